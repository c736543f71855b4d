"""examples/link_pred_codex.py: a PyG example built of the public blocks, with the fast recipe's
settings, that trains as `torch-wge train` does and fails in one line."""

import ast
import inspect
import re
import runpy
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest
import torch

import torch_wge.datasets.base as datasets_base
import torch_wge.nn
from torch_wge.nn import auto_matmul_dtype
from torch_wge.testing import random_kg, write_triples_folder

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "link_pred_codex.py"
#: The packages the example may import from torch_wge: its public building blocks.
BUILDING_BLOCKS = {
    "torch_wge.nn",
    "torch_wge.transforms",
    "torch_wge.datasets",
    "torch_wge.evaluation",
    "torch_wge.data",
}


@pytest.fixture(scope="module")
def small_kg(tmp_path_factory) -> Path:
    """A folder of triple files of 40 entities and 4 relations (one batch an epoch)."""
    return write_triples_folder(random_kg(40, 4, 400, seed=5), tmp_path_factory.mktemp("kg") / "kg")


def run_example(monkeypatch, *options: str) -> int:
    """Runs the example in this process with ``options``; returns its exit code."""
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), *options])
    try:
        runpy.run_path(str(EXAMPLE), run_name="__main__")
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    return 0


def test_the_example_imports_only_torch_pyg_the_standard_library_and_the_building_blocks():
    modules = []
    for node in ast.walk(ast.parse(EXAMPLE.read_text())):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module is not None
            modules.append(node.module)
    assert any(module.startswith("torch_wge.") for module in modules)
    for module in modules:
        top = module.split(".")[0]
        assert top in ("torch", "torch_geometric", "torch_wge") or top in sys.stdlib_module_names, module
        if top == "torch_wge":
            assert module in BUILDING_BLOCKS, f"the example imports {module}, not a public building block"
            forbidden = ("training", "cli", "io", "utils", "distributed", "inference", "testing")
            assert module.split(".")[1] not in forbidden, module


def test_the_example_holds_the_fast_recipe():
    from torch_wge.nn import WGE, OneToNLoss
    from torch_wge.training import RECIPES, TrainConfig
    from torch_wge.transforms import RelationFocusedTransform

    example = runpy.run_path(str(EXAMPLE), run_name="link_pred_codex")  # its settings; nothing runs
    constants = []  # the names of its module-level constants, as NAME = ... and A, B = ...
    for node in ast.parse(EXAMPLE.read_text()).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                constants += [name.id for name in names if isinstance(name, ast.Name) and name.id.isupper()]
    settings = {name.lower(): example[name] for name in constants}
    assert len(settings) == 15
    fast = TrainConfig(recipe="fast")
    assert settings == {name: getattr(fast, name) for name in settings}
    # the recipe's settings the example does not name: off in the recipe and by default in OneToNLoss
    unnamed = set(RECIPES["fast"]) - set(settings)
    assert unnamed == {"schedule", "candidates", "n3", "relation_prediction", "ema_decay"}
    loss_defaults = inspect.signature(OneToNLoss).parameters
    assert all(RECIPES["fast"][name] == loss_defaults[name].default == 0 for name in ("candidates", "n3"))
    assert RECIPES["fast"]["relation_prediction"] == loss_defaults["relation_prediction"].default == 0
    assert RECIPES["fast"]["ema_decay"] == 0  # the trained weights themselves
    assert RECIPES["fast"]["schedule"] == "cosine"  # the example's learning_rate, equal to the recipe's:
    for epochs in (1, 2, 5, 6, 7, 80, 500):
        assert [example["learning_rate"](e, epochs) for e in range(epochs)] == [
            TrainConfig(recipe="fast", epochs=epochs).learning_rate(e) for e in range(epochs)
        ]
    # the model and graph settings left at the defaults of WGE and RelationFocusedTransform
    wge = inspect.signature(WGE).parameters
    assert (wge["views"].default, wge["conv"].default) == (fast.views, fast.conv)
    view = inspect.signature(RelationFocusedTransform).parameters
    assert (view["predicate_entities"].default, view["relation_edges"].default) == (
        fast.predicate_entities,
        fast.relation_edges,
    )


def test_the_example_trains_the_model_of_the_trainer_the_same_way(tmp_path, monkeypatch, capsys):
    from torch_wge.data import TrainingQueries
    from torch_wge.training import TrainConfig, Trainer, load_data
    from torch_wge.training import TrainingQueries as TrainerQueries

    assert TrainerQueries is TrainingQueries  # the trainer batches its queries with the example's helper
    folder = write_triples_folder(random_kg(200, 6, 3000, seed=1), tmp_path / "kg")  # 3 steps an epoch
    made = {}

    class KeptWGE(torch_wge.nn.WGE):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made["model"] = self

    monkeypatch.setattr(torch_wge.nn, "WGE", KeptWGE)
    options = ["--dataset", str(folder), "--root", str(tmp_path / "data"), "--epochs", "2", "--device", "cpu"]
    assert run_example(monkeypatch, *options) == 0
    monkeypatch.undo()
    printed = [float(loss) for loss in re.findall(r"loss (\d+\.\d+)", capsys.readouterr().out)]

    config = TrainConfig(dataset=str(folder), root=str(tmp_path / "data"), epochs=2, device="cpu")  # precision auto
    trainer = Trainer(config, load_data(config, log=False)[1], tmp_path / "run", progress=False)
    assert trainer.queries.num_batches(config.batch_size) == 3
    trainer.fit()
    assert repr(made["model"]).replace("KeptWGE", "WGE") == repr(trainer.model)
    example, trained = made["model"].state_dict(), trainer.model.state_dict()
    assert example.keys() == trained.keys()
    for name in example:
        assert torch.equal(example[name], trained[name]), name
    log = [line for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines() if '"event": "epoch"' in line]
    logged = [float(re.search(r'"loss": ([0-9.e-]+)', line).group(1)) for line in log]
    assert printed == pytest.approx(logged, abs=1e-5)  # printed with 5 decimals


