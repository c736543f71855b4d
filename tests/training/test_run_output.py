"""What a run tells its user and leaves behind: the progress bar's figures against the
log, the first line (run folder, the epoch a resume continues from), no lock file."""

import re
import sys

import pytest
import torch_geometric.transforms as T

from torch_wge.testing import random_kg
from torch_wge.training import TrainConfig, Trainer
from torch_wge.training.run_folder import RunLock, read_log
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform


@pytest.fixture(scope="module")
def data():
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(random_kg(30, 3, 240, seed=4))


@pytest.fixture(autouse=True)
def _single_thread(one_torch_thread):
    """One torch thread: the tiny models train faster that way."""


def config(**kwargs):
    defaults = dict(
        recipe="paper", dataset="random", epochs=4, hidden_channels=2, batch_size=64, lr=0.01, eval_every=1, seed=3
    )
    return TrainConfig(**{**defaults, **kwargs})


def bar_figures(err: str):
    """The (loss, best_mrr) of every state the progress bar was drawn in, in order."""
    states = [line for line in re.split(r"[\r\n]", err) if "best_mrr=" in line]
    return [(re.search(r"loss=([0-9.]+)", s)[1], re.search(r"best_mrr=([0-9.]+|-)", s)[1]) for s in states]


@pytest.mark.parametrize("eval_every", [4, 1])
def test_progress_bar_shows_the_best_validation_mrr_of_the_log(data, tmp_path, capsys, monkeypatch, eval_every):
    # eval_every=4: one validation, after the last epoch (the bar read best_mrr=0.0000 there);
    # eval_every=1: the last validation may be the best (the bar showed the best before it)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # bars are drawn on a terminal
    Trainer(config(eval_every=eval_every), data, tmp_path).fit()
    records = read_log(tmp_path / "log.jsonl")
    epochs = [r for r in records if r["event"] == "epoch"]
    evals = [r for r in records if r["event"] == "eval"]
    drawn = bar_figures(capsys.readouterr().err)
    # the bar after each epoch: its loss, and the best validation MRR logged up to that epoch
    expected = []
    for epoch in epochs:
        so_far = [r["both.mrr"] for r in evals if r["epoch"] <= epoch["epoch"]]
        expected.append((f"{epoch['loss']:.4f}", f"{max(so_far):.4f}" if so_far else "-"))
    # tqdm redraws at most every 0.1 s: the states drawn are some of these, in order, and the last
    changes = [state for i, state in enumerate(drawn) if i == 0 or state != drawn[i - 1]]
    remaining = iter(expected)
    assert all(state in remaining for state in changes), (changes, expected)
    assert drawn[-1] == expected[-1]
    assert drawn[-1][1] == f"{max(r['both.mrr'] for r in evals):.4f}"


def test_without_a_terminal_each_epoch_is_one_line_with_its_figures_and_an_eta(data, tmp_path, capsys):
    Trainer(config(epochs=4, eval_every=2), data, tmp_path).fit()
    records = read_log(tmp_path / "log.jsonl")
    evals = {r["epoch"]: r["both.mrr"] for r in records if r["event"] == "eval"}
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch ") and "ETA" in line]
    assert len(lines) == 4 and "\r" not in "".join(lines)
    for line, record in zip(lines, (r for r in records if r["event"] == "epoch")):
        best = max((mrr for epoch, mrr in evals.items() if epoch <= record["epoch"]), default=None)
        best_text = "-" if best is None else f"{best:.4f}"
        assert line.startswith(f"epoch {record['epoch']}/4 | loss {record['loss']:.4f} | best MRR {best_text} | ")
    assert re.search(r"\| ETA 0 s$", lines[-1])


def test_first_line_names_the_run_folder_and_the_epoch_a_resume_continues_from(data, tmp_path, capsys):
    Trainer(config(epochs=3, eval_every=2), data, tmp_path).fit()
    assert capsys.readouterr().err.splitlines()[0] == f"training into {tmp_path} (epochs 1 to 3)"
    Trainer(config(epochs=5, eval_every=2), data, tmp_path).fit(resume=True)
    best = max(
        (r for r in read_log(tmp_path / "log.jsonl") if r["event"] == "eval" and r["epoch"] <= 3),
        key=lambda r: r["both.mrr"],
    )
    assert capsys.readouterr().err.splitlines()[0] == (
        f"resuming the run in {tmp_path} after epoch 3 (epochs 4 to 5; "
        f"best validation MRR {best['both.mrr']:.4f} at epoch {best['epoch']})"
    )
    Trainer(config(epochs=5, eval_every=2), data, tmp_path).fit(resume=True)  # closing a finished run
    assert (
        capsys.readouterr()
        .err.splitlines()[0]
        .startswith(f"resuming the run in {tmp_path} after epoch 5 (no epoch left to train; best validation MRR")
    )
    Trainer(config(epochs=6, eval_every=2), data, tmp_path, progress=False).fit(resume=True)
    assert capsys.readouterr().err == ""  # progress=False: silent


def test_no_lock_file_is_left_in_the_run_folder(data, tmp_path, monkeypatch):
    Trainer(config(epochs=1), data, tmp_path / "clean", progress=False).fit()

    def interrupted(self, *args):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "train_epoch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Trainer(config(epochs=1), data, tmp_path / "stopped", progress=False).fit()
    for folder in ("clean", "stopped"):
        assert not (tmp_path / folder / ".lock").exists()
        lock = RunLock(tmp_path / folder)  # and the folder is free again
        assert lock.acquire()
        lock.release()
