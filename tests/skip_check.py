#!/usr/bin/env python3
"""Checks that no C++ test skips on its own: every skip goes through
tests/testing/requirements.h's KOLO_REQUIRE_OR_SKIP, which fails instead
under CI (CI=true), so a test that could not run never passes there.

Run as a test (tests/CMakeLists.txt): skip_check.py <source tree>

A test that does not apply to a build (Gloo's without KOLO_WITH_GLOO,
kolo-train's without LibTorch) is not compiled there rather than skipped.
Prints each plain GTEST_SKIP as file:line and exits 1 when there is one.
"""
import pathlib
import re
import sys

ALLOWED = {pathlib.PurePosixPath("tests/testing/requirements.h")}
SKIP = re.compile(r"\bGTEST_SKIP\b")
SOURCES = (".cc", ".h", ".cpp", ".hpp")


def plain_skips(root):
    for folder in ("tests", "tools", "bench", "fuzz"):
        for path in sorted((root / folder).rglob("*")):
            relative = pathlib.PurePosixPath(path.relative_to(root).as_posix())
            if path.suffix not in SOURCES or relative in ALLOWED:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                if SKIP.search(line):
                    yield f"{relative}:{number}: {line.strip()}"


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    found = list(plain_skips(root))
    for where in found:
        print(f"{where}\n  a plain skip passes under CI: use "
              f"KOLO_REQUIRE_OR_SKIP (tests/testing/requirements.h), or do "
              f"not compile a test that does not apply to the build")
    print(f"skip_check: {len(found)} plain GTEST_SKIP")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
