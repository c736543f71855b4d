"""A short real training run: CoDEx-S from ../shared/datasets, placed by hand (no network)."""

import shutil

import pytest

from torch_wge.training import TrainConfig, Trainer, load_data


@pytest.mark.slow
def test_short_codex_s_run_learns(shared_datasets, tmp_path):
    raw = tmp_path / "data" / "codex-s" / "raw"
    raw.mkdir(parents=True)
    for name in ("train.txt", "valid.txt", "test.txt"):
        shutil.copy(shared_datasets / "codex-s" / name, raw / name)
    # the paper's model at a 10x learning rate, so that 8 epochs suffice
    config = TrainConfig(
        recipe="paper", dataset="codex-s", root=str(tmp_path / "data"), epochs=8, lr=5e-3, eval_every=8
    )
    _, data = load_data(config)
    trainer = Trainer(config, data, tmp_path / "run", progress=False)
    untrained = trainer.evaluate("valid")["both.mrr"]
    result = trainer.fit()
    trained = result["valid"]["metrics"]["both"]["mrr"]
    # a random ranking of 2,034 entities has MRR about ln(2034) / 2034 = 0.004
    assert untrained < 0.02
    assert trained > 0.1 and trained > 10 * untrained
    assert result["test"]["metrics"]["both"]["hits@10"] > 0.15
