"""One command and seed give the same numbers, bit for bit, in fresh processes: whatever the
string-hash seed, and whether the dataset was processed in the run or read back from its cache."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch_wge
from torch_wge.testing import random_kg

TRAIN = "import sys; from torch_wge.cli import main; sys.exit(main(sys.argv[1:]))"


def write_triples_folder(folder: Path) -> None:
    data = random_kg(40, 4, 400, seed=11)
    folder.mkdir()
    for split, mask in (("train", data.train_mask), ("valid", data.val_mask), ("test", data.test_mask)):
        rows = zip(data.edge_index.t()[mask].tolist(), data.edge_type[mask].tolist())
        (folder / f"{split}.txt").write_text("".join(f"Q{h}\tP{r}\tQ{t}\n" for (h, t), r in rows))


def train(kg: Path, root: Path, out: Path, hash_seed: str) -> list:
    """Trains in a fresh process; returns every record of its log but the times."""
    env = {
        **os.environ,
        "PYTHONHASHSEED": hash_seed,
        "PYTHONPATH": str(Path(torch_wge.__file__).parents[1]),
    }
    argv = ["train", "--dataset", str(kg), "--root", str(root), "--out", str(out), "--recipe", "fast"]
    argv += ["--epochs", "3", "--eval-every", "1", "--hidden-channels", "4", "--batch-size", "32", "--threads", "1"]
    argv += ["--dropout", "0.3", "--device", "cpu", "--no-progress"]  # CUDA sums in no fixed order
    done = subprocess.run([sys.executable, "-c", TRAIN, *argv], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    timeless = [{k: v for k, v in r.items() if "seconds" not in k} for r in records]
    return timeless


def test_fresh_processes_log_identical_numbers(tmp_path):
    kg = tmp_path / "kg"
    write_triples_folder(kg)
    first = train(kg, tmp_path / "root-a", tmp_path / "run-a", hash_seed="0")
    assert [r["epoch"] for r in first if r["event"] == "epoch"] == [1, 2, 3]
    # another string-hash seed, the dataset processed again in a fresh root
    assert train(kg, tmp_path / "root-b", tmp_path / "run-b", hash_seed="4242") == first
    # the processed copy of the first run read back instead of processed
    processed = sorted((tmp_path / "root-a").rglob("data-*.pt"))
    assert len(processed) == 1
    before = processed[0].stat().st_mtime_ns
    assert train(kg, tmp_path / "root-a", tmp_path / "run-c", hash_seed="17") == first
    assert processed[0].stat().st_mtime_ns == before
