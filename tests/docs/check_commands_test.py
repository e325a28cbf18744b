#!/usr/bin/env python3
"""Feeds check_commands.py small documentation trees: one whose every block
passes, then one failing page for each reason it has to fail, and checks
that it names the reason and the place."""

import contextlib
import io
import os
import pathlib
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_commands  # noqa: E402  (found beside this file)
from command_blocks import (HOW_TO_MARK, command_blocks,  # noqa: E402
                            set_placeholders)

# Just enough of the tools' --help for the flags the pages use.
REFERENCE = {
    "kolorun": "```text\n  -np N\n  --metrics-port P\n  --version\n```\n",
    "kolo-train": "```text\n  --model M\n  --epochs E\n```\n",
    "kolo-bench": ("```text\nSubcommands:\n  train\n```\n\n"
                   "## kolo-bench train\n\n```text\n  --np L\n  --iters N\n"
                   "  --warmup N\n  --json F\n```\n"),
}
RUNNER = "/src/tests/docs/run_command_block.py"
# ctest's listing: {name: command line}, as ctest_commands reads it.
TESTS = {
    "kolorun_version": ["/b/tools/kolorun/kolorun", "--version"],
    "Runs.Train": ["python3", RUNNER, "--page=docs/page.md", "--test=Runs.Train",
                   "--set=--metrics-port=0"],
    "Runs.Other": ["python3", RUNNER, "--page=docs/other.md",
                   "--test=Runs.Other"],
    "Runs.Model": ["python3", RUNNER, "--page=docs/page.md",
                   "--test=Runs.Model", "--set=--model=resnet18"],
}
GOOD_PAGE = """\
# A page

```text
kolorun -np N [--metrics-port P] program...
```

<!-- test: Runs.Train -->
```sh
kolorun -np 2 --metrics-port 9400 kolo-train --model lenet   # a job
```

<!-- test: kolorun_version -->
```console
$ build/tools/kolorun/kolorun --version
kolorun, part of kolo 0.1.0
```

<!-- test: .ci/run -->
```sh
./test.sh
```

<!-- not run: needs Slurm -->
```sh
srun -N 2 kolorun -np 2 kolo-train
```
"""


