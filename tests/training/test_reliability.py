"""Checkpoint safety, the run-folder lock, resumed settings and diverging runs."""

import errno
import fcntl
import json
import os
import stat
import warnings
import zipfile

import pytest
import torch
import torch_geometric.transforms as T

from torch_wge import io
from torch_wge.inference import evaluate_checkpoint
from torch_wge.training import (
    CheckpointError,
    TrainConfig,
    Trainer,
    TrainingQueries,
    load_checkpoint,
    save_checkpoint,
    split_triples,
)
from torch_wge.training.checkpoint import FORMAT
from torch_wge.training.data import graph_sizes
from torch_wge.training.run_folder import RunFolderBusy, RunLock
from torch_wge.training.trainer import TrainingError
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform


@pytest.fixture(scope="module")
def data(tiny_two_view_kg):
    return tiny_two_view_kg


@pytest.fixture(autouse=True)
def _single_thread(one_torch_thread):
    """One torch thread: the tiny models train faster that way."""


def config(**kwargs):
    return TrainConfig(
        **{
            **dict(
                recipe="paper",
                dataset="random",
                epochs=3,
                hidden_channels=2,
                batch_size=64,
                lr=0.01,
                eval_every=2,
                seed=3,
            ),
            **kwargs,
        }
    )


def epochs_logged(folder):
    return [
        r["epoch"] for r in map(json.loads, (folder / "log.jsonl").read_text().splitlines()) if r["event"] == "epoch"
    ]


