#!/usr/bin/env python3
"""Checks every command that README.md and docs/ show against the real tools.

The rule. A command is shown
  * on a line of a fenced block (```sh, ```bash, ```console or unlabelled)
    whose first word, after an optional "$ " prompt, "sudo" and NAME=VALUE
    assignments, is a program; a line ending in a backslash, and the
    indented lines that follow a command (a synopsis's continuation), are
    part of it;
  * in an inline code span (`...`) that starts with kolorun, kolo-train or
    kolo-bench.
Lines of other blocks (```cpp, ```cmake, ```json...) and lines whose first
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
Synopses such as `kolorun -np N [--backend shm|tcp]` are checked the same
way: brackets and alternatives are read as words.

The pages are those whose C++ blocks compile_code_blocks.py compiles:
README.md and docs/**/*.md (the generated reference's own help text is in
```text blocks, which hold no commands).

Exit 1, listing each failing command with its page and line, if any fails.
"""
import argparse
import pathlib
import re
import sys

from compile_code_blocks import markdown_pages

KOLO_TOOLS = ("kolorun", "kolo-train", "kolo-bench")
# Programs from outside kolo that the documentation shows. They are not
# looked up (a test machine need not have Prometheus or Docker), only named.
EXTERNAL = {
    "apt-get", "cmake", "ctest", "curl", "docker", "ip", "mpirun", "srun",
    "prometheus", "python3", "sh", "torchrun", "exec",
}
LAUNCHERS = ("kolorun", "mpirun", "srun", "torchrun")
SHELL_FENCES = ("", "sh", "bash", "console", "shell")
REPO_DIRS = ("scripts/", "bench/", "tests/", "tools/", ".ci/", "deploy/",
             "examples/")
FLAG = re.compile(r"^-{1,2}[A-Za-z][A-Za-z0-9-]*")


def shown_commands(path, source):
    """(where, command) for every command the page shows."""
    name = path.relative_to(source).as_posix()
    lines = path.read_text().split("\n")
    fence = None
    command, start, continued = None, 0, False
    prose, prose_start = [], 1  # the text between fences, for inline spans
    for number, line in enumerate(lines + ["```"], 1):
        opening = re.match(r"^```(\S*)", line)
        if opening:
            if command is not None:
                yield f"{name}:{start}", command
            command, continued = None, False
            if fence is None:
                yield from inline_commands(name, prose, prose_start)
            prose, prose_start = [], number + 1
            fence = None if fence is not None else opening.group(1)
            continue
        if fence is None:
            prose.append(line)
            continue
        if fence not in SHELL_FENCES:
            continue
        text = line[:-1] if line.endswith("\\") else line
        if command is not None and (continued or line[:1].isspace()):
            command += " " + text.strip()
        else:
            if command is not None:
                yield f"{name}:{start}", command
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
            yield f"{name}:{line}", span


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    source = pathlib.Path(args.source_dir)
    reference = reference_sections(source)
    checked, failures = 0, 0
    for page in markdown_pages(source):
        for where, command in shown_commands(page, source):
            checked += 1
            problems = check(command, source, reference)
            if problems:
                failures += 1
                print(f"FAILED {where}: {command}")
                for problem in problems:
                    print(f"  {problem}")
    print(f"{checked} commands checked, {failures} failed")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
