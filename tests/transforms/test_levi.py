from hand_kg import assert_simple_undirected, hand_kg, pairs

from torch_wge.testing import random_kg
from torch_wge.transforms import LeviGraphTransform


def test_repr():
    assert str(LeviGraphTransform()) == "LeviGraphTransform()"


def test_hand_kg():
    # (h, r, t) gives h - node(r) - t, and its inverse t - node(r^-1) - h.
    # Nodes: r0 = 6, r1 = 7, r2 = 8, r0^-1 = 9, r1^-1 = 10, r2^-1 = 11.
    #   T1 (0, r0, 1): {0,6} {1,6} {1,9} {0,9}
    #   T2 (3, r0, 1): {3,6} {1,6} {1,9} {3,9}
    #   T3 (1, r1, 2): {1,7} {2,7} {2,10} {1,10}
    #   T4 (2, r2, 4): {2,8} {4,8} {4,11} {2,11}
    #   T5 (1, r1, 4): {1,7} {4,7} {4,10} {1,10}
    #   T6 (4, r2, 4): {4,8} {4,11}
    #   T7 (0, r2, 1): {0,8} {1,8} {1,11} {0,11}
    data = LeviGraphTransform()(hand_kg())
    assert data.levi_num_nodes == 12
    assert pairs(data.levi_edge_index) == sorted(
        [
            (0, 6),
            (1, 6),
            (1, 9),
            (0, 9),
            (3, 6),
            (3, 9),
            (1, 7),
            (2, 7),
            (2, 10),
            (1, 10),
            (2, 8),
            (4, 8),
            (4, 11),
            (2, 11),
            (4, 7),
            (4, 10),
            (0, 8),
            (1, 8),
            (1, 11),
            (0, 11),
        ]
    )
    assert_simple_undirected(data.levi_edge_index, 12)


def test_brute_force_random():
    for seed in range(5):
        data = random_kg(num_entities=12, num_relations=4, num_triples=50, seed=seed)
        N, R = data.num_nodes, data.num_relations
        h, t = data.edge_index[:, data.train_mask].tolist()
        r = data.edge_type[data.train_mask].tolist()
        expected = set()
        for a, rel, b in zip(h, r, t):
            for u, v in [(a, N + rel), (N + rel, b), (b, N + R + rel), (N + R + rel, a)]:
                expected.add((min(u, v), max(u, v)))
        out = LeviGraphTransform()(data)
        assert pairs(out.levi_edge_index) == sorted(expected)
        assert out.levi_num_nodes == N + 2 * R
        assert_simple_undirected(out.levi_edge_index, N + 2 * R)
