"""The moving average of the weights (``ema_decay``): its values, its use by the trainer, resume."""

import json

import pytest
import torch

from torch_wge.training import RECIPES, TrainConfig, Trainer, evaluate_model, load_checkpoint
from torch_wge.training.ema import WeightAverage


@pytest.fixture
def data(small_two_view_kg):
    return small_two_view_kg


def float64_state(model):
    return {name: value.detach().to(torch.float64).clone() for name, value in model.state_dict().items()}


def ema_reference(snapshots, decay):
    """The average by its recursion in float64, from the initial weights over every step's."""
    average = dict(snapshots[0])
    for weights in snapshots[1:]:
        average = {name: decay * average[name] + (1 - decay) * weights[name] for name in average}
    return average


def test_weight_average_equals_the_float64_recursion():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    average = WeightAverage(model, decay=0.7)
    snapshots = [float64_state(model)]
    for _ in range(5):
        x = torch.randn(8, 3) * 2 + 1  # batch norm statistics move too
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        average.update(model)
        snapshots.append(float64_state(model))
    reference = ema_reference(snapshots, 0.7)
    for name, value in average.state_dict().items():
        if name.endswith("num_batches_tracked"):
            assert value.item() == 5  # counts are copied, not averaged
            continue
        assert torch.allclose(value.double(), reference[name], rtol=0, atol=1e-6), name
        assert not torch.allclose(value.double(), snapshots[-1][name], rtol=0, atol=1e-3), name
    assert not average.model.training and not any(p.requires_grad for p in average.model.parameters())


def test_trainer_validates_keeps_and_tests_the_average(data, tmp_path, small_config):
    trainer = Trainer(small_config(ema_decay=0.8), data, tmp_path, progress=False)
    snapshots = [float64_state(trainer.model)]
    trainer.optimizer.register_step_post_hook(lambda *_: snapshots.append(float64_state(trainer.model)))
    result = trainer.fit()

    last = load_checkpoint(tmp_path / "last.pt")
    reference = ema_reference(snapshots, 0.8)
    for name, value in last["ema"].items():
        if not value.is_floating_point():  # batch counts: copied
            assert torch.equal(value, last["model"][name])
            continue
        assert torch.allclose(value.double(), reference[name], rtol=0, atol=1e-6), name

    # best.pt holds the average at the best epoch, and its metrics are those reported
    steps_per_epoch = (len(snapshots) - 1) // 4
    best = load_checkpoint(tmp_path / "best.pt")
    at_best = ema_reference(snapshots[: result["best_epoch"] * steps_per_epoch + 1], 0.8)
    for name, value in best["model"].items():
        if value.is_floating_point():
            assert torch.allclose(value.double(), at_best[name], rtol=0, atol=1e-6), name
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    evals = [r for r in log if r["event"] == "eval"]
    assert [r["epoch"] for r in evals] == [2, 4]
    best_eval = next(r for r in evals if r["epoch"] == result["best_epoch"])
    assert best_eval["both.mrr"] == max(r["both.mrr"] for r in evals) == result["valid"]["metrics"]["both"]["mrr"]

    # the trained weights are validated beside the average: the last record is theirs
    trainer.model.load_state_dict(last["model"])
    trained = evaluate_model(trainer.model, trainer.graph_inputs, trainer.evaluators["valid"])
    logged = evals[-1]["trained_weights"]
    assert logged == pytest.approx(trained.to_flat_dict(), abs=1e-12)
    assert logged != pytest.approx({key: evals[-1][key] for key in logged}, abs=1e-12)  # not the average's


def test_kill_and_resume_with_the_average_is_bit_exact(data, tmp_path, kill_after_epoch, small_config):
    Trainer(small_config(ema_decay=0.8), data, tmp_path / "full", progress=False).fit()
    reference = load_checkpoint(tmp_path / "full" / "last.pt")

    kill_after_epoch(lambda: Trainer(small_config(ema_decay=0.8), data, tmp_path / "killed", progress=False), epoch=3)
    Trainer(small_config(ema_decay=0.8), data, tmp_path / "killed", progress=False).fit(resume=True)
    final = load_checkpoint(tmp_path / "killed" / "last.pt")
    assert final["epoch"] == 4
    for part in ("model", "ema"):
        for name, value in reference[part].items():
            assert torch.equal(final[part][name], value), (part, name)


def test_off_by_default_and_training_is_the_same_with_it(data, tmp_path, small_config):
    assert all(recipe["ema_decay"] == 0.0 for recipe in RECIPES.values())
    assert TrainConfig().ema_decay == 0.0
    plain = Trainer(small_config(), data, tmp_path / "plain", progress=False)
    assert plain.ema is None and plain.evaluated_model is plain.model
    plain.fit()
    averaged = Trainer(small_config(ema_decay=0.5), data, tmp_path / "averaged", progress=False)
    averaged.fit()
    without, with_average = (load_checkpoint(tmp_path / name / "last.pt") for name in ("plain", "averaged"))
    assert without["ema"] is None
    for name, value in without["model"].items():  # the average never feeds back into training
        assert torch.equal(with_average["model"][name], value), name
    evals = [json.loads(line) for line in (tmp_path / "plain" / "log.jsonl").read_text().splitlines()]
    assert not any("trained_weights" in r for r in evals)


@pytest.mark.parametrize("decay", [-0.1, 1.0, float("nan")])
def test_bad_decay_is_refused(decay, small_config):
    with pytest.raises(ValueError, match="ema_decay must be in"):
        small_config(ema_decay=decay).validate()
