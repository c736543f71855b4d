"""Training recipes, the learning-rate schedule, the time limit and the graph defaults."""

import inspect
import json
import math

import pytest
import torch
import torch_geometric.transforms as T

from torch_wge.testing import random_kg
from torch_wge.training import RECIPES, TrainConfig, Trainer
from torch_wge.training import trainer as trainer_module
from torch_wge.training.trainer import TrainingError
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform


@pytest.fixture(scope="module")
def data():
    kg = random_kg(40, 4, 400, seed=5)
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(kg)


def small(**kwargs):
    return TrainConfig(**{**dict(recipe="paper", dataset="random", hidden_channels=4, batch_size=64, seed=3), **kwargs})


def log_records(folder):
    return [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]


def test_paper_recipe_is_the_papers_setting():
    config = TrainConfig(recipe="paper")
    # WGE research code, CoDEx-S: Adam 5e-4 constant, batch 1024, 1-N BCE with label smoothing 0.1,
    # dropout 0.5, gradient clipping 0.5, 3000 epochs, validation every 10; K = 2, 64 quaternions (256 real numbers)
    assert (config.lr, config.schedule, config.epochs, config.batch_size) == (5e-4, "constant", 3000, 1024)
    assert (config.objective, config.label_smoothing, config.dropout, config.grad_clip) == ("bce", 0.1, 0.5, 0.5)
    assert (config.n3, config.eval_every, config.num_layers, config.hidden_channels) == (0.0, 10, 2, 64)
    assert (config.alpha0, config.beta, config.relation_edges) == (0.9, 0.2, False)
    assert all(config.learning_rate(epoch) == 5e-4 for epoch in (0, 1, 1499, 2999))
    assert TrainConfig(recipe="paper", dataset="codex-l").lr == 1e-4  # the research code's CoDEx-L rate


def test_the_fast_recipe_is_the_default_of_the_config_and_the_cli():
    from torch_wge.cli import build_parser, config_from_args

    assert TrainConfig() == TrainConfig(recipe="fast")
    assert (TrainConfig().epochs, TrainConfig().objective, TrainConfig().weight_decay) == (500, "softmax", 0.1)
    assert config_from_args(build_parser().parse_args(["train", "--dataset", "codex-s"])).recipe == "fast"
    # examples/link_pred_codex.py writes the fast recipe out: tests/test_example.py


def test_large_recipe_is_the_fast_recipe_shortened_with_a_sampled_softmax(data):
    from torch_wge.training import build_loss

    large, fast = TrainConfig(recipe="large"), TrainConfig(recipe="fast")
    assert (large.epochs, large.warmup_epochs, large.eval_every, large.candidates) == (80, 1, 2, 2000)
    assert (large.weight_decay, fast.weight_decay) == (0.0, 0.1)
    differing = {name for name in RECIPES["paper"] if getattr(large, name) != getattr(fast, name)}
    assert differing == {"epochs", "warmup_epochs", "eval_every", "candidates", "weight_decay"}
    assert build_loss(large).candidates == 2000
    assert build_loss(TrainConfig(recipe="large", candidates=0)).candidates == 0  # exact 1-N


def test_explicit_values_override_the_recipe():
    config = TrainConfig(recipe="fast", lr=1e-3, epochs=40)
    assert (config.lr, config.epochs) == (1e-3, 40)
    assert config.schedule == RECIPES["fast"]["schedule"] == "cosine"
    again = TrainConfig.from_dict(config.to_dict())  # a saved config comes back unchanged
    assert again == config
    with pytest.raises(ValueError, match="recipe must be one of"):
        TrainConfig(recipe="slow")


def test_cosine_schedule_values():
    config = TrainConfig(recipe="fast", lr=0.01, epochs=14, warmup_epochs=4)
    expected = [0.0025, 0.005, 0.0075, 0.01]  # linear warm-up
    expected += [0.005 * (1 + math.cos(math.pi * step / 10)) for step in range(10)]  # cosine over 10 epochs
    assert [config.learning_rate(epoch) for epoch in range(14)] == pytest.approx(expected, abs=1e-15)
    assert config.learning_rate(9) == pytest.approx(0.005)  # half-way through the decay
    assert config.learning_rate(20) == 0.0  # past the planned epochs (a resumed longer run) stays at zero


