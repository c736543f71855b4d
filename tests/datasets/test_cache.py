"""The processed cache: keyed by the raw files' content, rebuilt when damaged."""

import contextlib
import inspect
import os
import time
import warnings

import pytest
import torch

import torch_wge.datasets.base as base
from torch_wge.cli import main
from torch_wge.datasets import TriplesFolder


@pytest.fixture
def folder(tmp_path):
    kg = tmp_path / "kg"
    kg.mkdir()
    (kg / "train.txt").write_text("a\tr\tb\nb\tr\tc\nc\ts\ta\n")
    (kg / "valid.txt").write_text("a\ts\tc\n")
    (kg / "test.txt").write_text("b\ts\ta\n")
    return kg


#: The files PyG's processing writes beside the dataset's own: the repr of the pre-transform and pre-filter.
PYG_FILES = ["pre_filter.pt", "pre_transform.pt"]


def processed_files(dataset):
    return sorted(os.listdir(dataset.processed_dir))


def count_processing(monkeypatch):
    calls = []
    real = base.KnowledgeGraphDataset.process
    monkeypatch.setattr(base.KnowledgeGraphDataset, "process", lambda self: (calls.append(1), real(self)))
    return calls


def test_edited_raw_file_is_processed_anew(folder, monkeypatch):
    calls = count_processing(monkeypatch)
    before = TriplesFolder(str(folder), log=False)
    assert TriplesFolder(str(folder), log=False).entity_names == ["a", "b", "c"]
    assert len(calls) == 1  # the second load reads the cache
    with open(folder / "train.txt", "a") as f:
        f.write("c\tr\td\n")
    after = TriplesFolder(str(folder), log=False)
    assert len(calls) == 2
    assert after.entity_names == ["a", "b", "c", "d"]
    assert int(after[0].train_mask.sum()) == 4
    assert processed_files(after) == sorted([*after.processed_file_names, *PYG_FILES])  # old copy gone
    assert before.processed_file_names != after.processed_file_names


def test_added_label_file_is_processed_anew(folder):
    assert TriplesFolder(str(folder), log=False).entity_labels is None
    (folder / "entity_labels.txt").write_text("a\tAlpha\n")
    assert TriplesFolder(str(folder), log=False).entity_labels[0] == "Alpha"


@pytest.mark.parametrize("damage", ["truncate data", "truncate vocab", "delete vocab", "empty data"])
def test_damaged_cache_is_rebuilt(folder, damage):
    first = TriplesFolder(str(folder), log=False)
    data_path, vocab_path = first.processed_paths
    path = data_path if "data" in damage else vocab_path
    if damage.startswith("truncate"):
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    elif damage == "delete vocab":
        os.remove(path)
    else:
        open(path, "wb").close()
    with (
        pytest.warns(UserWarning, match="processing the raw files again")
        if damage != "delete vocab"
        else contextlib.nullcontext()
    ):
        again = TriplesFolder(str(folder), log=False)
    assert again.entity_names == first.entity_names
    assert torch.equal(again[0].edge_index, first[0].edge_index)


def test_force_reload(folder, tmp_path, monkeypatch, capsys):
    calls = count_processing(monkeypatch)
    assert main(["stats", "--dataset", str(folder), "--root", str(tmp_path)]) == 0
    assert main(["stats", "--dataset", str(folder), "--root", str(tmp_path)]) == 0
    assert len(calls) == 1
    assert main(["stats", "--dataset", str(folder), "--root", str(tmp_path), "--force-reload"]) == 0
    assert len(calls) == 2


