"""Horovod's PyTorch API on kolo: change ``import horovod.torch as hvd`` to
``import kolo.torch as hvd`` and the script runs on kolo's runtime.

    import kolo.torch as hvd
    hvd.init()
    model = Net()
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size()),
        named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

What differs from Horovod is listed in docs/python.md.
"""

from kolo.torch.compression import Compression
from kolo.torch.functions import (allgather_object, broadcast_object,
                                  broadcast_optimizer_state,
                                  broadcast_parameters)
from kolo.torch.mpi_ops import (Adasum, Average, HorovodInternalError,
                                HostsUpdatedInterrupt, InternalError, Max, Min, Product, Sum,
                                allgather, allgather_async, allreduce,
                                allreduce_, allreduce_async, allreduce_async_,
                                alltoall, alltoall_async, barrier, broadcast,
                                broadcast_, broadcast_async, broadcast_async_,
                                ccl_built, cross_rank, cross_size, cuda_built,
                                ddl_built, gloo_built, gloo_enabled,
                                grouped_allreduce, grouped_allreduce_,
                                grouped_allreduce_async,
                                grouped_allreduce_async_, init,
                                is_homogeneous, is_initialized, join,
                                local_rank, local_size, mpi_built,
                                mpi_enabled, mpi_threads_supported,
                                nccl_built, poll, rank, reducescatter,
                                reducescatter_async, rocm_built, shutdown,
                                size, start_timeline, stop_timeline,
                                synchronize)
from kolo.torch.optimizer import DistributedOptimizer
from kolo.torch.sync_batch_norm import SyncBatchNorm
from kolo.torch.process_sets import (ProcessSet, add_process_set,
                                     global_process_set, remove_process_set)
from kolo.torch import elastic
