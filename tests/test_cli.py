import json
import os
import shutil
import urllib.error

import pytest
import torch

import torch_wge.datasets.base as datasets_base
from torch_wge.cli import main
from torch_wge.testing import random_kg, write_triples_folder
from torch_wge.training import load_checkpoint, save_checkpoint
from torch_wge.training.checkpoint import FORMAT


@pytest.fixture(scope="module", autouse=True)
def _working_folder(tmp_path_factory):
    """The commands' default folders (``data``, ``runs``) in a temporary working folder."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(before)


@pytest.fixture(scope="module")
def kg_folder(tmp_path_factory):
    """A small KG as a folder of triple files with string identifiers."""
    return write_triples_folder(random_kg(30, 3, 300, seed=7), tmp_path_factory.mktemp("kg"))


@pytest.fixture(scope="module")
def trained(kg_folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    code = main(
        [
            "train",
            "--dataset",
            str(kg_folder),
            "--epochs",
            "4",
            "--eval-every",
            "2",
            "--hidden-channels",
            "2",
            "--batch-size",
            "16",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    return out


def test_train_writes_results(trained, capsys):
    results = json.loads((trained / "results.json").read_text())
    assert results["epochs_trained"] == 4 and results["config"]["hidden_channels"] == 2
    metrics = results["test"]["metrics"]
    # both directions of every test triple: the overall MRR is the mean of the head and tail sides
    assert metrics["both"]["mrr"] == pytest.approx((metrics["head"]["mrr"] + metrics["tail"]["mrr"]) / 2)
    assert results["best_epoch"] in (2, 4)  # validated every 2 epochs


def test_evaluate_matches_training_results(trained, capsys):
    code = main(
        [
            "evaluate",
            str(trained / "best.pt"),
            "--split",
            "test",
            "--per-relation",
            "--json",
            str(trained / "eval.json"),
        ]
    )
    assert code == 0
    evaluated = json.loads((trained / "eval.json").read_text())
    results = json.loads((trained / "results.json").read_text())
    assert evaluated["metrics"]["both"]["mrr"] == pytest.approx(results["test"]["metrics"]["both"]["mrr"])
    out = capsys.readouterr().out
    assert "realistic" in out and "P0" in out


def test_predict_lists_top_k(trained, capsys):
    assert main(["predict", str(trained / "best.pt"), "--head", "e001", "--relation", "P1", "--top-k", "5"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()[:2].rstrip(".").isdigit()]
    assert len(lines) == 5
    scores = [float(line.split()[2]) for line in lines]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--hidden-channels", "0"], "hidden channels must be positive, got 0"),
        (["train", "--beta", "1.5"], "beta must be in [0, 1]"),
        (["train", "--dataset", "no-such-dataset"], "unknown dataset"),
        (["stats", "--dataset", "no-such-dataset"], "unknown dataset"),
    ],
)
def test_bad_arguments_give_one_line_error(argv, message, capsys, tmp_path):
    assert main(argv + ["--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unknown_entity_and_missing_checkpoint(trained, capsys, tmp_path):
    assert main(["predict", str(trained / "best.pt"), "--head", "nobody", "--relation", "P1"]) == 2
    assert "unknown entity 'nobody'" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "missing.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_stats_on_a_folder(kg_folder, capsys):
    assert main(["stats", "--dataset", str(kg_folder), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["entities"] == 30 and stats["relations"] == 3


TRAIN = ["train", "--epochs", "4", "--eval-every", "2", "--hidden-channels", "2", "--batch-size", "16", "--no-progress"]
RESUME = TRAIN + ["--dataset", "{kg}", "--out", "{run}", "--resume"]


class MakesAFile:
    """Unpickled by a plain ``torch.load``, it creates the file ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def crafted_checkpoint(tmp):
    torch.save({"format": FORMAT, "config": MakesAFile(str(tmp / "created"))}, tmp / "crafted.pt")


def write_file(name, content):
    def prepare(tmp):
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(content)

    return prepare


def folder_with(name, content=None):
    """A copy of the KG folder whose ``name`` is replaced (by a folder when ``content`` is None)."""

    def prepare(tmp):
        shutil.copytree(tmp / "kg-source", tmp / "kg2")
        (tmp / "kg2" / name).unlink()
        if content is None:
            (tmp / "kg2" / name).mkdir()
        else:
            (tmp / "kg2" / name).write_bytes(content)

    return prepare


def special_file(name, kind):
    """``name`` in the KG copy ({tmp}/kg2) or the run copy ({tmp}/run) replaced by a FIFO or a
    link to /dev/zero (which never ends)."""

    def prepare(tmp):
        if name.startswith("kg2/"):
            shutil.copytree(tmp / "kg-source", tmp / "kg2")
        (tmp / name).parent.mkdir(exist_ok=True)
        (tmp / name).unlink(missing_ok=True)
        if kind == "fifo":
            os.mkfifo(tmp / name)
        else:
            os.symlink("/dev/zero", tmp / name)

    return prepare


