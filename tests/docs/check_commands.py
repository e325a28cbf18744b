#!/usr/bin/env python3
"""Checks every command that README.md and docs/ show against the real
tools, and that a test runs it.

The rule. A command is shown
  * on a line of a fenced block labelled sh, bash, shell, console (the `$ `
    lines) or text (synopses: `kolorun -np N [--backend shm|tcp]`) whose
    first word, after an optional "$ " prompt, "sudo" and NAME=VALUE
    assignments, is a program; a line ending in a backslash, and the
    indented lines that follow a command (a synopsis's continuation), are
    part of it;
  * in an inline code span (`...`) that starts with kolorun, kolo-train or
    kolo-bench.
Lines of code blocks (```cpp, ```cmake, ```json...) and lines whose first
word is no program (output, tables, comments) are not commands.

For each command:
  1. Every program it runs exists. kolo's tools (kolorun, kolo-train,
     kolo-bench, also as build/tools/<tool>/<tool>) have a generated
     reference page in docs/reference/; a repository path (scripts/*.sh,
     ./quickstart.sh, ./test.sh, bench/..., .ci/run) is a file in the tree;
     anything else must be one of the outside programs in EXTERNAL. A
     program a kolo launcher starts (after kolorun or mpirun) may also be
     the user's own (./train, program), which is not checked.
  2. Every flag given to a kolo tool (a word starting with - or -- up to
     the next program) appears in that tool's generated reference, for
     kolo-bench in its subcommand's section or the top-level help. The
     reference is each tool's --help (tests/docs/tool_reference.py), so a
     command shown cannot use a flag the tool does not have.
Synopses are checked the same way: brackets and alternatives are read as
words.

For each block:
  3. Every fence names what it holds: a block without a label fails, and a
     text block shows synopses, not commands: a command there without [ ],
     | or ... fails (it belongs in a sh block).
  4. Every command block (sh, bash, shell, console) carries the marker
     tests/docs/command_blocks.py defines: the tests that run its commands
     (each a test of `ctest -N` in --build-dir, or .ci/run), which must run
     each command as shown, or `not run` with a reason. The summary counts
     the blocks a test runs and lists those not run with their reasons.

The pages are README.md and docs/**/*.md but docs/reference/, which is the
tools' help text itself (tests/docs/tool_reference.py).

Exit 1, listing each failing command or block with its page and line.
"""
import argparse
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

from command_blocks import (CI_SCRIPT, HOW_TO_MARK, PLACEHOLDERS,
                            command_blocks)
from compile_code_blocks import markdown_pages

KOLO_TOOLS = ("kolorun", "kolo-train", "kolo-bench")
# Programs from outside kolo that the documentation shows. They are not
# looked up (a test machine need not have Prometheus or Docker), only named.
EXTERNAL = {
    "apt-get", "cmake", "ctest", "curl", "docker", "ip", "mpirun", "srun",
    "prometheus", "python3", "sh", "torchrun", "exec",
}
LAUNCHERS = ("kolorun", "mpirun", "srun", "torchrun")
# Blocks whose lines may show commands or synopses.
COMMAND_FENCES = ("", "sh", "bash", "console", "shell", "text")
REPO_DIRS = ("scripts/", "bench/", "tests/", "tools/", ".ci/", "deploy/",
             "examples/")
FLAG = re.compile(r"^-{1,2}[A-Za-z][A-Za-z0-9-]*")


def shown_commands(path, source):
    """(where, command, fence) for every command the page shows; fence is
    the block's label, None for an inline span."""
    name = path.relative_to(source).as_posix()
    lines = path.read_text().split("\n")
    fence = None
    command, start, continued = None, 0, False
    prose, prose_start = [], 1  # the text between fences, for inline spans
    for number, line in enumerate(lines + ["```"], 1):
        opening = re.match(r"^```(\S*)", line)
        if opening:
            if command is not None:
                yield f"{name}:{start}", command, fence
            command, continued = None, False
            if fence is None:
                yield from inline_commands(name, prose, prose_start)
            prose, prose_start = [], number + 1
            fence = None if fence is not None else opening.group(1)
            continue
        if fence is None:
            prose.append(line)
            continue
        if fence not in COMMAND_FENCES:
            continue
        text = line[:-1] if line.endswith("\\") else line
        if command is not None and (continued or line[:1].isspace()):
            command += " " + text.strip()
        else:
            if command is not None:
                yield f"{name}:{start}", command, fence
            text = re.sub(r"^\$ ", "", text)
            command = text.strip() if first_program(text) else None
            start = number
        continued = command is not None and line.endswith("\\")


