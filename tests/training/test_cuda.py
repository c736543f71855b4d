"""Training and evaluation on a CUDA device compute what they compute on the CPU.

Skipped where no CUDA device is present (CI); run on a GPU machine with
``pytest tests/training/test_cuda.py``.
"""

import pytest
import torch

from torch_wge.cli import main
from torch_wge.training import TrainConfig, Trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

OBJECTIVES = [("softmax", 0), ("softmax", 50), ("bce", 0), ("kl", 0), ("filtered-softmax", 0)]


def trainers(data, tmp_path, **settings):
    """The same run on the CPU and on CUDA: same initial weights (built on the
    CPU, then moved), same batches, no dropout."""
    config = dict(dataset="random", hidden_channels=4, batch_size=64, epochs=4, seed=3, dropout=0.0, **settings)
    return {
        device: Trainer(TrainConfig(device=device, **config), data, tmp_path / device, progress=False)
        for device in ("cpu", "cuda")
    }


@pytest.mark.parametrize("objective, candidates", OBJECTIVES)
def test_cuda_training_follows_the_cpu(small_two_view_kg, tmp_path, objective, candidates):
    runs = trainers(small_two_view_kg, tmp_path, objective=objective, candidates=candidates, recipe="fast")
    for _ in range(2):
        losses = {device: run.train_epoch() for device, run in runs.items()}
        assert losses["cuda"] == pytest.approx(losses["cpu"], rel=1e-4)
    cpu, cuda = (runs[device].evaluate("valid") for device in ("cpu", "cuda"))
    assert cuda["both.mrr"] == pytest.approx(cpu["both.mrr"], abs=1e-3)


def test_cuda_evaluation_ranks_as_the_cpu(small_two_view_kg, tmp_path):
    runs = trainers(small_two_view_kg, tmp_path)
    runs["cpu"].train_epoch()
    runs["cuda"].model.load_state_dict(runs["cpu"].model.state_dict())
    for split in ("valid", "test"):
        cpu, cuda = (runs[device].evaluate(split) for device in ("cpu", "cuda"))
        assert cuda.keys() == cpu.keys()
        # the encoder's scatter-adds sum in another order on the GPU, which may
        # flip a near-tie: a rank moves by one, a Hits@k by one query (1/80)
        close = {key: pytest.approx(cpu[key], rel=0.02, abs=0.015) for key in cpu.keys()}
        assert {key: cuda[key] for key in cpu.keys()} == close


def test_cli_trains_resumes_and_evaluates_on_cuda(tmp_path):
    folder = tmp_path / "kg"
    folder.mkdir()
    entities = 30
    triples = [(h, r, (h * 7 + r * 3 + 1) % entities) for h in range(entities) for r in range(3)]
    for split, part in (("train", triples[:70]), ("valid", triples[70:80]), ("test", triples[80:])):
        (folder / f"{split}.txt").write_text("".join(f"e{h}\tP{r}\te{t}\n" for h, r, t in part))
    run = tmp_path / "run"
    common = [
        "--dataset",
        str(folder),
        "--root",
        str(tmp_path / "data"),
        "--hidden-channels",
        "2",
        "--batch-size",
        "16",
    ]
    train = ["train", *common, "--eval-every", "1", "--device", "cuda", "--out", str(run), "--no-progress"]
    assert main([*train, "--epochs", "1"]) == 0
    assert main([*train, "--epochs", "2", "--resume"]) == 0
    checkpoint = torch.load(run / "last.pt", map_location="cpu", weights_only=False)
    assert checkpoint["device"].startswith("cuda")
    assert main(["evaluate", str(run / "best.pt"), "--root", str(tmp_path / "data"), "--device", "cuda"]) == 0