class RunsCode:
    """Unpickled by a plain ``torch.load`` (PyG's fallback), it creates the file ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.mark.parametrize("planted", ["data", "vocab", "pre_transform.pt"])
def test_code_planted_in_the_cache_never_runs(folder, tmp_path, planted):
    first = TriplesFolder(str(folder), log=False)
    created = tmp_path / "created"
    payload = {"data": first.processed_paths[0], "vocab": first.processed_paths[1]}.get(
        planted, os.path.join(first.processed_dir, planted)
    )
    torch.save(({"x": RunsCode(str(created))}, None, RunsCode(str(created))), payload)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = TriplesFolder(str(folder), log=False)
    assert not created.exists()
    messages = [str(w.message) for w in caught]
    if planted == "pre_transform.pt":  # PyG unpickles its file in full: refused and removed before it does
        assert messages == [] and not os.path.exists(payload)
    else:  # refused with one warning naming it, and rebuilt from the raw files
        assert len(messages) == 1 and payload in messages[0] and "refused" in messages[0]
    assert again.entity_names == ["a", "b", "c"]
    assert torch.equal(again[0].edge_index, first[0].edge_index)


@pytest.mark.parametrize("reload", [False, True])
def test_temporaries_of_a_killed_processing_are_removed_once_stale(folder, reload, tmp_path, capsys):
    cache = str(tmp_path / "cache")  # where the command line processes a folder (its --root)
    first = TriplesFolder(str(folder), cache_root=cache, log=False)
    killed, writing = (
        os.path.join(first.processed_dir, f".{os.path.basename(first.processed_paths[0])}.tmp-{name}")
        for name in ("k1ll3d", "wr1t1ng")
    )
    for path in (killed, writing):
        with open(path, "wb") as f:
            f.write(b"half a graph")
    stale = time.time() - base.STALE_TEMPORARY_SECONDS - 60
    os.utime(killed, (stale, stale))
    assert main(["stats", "--dataset", str(folder), "--root", cache, *(["--force-reload"] if reload else [])]) == 0
    # the fresh one may be another process's write in progress
    assert processed_files(first) == sorted([*first.processed_file_names, *PYG_FILES, os.path.basename(writing)])


def test_only_public_hooks_of_pyg_are_overridden():
    """PyG's private methods (``_download``, ...) are left to PyG, but ``_process``, which only removes
    PyG's unreadable ``pre_transform.pt`` and ``pre_filter.pt`` before running PyG's own."""
    from torch_geometric.data import InMemoryDataset

    private = [
        name
        for name in vars(base.KnowledgeGraphDataset)
        if name.startswith("_") and not name.startswith("__") and hasattr(InMemoryDataset, name)
    ]
    assert private == ["_process"]
    assert "super()._process()" in inspect.getsource(base.KnowledgeGraphDataset._process)


def forge_graph(edit):
    def forge(data_path, vocab_path):
        stored, slices, data_cls = torch.load(data_path, weights_only=False)
        edit(stored)
        torch.save((stored, slices, data_cls), data_path)

    return forge


def forge_vocabulary(edit):
    def forge(data_path, vocab_path):
        meta = torch.load(vocab_path, weights_only=False)
        edit(meta)
        torch.save(meta, vocab_path)

    return forge


def set_edge(stored, value):
    stored["edge_index"][0, 0] = value


@pytest.mark.parametrize(
    "forge, named",
    [
        (forge_graph(lambda s: set_edge(s, 10**6)), "edge_index holds ids outside [0, 3): 0 to 1000000"),
        (forge_graph(lambda s: set_edge(s, -1)), "edge_index holds ids outside [0, 3)"),
        (forge_graph(lambda s: s["edge_type"].__setitem__(0, 7)), "edge_type holds ids outside [0, 2)"),
        (forge_graph(lambda s: s.update(num_nodes="3")), "num_nodes and num_relations must be integers"),
        (forge_graph(lambda s: s.update(train_mask=s["train_mask"][:1])), "train_mask must be a boolean vector"),
        (forge_graph(lambda s: s.update(edge_index=s["edge_index"].float())), "edge_index must be a [2, n] tensor"),
        (forge_vocabulary(lambda m: m.update(entity_names=5)), "entity_names must be a list of 3 strings"),
        (forge_vocabulary(lambda m: m["entity_names"].pop()), "entity_names must be a list of 3 strings"),
        (forge_vocabulary(lambda m: m.update(relation_labels=["x"])), "relation_labels must be None or a list of 2"),
        (forge_vocabulary(lambda m: m.update(num_dropped={"x": -1})), "num_dropped must map reasons to counts"),
    ],
)
def test_a_forged_cache_is_refused_in_one_warning_and_rebuilt(folder, forge, named):
    first = TriplesFolder(str(folder), log=False)
    forge(*first.processed_paths)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = TriplesFolder(str(folder), log=False)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and named in messages[0] and "processing the raw files again" in messages[0], messages
    assert again.entity_names == ["a", "b", "c"] and torch.equal(again[0].edge_index, first[0].edge_index)


def test_a_label_file_that_is_a_fifo_is_refused_not_skipped(folder):
    os.mkfifo(folder / "entity_labels.txt")  # read, it would block until a writer came
    with pytest.raises(OSError, match="not a regular file") as refused:
        TriplesFolder(str(folder), log=False)
    assert refused.value.filename == str(folder / "entity_labels.txt")