class MakesAFile:
    """Unpickled by a plain ``torch.load``, it creates the file ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def test_crafted_checkpoint_is_refused_and_runs_nothing(tmp_path):
    target = tmp_path / "created"
    torch.save({"format": FORMAT, "model": MakesAFile(str(target))}, tmp_path / "crafted.pt")
    with pytest.raises(CheckpointError, match="refused"):
        load_checkpoint(tmp_path / "crafted.pt")
    assert not target.exists()
    torch.load(tmp_path / "crafted.pt", weights_only=False)  # what the old loading did
    assert target.exists()


def test_a_plain_pickle_is_one_line_without_torchs_protocol_warning(tmp_path, capsys):
    import pickle

    from torch_wge.cli import main

    (tmp_path / "plain.pt").write_bytes(pickle.dumps({"format": FORMAT, "model": {}}, protocol=4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "Detected pickle protocol 4" would end the test
        with pytest.raises(CheckpointError, match="refused"):
            load_checkpoint(tmp_path / "plain.pt")
    assert main(["evaluate", str(tmp_path / "plain.pt")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "refused (loading it could run code)" in err, err


def test_disk_full_keeps_the_previous_file_and_no_temporary(tmp_path, monkeypatch, full_disk):
    path = tmp_path / "results.json"
    io.write_json(path, {"epoch": 1})
    full_disk("results.json")
    with pytest.raises(OSError) as info:
        io.write_json(path, {"epoch": 2})
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"epoch": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


@pytest.mark.parametrize("kind", ["fifo", "link to a fifo", "device", "folder"])
def test_a_destination_that_is_no_regular_file_is_refused(tmp_path, kind):
    target = tmp_path / "target"
    if kind == "device":
        try:
            os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
        except PermissionError:
            pytest.skip("creating a device node needs root")
    elif kind == "folder":
        target.mkdir()
    else:
        os.mkfifo(target)
    path = tmp_path / "link" if kind == "link to a fifo" else target
    if path != target:
        path.symlink_to(target)
    mode = os.lstat(path).st_mode
    for write in (lambda: io.write_json(path, {"a": 1}), lambda: io.append_line(path, "{}")):
        with pytest.raises(OSError, match="not a regular file; refused") as info:
            write()  # a FIFO without a reader would block: refused before it is opened
        assert info.value.filename == str(path)
    assert os.lstat(path).st_mode == mode  # still what it was, not renamed over
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"target", path.name})  # no temporary


def test_a_link_to_a_file_is_written_through(tmp_path):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    io.write_json(tmp_path / "link.json", {"a": 1})
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "real.json").read_text()) == {"a": 1}


def test_overwrite_and_resume_write_through_a_linked_last_pt_alike(data, tmp_path):
    run, disk = tmp_path / "run", tmp_path / "disk"
    Trainer(config(epochs=2), data, run, progress=False).fit()
    disk.mkdir()
    (run / "last.pt").rename(disk / "last.pt")
    (run / "last.pt").symlink_to(disk / "last.pt")
    Trainer(config(epochs=3), data, run, progress=False).fit(resume=True)
    assert (run / "last.pt").is_symlink() and load_checkpoint(disk / "last.pt")["epoch"] == 3
    Trainer(config(epochs=1), data, run, progress=False).fit(overwrite=True)  # once a regular file replaced it
    assert (run / "last.pt").is_symlink() and load_checkpoint(disk / "last.pt")["epoch"] == 1


def test_a_second_run_into_the_same_folder_is_refused(data, tmp_path):
    tmp_path.mkdir(exist_ok=True)
    other = RunLock(tmp_path)
    other.acquire()  # another training process
    for path in tmp_path.iterdir():  # files removed by hand (an old run's .lock among them)
        path.unlink()
    with pytest.raises(RunFolderBusy, match="in use by another training process"):
        Trainer(config(), data, tmp_path, progress=False).fit()
    assert list(tmp_path.iterdir()) == []  # nothing written
    other.release()
    # a process that dies holding the lock releases it
    pid = os.fork()
    if pid == 0:
        RunLock(tmp_path).acquire()
        os._exit(137)
    os.waitpid(pid, 0)
    Trainer(config(), data, tmp_path, progress=False).fit()
    assert epochs_logged(tmp_path) == [1, 2, 3]


def test_resume_refuses_changed_settings_and_accepts_more_epochs(data, tmp_path):
    Trainer(config(epochs=2), data, tmp_path, progress=False).fit()
    before = {name: (tmp_path / name).read_bytes() for name in ("log.jsonl", "config.json", "last.pt")}
    with pytest.raises(CheckpointError, match=r"--lr 0.01 -> 0.05; --dropout 0.5 -> 0.3"):
        Trainer(config(epochs=2, lr=0.05, dropout=0.3), data, tmp_path, progress=False).fit(resume=True)
    assert before == {name: (tmp_path / name).read_bytes() for name in before}  # nothing recorded
    Trainer(config(epochs=4), data, tmp_path, progress=False).fit(resume=True)
    assert json.loads((tmp_path / "config.json").read_text())["epochs"] == 4
    assert epochs_logged(tmp_path) == [1, 2, 3, 4]


def test_a_folder_that_cannot_be_locked_is_locked_through_a_file(tmp_path, monkeypatch):
    """On NFS ``flock`` of a folder fails (EBADF): a lock file in it is locked instead."""
    real_flock = fcntl.flock

    def flock(fd, operation):
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        return real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    first, second = RunLock(tmp_path), RunLock(tmp_path)
    assert first.acquire()
    assert (tmp_path / io.LOCK_FILE).is_file()
    with pytest.raises(RunFolderBusy):
        second.acquire()
    first.release()
    assert second.acquire()
    second.release()


def test_non_finite_loss_stops_before_saving_the_epoch(data, tmp_path, monkeypatch):
    real_epoch = Trainer.train_epoch

    def diverging(self, *args):
        loss = real_epoch(self, *args)
        return float("nan") if self.epoch == 2 else loss  # the third epoch diverges

    monkeypatch.setattr(Trainer, "train_epoch", diverging)
    with pytest.raises(TrainingError, match="loss became nan in epoch 3.*keeps epoch 2"):
        Trainer(config(epochs=4), data, tmp_path, progress=False).fit()
    assert load_checkpoint(tmp_path / "last.pt")["epoch"] == 2
    assert load_checkpoint(tmp_path / "best.pt")["epoch"] == 2
    assert epochs_logged(tmp_path) == [1, 2]


def test_stale_temporaries_are_removed_on_the_next_start(data, tmp_path):
    Trainer(config(epochs=2), data, tmp_path, progress=False).fit()
    (tmp_path / ".last.pt.tmp-x1y2").write_bytes(b"half a checkpoint")
    (tmp_path / "notes.txt").write_text("mine")
    Trainer(config(epochs=3), data, tmp_path, progress=False).fit(resume=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best.pt",
        "config.json",
        "last.pt",
        "log.jsonl",
        "notes.txt",
        "results.json",
    ]


def test_best_pt_of_another_epoch_is_refused(data, tmp_path):
    """A best.pt that last.pt does not vouch for (and cannot repair) is not evaluated."""
    Trainer(config(epochs=4), data, tmp_path / "a", progress=False).fit()
    last = load_checkpoint(tmp_path / "a" / "last.pt")
    last["best"]["epoch"], last["best_model"] = 2, None  # last.pt of epoch 4 names epoch 2 as the best
    save_checkpoint(last, tmp_path / "a" / "last.pt")
    Trainer(config(epochs=1, eval_every=1), data, tmp_path / "b", progress=False).fit()
    (tmp_path / "a" / "best.pt").write_bytes((tmp_path / "b" / "best.pt").read_bytes())  # epoch 1
    with pytest.raises(CheckpointError, match="holds epoch 1 but .* names epoch 2 as the best"):
        Trainer(config(epochs=4), data, tmp_path / "a", progress=False).fit(resume=True)


def overwrite_tensor_bytes(path, count=64):
    """Overwrites ``count`` bytes in the middle of the largest tensor stored in ``path``
    (a torch zip file), where torch itself notices nothing."""
    with zipfile.ZipFile(path) as archive:
        record = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
        name_and_extra = len(record.filename.encode()) + len(record.extra)
    start = record.header_offset + 30 + name_and_extra + record.file_size // 2 - count // 2
    content = bytearray(path.read_bytes())
    content[start : start + count] = bytes(255 - b for b in content[start : start + count])
    path.write_bytes(bytes(content))


def test_a_damaged_checkpoint_is_refused(data, tmp_path):
    Trainer(config(epochs=2), data, tmp_path, progress=False).fit()
    best = tmp_path / "best.pt"
    weights = load_checkpoint(best)["model"]
    overwrite_tensor_bytes(best)
    # torch reads it without a word, with other weights
    damaged = torch.load(best, weights_only=True)["model"]
    assert any(not torch.equal(damaged[name], value) for name, value in weights.items())
    with pytest.raises(CheckpointError, match=f"{best} is damaged: its contents no longer match its checksum"):
        load_checkpoint(best)
    with pytest.raises(CheckpointError, match="damaged"):
        evaluate_checkpoint(best, data=data)


def with_other_training_triples(data):
    """``data`` with one training tail changed: same sizes and entities, other triples."""
    other = data.clone()
    train = other.train_mask.nonzero().view(-1)
    heads, tails = other.edge_index[0, train], other.edge_index[1, train]
    i = 0
    while True:  # a tail that makes a new triple
        new_tail = (tails[i] + 1) % other.num_nodes
        triple = (heads[i], other.edge_type[train[i]], new_tail)
        if not ((heads == triple[0]) & (other.edge_type[train] == triple[1]) & (tails == new_tail)).any():
            break
        i += 1
    other.edge_index[1, train[i]] = new_tail
    # views rebuilt on the edited graph: what a checkpoint's own fingerprint must catch
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(other)


def test_other_training_triples_are_refused(data, tmp_path):
    Trainer(config(epochs=2), data, tmp_path, progress=False).fit()
    other = with_other_training_triples(data)
    assert graph_sizes(other) == graph_sizes(data)
    before = {name: (tmp_path / name).read_bytes() for name in ("log.jsonl", "last.pt")}
    with pytest.raises(CheckpointError, match="training triples of random .* differ from those .*last.pt"):
        Trainer(config(epochs=3), other, tmp_path, progress=False).fit(resume=True)
    assert before == {name: (tmp_path / name).read_bytes() for name in before}
    with pytest.raises(CheckpointError, match="training triples of the graph passed as data differ"):
        evaluate_checkpoint(tmp_path / "best.pt", data=other)
    evaluate_checkpoint(tmp_path / "best.pt", data=data)  # the same triples in another order are the same data
    shuffled = data.clone()
    order = torch.randperm(data.edge_type.numel(), generator=torch.Generator().manual_seed(0))
    for key in ("edge_type", "train_mask", "val_mask", "test_mask"):
        shuffled[key] = data[key][order]
    shuffled.edge_index = data.edge_index[:, order]
    evaluate_checkpoint(tmp_path / "best.pt", data=shuffled)


def test_a_last_batch_of_one_query_trains(data, tmp_path):
    queries = TrainingQueries(split_triples(data, "train"), data.num_nodes, data.num_relations)
    batch_size = (len(queries) - 1) // 2  # two batches and one query left over
    assert len(queries) % batch_size == 1
    Trainer(config(epochs=1, batch_size=batch_size), data, tmp_path, progress=False).fit()
    assert epochs_logged(tmp_path) == [1]


def test_resume_says_when_the_rounding_changes(data, tmp_path):
    Trainer(config(epochs=2, precision="float32"), data, tmp_path, progress=False).fit()
    assert load_checkpoint(tmp_path / "last.pt")["threads"] == torch.get_num_threads() == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same thread count and settings: nothing said
        Trainer(config(epochs=3, precision="float32"), data, tmp_path, progress=False).fit(resume=True)
    torch.set_num_threads(2)  # restored by the fixture
    with pytest.warns(UserWarning, match=r"--precision float32 -> bf16, --threads 1 -> 2: .* not bit for bit"):
        Trainer(config(epochs=4, precision="bf16"), data, tmp_path, progress=False).fit(resume=True)
    assert epochs_logged(tmp_path) == [1, 2, 3, 4]


def test_a_checkpoint_without_a_checksum_still_loads(tmp_path):
    """Checkpoints written before checksums were stored are read as before."""
    state = {"format": FORMAT, "epoch": 3, "model": {"w": torch.arange(4.0)}}
    torch.save(state, tmp_path / "old.pt")
    assert load_checkpoint(tmp_path / "old.pt")["epoch"] == 3
    torch.save({**state, "checksum": "0" * 64}, tmp_path / "wrong.pt")
    with pytest.raises(CheckpointError, match="no longer match its checksum"):
        load_checkpoint(tmp_path / "wrong.pt")


def test_a_run_saved_by_another_optimiser_implementation_resumes_with_its_own(data, tmp_path):
    # the CPU trainer steps with AdamW's fused implementation; a checkpoint of the multi-tensor one
    # (older runs, other devices) resumes there and continues with the fused one: the same numbers as
    # a run that never stopped, which the other implementation would only give to rounding
    whole = tmp_path / "whole"
    Trainer(config(epochs=3), data, whole, progress=False).fit()
    resumed = tmp_path / "resumed"
    Trainer(config(epochs=2), data, resumed, progress=False).fit()
    state = load_checkpoint(resumed / "last.pt")
    assert [group["fused"] for group in state["optimizer"]["param_groups"]] == [True]
    for group in state["optimizer"]["param_groups"]:
        group.update(fused=None, foreach=True)
    save_checkpoint(state, resumed / "last.pt")
    trainer = Trainer(config(epochs=3), data, resumed, progress=False)
    with pytest.warns(UserWarning, match=r"the optimiser step foreach -> fused: .* not bit for bit"):
        trainer.fit(resume=True)
    assert [(group["fused"], group["foreach"]) for group in trainer.optimizer.param_groups] == [(True, None)]
    final = load_checkpoint(resumed / "last.pt")["model"]
    assert all(torch.equal(value, final[name]) for name, value in load_checkpoint(whole / "last.pt")["model"].items())


def test_a_fused_optimiser_state_loads_into_an_unfused_optimiser(data, tmp_path):
    from torch_wge.training.validation import load_optimizer

    Trainer(config(epochs=1), data, tmp_path, progress=False).fit()
    saved = load_checkpoint(tmp_path / "last.pt")["optimizer"]
    model = Trainer(config(epochs=1), data, tmp_path / "other", progress=False).model
    optimizer = torch.optim.AdamW(model.parameters(), foreach=True)
    load_optimizer(optimizer, saved, tmp_path / "last.pt")
    assert [(group["fused"], group["foreach"]) for group in optimizer.param_groups] == [(None, True)]
    steps = [state["step"] for state in optimizer.state.values()]
    assert steps and all(step.device.type == "cpu" and step.dtype == torch.float32 for step in steps)
