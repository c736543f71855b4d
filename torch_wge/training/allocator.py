"""How the C allocator keeps the CPU buffers a training step frees.

A training step allocates and frees the same large buffers every time (a layer's ``[N, C]``
outputs and gradients, the gathered rows of the sharded encoder). glibc's ``malloc`` serves a
block above its mmap threshold (128 KiB at first, raised as such blocks are freed) with a fresh
``mmap`` and unmaps it on ``free``, and it returns the free top of its heap to the system once it
exceeds the trim threshold; every step then touches new pages, which the kernel faults in and
zeroes. :func:`keep_freed_memory` raises both thresholds, so that freed blocks stay in the process
for the next step. The price: the process's resident size stays at its peak instead of shrinking
between steps.
"""

import ctypes
import ctypes.util
import sys

#: ``mallopt`` parameters of glibc's ``malloc.h``.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3

#: Blocks up to this size come from the heap (glibc's largest mmap threshold on 64-bit systems).
MMAP_THRESHOLD = 32 * 2**20

#: Free memory at the top of the heap is kept up to this size.
TRIM_THRESHOLD = 2**30


def keep_freed_memory() -> bool:
    """Sets glibc's mmap threshold to :data:`MMAP_THRESHOLD` and its trim threshold to
    :data:`TRIM_THRESHOLD` for this process (see the module's description). Returns whether both
    were set: :obj:`False` where the C library is not glibc (then nothing changes).

    ``torch-wge train`` and ``tune`` call it (what it saves a step: ``benchmarks/RESULTS.md``).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # another C library (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # (setting either also stops glibc from moving the mmap threshold by itself)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
