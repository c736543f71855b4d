"""Processing on PyG's lifecycle under kills and concurrent processes: the next construction, or each
of two at once, ends with the full, right dataset."""

import io as bytes_io
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
import torch_geometric.io.fs as pyg_fs

from torch_wge import io
from torch_wge.datasets import TriplesFolder
from torch_wge.transforms import RelationFocusedTransform

REPOSITORY = Path(__file__).resolve().parents[2]

#: The writes of a processing, in order: torch_wge's graph and vocabulary, then PyG's two files.
WRITES = ("graph", "vocabulary", "pre_transform.pt", "pre_filter.pt")


def write_graph(folder: Path, triples: int = 300) -> Path:
    """A folder of ``triples`` distinct triples over 60 entities and 5 relations, the last 40 split into
    valid and test, every entity and relation in training."""
    rows = [f"e{i % 60}\tr{i // 60 % 5}\te{(i // 300 + 7 * (i % 60) + 1) % 60}" for i in range(triples)]
    folder.mkdir(parents=True)
    (folder / "train.txt").write_text("\n".join(rows[:-40]) + "\n")
    (folder / "valid.txt").write_text("\n".join(rows[-40:-20]) + "\n")
    (folder / "test.txt").write_text("\n".join(rows[-20:]) + "\n")
    return folder


def assert_same_graph(data: dict, expected: dict):
    assert sorted(data) == sorted(expected)
    for key, value in expected.items():
        assert torch.equal(data[key], value) if isinstance(value, torch.Tensor) else data[key] == value, key


def assert_same_dataset(dataset, reference):
    assert_same_graph(dataset[0].to_dict(), reference[0].to_dict())
    assert (dataset.entity_names, dataset.relation_names) == (reference.entity_names, reference.relation_names)
    assert dataset.num_dropped == reference.num_dropped


