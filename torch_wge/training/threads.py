import os
from typing import Optional

import torch


def free_cores() -> int:
    """Cores this process may use that other processes do not keep busy: the
    cores of its CPU affinity less the one-minute load average, at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    return max(1, min(cores, int(cores - busy + 0.5)))


def set_threads(threads: Optional[int] = None) -> int:
    """Sets PyTorch's intra-op threads to ``threads``, or by default to
    :func:`free_cores` (never more than PyTorch's own default): on a machine
    where other processes compete for the cores, more threads than free cores
    make every matmul wait for descheduled threads, many times slower than
    fewer threads. Returns the number set."""
    cores = os.cpu_count() or 1
    if threads is not None and not 1 <= threads <= cores:
        raise ValueError(f"--threads must be between 1 and the {cores} CPU(s) of this machine, got {threads}")
    chosen = threads if threads is not None else min(torch.get_num_threads(), free_cores())
    torch.set_num_threads(chosen)
    return chosen
