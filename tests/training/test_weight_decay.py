"""AdamW's decoupled weight decay (``weight_decay``): the step it takes, resume, validation."""

import pytest
import torch

from torch_wge.cli import main
from torch_wge.training import RECIPES, TrainConfig, Trainer, load_checkpoint


@pytest.fixture
def data(small_two_view_kg):
    return small_two_view_kg


def one_step(small_config, data, tmp_path, weight_decay):
    """The weights before and after one optimiser step over all training queries."""
    trainer = Trainer(small_config(weight_decay=weight_decay, batch_size=10_000), data, tmp_path, progress=False)
    before = {name: p.detach().double().clone() for name, p in trainer.model.named_parameters()}
    torch.manual_seed(7)  # the same dropout masks in both runs
    trainer.train_epoch()
    after = {name: p.detach().double().clone() for name, p in trainer.model.named_parameters()}
    stepped = {name for name, p in trainer.model.named_parameters() if p.grad is not None}
    return before, after, stepped


def test_a_step_shrinks_every_parameter_by_lr_times_decay_before_adam(data, tmp_path, small_config):
    """From the same weights the gradient and Adam's update are the same with and
    without decay, so the two steps differ by exactly the decay term:
    theta_decayed - theta_plain = -lr * lambda * theta_0."""
    lr, decay = 0.01, 0.3
    before, plain, stepped = one_step(small_config, data, tmp_path / "plain", 0.0)
    before_decayed, decayed, stepped_decayed = one_step(small_config, data, tmp_path / "decayed", decay)
    assert stepped == stepped_decayed and len(stepped) > 0
    for name in before:
        assert torch.equal(before[name], before_decayed[name]), name
        expected = -lr * decay * before[name] if name in stepped else torch.zeros_like(before[name])
        assert torch.allclose(decayed[name] - plain[name], expected, rtol=0, atol=1e-6), name
    # the decay term is not negligible against that tolerance for the embeddings
    assert (lr * decay * before["entity_embedding.weight"]).abs().max() > 1e-4


def test_kill_and_resume_with_decay_is_bit_exact(data, tmp_path, kill_after_epoch, small_config):
    Trainer(small_config(weight_decay=0.1), data, tmp_path / "full", progress=False).fit()
    reference = load_checkpoint(tmp_path / "full" / "last.pt")

    kill_after_epoch(
        lambda: Trainer(small_config(weight_decay=0.1), data, tmp_path / "killed", progress=False), epoch=3
    )
    resumed = Trainer(small_config(weight_decay=0.1), data, tmp_path / "killed", progress=False)
    resumed.fit(resume=True)
    assert resumed.optimizer.param_groups[0]["weight_decay"] == 0.1
    final = load_checkpoint(tmp_path / "killed" / "last.pt")
    assert final["epoch"] == 4
    for name, value in reference["model"].items():
        assert torch.equal(final["model"][name], value), name


def test_only_the_fast_recipe_decays():
    assert {name: recipe["weight_decay"] for name, recipe in RECIPES.items()} == {
        "paper": 0.0,
        "fast": 0.1,
        "large": 0.0,
    }
    assert TrainConfig(recipe="paper").weight_decay == 0.0 and TrainConfig().weight_decay == 0.1
    assert TrainConfig(recipe="fast", weight_decay=0.0).weight_decay == 0.0


@pytest.mark.parametrize("decay", [-0.1, float("inf"), float("nan")])
def test_bad_decay_is_refused(decay, capsys, small_config):
    with pytest.raises(ValueError, match="weight decay must be >= 0"):
        small_config(weight_decay=decay).validate()
    assert main(["train", "--weight-decay", str(decay), "--epochs", "1"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"weight decay must be >= 0 and finite, got {decay}")
