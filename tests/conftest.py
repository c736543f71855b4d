"""Shared fixtures: the benchmark datasets that lie beside the repository."""
import os
from pathlib import Path

import pytest
import torch

SHARED_DATASETS = Path(
    os.environ.get(
        "TORCH_WGE_SHARED_DATASETS",
        Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets",
    )
).resolve()


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """Folder with the published benchmark files (``../shared/datasets``).

    Tests that need real data fail loudly, never skip, when it is missing.
    """
    if not (SHARED_DATASETS / "codex-s" / "train.txt").is_file():
        pytest.fail(
            f"real benchmark data not found at {SHARED_DATASETS}; these tests need "
            "../shared/datasets beside the repository (or TORCH_WGE_SHARED_DATASETS)",
            pytrace=False,
        )
    return SHARED_DATASETS


@pytest.fixture
def one_torch_thread():
    """One intra-op thread for the test, restored afterwards: tests of many small
    tensor ops run faster that way on a 2-core machine, where two threads mostly
    wait for each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