def test_the_example_runs_on_a_folder_of_triples(small_kg, tmp_path):
    save = tmp_path / "weights.pt"
    options = ["--dataset", str(small_kg), "--root", str(tmp_path / "data"), "--epochs", "2", "--device", "cpu"]
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), *options, "--save", str(save)], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "an epoch takes about" not in run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"{small_kg}: 40 entities, 4 relations, 400 triples"
    dtype = "torch.bfloat16" if auto_matmul_dtype("cpu") is not None else "torch.float32"
    assert re.fullmatch(rf"matmuls in {dtype} on cpu, \d+ CPU thread\(s\)", lines[1])
    epochs = [line for line in lines if line.startswith("epoch")]
    assert [line.split()[1] for line in epochs] == ["1/2", "2/2"]
    assert all(re.search(r"loss \d+\.\d{5}  \d+\.\d s.*  ETA \d+\.\d min$", line) for line in epochs)
    assert ["valid MRR" in line for line in epochs] == [False, True]  # every 10 epochs and after the last
    test = re.fullmatch(r"best validation MRR \S+ at epoch 2; test: MRR (\S+) \| MR .* \| H@10 \S+", lines[-3])
    assert test is not None and 0 < float(test.group(1)) <= 1
    assert lines[-2] == f"best weights written to {save}"
    assert re.fullmatch(r"total time \d+\.\d min", lines[-1])
    weights = torch.load(save, weights_only=True)
    model = torch_wge.nn.WGE(40, 4, hidden_channels=64, num_layers=2)
    model.load_state_dict(weights)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "weights.pt"]  # no temporary file left


def test_a_long_epoch_is_announced_once_with_a_smaller_setting(tmp_path, monkeypatch, capsys):
    import time

    folder = write_triples_folder(random_kg(400, 8, 6000, seed=1), tmp_path / "kg")  # 5 steps an epoch
    clock = iter(range(0, 10**9, 1000))  # each reading of the clock 1000 s after the last
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))
    assert (
        run_example(
            monkeypatch, "--dataset", str(folder), "--root", str(tmp_path / "data"), "--epochs", "2", "--device", "cpu"
        )
        == 0
    )
    err = capsys.readouterr().err
    assert err.count("an epoch takes about") == 1
    line = next(line for line in err.splitlines() if "an epoch takes about" in line)
    assert "--epochs" in line and "HIDDEN_CHANNELS" in line and "torch-wge train --recipe large" in line


@pytest.mark.parametrize(
    "options, message",
    [
        (["--epochs", "0"], "--epochs must be in [1, 2**63)"),
        (["--epochs", "many"], "argument --epochs: invalid int value: 'many'"),
        (["--seed", "-1"], "--seed in [0, 2**63)"),
        (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
        (["--save", "/no/such/folder/w.pt"], "argument --save: the folder of /no/such/folder/w.pt does not exist"),
        (["--recipe", "paper"], "unrecognized arguments: --recipe paper"),
        (["--dataset", "codex-x"], "unknown dataset 'codex-x'; did you mean codex-s?"),
        (["--dataset", "./no/such/kg"], "no such dataset folder"),
    ],
)
def test_a_bad_option_is_one_line(options, message, tmp_path, monkeypatch, capsys):
    assert run_example(monkeypatch, "--root", str(tmp_path), *options) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    errors = [line for line in captured.err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("link_pred_codex.py: error: ") and message in errors[0]


def test_offline_without_the_raw_files_is_one_line(tmp_path, monkeypatch, capsys):
    def download_url(url, *args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(datasets_base, "download_url", download_url)
    assert run_example(monkeypatch, "--root", str(tmp_path), "--epochs", "1") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("link_pred_codex.py: error: ")
    assert "could not download" in line and str(tmp_path / "codex-s" / "raw") in line


def test_ctrl_c_is_one_line_and_exit_code_130(small_kg, tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch_wge.nn.OneToNLoss, "forward", interrupted)
    save = tmp_path / "weights.pt"
    options = ["--dataset", str(small_kg), "--root", str(tmp_path / "data"), "--save", str(save)]
    assert run_example(monkeypatch, *options) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "link_pred_codex.py: interrupted; nothing was written"
    assert not save.exists()
