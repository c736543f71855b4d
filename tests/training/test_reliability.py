"""Checkpoint safety, the run-folder lock, resumed settings and diverging runs."""

import errno
import json
import os
import stat

import pytest
import torch
import torch_geometric.transforms as T

from torch_wge import io
from torch_wge.testing import random_kg
from torch_wge.training import CheckpointError, TrainConfig, Trainer, load_checkpoint, save_checkpoint
from torch_wge.training.checkpoint import FORMAT
from torch_wge.training.run_folder import RunFolderBusy, RunLock
from torch_wge.training.trainer import TrainingError
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform


@pytest.fixture(scope="module")
def data():
    kg = random_kg(30, 3, 240, seed=5)
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(kg)


@pytest.fixture(autouse=True)
def _single_thread(one_torch_thread):
    """One torch thread: the tiny models train faster that way."""


def config(**kwargs):
    return TrainConfig(
        **{**dict(dataset="random", epochs=3, channels=8, batch_size=64, lr=0.01, eval_every=2, seed=3), **kwargs}
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


def test_non_finite_loss_stops_before_saving_the_epoch(data, tmp_path, monkeypatch):
    real_epoch = Trainer.train_epoch

    def diverging(self):
        loss = real_epoch(self)
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
