"""`python -m build` makes a wheel of kolo's package from the build tree
(reusing it: nothing is compiled again), and the wheel, installed on its
own, starts a job with the kolorun it carries."""

import os
import subprocess
import sys
import zipfile

import pytest

PYTHON = os.environ["KOLO_TEST_PYTHON"]
SOURCE = os.environ["KOLO_TEST_SOURCE_DIR"]
BUILD = os.environ["KOLO_TEST_BUILD_DIR"]


def run(argv, **kwargs):
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                            **kwargs)
    assert result.returncode == 0, (f"{' '.join(argv)} exited with "
                                    f"{result.returncode}:\n{result.stdout}\n"
                                    f"{result.stderr}")
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    # The build tree's own options stay as they are: the package's
    # pyproject.toml turns tests and benchmarks off for a user's build.
    run([PYTHON, "-m", "build", "--wheel", "--no-isolation", "--outdir",
         str(out), "-C", f"build-dir={BUILD}",
         "-C", "cmake.define.KOLO_BUILD_TESTS=ON",
         "-C", "cmake.define.KOLO_BUILD_BENCH=ON", SOURCE])
    wheels = list(out.glob("kolo-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_holds_the_extension_package_and_kolorun(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    abi = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    assert any(n.startswith("kolo/_kolo.") and abi in n and n.endswith(".so")
               for n in names), names
    for wanted in ("kolo/__init__.py", "kolo/bin/kolorun",
                   "kolo/torch/__init__.py", "kolo/torch/mpi_ops.py",
                   "kolo/torch/elastic.py"):
        assert wanted in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "kolorun = kolo._launcher:main" in zipfile.ZipFile(wheel).read(
        entry_points).decode()


def test_the_installed_wheel_runs_a_job(wheel, tmp_path):
    site = tmp_path / "site"
    run([PYTHON, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(site), str(wheel)])
    script = ("import kolo, kolo.torch as hvd, torch; hvd.init(); "
              "t = hvd.allreduce(torch.tensor([float(hvd.rank())]), op=hvd.Sum); "
              "print(f'rank {hvd.rank()}: sum {t.item():g}, kolo from', kolo.__file__)")
    env = dict(os.environ, PYTHONPATH=str(site))
    out = run([str(site / "bin" / "kolorun"), "-np", "2", PYTHON, "-c", script],
              env=env)
    for rank in (0, 1):
        assert f"rank {rank}: sum 1, kolo from {site}/kolo/__init__.py" in out, out
