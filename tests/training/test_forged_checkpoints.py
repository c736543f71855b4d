"""Checkpoints whose fields were forged and their checksum recomputed with the package's own writer
(issue 65): every field is checked for type, dtype and range before anything is built from it, and
each forged value is one line naming the file and the field (exit code 2). ``train`` refuses sizes by
their memory and by an estimate of an epoch's work; ``predict --filter-known`` leaves the query's own
entity out of its answers."""

import shutil

import pytest
import torch

from torch_wge import io
from torch_wge.cli import main
from torch_wge.inference import trained as trained_module
from torch_wge.testing import random_kg, write_triples_folder
from torch_wge.training import TrainConfig, load_checkpoint, save_checkpoint
from torch_wge.training.model import MAX_EPOCH_FLOPS, MAX_LAYERS, check_memory, epoch_flops

TRAIN = ["train", "--epochs", "4", "--eval-every", "2", "--hidden-channels", "2", "--batch-size", "16"]
TRAIN += ["--no-progress", "--no-tensorboard", "--threads", "1"]


@pytest.fixture(scope="module")
def kg(tmp_path_factory):
    return write_triples_folder(random_kg(30, 3, 300, seed=7), tmp_path_factory.mktemp("kg"))


@pytest.fixture(scope="module")
def trained(kg, tmp_path_factory):
    """A run of 4 epochs, its data processed under its own root."""
    tmp = tmp_path_factory.mktemp("forged")
    argv = TRAIN + ["--dataset", str(kg), "--root", str(tmp / "data"), "--out", str(tmp / "run")]
    threads = torch.get_num_threads()
    assert main(argv) == 0
    torch.set_num_threads(threads)  # --threads 1 is the process's
    return tmp


@pytest.fixture(autouse=True)
def _threads_restored(one_torch_thread):
    """The commands' --threads 1 undone after each test."""


@pytest.fixture
def run(trained, tmp_path):
    """A copy of the trained run, to forge."""
    shutil.copytree(trained / "run", tmp_path / "run")
    return tmp_path / "run"


def forge(path, edit):
    """``path`` changed by ``edit(state)`` and saved by the package's writer (a valid checksum)."""
    state = load_checkpoint(path)
    edit(state)
    save_checkpoint(state, path)


