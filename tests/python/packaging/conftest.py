"""Under CI=true a skipped test is a failure (see ../conftest.py)."""

import os


def pytest_runtest_logreport(report):
    if report.skipped and os.environ.get("CI") == "true":
        report.outcome = "failed"
