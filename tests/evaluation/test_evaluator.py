import pytest
import torch

from torch_wge.evaluation import RANK_TYPES, LinkPredictionEvaluator, LinkPredictionResults
from torch_wge.testing import random_kg


def split_triples(data):
    triples = torch.stack([data.edge_index[0], data.edge_type, data.edge_index[1]], dim=1)
    return {
        "all": triples,
        "train": triples[data.train_mask],
        "valid": triples[data.val_mask],
        "test": triples[data.test_mask],
    }


def random_table(num_entities, num_relations, seed, values=3):
    """Scores table[relation, entity, candidate] with few distinct values (ties)."""
    gen = torch.Generator().manual_seed(seed)
    shape = (2 * num_relations, num_entities, num_entities)
    return torch.randint(0, values, shape, generator=gen).float()


def brute_force(triples, known, num_relations, table, rank_type):
    """Queries, filters and ranks built with Python sets and loops."""
    answers = {}
    for h, r, t in known.tolist():
        answers.setdefault((h, r), set()).add(t)
        answers.setdefault((t, r + num_relations), set()).add(h)
    queries = [(h, r, t) for h, r, t in triples.tolist()]
    queries += [(t, r + num_relations, h) for h, r, t in triples.tolist()]
    ranks, filters = [], []
    for entity, relation, target in queries:
        removed = answers.get((entity, relation), set()) - {target}
        filters.append(removed)
        row = table[relation, entity].tolist()
        greater = sum(row[c] > row[target] for c in range(len(row)) if c not in removed)
        at_least = sum(row[c] >= row[target] for c in range(len(row)) if c not in removed)
        optimistic, pessimistic = 1 + greater, at_least
        ranks.append(
            {"optimistic": optimistic, "pessimistic": pessimistic, "realistic": (optimistic + pessimistic) / 2}[
                rank_type
            ]
        )
    return queries, filters, torch.tensor(ranks, dtype=torch.float32)


@pytest.mark.parametrize("seed", [0, 1])
def test_query_order_and_filter_against_brute_force(seed):
    data = random_kg(num_entities=15, num_relations=3, num_triples=90, seed=seed)
    splits = split_triples(data)
    num_entities, num_relations = data.num_nodes, data.num_relations
    table = random_table(num_entities, num_relations, seed)
    evaluator = LinkPredictionEvaluator(splits["test"], splits["all"], num_entities, num_relations)
    num_test = splits["test"].size(0)
    assert num_test > 0 and len(evaluator) == 2 * num_test

    for rank_type in RANK_TYPES:
        queries, filters, expected = brute_force(splits["test"], splits["all"], num_relations, table, rank_type)
        actual = evaluator.compute_ranks(lambda e, r: table[r, e], batch_size=5, rank_type=rank_type)
        assert torch.equal(actual, expected), rank_type

    assert evaluator.query_entity.tolist() == [q[0] for q in queries]
    assert evaluator.query_relation.tolist() == [q[1] for q in queries]
    assert evaluator.query_target.tolist() == [q[2] for q in queries]
    assert evaluator.query_side.tolist() == [0] * num_test + [1] * num_test
    assert evaluator.query_kg_relation.tolist() == [q[1] % num_relations for q in queries]

    # The CSR filter (target excluded) equals the brute-force sets.
    index = evaluator.filter_index()
    pairs = set(map(tuple, index.t().tolist()))
    assert len(pairs) == index.size(1)
    assert pairs == {(q, e) for q, removed in enumerate(filters) for e in removed}
    # Sub-range rows are counted from start.
    sub = evaluator.filter_index(3, 9)
    assert set(map(tuple, sub.t().tolist())) == {(q - 3, e) for q in range(3, 9) for e in filters[q]}


def test_filter_uses_valid_and_test_triples_and_never_the_target():
    # Query (0, 0, ?) of test triple (0, 0, 1); entity 2 answers it in train,
    # entity 3 in valid, entity 4 in test; entity 5 is not an answer.
    train = torch.tensor([[0, 0, 2], [1, 0, 0]])
    valid = torch.tensor([[0, 0, 3]])
    test = torch.tensor([[0, 0, 1], [0, 0, 4]])
    known = torch.cat([train, valid, test])
    evaluator = LinkPredictionEvaluator(test, known, num_entities=6, num_relations=1)
    table = torch.zeros(2, 6, 6)
    table[0, 0] = torch.tensor([0.0, 5.0, 9.0, 9.0, 9.0, 1.0])
    ranks = evaluator.compute_ranks(lambda e, r: table[r, e])
    # tail of (0, 0, 1): 2, 3 and 4 filtered, 1 beats 0 and 5 -> rank 1.
    # tail of (0, 0, 4): 1, 2, 3 filtered; target 4 kept (score 9) -> rank 1.
    # head queries (1, 0^-1, ?) and (4, 0^-1, ?): known heads {0}; all scores 0
    # -> (6 + 1) / 2.
    assert ranks.tolist() == [1.0, 1.0, 3.5, 3.5]
    # Known = train only: the evaluated (test) triples are still added, so
    # entity 4 stays filtered but the valid answer 3 (9.0 > 5.0) is ranked.
    train_only = LinkPredictionEvaluator(test, train, num_entities=6, num_relations=1)
    assert train_only.compute_ranks(lambda e, r: table[r, e])[0].item() == 2.0
    # Unfiltered.
    raw = LinkPredictionEvaluator(test, None, num_entities=6, num_relations=1)
    assert raw.compute_ranks(lambda e, r: table[r, e]).tolist() == [4.0, 2.0, 3.5, 3.5]
    assert not raw.evaluate(lambda e, r: table[r, e]).filtered


