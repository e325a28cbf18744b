"""Starting a launcher (kolorun, mpirun, torchrun) from a test, for the tests
that run under one interpreter (launchers/, elastic/)."""

import os
import signal
import subprocess

import pytest


def run(command, env=None, timeout=120):
    """Runs `command` in a session of its own, so that a timeout kills every
    process it started; returns its exit code and its stdout and stderr
    together."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        pytest.fail(f"{command[0]} did not finish in {timeout} s:\n{out}")
    return process.returncode, out