def inline_commands(name, lines, first_line):
    """The inline code spans of prose that start with a kolo tool; a span
    may run over a line break."""
    text = "\n".join(lines)
    for match in re.finditer(r"`([^`]+)`", text):
        span = " ".join(match.group(1).split())
        if span.split()[0] in KOLO_TOOLS:
            line = first_line + text.count("\n", 0, match.start())
            yield f"{name}:{line}", span, None


def words(command):
    # Brackets, alternatives and quotes separate words: synopses read as
    # commands, and a quoted --remote-shell template stays out of the way.
    return [w for w in re.split(r"[\s\[\]|'\"()]+", command) if w]


def tool_of(word):
    base = word.rsplit("/", 1)[-1]
    if base in KOLO_TOOLS and (word == base or
                               word.endswith(f"tools/{base}/{base}")):
        return base
    return None


def first_program(command):
    for word in words(command):
        if word == "sudo" or re.match(r"^[A-Z_][A-Z0-9_]*=", word):
            continue
        if word.endswith("/"):
            return None  # a folder: a listing of the tree, not a command
        return word if (tool_of(word) or word in EXTERNAL or
                        word.startswith(("./", *REPO_DIRS))) else None
    return None


def reference_sections(source):
    """tool -> {subcommand or "": help text} from docs/reference/."""
    sections = {}
    for tool in KOLO_TOOLS:
        page = source / "docs" / "reference" / f"{tool}.md"
        if not page.exists():
            continue
        parts = re.split(rf"^## {re.escape(tool)} (\S+)\n", page.read_text(),
                         flags=re.M)
        found = {"": parts[0]}
        for sub, text in zip(parts[1::2], parts[2::2]):
            found[sub] = text
        sections[tool] = found
    return sections


def has_flag(text, flag):
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def check(command, source, reference):
    """The problems of one command, as sentences."""
    problems = []
    tool, sub, after_launcher = None, None, False
    for word in words(command):
        kolo_tool = tool_of(word)
        if kolo_tool:
            if kolo_tool not in reference:
                problems.append(f"{kolo_tool} has no page in docs/reference/")
            tool, sub = kolo_tool, None
            after_launcher = after_launcher or kolo_tool == "kolorun"
            continue
        if word in EXTERNAL:
            tool = None
            after_launcher = after_launcher or word in LAUNCHERS
            continue
        if word.startswith(("./", *REPO_DIRS)) and "/" in word:
            path = word[2:] if word.startswith("./") else word
            if not (source / path).is_file() and not after_launcher:
                problems.append(f"{word} is no file of the repository")
            tool = None
            continue
        if tool is None:
            continue
        sections = reference.get(tool, {})
        if (tool == "kolo-bench" and sub is None and not word.startswith("-")):
            if word not in sections:
                problems.append(f"kolo-bench has no subcommand {word}")
            sub = word
            continue
        flag = FLAG.match(word)
        if not flag:
            continue
        texts = [sections.get("", "")] + ([sections.get(sub, "")] if sub else [])
        if not any(has_flag(text, flag.group(0)) for text in texts):
            where = f"{tool} {sub}" if sub else tool
            problems.append(f"{where} has no flag {flag.group(0)} "
                            f"(docs/reference/{tool}.md)")
    return problems


def documentation_pages(source):
    return [page for page in markdown_pages(source)
            if "reference" not in page.relative_to(source).parts[1:2]]


def fence_problems(path, source):
    """(where, problem) for each fence without a label (rule 3)."""
    name = path.relative_to(source).as_posix()
    opening = True
    for number, line in enumerate(path.read_text().split("\n"), 1):
        if not line.startswith("```"):
            continue
        if opening and not line[3:].strip():
            yield (f"{name}:{number}", "a fence without a label: ```sh for "
                   "commands (with a marker), ```console for a session, "
                   "```text for a synopsis, output or listing, else the code's "
                   "language")
        opening = not opening


def is_synopsis(command):
    return re.search(r"[\[|]|\.\.\.", command) is not None


def ctest_commands(ctest, build_dir):
    """{test name: its command line} of every test ctest lists."""
    listing = subprocess.run([ctest, "--show-only=json-v1"], cwd=build_dir,
                             capture_output=True, text=True, check=True).stdout
    return {test["name"]: test.get("command", [])
            for test in json.loads(listing)["tests"]}


def runner_options(argv):
    """--page=, --test= and --set= of a run_command_block.py command line
    (kolo_doc_block_test writes them so), or None for another program."""
    if not any(a.endswith("run_command_block.py") for a in argv):
        return None
    options = {"--set": []}
    for word in argv:
        flag, _, value = word.partition("=")
        if flag in ("--page", "--test"):
            options[flag] = value
        elif flag == "--set":
            options["--set"].append(value.partition("=")[0])
    return options


