#!/usr/bin/env python3
"""Runs the commands of a documentation block as the page shows them.

The block is the one of --page marked <!-- test: NAME --> with this test's
--test NAME (tests/docs/command_blocks.py states the markers). Its commands
run one after the other under bash in a fresh scratch folder that holds the
repository's top-level entries (scripts/, deploy/, ...) as links and build/
as a link to the build folder, with the built tools first on PATH, so a
command reads as on the page: `kolorun ...`, `build/tools/kolorun/kolorun`,
`scripts/...`. Only the PLACEHOLDERS given with --set differ from the page.

--until REGEX is for a block whose last command serves until stopped (a
job's metrics, Prometheus): the test passes once its output matches REGEX
within --within seconds, and stops it. --program NAME=COMMAND makes
./NAME in the scratch folder a script that runs COMMAND: the program the
page leaves to the reader (./my_program). --file NAME=PATH copies a file
the page assumes (ds_config.json) into the scratch folder.

--expect REGEX checks what the commands print (a line the page shows).

Exit 0 when every command exits 0 (or the last one printed REGEX) and the
output matches --expect, else 1.
"""
import argparse
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from check_commands import has_flag, reference_sections, tool_of
from command_blocks import command_blocks, set_placeholders

TOOLS_DIRS = ("kolorun", "kolo-train", "kolo-bench")


def parse_pairs(pairs, option):
    found = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            sys.exit(f"run_command_block.py: {option} {pair!r} is not NAME=VALUE")
        found[name] = value
    return found


def tool_has_flag_in(reference):
    """tool_has_flag(words, flag) for set_placeholders: the flag is in the
    help of the command's last kolo tool (its subcommand for kolo-bench)."""

    def tool_has_flag(words, flag):
        tool, sub = None, None
        for i, word in enumerate(words):
            if tool_of(word):
                tool = tool_of(word)
                sub = words[i + 1] if tool == "kolo-bench" and i + 1 < len(words) else None
        if tool is None:
            return False
        sections = reference.get(tool, {})
        text = sections.get(sub, "") if sub in sections else sections.get("", "")
        return has_flag(text, flag)

    return tool_has_flag


def make_scratch(source, build, programs, files):
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="kolo-doc-block-"))
    for entry in source.iterdir():
        if entry.name not in (".git", "build"):
            (scratch / entry.name).symlink_to(entry)
    (scratch / "build").symlink_to(build)
    for name, command in programs.items():
        script = scratch / name
        script.write_text(f"#!/bin/sh\nexec {command} \"$@\"\n")
        script.chmod(0o755)
    for name, path in files.items():
        shutil.copy(source / path, scratch / name)
    return scratch


def run_until(command, scratch, env, pattern, within):
    """Runs `command` until its output matches `pattern`, then stops it."""
    log = scratch / "until.log"
    with open(log, "w") as out:
        process = subprocess.Popen(["bash", "-c", command], cwd=scratch, env=env,
                                   stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if re.search(pattern, text):
                print(text, end="")
                print(f"run_command_block.py: saw {pattern!r}; stopping it")
                return True
            if process.poll() is not None:
                print(text, end="")
                print(f"run_command_block.py: exited with {process.returncode} "
                      f"before printing {pattern!r}")
                return False
            time.sleep(0.2)
        print(log.read_text(errors="replace"), end="")
        print(f"run_command_block.py: no {pattern!r} within {within} s")
        return False
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", required=True, type=pathlib.Path)
    parser.add_argument("--build-dir", required=True, type=pathlib.Path)
    parser.add_argument("--page", required=True,
                        help="the page, relative to the source folder")
    parser.add_argument("--test", required=True, help="this test's ctest name")
    parser.add_argument("--set", action="append", default=[],
                        metavar="FLAG=VALUE", help="a placeholder's value")
    parser.add_argument("--until", help="stop the last command at this output")
    parser.add_argument("--within", type=float, default=120)
    parser.add_argument("--program", action="append", default=[],
                        metavar="NAME=COMMAND")
    parser.add_argument("--file", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--expect", help="the commands' output must match this")
    args = parser.parse_args()
    source, build = args.source_dir.resolve(), args.build_dir.resolve()
    values = parse_pairs(args.set, "--set")
    blocks = [b for b in command_blocks(source / args.page, args.page)
              if b.marker and b.marker[0] == "test" and args.test in b.marker[1]]
    if not blocks:
        print(f"run_command_block.py: no block of {args.page} is marked "
              f"<!-- test: {args.test} -->")
        return 1
    commands = []
    has_flag_of = tool_has_flag_in(reference_sections(source))
    for block in blocks:
        for _, command in block.commands:
            try:
                shown = set_placeholders(shlex.split(command), values, has_flag_of)
            except ValueError as error:
                print(f"run_command_block.py: --set: {error}")
                return 1
            commands.append(shlex.join(shown))
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(
        [str(build / "tools" / tool) for tool in TOOLS_DIRS] + [env.get("PATH", "")])
    scratch = make_scratch(source, build, parse_pairs(args.program, "--program"),
                           parse_pairs(args.file, "--file"))
    output = ""
    try:
        for i, command in enumerate(commands):
            print(f"$ {command}", flush=True)
            if args.until and i == len(commands) - 1:
                if not run_until(command, scratch, env, args.until, args.within):
                    return 1
                continue
            run = subprocess.run(["bash", "-c", command], cwd=scratch, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, errors="replace")
            print(run.stdout, end="", flush=True)
            output += run.stdout
            code = run.returncode
            if code != 0:
                print(f"run_command_block.py: {args.page}: `{command}` "
                      f"exited with {code}")
                return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.expect and not re.search(args.expect, output):
        print(f"run_command_block.py: the output lacks {args.expect!r}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