class CheckCommandsTest(unittest.TestCase):

    def Tree(self, page):
        """A repository holding README.md, docs/page.md (`page`), the
        reference pages, ./test.sh and a .ci/run that runs it."""
        root = pathlib.Path(tempfile.mkdtemp(prefix="kolo-doc-check-"))
        self.addCleanup(shutil.rmtree, root, ignore_errors=True)
        (root / "docs" / "reference").mkdir(parents=True)
        (root / ".ci").mkdir()
        (root / "README.md").write_text("# kolo\n")
        (root / "docs" / "page.md").write_text(page)
        for tool, text in REFERENCE.items():
            (root / "docs" / "reference" / f"{tool}.md").write_text(
                f"# {tool}\n\n{text}")
        (root / "test.sh").write_text("#!/bin/sh\n")
        (root / ".ci" / "run").write_text("#!/bin/sh\n./test.sh\n")
        return root

    def Problems(self, page):
        """Every problem the checker finds on `page`, as one text."""
        root = self.Tree(page)
        reference = check_commands.reference_sections(root)
        found = []
        for doc in check_commands.documentation_pages(root):
            for where, what, problems in check_commands.page_problems(
                    doc, root, reference):
                found += [f"{where}: {p}" for p in problems]
            name = doc.relative_to(root).as_posix()
            for block in command_blocks(doc, name):
                found += [f"{block.where()}: {p}" for p in
                          check_commands.block_problems(block, TESTS, root)]
        return "\n".join(found)

    def testAPageWhoseEveryBlockIsRunOrSaysWhyPasses(self):
        self.assertEqual(self.Problems(GOOD_PAGE), "")

    def Summary(self, page):
        """check_blocks' count of failing blocks and what it prints."""
        root = self.Tree(page)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            failed = check_commands.check_blocks(root, TESTS)
        return failed, out.getvalue()

    def testTheSummaryCountsRunAndNotRunBlocks(self):
        failed, out = self.Summary(GOOD_PAGE)
        self.assertEqual(failed, 0)
        self.assertIn("3 command blocks run by a test, 1 not run:", out)
        self.assertIn("docs/page.md:24: needs Slurm", out)

    def testABlockWithoutAMarkerFailsAndTheOutputSaysHowToMarkIt(self):
        failed, out = self.Summary("```sh\nkolorun -np 2 kolo-train\n```\n")
        self.assertEqual(failed, 1)
        self.assertIn("FAILED docs/page.md:1: a ```sh block", out)
        self.assertIn("no marker on the line above the block", out)
        self.assertIn(HOW_TO_MARK, out)

    def testAMarkerNamingNoTestFails(self):
        self.assertIn("docs/page.md:2: Runs.Missing is no test of `ctest -N`",
                      self.Problems("<!-- test: Runs.Missing -->\n```sh\n"
                                    "kolorun -np 2 kolo-train\n```\n"))

    def testATestThatRunsTheCommandWithOtherFlagsFails(self):
        problems = self.Problems("<!-- test: kolorun_version -->\n```sh\n"
                                 "kolorun --version -np 2\n```\n")
        self.assertIn("docs/page.md:2: line 3: kolorun_version does not run "
                      "`kolorun --version -np 2` as shown", problems)

    def testARunnerOfAnotherPageOrBlockDoesNotRunThisOne(self):
        problems = self.Problems("<!-- test: Runs.Other -->\n```sh\n"
                                 "kolorun -np 2 kolo-train\n```\n")
        self.assertIn("Runs.Other does not run `kolorun -np 2 kolo-train`",
                      problems)

    def testARunnerMayChangeOnlyPlaceholders(self):
        problems = self.Problems("<!-- test: Runs.Model -->\n```sh\n"
                                 "kolorun -np 2 kolo-train --model lenet\n```\n")
        self.assertIn("Runs.Model sets --model, which is no placeholder",
                      problems)

    def testACiLineMustBeTheCommand(self):
        problems = self.Problems("<!-- test: .ci/run -->\n```sh\n"
                                 "./test.sh -R Documentation\n```\n")
        self.assertIn(".ci/run does not run `./test.sh -R Documentation`",
                      problems)

    def testNotRunNeedsAReason(self):
        self.assertIn("docs/page.md:2: `not run` without a reason",
                      self.Problems("<!-- not run:  -->\n```sh\n"
                                    "kolorun -np 2 kolo-train\n```\n"))

    def testAFenceWithoutALabelFails(self):
        self.assertIn("docs/page.md:1: a fence without a label",
                      self.Problems("```\nkolorun -np 2 kolo-train\n```\n"))

    def testACommandInATextBlockFails(self):
        self.assertIn("a command in a ```text block",
                      self.Problems("```text\nkolorun -np 2 kolo-train\n```\n"))

    def testAFlagTheToolLacksFailsAsBefore(self):
        self.assertIn("kolorun has no flag --no-such-flag",
                      self.Problems("<!-- test: Runs.Train -->\n```sh\n"
                                    "kolorun --no-such-flag 1 kolo-train\n```\n"))

    def testPlaceholdersReplaceShownValuesAndAddRunLengths(self):
        def bench_train_has(words, flag):
            return words[:2] == ["kolo-bench", "train"] and flag == "--iters"
        self.assertEqual(
            set_placeholders(["kolo-bench", "train", "--json", "r.json"],
                             {"--iters": "2"}, bench_train_has),
            ["kolo-bench", "train", "--json", "r.json", "--iters", "2"])
        self.assertEqual(
            set_placeholders(["kolorun", "--metrics-port=9400", "-np", "2"],
                             {"--metrics-port": "0"}, lambda w, f: False),
            ["kolorun", "--metrics-port=0", "-np", "2"])
        with self.assertRaisesRegex(ValueError, "--model is no placeholder"):
            set_placeholders(["kolo-train"], {"--model": "x"}, bench_train_has)


if __name__ == "__main__":
    unittest.main()
