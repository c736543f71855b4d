"""Shared fixtures: the benchmark datasets that lie beside the repository."""

import errno
import os
import warnings
from pathlib import Path

import pytest
import torch

# torch 2.13 deprecates TorchScript, and two of its users script when they are imported: PyG (a
# helper of its pooling modules, on `import torch_geometric`) and torch itself (torch.utils.mkldnn,
# imported by the first torch.compile). Imported here once with exactly that notice hidden, so the
# test run shows only warnings of torch_wge and its tests; a later torch.jit.script call still warns.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", r"`torch\.jit\.script(_method)?` is deprecated", DeprecationWarning)
    import torch.utils.mkldnn  # noqa: F401
    import torch_geometric  # noqa: F401

SHARED_DATASETS = Path(
    os.environ.get(
        "TORCH_WGE_SHARED_DATASETS",
        Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets",
    )
).resolve()


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """Folder with the published benchmark files: ``$TORCH_WGE_SHARED_DATASETS``,
    by default ``../shared/datasets`` beside the repository.

    When it is absent the tests that need it are skipped with one line, except
    under ``CI=true``, where they fail.
    """
    if not (SHARED_DATASETS / "codex-s" / "train.txt").is_file():
        message = (
            f"real benchmark data not found at {SHARED_DATASETS} "
            "(set TORCH_WGE_SHARED_DATASETS to the folder of the benchmark files)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
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


class _FullDiskFile:
    """A file on a full disk: half of each write lands, then ENOSPC is raised."""

    def __init__(self, f):
        self.f = f

    def write(self, content):
        self.f.write(content[: len(content) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


@pytest.fixture
def full_disk(monkeypatch):
    """``full_disk(fragment)``: from then on, writes through ``os.fdopen`` (how
    torch_wge's atomic writes open their temporary files) to a file whose
    path contains ``fragment`` fail with ``OSError(ENOSPC)``. Undone with
    ``monkeypatch.undo()`` or at the end of the test."""
    real_fdopen = os.fdopen

    def fdopen(fd, *args, **kwargs):
        f = real_fdopen(fd, *args, **kwargs)
        return _FullDiskFile(f) if fragment[0] in os.readlink(f"/proc/self/fd/{fd}") else f

    fragment = [None]

    def fill(part: str) -> None:
        fragment[0] = part
        monkeypatch.setattr(os, "fdopen", fdopen)

    return fill
