"""What a user runs prints no warning: train (with its progress output), evaluate,
predict and a 2-process torchrun train, each a fresh process in which every warning
is an error (``-W error``, and ``PYTHONWARNINGS`` for the processes torchrun starts)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torch_wge.testing import random_kg

REPOSITORY = Path(__file__).resolve().parents[1]
WARNINGS_AS_ERRORS = [
    "error",
    # torch 2.13 deprecates TorchScript, and PyG scripts a helper of its pooling modules when
    # torch_geometric is imported: a notice in a third-party import (hidden by Python's default
    # filters), not caused by torch_wge, which scripts nothing
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning:torch.jit._script",
]


def run(args, tmp_path, **env):
    """``python -W ... args`` in the repository (so that its torch_wge is imported); every
    warning is an error, in this process and in the processes it starts."""
    flags = [arg for f in WARNINGS_AS_ERRORS for arg in ("-W", f)]
    environment = {**os.environ, "PYTHONWARNINGS": ",".join(WARNINGS_AS_ERRORS), "OMP_NUM_THREADS": "1", **env}
    environment.pop("PYTEST_CURRENT_TEST", None)
    done = subprocess.run(
        [sys.executable, *flags, *args],
        cwd=REPOSITORY,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # a Python warning ("UserWarning: ..."), or one logged by torch ("W1124 15:54:29.501000 ...")
    assert not re.search(r"Warning:|^W\d{4} ", done.stderr, re.M), done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def kg_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kg")
    kg = random_kg(24, 3, 160, seed=2)
    for name, mask in (("train", "train"), ("valid", "val"), ("test", "test")):
        rows = zip(*kg.edge_index[:, kg[f"{mask}_mask"]].tolist(), kg.edge_type[kg[f"{mask}_mask"]].tolist())
        (folder / f"{name}.txt").write_text("".join(f"e{h}\tr{r}\te{t}\n" for h, t, r in rows))
    return folder


TRAIN = ["train", "--epochs", "2", "--eval-every", "1", "--hidden-channels", "2", "--num-layers", "1", "--threads", "1"]


def test_train_evaluate_predict_warn_nothing(kg_folder, tmp_path):
    out, root = tmp_path / "run", tmp_path / "data"
    done = run(
        ["-m", "torch_wge", *TRAIN, "--dataset", str(kg_folder), "--root", str(root), "--out", str(out)], tmp_path
    )
    assert done.stderr.count(f"training into {out}") == 1  # the progress output was shown
    run(["-m", "torch_wge", "evaluate", str(out / "best.pt"), "--per-relation"], tmp_path)
    run(["-m", "torch_wge", "predict", str(out / "best.pt"), "--head", "e0", "--relation", "r0"], tmp_path)


def test_two_process_torchrun_warns_nothing_and_rank_0_alone_reports(kg_folder, tmp_path):
    out = tmp_path / "run"
    command = ["-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "torch_wge", *TRAIN]
    options = ["--dataset", str(kg_folder), "--root", str(tmp_path / "data"), "--device", "cpu", "--out", str(out)]
    done = run(command + options, tmp_path)
    # one banner and one final line, from rank 0 (one each per rank before)
    assert done.stderr.count(f"training into {out}") == 1
    assert done.stderr.count("CPU thread(s)") == 1
    assert done.stdout.count("best epoch") == 1


@pytest.mark.slow
def test_the_test_run_shows_no_torchscript_notice():
    """torch 2.13 deprecates TorchScript; importing PyG and torch.compile's first call
    script at import time. tests/conftest.py imports them with that notice hidden: a
    compile test and a jit.script test run clean with deprecation notices as errors."""
    tests = ["tests/nn/test_quaternion_gcn_conv.py::test_torch_compile_fullgraph_matches_eager"]
    tests += ["tests/nn/test_script_and_compile.py::test_script_quate_decoder_matches_eager"]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error::DeprecationWarning"]
    done = subprocess.run(command + tests, cwd=REPOSITORY, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-3000:]
    assert "Warning" not in done.stdout, done.stdout[-3000:]
