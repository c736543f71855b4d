"""The whole model against an independent dense implementation
(``tests/naive_wge.py``: dense adjacency matrices, a dense target matrix,
autograd BCE, one query at a time with Python-set filtering)."""

import subprocess
import sys
from pathlib import Path

import pytest

NAIVE = Path(__file__).resolve().parent / "naive_wge.py"


@pytest.mark.slow
def test_naive_wge_computes_what_torch_wge_computes():
    proc = subprocess.run([sys.executable, str(NAIVE), "--check"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "filtered ranks identical; naive WGE matches torch_wge" in proc.stdout
