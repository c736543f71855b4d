"""First contact: the command line's help and version import neither torch nor PyG
(what makes them slow), and the setting choices named for that agree with the
registries they stand for."""

import subprocess
import sys
from pathlib import Path

import pytest

import torch_wge
from torch_wge.nn.decoders.loss import OBJECTIVES
from torch_wge.nn.models.wge import VIEWS
from torch_wge.training.config import CHOICES
from torch_wge.training.precision import PRECISIONS

ROOT = Path(__file__).resolve().parents[1]

# runs the command line in a fresh interpreter, then prints the heavy modules it imported
PROBE = """
import sys
from torch_wge.cli import main
try:
    main(sys.argv[1:])
finally:
    print("imported:", sorted(m for m in ("torch", "torch_geometric", "numpy") if m in sys.modules))
"""


def run_fresh(*argv):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["export", "--help"], ["--version"]])
def test_help_and_version_import_no_torch(argv):
    done = run_fresh(*argv)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "imported: []"


def test_version_is_the_package_version():
    assert run_fresh("--version").stdout.splitlines()[0] == f"torch-wge {torch_wge.__version__}"


def test_choices_are_the_registries_names():
    assert CHOICES["views"] == tuple(VIEWS)
    assert CHOICES["objective"] == tuple(OBJECTIVES)
    assert CHOICES["precision"] == tuple(PRECISIONS)


def test_every_public_name_of_training_resolves():
    import torch_wge.training as training
    from torch_wge.training.trainer import Trainer

    assert training.Trainer is Trainer
    for name in training.__all__:  # a name mapped to the wrong module raises AttributeError
        getattr(training, name)
    with pytest.raises(AttributeError, match="no_such_name"):
        training.no_such_name