def test_constant_model_is_not_perfect():
    data = random_kg(num_entities=20, num_relations=4, num_triples=120, seed=3)
    splits = split_triples(data)
    evaluator = LinkPredictionEvaluator(splits["test"], splits["all"], data.num_nodes, data.num_relations)
    ranks = evaluator.compute_ranks(lambda e, r: torch.zeros(e.numel(), data.num_nodes))
    num_filtered = torch.bincount(evaluator.filter_index()[0], minlength=len(evaluator))
    assert torch.equal(ranks, (data.num_nodes - num_filtered + 1).float() / 2)
    assert evaluator.summarize(ranks)["both.hits@1"] == 0.0


def test_chunking_and_shards_agree():
    data = random_kg(num_entities=25, num_relations=4, num_triples=150, seed=4)
    splits = split_triples(data)
    evaluator = LinkPredictionEvaluator(splits["test"], splits["all"], data.num_nodes, data.num_relations)
    table = random_table(data.num_nodes, data.num_relations, seed=5)
    score_fn = lambda e, r: table[r, e]  # noqa: E731
    whole = evaluator.compute_ranks(score_fn, batch_size=10_000)
    for batch_size in (1, 7):
        assert torch.equal(evaluator.compute_ranks(score_fn, batch_size=batch_size), whole)
    num_queries = len(evaluator)
    for split in (0, 1, num_queries // 3, num_queries - 1, num_queries):
        first = evaluator.compute_ranks(score_fn, batch_size=4, start=0, stop=split)
        second = evaluator.compute_ranks(score_fn, batch_size=4, start=split)
        assert torch.equal(torch.cat([first, second]), whole)
    results = evaluator.evaluate(score_fn, batch_size=3, progress=True)
    assert isinstance(results, LinkPredictionResults)
    assert torch.equal(results.ranks, whole.double())
    assert results.to_flat_dict() == evaluator.summarize(whole).to_flat_dict()


def test_checks():
    triples = torch.tensor([[0, 0, 1]])
    with pytest.raises(ValueError, match=r"entity ids must lie in \[0, 1\)"):
        LinkPredictionEvaluator(triples, triples, num_entities=1, num_relations=1)
    with pytest.raises(ValueError, match=r"relation ids must lie in \[0, 0\)"):
        LinkPredictionEvaluator(triples, triples, num_entities=2, num_relations=0)
    with pytest.raises(ValueError, match=r"triples must have shape \[T, 3\]"):
        LinkPredictionEvaluator(triples[:, :2], triples, num_entities=2, num_relations=1)
    evaluator = LinkPredictionEvaluator(triples, triples, num_entities=2, num_relations=1)
    with pytest.raises(ValueError, match="shape"):
        evaluator.compute_ranks(lambda e, r: torch.zeros(e.numel(), 3))
    with pytest.raises(ValueError, match="start=2, stop=1"):
        evaluator.compute_ranks(lambda e, r: torch.zeros(e.numel(), 2), start=2, stop=1)
    with pytest.raises(ValueError, match="expected 2 ranks"):
        evaluator.summarize(torch.ones(3))
    assert "num_triples=1" in repr(evaluator)
    # An empty split ranks no queries (a process's empty share), and its metrics are refused, not NaN.
    empty = LinkPredictionEvaluator(torch.zeros(0, 3, dtype=torch.long), triples, 2, 1)
    assert empty.compute_ranks(lambda e, r: torch.zeros(e.numel(), 2)).numel() == 0
    with pytest.raises(ValueError, match=r"^no triples to evaluate \(an empty split\): every metric would be NaN"):
        empty.evaluate(lambda e, r: torch.zeros(e.numel(), 2))
    with pytest.raises(ValueError, match="no triples to evaluate"):
        empty.summarize(torch.zeros(0))


def test_from_data():
    data = random_kg(num_entities=12, num_relations=2, num_triples=50, seed=6)
    splits = split_triples(data)
    table = random_table(data.num_nodes, data.num_relations, seed=7)
    score_fn = lambda e, r: table[r, e]  # noqa: E731
    for split, key in (("val", "valid"), ("valid", "valid"), ("test", "test")):
        evaluator = LinkPredictionEvaluator.from_data(data, split)
        direct = LinkPredictionEvaluator(splits[key], splits["all"], data.num_nodes, data.num_relations)
        assert torch.equal(evaluator.compute_ranks(score_fn), direct.compute_ranks(score_fn))
    assert not LinkPredictionEvaluator.from_data(data, "test", filtered=False).filtered
    with pytest.raises(ValueError, match="split must be .*got 'dev'"):
        LinkPredictionEvaluator.from_data(data, "dev")


@pytest.mark.parametrize("nan_rows", ["all", "one"])
def test_nan_scores_are_refused_not_ranked_as_ties(nan_rows):
    # all-NaN scores once ranked like constant ones (MRR 0.58 here instead of an error)
    data = random_kg(20, 2, 120, seed=3)
    triples = split_triples(data)
    evaluator = LinkPredictionEvaluator(triples["test"], triples["all"], 20, 2)

    def score_fn(entities, relations):
        scores = torch.rand(entities.numel(), 20)
        scores[0 if nan_rows == "one" else slice(None), 7] = float("nan")
        return scores

    with pytest.raises(ValueError, match="NaN scores for queries 0..4"):
        evaluator.compute_ranks(score_fn, batch_size=5)
    # infinite scores are ordered, and ranked as such
    ranks = evaluator.compute_ranks(lambda e, r: torch.full((e.numel(), 20), float("inf")), batch_size=5)
    assert torch.all(ranks > 1)
