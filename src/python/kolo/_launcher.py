"""The ``kolorun`` command a pip install puts on PATH: kolo's launcher, the
C++ program installed in the package (kolo/bin/kolorun), run with the same
arguments."""

import os
import sys


def kolorun_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "kolorun")


def main():
    path = kolorun_path()
    if not os.access(path, os.X_OK):
        sys.exit(f"kolorun: {path} is missing or not executable; reinstall kolo")
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
