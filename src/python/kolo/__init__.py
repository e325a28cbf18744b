"""kolo: distributed training for PyTorch over kolo's C++ core.

Scripts use ``kolo.torch``, whose API is Horovod's PyTorch API::

    import kolo.torch as hvd
    hvd.init()

and start under ``kolorun -np 2 python3 train.py`` (or torchrun, mpirun,
srun). See docs/python.md.
"""

# LibTorch's libraries come from the torch package: importing it first loads
# them, and the extension (kolo._kolo) then finds them already in memory.
import torch as _torch  # noqa: F401

from kolo._kolo import build_info as _build_info

__version__ = _build_info()["version"]
