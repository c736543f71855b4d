import torch

from torch_wge.testing import random_kg
from torch_wge.training import TrainingQueries, add_inverse_triples, split_triples


def test_queries_match_brute_force():
    data = random_kg(25, 3, 150, seed=2)
    train = split_triples(data, "train")
    queries = TrainingQueries(train, 25, 3)
    expected = {}
    for h, r, t in train.tolist():
        expected.setdefault((h, r), set()).add(t)
        expected.setdefault((t, r + 3), set()).add(h)
    assert len(queries) == len(expected)
    index = torch.randperm(len(queries))[:17]
    heads, relations, positives = queries.batch(index)
    for row, (h, r) in enumerate(zip(heads.tolist(), relations.tolist())):
        got = set(positives[1, positives[0] == row].tolist())
        assert got == expected[(h, r)]


def test_batches_cover_every_query_once_in_a_seeded_order():
    queries = TrainingQueries(split_triples(random_kg(30, 4, 200, seed=3), "train"), 30, 4)
    seen = torch.cat([torch.stack([h, r], 1) for h, r, _ in queries.batches(7, torch.Generator().manual_seed(0))])
    assert seen.size(0) == len(queries) and torch.unique(seen, dim=0).size(0) == len(queries)
    again = torch.cat([h for h, _, _ in queries.batches(7, torch.Generator().manual_seed(0))])
    assert torch.equal(again, seen[:, 0])
    assert queries.num_batches(7) == -(-len(queries) // 7)


def test_add_inverse_triples():
    triples = torch.tensor([[0, 1, 2]])
    assert add_inverse_triples(triples, 5).tolist() == [[0, 1, 2], [2, 6, 0]]


def test_subset_holds_the_chosen_queries_with_their_answers():
    triples = torch.tensor([[0, 0, 1], [0, 0, 2], [1, 1, 2], [2, 0, 0], [2, 1, 1]])
    queries = TrainingQueries(triples, num_entities=3, num_relations=2)
    index = torch.tensor([1, 3, 4])
    subset = queries.subset(index)
    assert len(subset) == 3
    heads, relations, positives = subset.batch(torch.arange(3))
    expected_heads, expected_relations, expected = queries.batch(index)
    assert torch.equal(heads, expected_heads) and torch.equal(relations, expected_relations)
    assert torch.equal(positives, expected)
