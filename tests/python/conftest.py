"""Every rank of a kolorun job runs the same tests in the same order, so the
collectives inside them meet. kolo.torch is initialised once per process.

Run by ctest (tests/python/CMakeLists.txt) as
    kolorun -np N python -m pytest tests/python
with the build tree's package on PYTHONPATH.
"""

import os

import pytest
import torch

import kolo.torch as hvd


@pytest.fixture(scope="session", autouse=True)
def world():
    hvd.init()
    torch.manual_seed(1234)
    yield
    hvd.shutdown()


# Tests that start jobs themselves, under one interpreter (CMakeLists.txt),
# not on every rank of this suite's job.
collect_ignore = ["launchers", "elastic", "packaging"]


def pytest_runtest_logreport(report):
    """Under CI=true a skipped test is a failure, as kolo's C++ tests'
    skips are (tests/testing/requirements.h): CI installs everything."""
    if report.skipped and os.environ.get("CI") == "true":
        report.outcome = "failed"