def append_to_log(line):
    def prepare(tmp):
        with open(tmp / "run" / "log.jsonl", "a") as f:
            f.write(line + "\n")

    return prepare


def edit_config(key, value):
    """The run's config.json with ``key`` set to ``value`` (as if edited by hand)."""

    def prepare(tmp):
        path = tmp / "run" / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))

    return prepare


def drop_setting(key):
    """The run's config.json without ``key``."""

    def prepare(tmp):
        path = tmp / "run" / "config.json"
        path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != key}))

    return prepare


def edit_checkpoint(name, edit):
    """The run's checkpoint ``name`` changed by ``edit(state)`` and saved with a valid checksum."""

    def prepare(tmp):
        state = load_checkpoint(tmp / "run" / name)
        edit(state)
        save_checkpoint(state, tmp / "run" / name)

    return prepare


def first_weight(state):
    return next(iter(state["model"]))


def cut_in_half(name):
    def prepare(tmp):
        path = tmp / "run" / name
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    return prepare


def make_fifo(tmp):
    os.mkfifo(tmp / "fifo")


#: JSON nested 100,000 deep under a setting, and the same in YAML's flow style.
DEEP_JSON = b'{"lr": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
DEEP_YAML = b"lr: " + b"[" * 100_000 + b"]" * 100_000 + b"\n"
#: 600 bytes of YAML whose aliases expand to 9**9 strings under lr (it ran out of memory when expanded).
ALIAS_BOMB = (
    b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + b"".join(
        f"{x}: &{x} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n".encode() for p, x in zip("abcdefgh", "bcdefghi")
    )
    + b"lr: *i\n"
)


def folder_holding(files):
    """The folder {tmp}/mine holding ``files`` (name -> text) of no run."""

    def prepare(tmp):
        (tmp / "mine").mkdir()
        for name, text in files.items():
            (tmp / "mine" / name).write_text(text)

    return prepare


def offline(tmp):
    def download_url(url, *args, **kwargs):
        raise urllib.error.URLError("no network")

    return download_url


