"""kolo.torch under every launcher a user starts it with: kolorun (the
pip-installed command and the build's), mpirun, torchrun, and srun's
environment. Each starts real processes running worker.py.

Not under kolorun itself: ctest runs this file with one interpreter
(tests/python/CMakeLists.txt), which names the programs in KOLO_TEST_*.
"""

import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import launched  # noqa: E402  (tests/python/launched.py)

WORKER = os.path.join(HERE, "worker.py")
PYTHON = os.environ.get("KOLO_TEST_PYTHON", sys.executable)
KOLORUN = os.environ.get("KOLO_TEST_KOLORUN", "kolorun")
TIMEOUT = 120


def run(command, env=None, timeout=TIMEOUT):
    return launched.run(command, env=env, timeout=timeout)


def assert_ranks_ok(code, out, size):
    assert code == 0, out
    for r in range(size):
        assert f"rank {r} of {size}: ok" in out, out


@pytest.mark.parametrize("backend", ["shm", "tcp", "gloo"])
def test_the_build_kolorun(backend):
    code, out = run([KOLORUN, "-np", "2", "--backend", backend, PYTHON, WORKER, "2"])
    assert_ranks_ok(code, out, 2)


def test_kolorun_with_a_host_list():
    code, out = run([KOLORUN, "-H", "localhost:3", PYTHON, WORKER, "3"])
    assert_ranks_ok(code, out, 3)


def test_the_installed_kolorun_command():
    """The environment's kolorun (pip install .) runs the environment's
    python with the installed package, not the build tree's."""
    installed = os.path.join(os.path.dirname(PYTHON), "kolorun")
    if not os.path.exists(installed):
        pytest.skip(f"{installed} is missing: scripts/setup.sh installs the "
                    "package (pip install .)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code, out = run([installed, "-np", "2", PYTHON, WORKER, "2"], env=env)
    assert_ranks_ok(code, out, 2)


def test_mpirun():
    code, out = run(["mpirun", "--allow-run-as-root", "--oversubscribe",
                     "-np", "2", "-x", "PYTHONPATH", PYTHON, WORKER, "2"])
    assert_ranks_ok(code, out, 2)


def test_torchrun():
    code, out = run([PYTHON, "-m", "torch.distributed.run", "--standalone",
                     "--nproc-per-node", "2", WORKER, "2"])
    assert_ranks_ok(code, out, 2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_srun_environment():
    """What srun gives each task (no Slurm cluster runs here): SLURM_* and,
    as a batch script sets it, the store's address on the first node."""
    size, port = 2, free_port()
    processes = []
    for r in range(size):
        env = dict(os.environ, SLURM_PROCID=str(r), SLURM_NTASKS=str(size),
                   SLURM_LOCALID=str(r), SLURM_NODEID="0", SLURM_NNODES="1",
                   SLURM_JOB_ID="4242", SLURM_STEP_ID="0",
                   KOLO_STORE_ADDR=f"127.0.0.1:{port}",
                   KOLO_STORE_SECRET="srun-test-secret-0123456789")
        processes.append(subprocess.Popen([PYTHON, WORKER, str(size)], env=env,
                                          stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
    outs = []
    for p in processes:
        try:
            outs.append(p.communicate(timeout=TIMEOUT)[0])
        except subprocess.TimeoutExpired:
            for q in processes:
                q.kill()
            pytest.fail("srun-style tasks did not finish")
    for r, (p, out) in enumerate(zip(processes, outs)):
        assert p.returncode == 0, out
        assert f"rank {r} of {size}: ok" in out, out


def test_a_dead_rank_is_named_within_the_timeout():
    script = os.path.join(HERE, "dead_rank.py")
    code, out = run([KOLORUN, "-np", "2", "--timeout", "5", PYTHON, script])
    assert code == 0, out
    assert "raised: " in out and "rank 1" in out, out


def test_ctrl_c_interrupts_a_wait():
    """Rank 0 waits for a collective rank 1 never starts; SIGINT to rank 0
    raises KeyboardInterrupt out of the wait (the GIL is released and the
    wait checks for signals)."""
    script = os.path.join(HERE, "interrupted.py")
    code, out = run([KOLORUN, "-np", "2", "--timeout", "60", PYTHON, script])
    assert code == 0, out
    assert "interrupted after" in out, out