def one_line(argv, capsys) -> str:
    capsys.readouterr()
    assert main([str(arg) for arg in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def embedding(state):
    return next(name for name in state["model"] if "embedding" in name)


#: best.pt forgeries: (edit, the texts the one line names besides the file)
FORGED_BEST = {
    "num_layers 10**9": (lambda s: s["config"].update(num_layers=10**9), ["config:", "num_layers 1000000000", "GiB"]),
    "num_layers 1000": (lambda s: s["config"].update(num_layers=1000), ["config:", "num_layers 1000", "at most 100"]),
    "num_entities 10**12": (lambda s: s["graph"].update(num_entities=10**12), ["config:", "num_entities 10000"]),
    "an int64 embedding": (
        lambda s: s["model"].update({embedding(s): s["model"][embedding(s)].long()}),
        ["model:", "float32 tensor, found int64"],
    ),
    "epoch 50 of 4": (lambda s: s.update(epoch=50), ["'epoch' must lie in [0, 4]", "found 50"]),
    "vocabulary 5": (lambda s: s.update(vocabulary=5), ["'vocabulary'", "sha256"]),
    "valid of strings": (lambda s: s.update(valid={"both.mrr": "x"}), ["'valid'"]),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["evaluate", "export"])
@pytest.mark.parametrize("case", list(FORGED_BEST))
def test_a_forged_best_pt_is_one_line_before_a_model_is_built(case, command, run, trained, capsys, monkeypatch):
    edit, named = FORGED_BEST[case]
    forge(run / "best.pt", edit)

    def build_model(*args):
        raise AssertionError("a model was built from a forged checkpoint")

    if case != "an int64 embedding":  # refused before the data is loaded
        monkeypatch.setattr(trained_module, "load_data", build_model)
    monkeypatch.setattr(trained_module, "build_model", build_model)
    message = one_line([command, run / "best.pt", "--root", trained / "data", "--device", "cpu"], capsys)
    assert f"{run / 'best.pt'}: " in message
    for text in named:
        assert text in message, message


def test_a_sparse_weight_is_refused_before_its_checksum_is_computed(run, capsys):
    # the package's writer cannot write one; a file without a checksum (as before checksums) can hold it
    state = load_checkpoint(run / "best.pt")
    state["model"][embedding(state)] = state["model"][embedding(state)].to_sparse()
    io.torch_save(state, run / "best.pt")
    message = one_line(["evaluate", run / "best.pt"], capsys)
    assert f"checkpoint {run / 'best.pt'} holds a torch.sparse_coo tensor" in message


def test_an_int64_embedding_is_refused_where_the_weights_are_loaded(run, trained, capsys):
    # the same check as the model's own weights: dtype against the built module's, not only the file's
    from torch_wge.nn import WGE
    from torch_wge.training.validation import StoredError, load_weights

    model = WGE(10, 2, hidden_channels=2, num_layers=1)
    weights = {name: value.clone() for name, value in model.state_dict().items()}
    weights["entity_embedding.weight"] = weights["entity_embedding.weight"].double()
    with pytest.raises(StoredError, match=r"^run/best.pt: model: weight 'entity_embedding.weight' is float64"):
        load_weights(model, weights, "run/best.pt")


#: last.pt forgeries refused on --resume: (edit, the texts the one line names)
FORGED_LAST = {
    "epoch 50 of 4": (lambda s: s.update(epoch=50), ["'epoch' must lie in [0, 4]"]),
    "threads 'x'": (lambda s: s.update(threads="x"), ["'threads'"]),
    "threads 10**400": (lambda s: s.update(threads=10**400), ["'threads'", "an integer of"]),
    "world_size 0": (lambda s: s.update(world_size=0), ["'world_size'"]),
    "device with terminal controls": (lambda s: s.update(device="cuda\x1b[2J"), ["'device'"]),
    "device 5": (lambda s: s.update(device=5), ["'device'"]),
    "ema of int64 weights": (
        lambda s: s.update(ema={k: v.long() for k, v in s["model"].items()}),
        ["'ema'", "dtypes"],
    ),
    "num_layers 10**9": (lambda s: s["config"].update(num_layers=10**9), ["config:", "num_layers 1000000000"]),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(FORGED_LAST))
def test_a_forged_last_pt_is_not_resumed(case, run, trained, kg, capsys):
    edit, named = FORGED_LAST[case]
    forge(run / "last.pt", edit)
    argv = TRAIN + ["--dataset", kg, "--root", trained / "data", "--out", run, "--resume", "--device", "cpu"]
    message = one_line(argv, capsys)
    assert f"{run / 'last.pt'}: " in message
    for text in named:
        assert text in message, message
    assert "results.json" not in message


def test_a_resumed_run_that_records_its_own_threads_and_device_resumes(run, trained, kg, capsys):
    # what the checks let through: the values a run writes
    forge(run / "last.pt", lambda s: s.update(threads=3, world_size=1, device="cuda:1"))
    argv = TRAIN + ["--dataset", kg, "--root", trained / "data", "--out", run, "--resume", "--epochs", "5"]
    assert main([str(arg) for arg in argv]) == 0
    assert "--device cuda:1 -> cpu, --threads 3 -> 1" in capsys.readouterr().err


def test_train_refuses_a_deeper_encoder_than_the_bound_in_one_line(kg, tmp_path, capsys):
    argv = TRAIN + ["--dataset", kg, "--root", tmp_path / "data", "--out", tmp_path / "run"]
    message = one_line(argv + ["--num-layers", MAX_LAYERS + 1], capsys)
    assert f"num_layers {MAX_LAYERS + 1}: at most {MAX_LAYERS} encoder layers" in message
    assert not (tmp_path / "run" / "last.pt").exists()


#: The published graphs' sizes, for the estimates.
GRAPHS = {
    "fb15k-237": {"num_entities": 14541, "num_relations": 237, "num_train": 272115},
    "codex-l": {"num_entities": 77951, "num_relations": 69, "num_train": 551193},
}


@pytest.mark.parametrize("dataset", list(GRAPHS))
@pytest.mark.parametrize("recipe", ["paper", "fast", "large"])
def test_the_recipes_pass_the_work_estimate_on_the_largest_benchmarks(dataset, recipe):
    # the largest model of the paper's runs: 128 quaternions, 3 layers
    config = TrainConfig(dataset=dataset, recipe=recipe, hidden_channels=128, num_layers=3)
    check_memory(config, GRAPHS[dataset], torch.device("cpu"))
    assert sum(epoch_flops(config, GRAPHS[dataset])) * 100 < MAX_EPOCH_FLOPS


def test_an_epoch_of_more_work_than_the_bound_is_refused_in_one_line():
    graph = {"num_entities": 10**6, "num_relations": 10, "num_train": 10**9}  # 4 GiB of parameters
    with pytest.raises(ValueError, match=r"^hidden_channels 64: an epoch needs about 1.2e\+19 floating-point"):
        check_memory(TrainConfig(num_layers=2), graph, torch.device("cpu"))
    deep = {"num_entities": 2034, "num_relations": 42, "num_train": 32888}  # CoDEx-S
    with pytest.raises(ValueError, match=r"^num_layers 100000: at most 100 encoder layers"):
        check_memory(TrainConfig(num_layers=100_000, hidden_channels=2), deep, torch.device("cpu"))


def test_predict_filter_known_leaves_the_query_entity_out(trained, kg, capsys):
    triples = [line.split("\t") for line in (kg / "train.txt").read_text().splitlines()]
    known = {
        tuple(line.split("\t"))
        for name in ("train", "valid", "test")
        for line in (kg / f"{name}.txt").read_text().splitlines()
    }
    head, relation = next((h, r) for h, r, _ in triples if (h, r, h) not in known)
    argv = ["predict", trained / "run", "--head", head, "--relation", relation, "--top-k", "30"]
    argv += ["--root", trained / "data", "--filter-known"]
    capsys.readouterr()
    assert main([str(arg) for arg in argv]) == 0
    answers = [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]]
    assert answers and head not in answers
    answered = {(head, relation, t) for t in answers}
    assert not answered & known
    assert len(answers) == 30 - 1 - sum(1 for h, r, _ in known if (h, r) == (head, relation))
