"""Rank 1 leaves without a word; rank 0's next collective must raise
HorovodInternalError naming it, well within the job's timeout."""

import os
import time

import torch

import kolo.torch as hvd

hvd.init()
hvd.allreduce(torch.ones(4), name="before")
if hvd.rank() == 1:
    os._exit(0)
start = time.monotonic()
try:
    hvd.allreduce(torch.ones(4), name="after")
except hvd.HorovodInternalError as error:
    took = time.monotonic() - start
    assert took < 5, took
    print(f"raised: {error} ({took:.2f} s)")
else:
    raise SystemExit("rank 0's allreduce succeeded without rank 1")
