import json

import numpy as np
import pytest
import torch

from torch_wge.evaluation import METRICS, SIDES, LinkPredictionResults


def numpy_metrics(ranks):
    return {
        "mrr": float(np.mean(1.0 / ranks)),
        "mr": float(np.mean(ranks)),
        "hits@1": float(np.mean(ranks <= 1)),
        "hits@3": float(np.mean(ranks <= 3)),
        "hits@10": float(np.mean(ranks <= 10)),
    }


@pytest.fixture
def random_results():
    gen = torch.Generator().manual_seed(0)
    num_queries, num_relations = 300, 5
    # Realistic ranks are multiples of 1/2.
    ranks = torch.randint(2, 40, (num_queries,), generator=gen).float() / 2
    side = torch.randint(0, 2, (num_queries,), generator=gen)
    relation = torch.randint(0, num_relations - 1, (num_queries,), generator=gen)  # last unused
    results = LinkPredictionResults(ranks, side, relation, num_relations)
    return results, ranks.double().numpy(), side.numpy(), relation.numpy()


def test_metrics_against_numpy(random_results):
    results, ranks, side, relation = random_results
    selectors = {"both": np.ones_like(side, dtype=bool), "head": side == 1, "tail": side == 0}
    flat = results.to_flat_dict()
    assert list(flat) == [f"{s}.{m}" for s in SIDES for m in METRICS]
    for name, mask in selectors.items():
        expected = numpy_metrics(ranks[mask])
        for metric, value in expected.items():
            assert flat[f"{name}.{metric}"] == pytest.approx(value, rel=1e-12)
            assert results[f"{name}.{metric}"] == pytest.approx(value, rel=1e-12)
        assert results.metric("count", name) == int(mask.sum())
    assert results["mrr"] == results["both.mrr"] == results["BOTH.MRR"]
    assert results["tail.hits@5"] == pytest.approx(float(np.mean(ranks[side == 0] <= 5)))


def test_per_relation_against_numpy(random_results):
    results, ranks, side, relation = random_results
    rows = results.per_relation()
    seen = set()
    for row in rows:
        mask = relation == row["relation"]
        if row["side"] != "both":
            mask &= side == (1 if row["side"] == "head" else 0)
        assert row["count"] == int(mask.sum()) > 0
        for metric, value in numpy_metrics(ranks[mask]).items():
            assert row[metric] == pytest.approx(value, rel=1e-12)
            assert results.metric(metric, row["side"], relation=row["relation"]) == pytest.approx(value)
        seen.add((row["relation"], row["side"]))
    expected = {
        (r, s)
        for r in range(5)
        for s in SIDES
        if ((relation == r) & ({"both": True, "head": side == 1, "tail": side == 0}[s])).any()
    }
    assert seen == expected
    assert all(r != 4 for r, _ in seen)  # relation without queries has no rows
    assert np.isnan(results.metric("mrr", "head", relation=4))


def test_export_and_printing(random_results):
    results = random_results[0]
    everything = json.loads(json.dumps(results.to_dict()))
    assert everything["metrics"]["head"]["mrr"] == pytest.approx(results["head.mrr"])
    assert everything["counts"]["both"] == results.num_queries
    assert len(everything["per_relation"]) == len(results.per_relation())
    text = str(results)
    assert "realistic ranks (ties: mean of optimistic and pessimistic), filtered" in text
    assert all(side in text for side in SIDES)
    table = results.format(per_relation=True, relation_names=[f"rel-{r}" for r in range(5)]).split("\n\n")[1]
    both_lines = [line.split() for line in table.splitlines()[1:] if line.split()[1] == "both"]
    count = {row["relation"]: row["count"] for row in results.per_relation() if row["side"] == "both"}
    assert [line[0] for line in both_lines] == [f"rel-{r}" for r in sorted(count, key=lambda r: -count[r])]
    assert [int(line[2]) for line in both_lines] == sorted(count.values(), reverse=True)
    mrr = {f"rel-{row['relation']}": row["mrr"] for row in results.per_relation() if row["side"] == "both"}
    assert all(float(line[3]) == pytest.approx(mrr[line[0]], abs=5e-5) for line in both_lines)
    line = results.summary_line()
    assert line.startswith(f"MRR {results['both.mrr']:.4f} | MR {results['both.mr']:.1f} | H@1 ")
    assert "H@10" in line
    assert "both.mrr" in results and "left.mrr" not in results
    for bad in ("left.mrr", "both.auc", "both.hits@0", "a.b.c"):
        with pytest.raises(KeyError):
            results[bad]


def test_hand_computed():
    results = LinkPredictionResults(
        torch.tensor([1.0, 2.0, 4.0, 10.5]), torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 0, 1]), 2
    )
    assert results["both.mrr"] == pytest.approx((1 + 1 / 2 + 1 / 4 + 1 / 10.5) / 4)
    assert results["both.mr"] == pytest.approx(17.5 / 4)
    assert results["head.hits@10"] == 0.5  # 10.5 is not a hit at 10
    assert results["tail.hits@1"] == 0.5


def test_checks():
    with pytest.raises(ValueError, match="ranks must be >= 1"):
        LinkPredictionResults(torch.tensor([0.5]), torch.tensor([0]), torch.tensor([0]), 1)
    with pytest.raises(ValueError, match="query_side must be 0"):
        LinkPredictionResults(torch.tensor([1.0]), torch.tensor([2]), torch.tensor([0]), 1)
    with pytest.raises(ValueError, match=r"query_relation must lie in \[0, 1\)"):
        LinkPredictionResults(torch.tensor([1.0]), torch.tensor([0]), torch.tensor([1]), 1)
    with pytest.raises(ValueError, match="must have the same length"):
        LinkPredictionResults(torch.tensor([1.0, 2.0]), torch.tensor([0]), torch.tensor([0]), 1)
