"""Shared fixtures: the benchmark datasets that lie beside the repository."""
import os
from pathlib import Path

import pytest

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
