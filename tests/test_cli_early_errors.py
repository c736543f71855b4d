"""A bad value or a missing file is answered before torch is loaded (which takes seconds), and
an option a sub-command does not know is that sub-command's error."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# runs the command line in a fresh interpreter, then prints the heavy modules it imported
PROBE = """
import sys
from torch_wge.cli import main
try:
    code = main(sys.argv[1:])
finally:
    print("imported:", sorted(m for m in ("torch", "torch_geometric", "numpy") if m in sys.modules))
sys.exit(code)
"""


def run_fresh(*argv, cwd):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, timeout=120, cwd=cwd
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--hidden-channels", "0"], "torch-wge train: error: hidden channels must be positive, got 0"),
        (["train", "--config", "{tmp}/no.json"], "{tmp}/no.json: cannot be read"),
        (["train", "--config", "{tmp}/fifo"], "{tmp}/fifo: cannot be read (is a device, FIFO or socket"),
        (["train", "--out", "{tmp}/run", "--resume", "--lr", "2"], "lr must be in (0, 1], got 2.0"),
        (["evaluate", "{tmp}/missing.pt"], "{tmp}/missing.pt: does not exist"),
        (["predict", "{tmp}", "--head", "a", "--relation", "r"], "{tmp}/best.pt: no best checkpoint"),
        (["export", "{tmp}/missing.pt"], "{tmp}/missing.pt: does not exist"),
        (["evaluate", "{tmp}/fifo"], "{tmp}/fifo: is a device, FIFO or socket, not a regular file"),
        (["tune", "--trials", "1", "--study", ""], "torch-wge tune: error: --study: empty study name"),
    ],
)
def test_a_bad_value_is_answered_before_torch_is_loaded(argv, message, tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo")
    done = run_fresh(*(arg.format(tmp=tmp_path) for arg in argv), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and message.format(tmp=tmp_path) in done.stderr, done.stderr
    imported = done.stdout.splitlines()[-1]
    assert "'torch'" not in imported and "torch_geometric" not in imported, imported  # tune's optuna loads numpy


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["train", "--epocs", "3"],
            "torch-wge train: error: unrecognized arguments: --epocs 3 (did you mean --epochs?)",
        ),
        (["predict", "run", "--head", "a", "--relation", "r", "--topk", "3"], "torch-wge predict: error: "),
        (["tune", "--trials", "1", "--sed", "3"], "(did you mean --seed?)"),
    ],
)
def test_an_option_typo_is_the_sub_commands_error(argv, message, tmp_path):
    done = run_fresh(*argv, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert done.stdout.splitlines()[-1] == "imported: []"
