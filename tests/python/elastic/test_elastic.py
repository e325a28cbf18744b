"""kolo.torch.elastic in real elastic jobs: `kolorun --elastic` starts
elastic_worker.py, and one worker is killed (SIGKILL) mid-training.

Not under kolorun itself: ctest runs this file with one interpreter
(tests/python/CMakeLists.txt), which names the programs in KOLO_TEST_*.
"""

import collections
import json
import os
import re
import sys

import pytest

import regression

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import launched  # noqa: E402  (tests/python/launched.py)

WORKER = os.path.join(HERE, "elastic_worker.py")
EXAMPLE = os.path.join(HERE, "..", "..", "..", "examples", "python", "elastic_train.py")
PYTHON = os.environ.get("KOLO_TEST_PYTHON", sys.executable)
KOLORUN = os.environ.get("KOLO_TEST_KOLORUN", "kolorun")
TIMEOUT = 240
# A loaded machine's interpreters can be slow to import torch: no eviction
# for that.
ELASTIC_FLAGS = ["--elastic", "--heartbeat-timeout", "20"]


def run(command):
    """Exit code and output (stdout and stderr) of kolorun running
    `command`, with this folder on the workers' PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [HERE] + [p for p in [env.get("PYTHONPATH")] if p])
    return launched.run(command, env=env, timeout=TIMEOUT)


def finals(out):
    return [json.loads(m) for m in re.findall(r"worker \d+: final (\{.*\})", out)]


EPOCHS, BATCH, COMMIT_EVERY = 3, 4, 2
# Slow enough for the replacement (an interpreter importing torch) to join
# before the job ends.
STEP_SECONDS = 0.4
KILLED_WORKER, KILL_AT_STEP = 1, 7


@pytest.fixture(scope="module")
def killed_job():
    # --min-np 2: the survivors go on alone until the replacement joins.
    code, out = run([KOLORUN, *ELASTIC_FLAGS, "-np", "3", "--min-np", "2",
                          PYTHON, WORKER,
                          str(EPOCHS), str(BATCH), str(COMMIT_EVERY),
                          str(STEP_SECONDS), str(KILLED_WORKER), str(KILL_AT_STEP)])
    assert code == 0, out
    return out


def test_the_survivors_restore_the_last_commit_and_carry_on(killed_job):
    out = killed_job
    assert (f"worker {KILLED_WORKER} (rank 1 of round 0 on localhost) was "
            "killed by signal 9") in out, out
    resets = re.findall(r"worker (\d+): reset (\d+): rank (\d) of (\d) at "
                        r"step (\d+) \(reached (\d+)\)", out)
    first = [r for r in resets if r[1] == "1"]
    assert {worker for worker, *_ in first} == {"0", "2"}, out
    for _, _, _, size, step, reached in first:
        # The survivors, with the replacement if it was ready by then.
        assert size in ("2", "3"), out
        # Back to the last commit before the kill: one step lost.
        assert int(step) == KILL_AT_STEP - KILL_AT_STEP % COMMIT_EVERY, out
        assert int(reached) == KILL_AT_STEP, out
    # A replacement that joins later does so at a commit
    # (HostsUpdatedInterrupt): nothing is put back.
    for _, reset, _, size, step, reached in resets:
        if reset != "1":
            assert size == "3" and step == reached, out
    results = finals(out)
    assert len(results) == 3, out  # the survivors and the replacement
    assert {r["worker"] for r in results} == {0, 2, 3}, out


def test_the_final_parameters_equal_one_process_replaying_the_steps(killed_job):
    out = killed_job
    results = finals(out)
    steps = [indices for _, indices in results[0]["log"]]
    expected = regression.replay(steps)
    for result in results:
        assert result["log"] == results[0]["log"]
        for got, want in zip(result["parameters"], expected):
            assert got == pytest.approx(want, rel=1e-10, abs=1e-10)


def test_the_sampler_covers_every_index_once_per_epoch(killed_job):
    out = killed_job
    log = finals(out)[0]["log"]
    for epoch in range(EPOCHS):
        counts = collections.Counter(i for e, indices in log if e == epoch
                                     for i in indices)
        assert set(counts) == set(range(regression.SAMPLES)), epoch
        # Only the padding that evens out a split repeats an index: at most
        # size - 1 of them per split (3 workers, the survivors, 3 again).
        repeats = sum(counts.values()) - regression.SAMPLES
        assert repeats <= 2 + 1 + 2, (epoch, counts)


def test_the_example_trains_elastically():
    code, out = run([KOLORUN, *ELASTIC_FLAGS, "-np", "2", PYTHON, EXAMPLE,
                          "--epochs", "2", "--kill-worker", "0",
                          "--kill-at-batch", "3"])
    assert code == 0, out
    assert "worker 0 (rank 0 of round 0 on localhost) was killed" in out, out
    assert re.search(r"epoch 1: loss \d", out), out
    assert "done: 2 epochs" in out, out
