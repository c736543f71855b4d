"""keep_freed_memory: a freed large block stays in the process instead of going back to the system."""

import subprocess
import sys
import textwrap

import pytest

#: A fresh process allocates, touches and frees a 24 MiB block and prints how much its resident size
#: fell on the free, in MiB (the allocator's settings are per process).
FREE_ONE_BLOCK = textwrap.dedent(
    """
    import os
    import sys
    import torch
    from torch_wge.training.allocator import keep_freed_memory
    if sys.argv[1] == "kept" and not keep_freed_memory():
        raise SystemExit("not glibc")
    def resident():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    block = torch.ones(6 * 2**20)  # 24 MiB, every page touched
    before = resident()
    del block
    print((before - resident()) / 2**20)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_freed_large_block_stays_in_the_process():
    fallen = {
        mode: float(
            subprocess.run(
                [sys.executable, "-c", FREE_ONE_BLOCK, mode], check=True, capture_output=True, text=True
            ).stdout
        )
        for mode in ("default", "kept")
    }
    assert fallen["default"] > 20  # glibc maps a block this large on its own and unmaps it on free
    assert fallen["kept"] < 4  # kept in the heap for the next allocation
