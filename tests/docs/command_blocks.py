"""The command blocks of the documentation and the marker that ties each
to the test that runs it. check_commands.py checks the markers;
run_command_block.py is the test that runs a block as the page shows it.

A command block is a fence labelled sh, bash, shell or console (in a
console block only the `$ ` lines are commands, the rest is their output).
The line just above it says who runs its commands:

    <!-- test: NAME[, NAME...] -->
        each NAME a ctest test (`ctest -N` lists it), or .ci/run, CI's
        entry script; together they run every command of the block
    <!-- not run: REASON -->
        no test can: the block needs a cluster, Slurm, ssh, a GPU or root
        on the user's machine; REASON says which

A test runs a shown command when
  * it is run_command_block.py for this page and the test's own name: it
    reads the block under the marker naming it and runs its commands in a
    scratch folder (so the page is the test's source), or
  * its command line holds the command: the same program (compared by file
    name, so build/tools/kolorun/kolorun is kolorun) followed by the same
    words (a repository path the same file as an absolute one), or
  * it is .ci/run and one of its lines is the command.
The only values a test may give differently are those of PLACEHOLDERS,
each set explicitly on run_command_block.py's command line.
"""
import re
import shlex

SHELL_FENCES = ("sh", "bash", "shell", "console")
CI_SCRIPT = ".ci/run"
MARKER = re.compile(r"^<!-- (test|not run): (.*) -->$")

# What a failure tells the author of a new block; kept beside the rule.
HOW_TO_MARK = """\
Put one of these on the line just above the block's opening fence:
  <!-- test: NAME -->        NAME: the ctest test (or .ci/run) that runs the
                             block's commands, as shown; several: NAME, NAME
  <!-- not run: REASON -->   only where no test can (a cluster, Slurm, ssh,
                             a GPU); REASON says which
To add a test that runs the block as the page shows it, add to
tests/docs/CMakeLists.txt
  kolo_doc_block_test(NAME PAGE [SET FLAG=VALUE...] [UNTIL REGEX])
and mark the block <!-- test: NAME -->. A listing, synopsis or output that
runs nothing belongs in a ```text block."""

# The values a test may give differently from the page, and why. A test
# names each one it changes (run_command_block.py --set FLAG=VALUE); where
# the page leaves the flag out, a run-length flag is added to the tool that
# has it. Everything else of a command runs as shown.
PLACEHOLDERS = {
    "--metrics-port": "a port: tests never take fixed ones (0 picks a free one)",
    "--web.listen-address": "an address and port, likewise",
    "--storage.tsdb.path": "a folder the test makes in its scratch folder",
    "--iters": "run length: a page shows a measurement, a test that it runs",
    "--warmup": "run length, likewise",
    "--repeat": "run length, likewise",
    "-e": "run length: kolo-bench collectives' largest message size",
}


class Block:
    """One command block: where it is, its marker and its commands."""

    def __init__(self, page, line, lang, marker, commands):
        self.page = page  # the page's path relative to the repository
        self.line = line  # the line of the opening fence
        self.lang = lang
        self.marker = marker  # ("test", [names]), ("not run", reason), None
        self.commands = commands  # [(line, command text)]

    def where(self):
        return f"{self.page}:{self.line}"


def read_marker(line):
    match = MARKER.match(line.strip())
    if not match:
        return None
    kind, value = match.group(1), match.group(2).strip()
    if kind == "test":
        return kind, [name.strip() for name in value.split(",") if name.strip()]
    return kind, value


def command_lines(lang, lines, first_line):
    """(line, command) of a block's body: `$ ` lines of a console block;
    the lines of a sh block with backslash continuations joined and
    comments dropped."""
    commands, pending, start = [], "", None
    for number, line in enumerate(lines, first_line):
        if lang == "console":
            if line.startswith("$ "):
                commands.append((number, line[2:].strip()))
            continue
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if start is None:
            start = number
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        text = re.sub(r"\s+#.*$", "", pending + line.strip())
        commands.append((start, text.strip()))
        pending, start = "", None
    return commands


def command_blocks(path, page_name):
    """Every command block of one page, with the marker above it."""
    lines = path.read_text().split("\n")
    blocks, fence = [], None
    for number, line in enumerate(lines, 1):
        if not line.startswith("```"):
            continue
        if fence is None:
            fence = (number, line[3:].strip())
            continue
        start, lang = fence
        fence = None
        if lang not in SHELL_FENCES:
            continue
        above = lines[start - 2] if start >= 2 else ""
        blocks.append(Block(page_name, start, lang, read_marker(above),
                            command_lines(lang, lines[start:number - 1],
                                          start + 1)))
    return blocks


def words(command):
    """A command as the shell splits it."""
    return shlex.split(command)


def flag_of(word):
    """The flag a word gives, with the value after = apart, or None."""
    if not re.match(r"^--?[A-Za-z]", word):
        return None, None
    flag, _, value = word.partition("=")
    return flag, (value if "=" in word else None)


def set_placeholders(command_words, values, tool_has_flag):
    """command_words with the PLACEHOLDERS in `values` ({flag: value})
    given their test value. A flag the command shows keeps its place; a
    run-length flag it leaves out is added at the end where the command's
    last tool has it (tool_has_flag(words, flag)). Raises ValueError for a
    flag that is no placeholder."""
    for flag in values:
        if flag not in PLACEHOLDERS:
            raise ValueError(f"{flag} is no placeholder of "
                             "tests/docs/command_blocks.py")
    result, shown, i = [], set(), 0
    while i < len(command_words):
        word = command_words[i]
        flag, inline = flag_of(word)
        i += 1
        if flag in values:
            shown.add(flag)
            if inline is not None:
                result.append(f"{flag}={values[flag]}")
            else:
                result += [flag, values[flag]]
                i += 1  # the shown value
            continue
        result.append(word)
    for flag, value in values.items():
        if flag not in shown and tool_has_flag(result, flag):
            result += [flag, value]
    return result
