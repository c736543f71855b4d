import json

import pytest

from torch_wge.cli import main
from torch_wge.testing import random_kg


@pytest.fixture(scope="module")
def kg_folder(tmp_path_factory):
    """A small KG as a folder of triple files with string identifiers."""
    folder = tmp_path_factory.mktemp("kg")
    data = random_kg(30, 3, 300, seed=7)
    for split, mask in (("train", data.train_mask), ("valid", data.val_mask), ("test", data.test_mask)):
        lines = [f"e{h:03d}\tP{r}\te{t:03d}" for (h, t), r in zip(data.edge_index.t()[mask].tolist(), data.edge_type[mask].tolist())]
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="module")
def trained(kg_folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    code = main(["train", "--dataset", str(kg_folder), "--epochs", "4", "--eval-every", "2", "--channels", "8",
                 "--batch-size", "16", "--out", str(out), "--no-progress"])
    assert code == 0
    return out


def test_train_writes_results(trained, capsys):
    results = json.loads((trained / "results.json").read_text())
    assert results["epochs_trained"] == 4 and results["config"]["channels"] == 8
    assert 0 < results["test"]["metrics"]["both"]["mrr"] <= 1


def test_evaluate_matches_training_results(trained, capsys):
    code = main(["evaluate", str(trained / "best.pt"), "--split", "test", "--per-relation", "--json", str(trained / "eval.json")])
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
        (["train", "--channels", "6"], "channels must be a positive multiple of 4"),
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
