"""Rank 0 starts an allreduce that rank 1 never joins, and sends itself
SIGINT after 0.5 s: the wait must end in KeyboardInterrupt at once, not at
the job's timeout (60 s here)."""

import os
import signal
import threading
import time

import torch

import kolo.torch as hvd

hvd.init()
if hvd.rank() == 0:
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        hvd.allreduce(torch.ones(4), name="never.joined")
    except KeyboardInterrupt:
        took = time.monotonic() - start
        assert took < 5, took
        print(f"interrupted after {took:.2f} s", flush=True)
    os._exit(0)
else:
    time.sleep(3)
    os._exit(0)