def test_constant_schedule_warms_up_too():
    # a warm-up given with the constant schedule was once dropped without a word
    config = TrainConfig(recipe="fast", schedule="constant", lr=0.01, epochs=14, warmup_epochs=4)
    assert [config.learning_rate(epoch) for epoch in range(6)] == [0.0025, 0.005, 0.0075, 0.01, 0.01, 0.01]
    assert TrainConfig(recipe="paper").learning_rate(0) == 5e-4  # its warm-up is 0 epochs


@pytest.mark.parametrize("name", ["batch_size", "eval_batch_size", "epochs", "warmup_epochs", "candidates"])
def test_integers_past_64_bits_are_refused_naming_the_setting(name):
    config = TrainConfig(recipe="fast", objective="softmax", **{name: 10**20})
    with pytest.raises(ValueError, match=f"^{name} must be a 64-bit integer .below 2..63., got {10**20}$"):
        config.validate()


def test_trainer_applies_the_schedule(data, tmp_path):
    config = small(recipe="fast", lr=0.02, epochs=5, warmup_epochs=2, eval_every=5)
    trainer = Trainer(config, data, tmp_path, progress=False)
    trainer.fit()
    logged = [r["lr"] for r in log_records(tmp_path) if r["event"] == "epoch"]
    # warm-up 0.01, 0.02; cosine over 3 epochs: 0.02 (1 + cos(k pi / 3)) / 2 for k = 0, 1, 2
    assert logged == pytest.approx([0.01, 0.02, 0.02, 0.015, 0.005])
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.005)


class StepClock:
    """A clock that advances ``seconds`` with every optimiser step, and only then."""

    def __init__(self, seconds: float):
        self.seconds, self.steps = seconds, 0

    def __call__(self) -> float:
        return self.seconds * self.steps

    def count_steps(self, trainer: Trainer) -> Trainer:
        step = trainer.optimizer.step

        def counted(*args, **kwargs):
            self.steps += 1
            return step(*args, **kwargs)

        trainer.optimizer.step = counted
        return trainer


def test_time_limit_stops_within_an_epoch_and_the_resumed_run_equals_an_uninterrupted_one(
    data, tmp_path, monkeypatch, capsys
):
    steps = Trainer(small(epochs=1), data, tmp_path / "count", progress=False).queries.num_batches(64)
    assert steps >= 3
    clock = StepClock(10.0)
    monkeypatch.setattr(trainer_module.time, "perf_counter", clock)
    # the limit falls after the second step of epoch 2: steps + 2 steps of 10 s
    limit = (steps + 2) * 10.0 / 60.0
    config = small(recipe="paper", lr=0.01, epochs=3, eval_every=100, time_limit=limit)
    stopped = clock.count_steps(Trainer(config, data, tmp_path / "run", progress=True))
    result = stopped.fit()

    assert clock.steps == steps + 2  # no step after the limit
    assert result["stopped_by"] == "time_limit" and result["epochs_trained"] == 1 and result["epochs"] == 3
    assert f"stopped by --time-limit after 1 of 3 epochs and 2 of {steps} steps of epoch 2" in capsys.readouterr().err
    last = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    assert last["epoch"] == 1 and last["epoch_progress"]["step"] == 2

    monkeypatch.undo()
    resumed = Trainer(small(recipe="paper", lr=0.01, epochs=3, eval_every=100), data, tmp_path / "run", progress=False)
    resumed.fit(resume=True)
    whole = Trainer(small(recipe="paper", lr=0.01, epochs=3, eval_every=100), data, tmp_path / "whole", progress=False)
    whole.fit()
    for (name, a), b in zip(resumed.model.state_dict().items(), whole.model.state_dict().values()):
        assert torch.equal(a, b), name
    losses = [[r["loss"] for r in log_records(tmp_path / f) if r["event"] == "epoch"] for f in ("run", "whole")]
    assert losses[0] == pytest.approx(losses[1], rel=1e-12)


