import json

import pytest
import torch
import torch_geometric.transforms as T

from torch_wge.testing import random_kg
from torch_wge.training import CheckpointError, TrainConfig, Trainer, load_checkpoint, save_checkpoint
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform


@pytest.fixture(scope="module")
def data():
    kg = random_kg(40, 4, 400, seed=5)
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(kg)


def config(**kwargs):
    defaults = dict(
        recipe="paper", dataset="random", epochs=6, hidden_channels=4, batch_size=32, lr=0.01, eval_every=2, seed=3
    )
    return TrainConfig(**{**defaults, **kwargs})


def test_kill_and_resume_reaches_the_uninterrupted_state(data, tmp_path, kill_after_epoch):
    full = Trainer(config(), data, tmp_path / "full", progress=False)
    full.fit()
    reference = load_checkpoint(tmp_path / "full" / "last.pt")

    kill_after_epoch(lambda: Trainer(config(), data, tmp_path / "killed", progress=False), epoch=3)
    resumed = Trainer(config(), data, tmp_path / "killed", progress=False)
    result = resumed.fit(resume=True)
    final = load_checkpoint(tmp_path / "killed" / "last.pt")
    assert final["epoch"] == reference["epoch"] == 6
    for name, value in reference["model"].items():
        assert torch.allclose(final["model"][name].float(), value.float(), atol=1e-6), name
    assert final["best"] == reference["best"]
    assert result["best_epoch"] == reference["best"]["epoch"]
    epochs = [
        r["epoch"]
        for r in map(json.loads, (tmp_path / "killed" / "log.jsonl").read_text().splitlines())
        if r["event"] == "epoch"
    ]
    assert epochs == [1, 2, 3, 4, 5, 6]  # no epoch logged twice


def test_refuses_to_overwrite_and_to_resume_nothing(data, tmp_path):
    with pytest.raises(CheckpointError, match="nothing to resume"):
        Trainer(config(epochs=1), data, tmp_path, progress=False).fit(resume=True)
    Trainer(config(epochs=1), data, tmp_path, progress=False).fit()
    with pytest.raises(FileExistsError, match=r"already holds a run; fit\(resume=True\) continues it"):
        Trainer(config(epochs=1), data, tmp_path, progress=False).fit()


def test_mismatched_and_corrupt_checkpoints(data, tmp_path):
    Trainer(config(epochs=1), data, tmp_path, progress=False).fit()
    with pytest.raises(CheckpointError, match="hidden_channels: checkpoint 4, here 8"):
        Trainer(config(epochs=2, hidden_channels=8), data, tmp_path, progress=False).fit(resume=True)
    other = random_kg(41, 4, 400, seed=5)
    other = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(other)
    with pytest.raises(CheckpointError, match="num_entities: checkpoint 40, here 41"):
        Trainer(config(epochs=2), other, tmp_path, progress=False).fit(resume=True)
    last = tmp_path / "last.pt"
    last.write_bytes(last.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="corrupt"):
        Trainer(config(epochs=2), data, tmp_path, progress=False).fit(resume=True)


def test_atomic_save_keeps_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "state.pt"
    save_checkpoint({"value": 1}, path)

    def broken_save(obj, f):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError):
        save_checkpoint({"value": 2}, path)
    monkeypatch.undo()
    assert load_checkpoint(path)["value"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["state.pt"]  # no temporary left behind


def test_logs_results_and_early_stopping(data, tmp_path, monkeypatch):
    # a model that never changes never improves after its first evaluation: patience 1 stops at epoch 4
    monkeypatch.setattr(Trainer, "train_epoch", lambda self, *args: 0.0)
    result = Trainer(config(epochs=40, patience=1), data, tmp_path, progress=False).fit()
    assert result["epochs_trained"] == 4 and result["best_epoch"] == 2
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records if r["event"] == "eval"] == [2, 4]
    assert records[-1]["event"] == "final"
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["test"]["metrics"]["both"]["mrr"] == pytest.approx(result["test"]["metrics"]["both"]["mrr"])
    assert saved["config"]["patience"] == 1


def test_resuming_at_the_last_epoch_only_evaluates_the_best_checkpoint(data, tmp_path, monkeypatch):
    # how a run stopped before its planned epochs is closed (benchmarks/reproduce.py --finish)
    Trainer(config(epochs=5), data, tmp_path, progress=False).fit()
    (tmp_path / "results.json").unlink()
    best = load_checkpoint(tmp_path / "best.pt")

    def no_training(self):
        raise AssertionError("a closed run must not train")

    monkeypatch.setattr(Trainer, "train_epoch", no_training)
    result = Trainer(config(epochs=5), data, tmp_path, progress=False).fit(resume=True)
    assert result["epochs_trained"] == 5 and result["best_epoch"] == best["epoch"]
    assert result["valid"]["metrics"]["both"]["mrr"] == pytest.approx(best["valid"]["both.mrr"])
    assert json.loads((tmp_path / "results.json").read_text())["best_epoch"] == best["epoch"]
    finals = [r for r in map(json.loads, (tmp_path / "log.jsonl").read_text().splitlines()) if r["event"] == "final"]
    assert len(finals) == 1  # the first run's final record was replaced, not repeated