# (argv with {kg}, {run} (a copy of a trained run) and {tmp}; preparation; what the one line must name)
BAD_INPUTS = {
    "lr inf": (TRAIN + ["--dataset", "{kg}", "--lr", "inf"], None, ["lr", "inf"]),
    "lr 1e300": (TRAIN + ["--dataset", "{kg}", "--lr", "1e300"], None, ["lr", "1e+300"]),
    "grad clip nan": (TRAIN + ["--dataset", "{kg}", "--grad-clip", "nan"], None, ["grad_clip", "nan"]),
    "grad clip -1": (TRAIN + ["--dataset", "{kg}", "--grad-clip", "-1"], None, ["grad_clip", "-1"]),
    "seed 2**70": (TRAIN + ["--dataset", "{kg}", "--seed", str(2**70)], None, ["seed", str(2**70)]),
    "threads -1": (TRAIN + ["--dataset", "{kg}", "--threads", "-1"], None, ["--threads"]),
    "device foo": (TRAIN + ["--dataset", "{kg}", "--device", "foo"], None, ["device", "foo"]),
    "device cuda without cuda": (TRAIN + ["--dataset", "{kg}", "--device", "cuda"], None, ["cuda", "not available"]),
    "hidden channels 1e9": (
        TRAIN + ["--dataset", "{kg}", "--hidden-channels", "1000000000"],
        None,
        ["hidden_channels 1000000000", "GiB"],
    ),
    "out is a file": (TRAIN + ["--dataset", "{kg}", "--out", "{tmp}/file"], write_file("file", b"x"), ["{tmp}/file"]),
    "out inside a file": (
        TRAIN + ["--dataset", "{kg}", "--out", "{tmp}/file/run"],
        write_file("file", b"x"),
        ["{tmp}/file/run"],
    ),
    "root is a file": (
        TRAIN + ["--dataset", "codex-s", "--root", "{tmp}/file"],
        write_file("file", b"x"),
        ["{tmp}/file"],
    ),
    "offline download": (
        TRAIN + ["--dataset", "codex-s", "--root", "{tmp}/data"],
        offline,
        ["could not download", "{tmp}/data/codex-s/raw"],
    ),
    "train.txt is a folder": (TRAIN + ["--dataset", "{tmp}/kg2"], folder_with("train.txt"), ["{tmp}/kg2/train.txt"]),
    "latin-1 in train.txt": (
        TRAIN + ["--dataset", "{tmp}/kg2"],
        folder_with("train.txt", b"caf\xe9\tP1\te001\n"),
        ["{tmp}/kg2/train.txt", "UTF-8"],
    ),
    "train.txt a FIFO": (TRAIN + ["--dataset", "{tmp}/kg2"], special_file("kg2/train.txt", "fifo"), ["kg2/train.txt"]),
    "test.txt a link to /dev/zero": (
        TRAIN + ["--dataset", "{tmp}/kg2"],
        special_file("kg2/test.txt", "zero"),
        ["{tmp}/kg2/test.txt", "not a regular file"],
    ),
    "log.jsonl a FIFO on resume": (RESUME, special_file("run/log.jsonl", "fifo"), ["{run}/log.jsonl", "not a regular"]),
    "log.jsonl a FIFO in a new run": (
        TRAIN + ["--dataset", "{kg}", "--out", "{tmp}/fresh"],
        special_file("fresh/log.jsonl", "fifo"),
        ["{tmp}/fresh/log.jsonl", "not a regular file"],
    ),
    "config.json a link to /dev/zero": (RESUME, special_file("run/config.json", "zero"), ["{run}/config.json"]),
    "checkpoint a FIFO": (["evaluate", "{tmp}/fifo"], make_fifo, ["{tmp}/fifo", "not a regular file"]),
    "resume with another lr": (RESUME + ["--lr", "0.05"], None, ["--lr 0.01 -> 0.05"]),
    "resume with another dropout": (RESUME + ["--dropout", "0.3"], None, ["--dropout 0.5 -> 0.3"]),
    "garbage log line": (RESUME, append_to_log("garbage"), ["{run}/log.jsonl, line"]),
    "log line [1,2]": (RESUME, append_to_log("[1,2]"), ["{run}/log.jsonl, line"]),
    "log epoch 'x'": (RESUME, append_to_log('{"event": "epoch", "epoch": "x"}'), ["{run}/log.jsonl, line", "'epoch'"]),
    "log epoch 1.5": (RESUME, append_to_log('{"event": "epoch", "epoch": 1.5}'), ["{run}/log.jsonl, line", "1.5"]),
    "evaluate --json a folder": (["evaluate", "{run}/best.pt", "--json", "{tmp}"], None, ["--json {tmp}"]),
    "truncated checkpoint": (
        ["evaluate", "{tmp}/bad.pt"],
        write_file("bad.pt", b"PK\x03\x04 cut"),
        ["{tmp}/bad.pt", "corrupt"],
    ),
    "crafted checkpoint": (["evaluate", "{tmp}/crafted.pt"], crafted_checkpoint, ["{tmp}/crafted.pt", "refused"]),
    "evaluate --device foo": (["evaluate", "{run}/best.pt", "--device", "foo"], None, ["foo"]),
    "threads 1e20": (TRAIN + ["--dataset", "{kg}", "--threads", "99999999999999999999"], None, ["--threads"]),
    "num layers 1e12": (
        TRAIN + ["--dataset", "{kg}", "--num-layers", "1000000000000"],
        None,
        ["num_layers 1000000000000", "GiB"],
    ),
    "batch size 1": (TRAIN + ["--dataset", "{kg}", "--batch-size", "1"], None, ["batch size must be >= 2", "got 1"]),
    "device cpu:99": (TRAIN + ["--dataset", "{kg}", "--device", "cpu:99", "--out", "{tmp}/new"], None, ["cpu:99"]),
    "evaluate --device cpu:99": (["evaluate", "{run}/best.pt", "--device", "cpu:99"], None, ["cpu:99"]),
    "evaluate --json a FIFO": (
        ["evaluate", "{run}/best.pt", "--json", "{tmp}/fifo"],
        make_fifo,
        ["{tmp}/fifo", "not a regular file"],
    ),
    "config.json hidden_channels 'abc'": (
        RESUME,
        edit_config("hidden_channels", "abc"),
        ["{run}/config.json", "'hidden_channels'"],
    ),
    "config.json hidden_channels 8.0": (
        RESUME,
        edit_config("hidden_channels", 8.0),
        ["{run}/config.json", "'hidden_channels'"],
    ),
    "config.json unknown key": (
        RESUME,
        edit_config("channels", 8),
        ["{run}/config.json", "unknown setting(s) 'channels'"],
    ),
    "config.json dataset 5": (RESUME, edit_config("dataset", 5), ["{run}/config.json", "'dataset'"]),
    "config.json seed '0'": (RESUME, edit_config("seed", "0"), ["{run}/config.json", "'seed'"]),
    "config.json lr '0.1'": (RESUME, edit_config("lr", "0.1"), ["{run}/config.json", "'lr'"]),
    "config.json beta [0.2]": (RESUME, edit_config("beta", [0.2]), ["{run}/config.json", "'beta'"]),
    "config.json hidden_channels 0": (
        RESUME,
        edit_config("hidden_channels", 0),
        ["{run}/config.json", "hidden channels must be positive"],
    ),
    "config.json a list": (RESUME, write_file("run/config.json", b"[1, 2]"), ["{run}/config.json", "JSON object"]),
    "last.pt damaged rng": (
        RESUME,
        edit_checkpoint("last.pt", lambda s: s["rng"].update(torch=torch.zeros(3, dtype=torch.uint8))),
        ["{run}/last.pt", "rng"],
    ),
    "last.pt without rng": (RESUME, edit_checkpoint("last.pt", lambda s: s.pop("rng")), ["{run}/last.pt", "'rng'"]),
    "last.pt epoch '4'": (
        RESUME,
        edit_checkpoint("last.pt", lambda s: s.update(epoch="4")),
        ["{run}/last.pt", "epoch"],
    ),
    "last.pt best mrr None": (
        RESUME,
        edit_checkpoint("last.pt", lambda s: s["best"].update(mrr=None)),
        ["{run}/last.pt", "mrr"],
    ),
    "last.pt optimizer of other shapes": (
        RESUME,
        edit_checkpoint("last.pt", lambda s: s["optimizer"]["state"][0].update(exp_avg=torch.zeros(3))),
        ["{run}/last.pt", "optimizer"],
    ),
    "last.pt optimizer betas 'x'": (
        RESUME,
        edit_checkpoint("last.pt", lambda s: s["optimizer"]["param_groups"][0].update(betas="x")),
        ["{run}/last.pt", "optimizer", "'betas'"],
    ),
    "last.pt best_model of strings": (
        RESUME,
        edit_checkpoint("last.pt", lambda s: s.update(best_model={"a": "b"})),
        ["{run}/last.pt", "best_model"],
    ),
    "last.pt cut in half": (RESUME, cut_in_half("last.pt"), ["{run}/last.pt"]),
    "best.pt cut in half": (["evaluate", "{run}/best.pt"], cut_in_half("best.pt"), ["{run}/best.pt"]),
    "best.pt config hidden_channels 'abc'": (
        ["evaluate", "{run}/best.pt"],
        edit_checkpoint("best.pt", lambda s: s["config"].update(hidden_channels="abc")),
        ["{run}/best.pt", "'hidden_channels'"],
    ),
    "best.pt other hidden_channels": (
        ["evaluate", "{run}/best.pt"],
        edit_checkpoint("best.pt", lambda s: s["config"].update(hidden_channels=4)),
        ["{run}/best.pt", "model", "size mismatch"],
    ),
    "best.pt weight of another shape": (
        ["predict", "{run}/best.pt", "--head", "e001", "--relation", "P1"],
        edit_checkpoint("best.pt", lambda s: s["model"].update({first_weight(s): torch.zeros(2, 2)})),
        ["{run}/best.pt", "model", "size mismatch"],
    ),
    "best.pt weight missing": (
        ["evaluate", "{run}/best.pt"],
        edit_checkpoint("best.pt", lambda s: s["model"].pop(first_weight(s))),
        ["{run}/best.pt", "Missing key"],
    ),
    "best.pt weight not a tensor": (
        ["evaluate", "{run}/best.pt"],
        edit_checkpoint("best.pt", lambda s: s["model"].update({first_weight(s): "x"})),
        ["{run}/best.pt", "must be a tensor"],
    ),
    "best.pt without config": (
        ["evaluate", "{run}/best.pt"],
        edit_checkpoint("best.pt", lambda s: s.pop("config")),
        ["{run}/best.pt", "'config'"],
    ),
    "best.pt graph sizes strings": (
        ["evaluate", "{run}/best.pt"],
        edit_checkpoint("best.pt", lambda s: s["graph"].update(num_entities="30")),
        ["{run}/best.pt", "num_entities"],
    ),
    "batch size 1e20": (
        TRAIN + ["--dataset", "{kg}", "--batch-size", str(10**20)],
        None,
        ["batch_size must be a 64-bit integer", str(10**20)],
    ),
    "argparse type error": (TRAIN + ["--dataset", "{kg}", "--batch-size", "x"], None, ["--batch-size", "'x'"]),
    "out empty": (TRAIN + ["--dataset", "{kg}", "--out", ""], None, ["--out", "empty"]),
    "resume and overwrite": (RESUME + ["--overwrite"], None, ["--resume and --overwrite"]),
    "config.json without dataset": (RESUME, drop_setting("dataset"), ["{run}/config.json", "'dataset'"]),
    "evaluate best.pt with a NaN weight": (
        ["evaluate", "{run}/best.pt"],
        edit_checkpoint("best.pt", lambda s: s["model"][first_weight(s)].view(-1).__setitem__(3, float("nan"))),
        ["{run}/best.pt", "NaN"],
    ),
    "predict best.pt with an infinite weight": (
        ["predict", "{run}/best.pt", "--head", "e001", "--relation", "P1"],
        edit_checkpoint("best.pt", lambda s: s["model"][first_weight(s)].view(-1).__setitem__(0, float("inf"))),
        ["{run}/best.pt", "infinite"],
    ),
    "--config a FIFO": (TRAIN + ["--dataset", "{kg}", "--config", "{tmp}/fifo"], make_fifo, ["{tmp}/fifo", "regular"]),
    "--config a link to /dev/zero": (
        TRAIN + ["--dataset", "{kg}", "--config", "{tmp}/zero.json"],
        special_file("zero.json", "zero"),
        ["{tmp}/zero.json", "not a regular file"],
    ),
    "--config JSON nested 100,000 deep": (
        TRAIN + ["--dataset", "{kg}", "--config", "{tmp}/deep.json"],
        write_file("deep.json", DEEP_JSON),
        ["{tmp}/deep.json", "nested deeper than 32 levels"],
    ),
    "--config YAML nested 100,000 deep": (
        TRAIN + ["--dataset", "{kg}", "--config", "{tmp}/deep.yaml"],
        write_file("deep.yaml", DEEP_YAML),
        ["{tmp}/deep.yaml", "nested deeper than 32 levels"],
    ),
    "--config a YAML alias bomb": (
        TRAIN + ["--dataset", "{kg}", "--config", "{tmp}/bomb.yaml"],
        write_file("bomb.yaml", ALIAS_BOMB),
        ["{tmp}/bomb.yaml", "YAML aliases (*a) are refused"],
    ),
    "--config a list of 10**6 under lr": (
        TRAIN + ["--dataset", "{kg}", "--config", "{tmp}/long.json"],
        write_file("long.json", b'{"lr": [' + b"1," * 10**6 + b"1]}"),
        ["{tmp}/long.json", "lr: setting 'lr' must be a number, found [1, 1, 1, 1, 1, 1, ...]"],
    ),
    "config.json nested 100,000 deep on resume": (
        RESUME,
        write_file("run/config.json", DEEP_JSON),
        ["{run}/config.json", "nested deeper than 32 levels"],
    ),
    "log.jsonl nested 100,000 deep on resume": (
        RESUME,
        append_to_log("[" * 100_000 + "]" * 100_000),
        ["{run}/log.jsonl, line", "nested deeper than 32 levels"],
    ),
    "last.pt ema 5": (RESUME, edit_checkpoint("last.pt", lambda s: s.update(ema=5)), ["{run}/last.pt", "'ema'"]),
    "last.pt ema of other shapes": (
        RESUME,
        edit_checkpoint("last.pt", lambda s: s.update(ema={"weight": torch.zeros(2)})),
        ["{run}/last.pt", "'ema'", "not those of the model"],
    ),
    "last.pt best mrr NaN": (
        RESUME,
        edit_checkpoint("last.pt", lambda s: s["best"].update(mrr=float("nan"))),
        ["{run}/last.pt", "'mrr'", "nan"],
    ),
    "last.pt best mrr 2": (
        RESUME,
        edit_checkpoint("last.pt", lambda s: s["best"].update(mrr=2.0)),
        ["{run}/last.pt", "'mrr'"],
    ),
    "out holds a log.jsonl and config.json of no run": (
        TRAIN + ["--dataset", "{kg}", "--out", "{tmp}/mine"],
        folder_holding({"log.jsonl": "my notes\n", "config.json": '{"theme": "dark"}'}),
        ["{tmp}/mine holds log.jsonl and config.json of no torch_wge run", "--overwrite"],
    ),
    "a FIFO entity_labels.txt": (
        TRAIN + ["--dataset", "{tmp}/kg2"],
        special_file("kg2/entity_labels.txt", "fifo"),
        ["{tmp}/kg2/entity_labels.txt", "not a regular file"],
    ),
    "dataset ./no-such-kg": (TRAIN + ["--dataset", "./no-such-kg"], None, ["./no-such-kg: no such dataset folder"]),
    "dataset codexs": (TRAIN + ["--dataset", "codexs"], None, ["unknown dataset 'codexs'; did you mean codex-s?"]),
    "option typo --epocs": (
        ["train", "--epocs", "3"],
        None,
        ["torch-wge train: error: unrecognized arguments: --epocs 3 (did you mean --epochs?)"],
    ),
    "evaluate a folder without best.pt": (
        ["evaluate", "{tmp}/kg-source"],
        None,
        ["{tmp}/kg-source/best.pt: no best checkpoint"],
    ),
    "evaluate a missing checkpoint": (["evaluate", "{tmp}/no.pt"], None, ["{tmp}/no.pt: does not exist"]),
    "predict --top-k 0": (
        ["predict", "{run}/best.pt", "--head", "e001", "--relation", "P1", "--top-k", "0"],
        None,
        ["--top-k"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_gives_one_line_naming_it(case, kg_folder, trained, tmp_path, capsys, monkeypatch):
    argv, prepare, named = BAD_INPUTS[case]
    if case == "device cuda without cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    shutil.copytree(trained, tmp_path / "run")
    shutil.copytree(kg_folder, tmp_path / "kg-source")
    if prepare is offline:
        monkeypatch.setattr(datasets_base, "download_url", offline(tmp_path))
    elif prepare is not None:
        prepare(tmp_path)
    fill = {"kg": str(kg_folder), "run": str(tmp_path / "run"), "tmp": str(tmp_path)}
    try:
        code = main([arg.format(**fill) for arg in argv])
    except SystemExit as exit:  # argparse's own errors
        code = exit.code
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    message = err.strip()
    for text in named:
        assert text.format(**fill) in message, message
    assert not (tmp_path / "created").exists()
    assert not (tmp_path / "new").exists()  # refused before training


def test_device_cpu_0_is_the_cpu(kg_folder, tmp_path, capsys):
    # the run's checkpoints were once saved as on "cpu:0", which torch.load cannot restore
    argv = TRAIN + ["--dataset", str(kg_folder), "--epochs", "2", "--device", "cpu:0", "--out", str(tmp_path)]
    assert main(argv) == 0, capsys.readouterr().err
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["best_epoch"] == 2 and results["config"]["device"] == "cpu:0"
    evaluate = ["evaluate", str(tmp_path / "best.pt"), "--split", "test", "--device", "cpu:0"]
    assert main(evaluate + ["--json", str(tmp_path / "e.json")]) == 0
    evaluated = json.loads((tmp_path / "e.json").read_text())
    assert evaluated["metrics"] == results["test"]["metrics"]


def test_predict_filter_known_lists_no_known_answer(trained, kg_folder, capsys):
    head, relation = (kg_folder / "train.txt").read_text().splitlines()[0].split("\t")[:2]

    def answers(*extra):
        assert (
            main(["predict", str(trained / "best.pt"), "--head", head, "--relation", relation, "--top-k", "30", *extra])
            == 0
        )
        return [line.split()[1:] for line in capsys.readouterr().out.splitlines()[1:]]

    everything = answers()
    known = [row[0] for row in everything if row[-1] == "[known]"]
    assert len(everything) == 30 and known
    filtered = answers("--filter-known")
    assert [row[0] for row in filtered] == [row[0] for row in everything if row[0] not in known and row[0] != head]
    assert not any(row[-1] == "[known]" for row in filtered)


def test_reordered_vocabulary_is_refused(kg_folder, tmp_path, capsys):
    shutil.copytree(kg_folder, tmp_path / "kg")
    run = [
        "train",
        "--dataset",
        str(tmp_path / "kg"),
        "--epochs",
        "2",
        "--eval-every",
        "2",
        "--hidden-channels",
        "2",
        "--batch-size",
        "16",
        "--out",
        str(tmp_path / "run"),
        "--no-progress",
    ]
    assert main(run) == 0
    assert main(["evaluate", str(tmp_path / "run" / "best.pt")]) == 0
    capsys.readouterr()
    train = tmp_path / "kg" / "train.txt"
    train.write_text("\n".join(reversed(train.read_text().splitlines())) + "\n")  # same triples, other ids
    assert main(["evaluate", str(tmp_path / "run" / "best.pt")]) == 2
    err = capsys.readouterr().err
    assert "numbers its entities or relations differently" in err and str(tmp_path / "kg") in err
    assert main(["predict", str(tmp_path / "run" / "best.pt"), "--head", "e001", "--relation", "P1"]) == 2


def test_disk_full_during_training(kg_folder, tmp_path, capsys, monkeypatch, full_disk):
    full_disk(".last.pt")
    out = tmp_path / "run"
    argv = TRAIN + ["--dataset", str(kg_folder), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(f"{out / 'last.pt'}: No space left on device")
    assert not (out / "last.pt").exists() and not [p for p in out.iterdir() if ".tmp-" in p.name]
    monkeypatch.undo()  # space freed: the run starts again and its log holds each epoch once
    assert main(argv) == 0
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log if r["event"] == "epoch"] == [1, 2, 3, 4]


def test_debug_shows_the_traceback(kg_folder, capsys):
    with pytest.raises(ValueError, match="lr must be in"):
        main(TRAIN + ["--dataset", str(kg_folder), "--lr", "inf", "--debug"])


@pytest.mark.parametrize(
    "command, line",
    [
        ("train", "torch-wge train: interrupted (no epoch was saved in runs/codex-s: nothing to resume)"),
        ("tune", "torch-wge tune: interrupted (the same command continues the study; a trial cut short"),
        ("stats", "torch-wge stats: interrupted"),
    ],
)
def test_ctrl_c_ends_with_one_line_saying_what_continues_the_command(command, line, monkeypatch, capsys, tmp_path):
    import torch_wge.cli as cli

    monkeypatch.chdir(tmp_path)  # no runs/codex-s/last.pt there

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, command, interrupted)
    monkeypatch.setitem(cli.CHECKS, command, lambda args: None)
    argv = {"train": ["train", "--dataset", "codex-s"], "tune": ["tune", "--dataset", "codex-s"]}
    assert main(argv.get(command, [command, "--dataset", "codex-s"])) == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith(line) and len(err.splitlines()) == 1
    assert command != "stats" or err == line  # nothing to continue


def test_ctrl_c_suggests_resume_only_where_a_checkpoint_is(kg_folder, tmp_path, monkeypatch, capsys):
    import torch_wge.cli as cli

    out = tmp_path / "run"
    assert main(TRAIN + ["--dataset", str(kg_folder), "--root", str(tmp_path / "data"), "--out", str(out)]) == 0

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "train", interrupted)
    capsys.readouterr()
    assert main(TRAIN + ["--dataset", str(kg_folder), "--out", str(out), "--resume"]) == 130
    assert capsys.readouterr().err.strip() == (
        f"torch-wge train: interrupted (--resume continues the run from its last checkpoint, {out / 'last.pt'})"
    )
    assert main(TRAIN + ["--dataset", str(kg_folder), "--out", str(tmp_path / "new")]) == 130
    assert capsys.readouterr().err.strip() == (
        f"torch-wge train: interrupted (no epoch was saved in {tmp_path / 'new'}: nothing to resume)"
    )


def test_epochs_zero_is_refused(kg_folder, capsys):
    assert main(TRAIN + ["--dataset", str(kg_folder), "--epochs", "0"]) == 2
    assert capsys.readouterr().err.strip().endswith("epochs must be positive, got 0")


def test_help_states_each_default_once():
    import argparse

    from torch_wge.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        for action in parser._actions:
            text = action.help or ""
            assert text.count("(default:") <= 1 and "(default: None)" not in text, (name, action.dest, text)


def test_each_setting_option_shows_the_help_of_its_field():
    import argparse
    import dataclasses

    from torch_wge.cli import build_parser
    from torch_wge.training import TrainConfig

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    options = {action.dest: action for action in commands.choices["train"]._actions}
    for field in dataclasses.fields(TrainConfig):
        assert field.metadata["help"], field.name
        assert options[field.name].help.startswith(field.metadata["help"]), field.name
        assert options[field.name].option_strings[0] == "--" + field.name.replace("_", "-")


def test_a_used_run_folder_and_an_unknown_entity_are_worded_for_the_command_line(trained, kg_folder, capsys):
    assert main(TRAIN + ["--dataset", str(kg_folder), "--out", str(trained)]) == 2
    line = capsys.readouterr().err.strip()
    assert line.endswith(
        f"{trained} already holds a run; add --resume to continue it, --overwrite to replace it, or choose another --out"
    )
    assert "resume=True" not in line
    assert main(["predict", str(trained / "best.pt"), "--head", "nobody", "--relation", "P1"]) == 2
    assert "not among the 30 entities of" in capsys.readouterr().err


def test_a_finished_run_without_last_pt_is_replaced_only_with_overwrite(trained, kg_folder, tmp_path, capsys):
    shutil.copytree(trained, tmp_path / "run")
    (tmp_path / "run" / "last.pt").unlink()  # a finished run kept without its last checkpoint
    before = {name: (tmp_path / "run" / name).read_bytes() for name in ("best.pt", "log.jsonl", "results.json")}
    argv = TRAIN + ["--dataset", str(kg_folder), "--out", str(tmp_path / "run"), "--seed", "5"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"torch-wge train: error: {tmp_path / 'run'} already holds a run; add --overwrite to replace it, or choose another --out\n"
    )
    assert {name: (tmp_path / "run" / name).read_bytes() for name in before} == before
    assert main(argv + ["--overwrite"]) == 0
    assert json.loads((tmp_path / "run" / "results.json").read_text())["config"]["seed"] == 5
    assert main(argv) == 2  # and the new run, with its last.pt, as any other
    assert "add --resume to continue it, --overwrite to replace it" in capsys.readouterr().err


def test_unseen_test_entities_are_stated_on_every_run_and_can_be_left_out(kg_folder, tmp_path, capsys):
    shutil.copytree(kg_folder, tmp_path / "kg")
    with open(tmp_path / "kg" / "test.txt", "a") as f:
        f.write("e001\tP1\tnewcomer\n")  # an entity no training triple has
    num_test = len((tmp_path / "kg" / "test.txt").read_text().splitlines())
    argv = TRAIN + ["--dataset", str(tmp_path / "kg"), "--root", str(tmp_path / "data")]
    note = (
        f"torch-wge: 1 of {num_test} test triples have an entity or relation not in training: ranked with "
        f"untrained embeddings, as published numbers are (--unseen drop leaves them out)"
    )
    for run in ("first", "again"):  # processed, then read back from the processed copy
        assert main(argv + ["--out", str(tmp_path / run)]) == 0
        err = capsys.readouterr().err.splitlines()
        assert note in err
        assert sum("not in training" in line or "not occur in training" in line for line in err) == 1, err
        results = json.loads((tmp_path / run / "results.json").read_text())
        assert results["unseen"] == {"policy": "keep", "ranked": {"valid": 0, "test": 1}}
        assert results["test"]["num_queries"] == 2 * num_test
    assert main(["evaluate", str(tmp_path / "first" / "best.pt")]) == 0
    assert note in capsys.readouterr().err.splitlines()
    assert main(argv + ["--out", str(tmp_path / "dropped"), "--unseen", "drop"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "torch-wge: 1 test triples with an entity or relation not in training left out (--unseen drop)" in err
    results = json.loads((tmp_path / "dropped" / "results.json").read_text())
    assert results["unseen"] == {"policy": "drop", "ranked": {"valid": 0, "test": 0}}
    assert results["test"]["num_queries"] == 2 * (num_test - 1)


def test_processing_prints_nothing_under_no_progress(kg_folder, tmp_path, capsys):
    assert (
        main(TRAIN + ["--dataset", str(kg_folder), "--root", str(tmp_path / "data"), "--out", str(tmp_path / "run")])
        == 0
    )
    assert capsys.readouterr().err == ""
    assert (tmp_path / "data").is_dir()  # processed there in this run
    best = str(tmp_path / "run" / "best.pt")
    assert main(["evaluate", best, "--root", str(tmp_path / "other"), "--no-progress"]) == 0
    assert (
        main(
            ["predict", best, "--root", str(tmp_path / "third"), "--no-progress", "--head", "e001", "--relation", "P1"]
        )
        == 0
    )
    assert capsys.readouterr().err == ""
    assert (tmp_path / "other").is_dir() and (tmp_path / "third").is_dir()  # processed there too


def test_a_folder_dataset_is_processed_under_root_and_left_as_it_was(kg_folder, tmp_path, capsys):
    before = sorted(p.relative_to(kg_folder) for p in kg_folder.rglob("*"))
    run, root = tmp_path / "run", tmp_path / "cache"
    argv = ["--dataset", str(kg_folder), "--root", str(root), "--out", str(run)]
    assert main(TRAIN + ["--epochs", "1"] + argv) == 0
    assert sorted(p.relative_to(kg_folder) for p in kg_folder.rglob("*")) == before
    assert not (kg_folder / "processed").exists()  # nor by the runs of the other tests
    processed = sorted(p.name for p in root.rglob("*.pt"))
    data, pre_filter, pre_transform, vocab = processed  # PyG's record of the pre-transform and filter beside them
    assert data.startswith("data-") and vocab.startswith("vocab-")
    assert (pre_filter, pre_transform) == ("pre_filter.pt", "pre_transform.pt")
    assert main(["evaluate", str(run / "best.pt")]) == 0  # found again from the run's settings
    assert sorted(p.name for p in root.rglob("*.pt")) == processed


#: What a label may hold that a terminal acts on: set the window title, bell, clear the screen,
#: return to the line's start, reverse the text's direction.
TERMINAL_CONTROLS = "\x1b]0;owned\x07\x1b[2J\rX\u202e"


@pytest.fixture(scope="module")
def labelled_run(tmp_path_factory):
    """A run (softmax objective, the fast recipe's) on a KG whose labels hold terminal controls."""
    tmp = tmp_path_factory.mktemp("labelled")
    entity_labels = {i: f"Person {i}" for i in range(30)}
    entity_labels[1] = "Alice" + TERMINAL_CONTROLS
    relation_labels = {0: "spouse" + TERMINAL_CONTROLS, 1: "child", 2: "sibling"}
    kg = write_triples_folder(random_kg(30, 3, 300, seed=7), tmp / "kg", entity_labels, relation_labels)
    argv = ["train", "--dataset", str(kg), "--root", str(tmp / "data"), "--out", str(tmp / "run")]
    assert main(argv + TRAIN[1:]) == 0
    return tmp / "run"


def test_printed_labels_have_their_control_characters_escaped(labelled_run, capsys):
    capsys.readouterr()
    assert main(["predict", str(labelled_run), "--head", "e001", "--relation", "P0", "--top-k", "30"]) == 0
    assert main(["evaluate", str(labelled_run), "--per-relation"]) == 0
    out = capsys.readouterr().out
    assert not any(char in out for char in "\x1b\x07\r\u202e"), repr(out)
    escaped = "\\x1b]0;owned\\x07\\x1b[2J\\rX\\u202e"
    assert f'e001 "Alice{escaped}"' in out and f'P0 "spouse{escaped}"' in out  # predict's query
    assert f"P0 (spouse{escaped})" in out  # evaluate's per-relation table


def test_predict_and_evaluate_take_a_run_folder_or_a_checkpoint_alike(labelled_run, capsys):
    capsys.readouterr()
    for command in (["evaluate"], ["predict", "--head", "e001", "--relation", "P1"]):
        outputs = []
        for run in (labelled_run, labelled_run / "best.pt"):
            assert main([command[0], str(run), *command[1:]]) == 0
            outputs.append(capsys.readouterr().out)
        assert outputs[0] == outputs[1]


def test_predicts_header_says_what_the_score_means_under_the_runs_objective(labelled_run, capsys):
    from torch_wge.cli import score_meaning

    capsys.readouterr()
    assert main(["predict", str(labelled_run), "--head", "e001", "--relation", "P1"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "the run's objective is softmax: scores rank one query's answers against each other" in header
    assert "bce" not in header
    assert score_meaning("bce") == (
        "the run's objective is bce: sigmoid(score) is the model's probability that the triple holds"
    )


def test_labels_match_regardless_of_case_and_an_unknown_one_gets_a_suggestion(labelled_run, capsys):
    capsys.readouterr()
    assert main(["predict", str(labelled_run), "--head", "person 5", "--relation", "CHILD"]) == 0
    assert '(e005 "Person 5", P1 "child", ?)' in capsys.readouterr().out
    assert main(["predict", str(labelled_run), "--head", "Persn 5", "--relation", "child"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown entity 'Persn 5'" in err and "did you mean 'Person 5'" in err, err
