"""Parallel map and reduce with a parallel backward pass (``parallel_sum``,
``parallel_map``) on serial, thread, process and Dask executors."""
from .faults import ParallelItemError, ParallelTimeoutError, WorkerDiedError
from .pmap import parallel_map
from .reduce import parallel_sum
from .shm import share

__all__ = ["parallel_sum", "parallel_map", "ParallelItemError", "ParallelTimeoutError",
           "WorkerDiedError", "share"]
