"""A normal train, evaluate and predict run prints none of torch's sparse CSR
notices (they are one-time warnings per process, so a fresh process is used)."""

import subprocess
import sys
from pathlib import Path

from torch_wge.testing import random_kg

SCRIPT = """
import sys
from torch_wge import cli
folder, out = sys.argv[1], sys.argv[2]
assert cli.main(["train", "--dataset", folder, "--epochs", "2", "--hidden-channels", "2", "--out", out, "--root", out + "-data", "--no-progress"]) == 0
assert cli.main(["evaluate", out + "/best.pt", "--no-progress"]) == 0
assert cli.main(["predict", out + "/best.pt", "--head", "e0", "--relation", "r0", "--top-k", "3"]) == 0
"""


def test_train_evaluate_predict_print_no_sparse_notices(tmp_path):
    kg = random_kg(20, 2, 80, seed=0)
    for name, mask in (("train", "train"), ("valid", "val"), ("test", "test")):
        h, t = kg.edge_index[:, kg[f"{mask}_mask"]].tolist()
        r = kg.edge_type[kg[f"{mask}_mask"]].tolist()
        (tmp_path / f"{name}.txt").write_text("".join(f"e{a}\tr{b}\te{c}\n" for a, b, c in zip(h, r, t)))
    run = subprocess.run(
        [
            sys.executable,
            "-W",
            "error:Sparse CSR tensor support",
            "-W",
            "error:Sparse invariant checks",
            "-c",
            SCRIPT,
            str(tmp_path),
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Sparse" not in run.stderr
    assert "test MRR" in run.stdout and "top 3 tails of (e0, r0, ?)" in run.stdout
