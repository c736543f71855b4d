"""A checkpoint of a run on a graph passed from Python (here PyG's
RelLinkPredDataset layout) is evaluated and queried with that graph."""

import json
import sys
from pathlib import Path

import pytest
import torch

from torch_wge.inference import evaluate_checkpoint, load_trained, predict
from torch_wge.training import CheckpointError, TrainConfig, Trainer, graph_transform

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from test_pyg_layouts import rel_link_pred_layout, word_net_layout  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    config = TrainConfig(hidden_channels=2, num_layers=1, epochs=2, eval_every=1, batch_size=4, seed=1)
    result = Trainer(config, graph_transform(config)(rel_link_pred_layout()), out, progress=False).fit()
    return out, result


def test_evaluate_checkpoint_with_data_reproduces_the_run(run):
    out, result = run
    for layout in (rel_link_pred_layout, word_net_layout):  # the same graph in another layout
        results, dataset = evaluate_checkpoint(out / "best.pt", "test", device="cpu", data=layout())
        assert dataset is None
        assert results.to_dict()["metrics"] == result["test"]["metrics"]
    assert json.loads((out / "results.json").read_text())["test"]["metrics"] == result["test"]["metrics"]


def test_predict_with_data(run):
    out, _ = run
    data = rel_link_pred_layout()
    model, _, _, viewed = load_trained(out / "best.pt", device="cpu", data=data)
    with torch.no_grad():
        scores = model(torch.tensor([1]), torch.tensor([1]), **model.graph_inputs(viewed))[0]
    rows = predict(out / "best.pt", 1, 1, top_k=3, device="cpu", data=data)
    assert [row["entity"] for row in rows] == scores.topk(3).indices.tolist()
    assert [row["score"] for row in rows] == pytest.approx(scores.topk(3).values.tolist(), abs=1e-6)
    # (1, r1, 2) and (1, r1, 4) are training triples, nothing else answers (1, r1, ?)
    assert all(row["known"] == (row["entity"] in (2, 4)) for row in rows)
    # heads of (?, r0, 1): 0 and 3; filtered out when asked, and so is the query's own entity 1
    heads = predict(out / "best.pt", "1", "0", predict_tails=False, top_k=6, filter_known=True, device="cpu", data=data)
    assert {row["entity"] for row in heads} == {2, 4, 5} and not any(row["known"] for row in heads)
    with pytest.raises(ValueError, match=r"entity 6 must be an id in \[0, 6\)"):
        predict(out / "best.pt", 6, 0, device="cpu", data=data)


def test_checkpoint_refuses_another_graph(run):
    out, _ = run
    data = word_net_layout()
    data.val_mask[:] = False  # one triple fewer in valid
    with pytest.raises(CheckpointError, match="num_valid"):
        evaluate_checkpoint(out / "best.pt", device="cpu", data=data)
