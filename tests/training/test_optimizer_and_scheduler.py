"""``Trainer(optimizer=..., scheduler=...)``: another optimiser and a learning-rate scheduler train,
resume exactly, and leave the default (the recipe's fused AdamW and schedule) as it was."""

import functools
import json

import pytest
import torch
from torch.optim.lr_scheduler import StepLR

from torch_wge.training import Trainer, load_checkpoint, save_checkpoint
from torch_wge.training.validation import StoredError

SGD = functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9)
STEP = functools.partial(StepLR, step_size=2, gamma=0.5)


@pytest.fixture
def data(small_two_view_kg):
    return small_two_view_kg


def records(folder, *events):
    """The log's records of ``events``, without their times."""
    lines = (folder / "log.jsonl").read_text().splitlines()
    return [
        {key: value for key, value in record.items() if "seconds" not in key}
        for record in map(json.loads, lines)
        if record["event"] in events
    ]


def test_sgd_with_a_step_schedule_trains(data, tmp_path, small_config):
    trainer = Trainer(small_config(epochs=6), data, tmp_path, progress=False, optimizer=SGD, scheduler=STEP)
    assert type(trainer.optimizer) is torch.optim.SGD and type(trainer.scheduler) is StepLR
    trainer.fit()
    epochs = records(tmp_path, "epoch")
    losses = [record["loss"] for record in epochs]
    assert losses[-1] < losses[0]
    # the scheduler's rates, stepped once an epoch: 0.05 for two epochs, then halved every two
    assert [record["lr"] for record in epochs] == pytest.approx([0.05, 0.05, 0.025, 0.025, 0.0125, 0.0125])
    state = load_checkpoint(tmp_path / "last.pt")
    assert state["scheduler"]["last_epoch"] == 6 and "momentum_buffer" in next(
        iter(state["optimizer"]["state"].values())
    )


def test_killed_and_resumed_equals_an_uninterrupted_run(data, tmp_path, kill_after_epoch, small_config):
    def make(folder):
        return Trainer(small_config(epochs=6), data, tmp_path / folder, progress=False, optimizer=SGD, scheduler=STEP)

    make("full").fit()
    reference = load_checkpoint(tmp_path / "full" / "last.pt")
    kill_after_epoch(lambda: make("killed"), epoch=3)
    make("killed").fit(resume=True)
    final = load_checkpoint(tmp_path / "killed" / "last.pt")
    assert final["epoch"] == reference["epoch"] == 6
    for name, value in reference["model"].items():
        assert torch.equal(final["model"][name], value), name
    assert final["scheduler"] == reference["scheduler"]
    assert final["best"] == reference["best"]
    events = ("epoch", "validation")
    assert records(tmp_path / "killed", *events) == records(tmp_path / "full", *events)


def test_an_optimizer_without_a_scheduler_follows_the_configs_schedule(data, tmp_path, small_config):
    config = small_config(epochs=4, lr=0.01, warmup_epochs=2, schedule="constant")
    Trainer(config, data, tmp_path, progress=False, optimizer=SGD).fit()
    # the schedule's factors (1/2, 1, 1, 1) of the optimiser's own rate 0.05
    assert [record["lr"] for record in records(tmp_path, "epoch")] == pytest.approx([0.025, 0.05, 0.05, 0.05])


def test_the_default_is_the_recipes_fused_adamw_and_schedule(data, tmp_path, small_config):
    config = small_config(epochs=3, warmup_epochs=2)
    trainer = Trainer(config, data, tmp_path, progress=False)
    assert type(trainer.optimizer) is torch.optim.AdamW and trainer.scheduler is None
    assert trainer.optimizer.defaults["fused"] and trainer.optimizer.defaults["lr"] == config.lr
    trainer.fit()
    assert [record["lr"] for record in records(tmp_path, "epoch")] == [config.learning_rate(e) for e in range(3)]
    assert load_checkpoint(tmp_path / "last.pt")["scheduler"] is None


def test_a_resume_needs_the_scheduler_the_run_was_trained_with(data, tmp_path, small_config):
    Trainer(small_config(epochs=2), data, tmp_path / "with", progress=False, optimizer=SGD, scheduler=STEP).fit()
    with pytest.raises(StoredError, match=r"last.pt: scheduler: the run was trained with a scheduler"):
        Trainer(small_config(epochs=3), data, tmp_path / "with", progress=False, optimizer=SGD).fit(resume=True)
    Trainer(small_config(epochs=2), data, tmp_path / "without", progress=False, optimizer=SGD).fit()
    with pytest.raises(StoredError, match=r"last.pt: scheduler: the run was trained with no scheduler"):
        Trainer(small_config(epochs=3), data, tmp_path / "without", progress=False, optimizer=SGD, scheduler=STEP).fit(
            resume=True
        )
    # a stored scheduler state that is no dict is refused before it is used
    state = load_checkpoint(tmp_path / "with" / "last.pt")
    save_checkpoint({**state, "scheduler": 5}, tmp_path / "with" / "last.pt")
    with pytest.raises(StoredError, match=r"scheduler: must be a dict \(a scheduler's state\) or None, found 5"):
        Trainer(small_config(epochs=3), data, tmp_path / "with", progress=False, optimizer=SGD, scheduler=STEP).fit(
            resume=True
        )


def test_factories_that_make_something_else_are_refused(data, tmp_path, small_config):
    with pytest.raises(TypeError, match="optimizer made a list, not a torch.optim.Optimizer"):
        Trainer(small_config(), data, tmp_path, progress=False, optimizer=list)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau
    with pytest.raises(TypeError, match="ReduceLROnPlateau steps on a metric"):
        Trainer(small_config(), data, tmp_path, progress=False, scheduler=plateau)
