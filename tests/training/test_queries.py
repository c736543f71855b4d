import torch

from torch_wge.testing import random_kg
from torch_wge.training import TrainingQueries, split_triples


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
    assert queries.num_batches(7) == len(queries.batch_indices(7)) == len(queries) // 7  # 183 = 26 * 7 + 1


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


def test_no_batch_holds_a_single_query_at_any_batch_size():
    """A last batch of one query joins the one before it; batch norm needs two queries."""
    queries = TrainingQueries(split_triples(random_kg(30, 4, 200, seed=3), "train"), 30, 4)
    n = len(queries)
    for batch_size in range(2, n + 2):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(batch_size))
        batches = queries.batch_indices(batch_size, torch.Generator().manual_seed(batch_size))
        assert torch.equal(torch.cat(batches), order)  # every query once, in the drawn order
        sizes = [b.numel() for b in batches]
        # brute force: consecutive slices of batch_size, a lone last query added to the one before
        expected = [min(batch_size, n - start) for start in range(0, n, batch_size)]
        if len(expected) > 1 and expected[-1] == 1:
            expected = expected[:-2] + [batch_size + 1]
        assert sizes == expected and min(sizes) >= 2, batch_size
        assert queries.num_batches(batch_size) == len(batches)
