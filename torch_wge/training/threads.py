r"""The CPU threads a run computes with: PyTorch's default, at most the CPUs
this process may run on, or the count given (``--threads``). The default
depends on the machine and the process's CPU affinity only, never on how busy
the machine is, so that a command and seed give the same numbers on a busy
machine as on an idle one (PyTorch's sums are split between its threads)."""

import os
from typing import Optional

import torch


def available_cores() -> int:
    """The CPUs this process may run on: its CPU affinity (all CPUs where
    the system has none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """PyTorch's intra-op thread count (its default in a process that has not
    set it) capped at :func:`available_cores`."""
    return max(1, min(torch.get_num_threads(), available_cores()))


def set_threads(threads: Optional[int] = None) -> int:
    """Sets PyTorch's intra-op threads to ``threads``, or by default to
    :func:`default_threads`, as ``torch-wge train`` does; returns the number
    set. On a machine where other processes keep the cores busy, fewer
    threads than the default can be many times faster: give them explicitly.

    Raises:
        ValueError: when ``threads`` is not between 1 and the machine's CPU count.
    """
    cores = os.cpu_count() or 1
    if threads is not None and not 1 <= threads <= cores:
        raise ValueError(f"--threads must be between 1 and the {cores} CPU(s) of this machine, got {threads}")
    chosen = threads if threads is not None else default_threads()
    torch.set_num_threads(chosen)
    return chosen