def kill_at(monkeypatch, write: int) -> list:
    """Cuts the processing short at its ``write``-th write (1-based, in :data:`WRITES` order) as a kill
    would: half of that file's bytes land where a kill leaves them (torch_wge writes to a temporary file
    and renames it, PyG writes the file in place), then KeyboardInterrupt. Returns the paths written."""
    written = []
    real_write_bytes = io.write_bytes

    def write_bytes(path, content):  # torch_wge's atomic writes
        written.append(path)
        if len(written) == write:
            path = Path(path)
            (path.parent / f".{path.name}{io.TEMP_INFIX}killed").write_bytes(content[: len(content) // 2])
            raise KeyboardInterrupt
        real_write_bytes(path, content)

    def torch_save(obj, path):  # PyG's fs.torch_save: serialised, then written in place
        written.append(path)
        buffer = bytes_io.BytesIO()
        torch.save(obj, buffer)
        content = buffer.getvalue()
        with open(path, "wb") as f:
            f.write(content[: len(content) // 2] if len(written) == write else content)
        if len(written) == write:
            raise KeyboardInterrupt

    monkeypatch.setattr(io, "write_bytes", write_bytes)
    monkeypatch.setattr(pyg_fs, "torch_save", torch_save)
    return written


@pytest.mark.parametrize("pre_transform", [None, RelationFocusedTransform(beta=0.5)], ids=["plain", "views"])
@pytest.mark.parametrize("write", range(1, len(WRITES) + 1), ids=WRITES)
def test_a_processing_killed_at_any_write_is_completed_by_the_next_construction(
    tmp_path, monkeypatch, write, pre_transform
):
    reference = TriplesFolder(str(write_graph(tmp_path / "clean")), pre_transform=pre_transform, log=False)
    folder = str(write_graph(tmp_path / "kg"))
    with monkeypatch.context() as patch:
        written = kill_at(patch, write)
        with pytest.raises(KeyboardInterrupt):
            TriplesFolder(folder, pre_transform=pre_transform, log=False)
    assert [Path(path).name.split("-")[0] for path in written] == ["data", "vocab", *WRITES[2:]][:write]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither a damaged file nor PyG's "pre_transform differs"
        again = TriplesFolder(folder, pre_transform=pre_transform, log=False)
    assert_same_dataset(again, reference)
    assert_same_dataset(TriplesFolder(folder, pre_transform=pre_transform, log=False), reference)  # from the files


@pytest.mark.parametrize("name", ["pre_transform.pt", "pre_filter.pt"])
@pytest.mark.parametrize("keep", [0, 0.5], ids=["emptied", "halved"])
def test_a_pyg_file_cut_short_by_hand_is_taken_as_absent(tmp_path, name, keep):
    folder = str(write_graph(tmp_path / "kg"))
    first = TriplesFolder(folder, log=False)
    path = os.path.join(first.processed_dir, name)
    with open(path, "r+b") as f:
        f.truncate(int(os.path.getsize(path) * keep))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = TriplesFolder(folder, log=False)
    assert_same_dataset(again, first)
    assert not os.path.exists(path)  # removed unread, as absent as before PyG's first processing
    assert_same_dataset(TriplesFolder(folder, log=False, force_reload=True), first)
    assert torch.load(path, weights_only=True) == "None"  # written again by PyG's processing


WORKER = """
import os, sys, time
import torch
from torch_wge.datasets import TriplesFolder
from torch_wge.transforms import RelationFocusedTransform

folder, go, out = sys.argv[1:4]
open(out + ".ready", "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
dataset = TriplesFolder(folder, pre_transform=RelationFocusedTransform(beta=0.5), log=True)
torch.save((dataset[0].to_dict(), dataset.entity_names, dataset.relation_names), out)
"""


def python_env() -> dict:
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_CURRENT_TEST"}  # as a user runs it
    env["OMP_NUM_THREADS"] = "1"
    return env


def test_two_processes_processing_one_fresh_folder_at_once_both_end_with_the_right_graph(tmp_path):
    reference = TriplesFolder(
        str(write_graph(tmp_path / "clean", triples=3000)), pre_transform=RelationFocusedTransform(beta=0.5), log=False
    )
    folder, go = str(write_graph(tmp_path / "kg", triples=3000)), str(tmp_path / "go")
    outs = [str(tmp_path / f"out{i}.pt") for i in range(2)]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, folder, go, out],
            cwd=REPOSITORY,
            env=python_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    deadline = time.monotonic() + 120
    while not all(os.path.exists(out + ".ready") for out in outs) and time.monotonic() < deadline:
        if any(worker.poll() is not None for worker in workers):
            break
        time.sleep(0.01)
    Path(go).touch()  # both start processing together
    errors = [worker.communicate(timeout=120)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], errors
    expected = reference[0].to_dict()
    for out in outs:
        data, entity_names, relation_names = torch.load(out, weights_only=True)
        assert_same_graph(data, expected)
        assert (entity_names, relation_names) == (reference.entity_names, reference.relation_names)
    assert any("Processing..." in error for error in errors)  # PyG's announcement, outside pytest
    processed = TriplesFolder(folder, pre_transform=RelationFocusedTransform(beta=0.5), log=False)
    assert sorted(os.listdir(processed.processed_dir)) == sorted(
        [*processed.processed_file_names, "pre_filter.pt", "pre_transform.pt"]
    )


def test_processing_is_announced_by_pyg_outside_pytest_and_only_with_log(tmp_path):
    """``log=True`` prints PyG's "Processing..." and "Done!" when the graph is processed, not when it is
    read back; ``log=False`` prints nothing. (PyG prints nothing under pytest.)"""
    folders = [str(write_graph(tmp_path / name)) for name in ("logged", "quiet")]
    code = (
        "import sys\nfrom torch_wge.datasets import TriplesFolder\n"
        "TriplesFolder(sys.argv[1], log=True)\nprint('--', file=sys.stderr, flush=True)\n"
        "TriplesFolder(sys.argv[1], log=True)\nprint('--', file=sys.stderr, flush=True)\n"
        "TriplesFolder(sys.argv[2], log=False)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *folders],
        cwd=REPOSITORY,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    processed, read, quiet = result.stderr.split("--\n")
    assert "Processing...\nDone!\n" in processed
    assert "Processing" not in read + quiet and "Done" not in read + quiet


def test_pyg_stores_the_pre_transform_and_compares_it(tmp_path):
    folder, views = str(write_graph(tmp_path / "kg")), RelationFocusedTransform(beta=0.5)
    first = TriplesFolder(folder, pre_transform=views, log=False)
    stored = os.path.join(first.processed_dir, "pre_transform.pt")
    assert torch.load(stored, weights_only=True) == str(views)
    torch.save("another()", stored)  # as if another pre-transform had been processed into this folder
    with pytest.warns(UserWarning, match="`pre_transform` argument differs"):
        TriplesFolder(folder, pre_transform=views, log=False)