def test_time_limit_at_an_epoch_end_validates_and_a_used_up_limit_is_refused(data, tmp_path, monkeypatch):
    clock = StepClock(10.0)
    monkeypatch.setattr(trainer_module.time, "perf_counter", clock)
    steps = Trainer(small(epochs=1), data, tmp_path / "count", progress=False).queries.num_batches(64)
    config = small(recipe="paper", lr=0.01, epochs=50, eval_every=100, time_limit=2 * steps * 10.0 / 60.0)
    result = clock.count_steps(Trainer(config, data, tmp_path, progress=False)).fit()
    records = log_records(tmp_path)
    assert [r["epoch"] for r in records if r["event"] == "eval"] == [2]  # validated where it stopped
    assert result["epochs_trained"] == 2 and result["best_epoch"] == 2 and result["stopped_by"] == "time_limit"

    trained = 2 * steps * 10.0 / 60
    with pytest.raises(TrainingError, match=rf"--time-limit 0\.1: .* trained {trained:.1f} minutes already"):
        Trainer(
            small(recipe="paper", lr=0.01, epochs=50, eval_every=100, time_limit=0.1), data, tmp_path, progress=False
        ).fit(resume=True)


def test_a_resume_with_fewer_epochs_than_trained_is_refused(data, tmp_path):
    Trainer(small(epochs=3, eval_every=100), data, tmp_path, progress=False).fit()
    with pytest.raises(TrainingError, match=r"--epochs 2: the run in .* has trained 3 epochs already; .*--epochs 3"):
        Trainer(small(epochs=2, eval_every=100), data, tmp_path, progress=False).fit(resume=True)
    closed = Trainer(small(epochs=3, eval_every=100), data, tmp_path, progress=False).fit(resume=True)
    assert closed["epochs_trained"] == 3  # the same count closes the finished run


def test_a_forged_epoch_progress_is_refused_naming_the_file(data, tmp_path):
    from torch_wge.training.checkpoint import load_checkpoint, save_checkpoint
    from torch_wge.training.validation import StoredError

    config = small(recipe="paper", lr=0.01, epochs=3, eval_every=100)
    Trainer(small(recipe="paper", lr=0.01, epochs=1, eval_every=100), data, tmp_path, progress=False).fit()
    state = load_checkpoint(tmp_path / "last.pt")
    steps = Trainer(config, data, tmp_path / "count", progress=False).queries.num_batches(64)
    for forged in ({"step": steps, "shuffle": torch.Generator().get_state(), "loss": 1.0}, {"step": 1}):
        save_checkpoint({**state, "epoch_progress": forged}, tmp_path / "last.pt")
        with pytest.raises(StoredError, match=r"last\.pt: epoch_progress: not the progress of an epoch of this run"):
            Trainer(config, data, tmp_path, progress=False).fit(resume=True)


def test_the_epoch_time_is_estimated_from_the_first_steps(data, tmp_path, monkeypatch, capsys):
    clock = StepClock(200.0)  # 200 s a step: an epoch of over 5 minutes
    monkeypatch.setattr(trainer_module.time, "perf_counter", clock)
    steps = Trainer(small(epochs=1), data, tmp_path / "count", progress=False).queries.num_batches(64)
    clock.count_steps(Trainer(small(epochs=1, eval_every=100), data, tmp_path / "run")).fit()
    err = capsys.readouterr().err
    minutes = round(steps * 200 / 60)
    assert f"one epoch: about {minutes} min ({steps} steps of 200.00 s); --recipe large" in err
    assert err.count("one epoch: about") == 1


def test_graph_defaults_of_train_config_are_the_transforms():
    # the README builds the views with the transforms' defaults, `torch-wge train` with TrainConfig's
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(RelationFocusedTransform.__init__).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    assert set(defaults) == {"beta", "predicate_entities", "relation_edges"}
    config = TrainConfig()
    assert {name: getattr(config, name) for name in defaults} == defaults


def test_candidates_setting_builds_a_sampled_softmax_model(data):
    from torch_wge.training import build_loss

    config = TrainConfig(objective="softmax", candidates=7)
    config.validate()
    assert build_loss(config).candidates == 7
    assert build_loss(TrainConfig()).candidates == 0
    assert build_loss(TrainConfig(objective="softmax", candidates=0)).candidates == 0
    for bad in (TrainConfig(objective="bce", candidates=7), TrainConfig(objective="softmax", candidates=-1)):
        with pytest.raises(ValueError, match="candidates needs --objective softmax"):
            bad.validate()
