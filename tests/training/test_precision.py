"""TrainConfig.precision: bfloat16 scoring matmuls in the training loss, TF32 matmul precision."""

import pytest
import torch
import torch_geometric.transforms as T

from torch_wge.testing import random_kg
from torch_wge.training import TrainConfig, Trainer
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform


@pytest.fixture(scope="module")
def data():
    kg = random_kg(40, 4, 400, seed=5)
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(kg)


def trainer(data, tmp_path, precision):
    config = TrainConfig(dataset="random", hidden_channels=16, batch_size=64, seed=3, dropout=0.0, precision=precision)
    return Trainer(config, data, tmp_path / precision, progress=False)


def test_bf16_losses_follow_float32_within_bfloat16_rounding(data, tmp_path, one_torch_thread):
    runs = {precision: trainer(data, tmp_path, precision) for precision in ("float32", "bf16")}
    losses = {precision: [run.train_epoch() for _ in range(3)] for precision, run in runs.items()}
    for exact, rounded in zip(losses["float32"], losses["bf16"]):
        assert rounded != exact  # the bfloat16 matmuls are used ...
        assert abs(rounded - exact) < 1e-2 * exact  # ... and change the loss only by their rounding
    # the model and what evaluation reads stay float32
    assert all(p.dtype == torch.float32 for p in runs["bf16"].model.parameters())
    assert runs["bf16"].evaluate("valid")["both.mrr"] == pytest.approx(
        runs["float32"].evaluate("valid")["both.mrr"], abs=0.05
    )


def test_tf32_is_the_float32_matmul_precision_while_training_and_evaluating(data, tmp_path, one_torch_thread):
    run = trainer(data, tmp_path, "tf32")
    seen = []
    run.model.encoder.register_forward_pre_hook(lambda *args: seen.append(torch.get_float32_matmul_precision()))
    before = torch.get_float32_matmul_precision()
    run.train_epoch()
    run.evaluate("valid")
    assert set(seen) == {"high"} and len(seen) > 1  # every batch and the evaluation
    assert torch.get_float32_matmul_precision() == before  # restored afterwards


def test_precision_may_change_on_resume_and_bad_names_are_refused(data, tmp_path, one_torch_thread):
    config = TrainConfig(
        dataset="random", hidden_channels=4, batch_size=64, epochs=1, eval_every=1, seed=3, precision="float32"
    )
    Trainer(config, data, tmp_path / "run", progress=False).fit()
    config.epochs, config.precision = 2, "bf16"
    with pytest.warns(UserWarning, match="--precision float32 -> bf16"):
        result = Trainer(config, data, tmp_path / "run", progress=False).fit(resume=True)
    assert result["epochs_trained"] == 2 and result["config"]["precision"] == "bf16"
    with pytest.raises(ValueError, match="precision must be one of auto, float32, tf32, bf16, got 'fp16'"):
        TrainConfig(precision="fp16").validate()


@pytest.mark.parametrize("native", [True, False])
def test_auto_is_bf16_exactly_where_the_device_has_it(data, tmp_path, monkeypatch, native, one_torch_thread):
    from torch_wge.training.precision import resolve_precision
    from torch_wge.utils import devices

    monkeypatch.setattr(devices, "cpu_flags", lambda: frozenset({"avx512_bf16"} if native else {"avx2"}))
    assert TrainConfig().precision == "auto"
    expected = "bf16" if native else "float32"
    assert resolve_precision("auto", "cpu") == expected
    assert resolve_precision("float32", "cpu") == "float32"  # named precisions are themselves
    auto, named = trainer(data, tmp_path, "auto"), trainer(data, tmp_path, expected)
    assert auto.precision == expected and auto.loss_fn.matmul_dtype == named.loss_fn.matmul_dtype
    assert auto.train_epoch() == named.train_epoch()  # the same computation, bit for bit