def same_word(shown, given, source):
    if shown == given:
        return True
    # A repository path shown relative is the file a test names absolutely.
    return ("/" in shown and os.path.isabs(given) and
            (source / shown).resolve() == pathlib.Path(given).resolve())


def command_in(argv, shown, source):
    """Whether the command line `argv` runs `shown`: the same program (by
    file name) followed by exactly the shown words."""
    given = [w for a in argv for w in (shlex.split(a) if " " in a else [a])]
    program = shown[0].rsplit("/", 1)[-1]
    for i, word in enumerate(given):
        if word.rsplit("/", 1)[-1] != program:
            continue
        rest = given[i + 1:]
        if len(rest) == len(shown) - 1 and all(
                same_word(s, g, source) for s, g in zip(shown[1:], rest)):
            return True
    return False


def runs(name, block, command, tests, source):
    """Whether the test `name` runs `command` of `block` (rule 4)."""
    if name == CI_SCRIPT:
        # A line of .ci/run is the command, or `timed` and the command
        # (.ci/run's wrapper that reports how long each part took).
        lines = (line.strip() for line in
                 (source / CI_SCRIPT).read_text().split("\n"))
        return command in (line.removeprefix("timed ") for line in lines)
    argv = tests[name]
    options = runner_options(argv)
    if options is not None:
        return options.get("--page") == block.page and options.get("--test") == name
    try:
        return command_in(argv, shlex.split(command), source)
    except ValueError:
        return False


def block_problems(block, tests, source):
    """The problems of one command block's marker, as sentences."""
    if block.marker is None:
        return ["no marker on the line above the block"]
    kind, value = block.marker
    if kind == "not run":
        return [] if value else ["`not run` without a reason"]
    if not value:
        return ["`test:` without a test name"]
    problems = []
    for name in value:
        if name != CI_SCRIPT and name not in tests:
            problems.append(f"{name} is no test of `ctest -N` (nor {CI_SCRIPT})")
            continue
        options = runner_options(tests.get(name, []))
        for flag in (options or {}).get("--set", []):
            if flag not in PLACEHOLDERS:
                problems.append(f"{name} sets {flag}, which is no placeholder "
                                "of tests/docs/command_blocks.py")
    named = [n for n in value if n == CI_SCRIPT or n in tests]
    for line, command in block.commands:
        if named and not any(runs(n, block, command, tests, source)
                             for n in named):
            problems.append(f"line {line}: {', '.join(named)} "
                            f"{'does' if len(named) == 1 else 'do'} not run "
                            f"`{command}` as shown")
    return problems


def check_blocks(source, tests):
    """Rule 4 over every page: prints each failure and the counts; returns
    the number of failing blocks."""
    run, not_run, failed = 0, [], 0
    for page in documentation_pages(source):
        name = page.relative_to(source).as_posix()
        for block in command_blocks(page, name):
            problems = block_problems(block, tests, source)
            if problems:
                failed += 1
                print(f"FAILED {block.where()}: a ```{block.lang} block")
                for problem in problems:
                    print(f"  {problem}")
            elif block.marker[0] == "test":
                run += 1
            else:
                not_run.append(f"{block.where()}: {block.marker[1]}")
    print(f"{run} command blocks run by a test, {len(not_run)} not run:")
    for entry in not_run:
        print(f"  {entry}")
    if failed:
        print(HOW_TO_MARK)
    return failed


def page_problems(page, source, reference):
    """(where, what, [problems]) for rules 1 to 3 on one page: each
    unlabelled fence and each command shown."""
    for where, problem in fence_problems(page, source):
        yield where, "a fence", [problem]
    for where, command, fence in shown_commands(page, source):
        problems = check(command, source, reference)
        if fence == "text" and not is_synopsis(command):
            problems.append("a command in a ```text block, which holds "
                            "synopses ([ ], | or ...): show it in a ```sh "
                            "block with a marker")
        yield where, command, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--build-dir", required=True,
                        help="where `ctest -N` lists the tests")
    parser.add_argument("--ctest", default="ctest", help="the ctest to ask")
    args = parser.parse_args()
    source = pathlib.Path(args.source_dir).resolve()
    reference = reference_sections(source)
    checked, failures = 0, 0
    for page in documentation_pages(source):
        for where, what, problems in page_problems(page, source, reference):
            checked += 1
            if problems:
                failures += 1
                print(f"FAILED {where}: {what}")
                for problem in problems:
                    print(f"  {problem}")
    print(f"{checked} commands checked, {failures} failed")
    failed_blocks = check_blocks(source, ctest_commands(args.ctest, args.build_dir))
    return 1 if failures or failed_blocks or checked == 0 else 0

if __name__ == "__main__":
    sys.exit(main())
