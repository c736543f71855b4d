import math
from collections import Counter

import pytest
import torch
from hand_kg import assert_simple_undirected, hand_kg, pairs

from torch_wge.testing import random_kg
from torch_wge.transforms import (
    EntityFocusedTransform,
    LeviGraphTransform,
    RelationFocusedTransform,
    relation_focused,
    relation_focused_constraints,
)
from torch_wge.transforms.relation_focused import num_top_pairs

# Hand derivation on the KG of hand_kg.py (N = 6, R = 3; relation r is node
# 6 + r, inverse r^-1 = r + 3).
#
# Incoming relations of each entity (e is a tail of r), inverses added:
#   e0: {r3, r5}   (T1 gives (0, r3) via r0^-1, T7 gives (0, r5))
#   e1: {r0, r4, r2}
#   e2: {r1, r5}
#   e3: {r3}
#   e4: {r2, r1, r5}   (T4, T6 give r2; T5 gives r1; T6 gives r5)
# Outgoing relations (e is a head of r) are the incoming ones flipped:
#   e0: {r0, r2}, e1: {r3, r1, r5}, e2: {r4, r2}, e3: {r0}, e4: {r5, r4, r2}
# Constraints (r_s, e, r_o) = every incoming x outgoing pair at e, minus those
# with r_s = r_o up to inversion (r_s mod 3 == r_o mod 3):
#   e0: (r3,0,r2) (r5,0,r0)                    [(r3,0,r0), (r5,0,r2) dropped]
#   e1: (r0,1,r1) (r0,1,r5) (r4,1,r3) (r4,1,r5) (r2,1,r3) (r2,1,r1)
#   e2: (r1,2,r2) (r5,2,r4)
#   e3: none                                    [(r3,3,r0) dropped]
#   e4: (r2,4,r4) (r1,4,r5) (r1,4,r2) (r5,4,r4)
# 14 distinct constraints over 12 pairs; (r1, r2) and (r5, r4) occur at e2
# and e4 (count 2), the other ten pairs once.
CONSTRAINTS = [  # sorted by (e_p, r_s, r_o)
    (3, 0, 2),
    (5, 0, 0),
    (0, 1, 1),
    (0, 1, 5),
    (2, 1, 1),
    (2, 1, 3),
    (4, 1, 3),
    (4, 1, 5),
    (1, 2, 2),
    (5, 2, 4),
    (1, 4, 2),
    (1, 4, 5),
    (2, 4, 4),
    (5, 4, 4),
]
RANKED_PAIRS = [  # count 2, then count 1; ties by (r_s, r_o)
    (1, 2),
    (5, 4),
    (0, 1),
    (0, 5),
    (1, 5),
    (2, 1),
    (2, 3),
    (2, 4),
    (3, 2),
    (4, 3),
    (4, 5),
    (5, 0),
]
RANKED_COUNTS = [2, 2] + [1] * 10

# Selection: P = 12, k = ceil(beta * 12), cut-off = count of the k-th pair.
#   beta = 0    -> k = 0: nothing kept
#   beta = 0.05 -> k = 1, cut-off 2: both count-2 pairs (tie kept)
#   beta = 0.1  -> k = 2, cut-off 2: the same 2 pairs
#   beta = 1/6  -> k = 2 (1/6 * 12 is exactly 2, not 3)
#   beta = 0.2  -> k = 3, cut-off 1: every pair (ties at the cut-off kept)
#   beta = 1    -> k = 12: every pair
#
# Top-2 view (beta = 0.1), kept constraints (r1,2,r2) (r1,4,r2) (r5,2,r4)
# (r5,4,r4): r-e edges {r_s, e} and {e, r_o}:
#   {7,2} {2,8} {7,4} {4,8} {11,2} {2,10} {11,4} {4,10}
# r-r edges {r1, r2} = {7, 8} and {r5, r4} = {10, 11}.
TOP2_RE = [(2, 7), (2, 8), (2, 10), (2, 11), (4, 7), (4, 8), (4, 10), (4, 11)]
TOP2_RR = [(7, 8), (10, 11)]
# Full view (beta = 1): r-e edges of all 14 constraints
#   e0: (r3,0,r2) -> {9,0} {0,8};  (r5,0,r0) -> {11,0} {0,6}
#   e1: r_s in {r0, r4, r2}, r_o in {r1, r5, r3}: all six of
#       {1,6} {1,10} {1,8} and {1,7} {1,11} {1,9} are used
#   e2: {7,2} {2,8} {11,2} {2,10};  e4: {8,4} {4,10} {7,4} {4,11}
# i.e. the Levi graph minus the edges of e3, which has no constraint.
ALL_RE = [
    (0, 6),
    (0, 8),
    (0, 9),
    (0, 11),
    (1, 6),
    (1, 7),
    (1, 8),
    (1, 9),
    (1, 10),
    (1, 11),
    (2, 7),
    (2, 8),
    (2, 10),
    (2, 11),
    (4, 7),
    (4, 8),
    (4, 10),
    (4, 11),
]
# r-r edges of the 12 pairs, unordered: (r3,r2)~(r2,r3) -> {8,9};
# (r5,r0)~(r0,r5) -> {6,11}; (r0,r1) -> {6,7}; (r4,r3) -> {9,10};
# (r4,r5)~(r5,r4) -> {10,11}; (r2,r1)~(r1,r2) -> {7,8}; (r2,r4) -> {8,10};
# (r1,r5) -> {7,11}.
ALL_RR = [(6, 7), (6, 11), (7, 8), (7, 11), (8, 9), (8, 10), (9, 10), (10, 11)]


def rf(beta, predicate_entities=True, relation_edges=True):
    """The edges of the hand graph's view; both edge kinds unless switched off."""
    data = RelationFocusedTransform(beta, predicate_entities, relation_edges)(hand_kg())
    assert data.rf_num_nodes == 12
    assert_simple_undirected(data.rf_edge_index, 12)
    return pairs(data.rf_edge_index)


def test_repr():
    assert str(RelationFocusedTransform()) == (
        "RelationFocusedTransform(beta=0.2, predicate_entities=True, relation_edges=False)"
    )
    assert str(RelationFocusedTransform(0.5, predicate_entities=False, relation_edges=True)) == (
        "RelationFocusedTransform(beta=0.5, predicate_entities=False, relation_edges=True)"
    )
    assert str(RelationFocusedTransform(1, relation_edges=True)) == (
        "RelationFocusedTransform(beta=1.0, predicate_entities=True, relation_edges=True)"
    )
    assert str(RelationFocusedTransform(0.2)) != str(RelationFocusedTransform(0.3))


@pytest.mark.parametrize("beta", [-0.1, 1.5, float("nan")])
def test_bad_beta(beta):
    with pytest.raises(ValueError, match="beta"):
        RelationFocusedTransform(beta=beta)
    with pytest.raises(ValueError, match="beta"):
        relation_focused_constraints(hand_kg(), beta=beta)


def test_no_edges_at_all_is_rejected():
    with pytest.raises(ValueError, match="RelationFocusedTransform"):
        RelationFocusedTransform(predicate_entities=False, relation_edges=False)


def test_hand_constraints():
    out = relation_focused_constraints(hand_kg(), beta=0.1)
    assert [tuple(c) for c in out.constraints.tolist()] == CONSTRAINTS
    assert [tuple(p) for p in out.pairs.tolist()] == RANKED_PAIRS
    assert out.pair_count.tolist() == RANKED_COUNTS
    assert out.num_constraints == 14 and out.num_pairs == 12
    assert out.cutoff == 2 and out.num_kept_pairs == 2
    assert out.num_kept_constraints == 4
    kept = {tuple(c) for c, k in zip(out.constraints.tolist(), out.constraint_kept.tolist()) if k}
    assert kept == {(1, 2, 2), (1, 4, 2), (5, 2, 4), (5, 4, 4)}


@pytest.mark.parametrize(
    "beta,k,cutoff,kept_pairs,kept_constraints",
    [
        (0.0, 0, None, 0, 0),
        (0.05, 1, 2, 2, 4),
        (0.1, 2, 2, 2, 4),
        (1 / 6, 2, 2, 2, 4),
        (0.2, 3, 1, 12, 14),
        (1.0, 12, 1, 12, 14),
    ],
)
def test_hand_selection(beta, k, cutoff, kept_pairs, kept_constraints):
    assert num_top_pairs(beta, 12) == k
    out = relation_focused_constraints(hand_kg(), beta=beta)
    assert out.cutoff == cutoff
    assert out.num_kept_pairs == kept_pairs
    assert out.num_kept_constraints == kept_constraints
    assert int(out.constraint_kept.sum()) == kept_constraints


def test_hand_views():
    assert rf(0.0) == []
    assert rf(0.0, predicate_entities=False) == []
    assert rf(0.1) == sorted(TOP2_RE + TOP2_RR)
    assert rf(0.05) == sorted(TOP2_RE + TOP2_RR)
    assert rf(0.1, relation_edges=False) == TOP2_RE
    assert rf(0.1, predicate_entities=False) == TOP2_RR
    assert rf(0.2) == sorted(ALL_RE + ALL_RR)
    assert rf(1.0) == sorted(ALL_RE + ALL_RR)
    assert rf(1.0, relation_edges=False) == ALL_RE
    assert rf(1.0, predicate_entities=False) == ALL_RR


def test_full_view_relation_entity_edges_are_levi_minus_unconstrained():
    # With beta = 1 every incidence that takes part in some constraint gives
    # an r-e edge; on the hand KG only entity 3's incidences take part in
    # none, so the r-e edges are the Levi edges without those of entity 3.
    levi = pairs(LeviGraphTransform()(hand_kg()).levi_edge_index)
    assert rf(1.0, relation_edges=False) == [e for e in levi if 3 not in e]


def test_num_top_pairs_rule():
    assert num_top_pairs(0.2, 1638) == 328  # 327.6 rounded up
    assert num_top_pairs(0.2, 2970) == 594  # exact product, not 595
    assert num_top_pairs(0.0, 10) == 0
    assert num_top_pairs(1.0, 10) == 10
    assert num_top_pairs(0.01, 10) == 1
    assert num_top_pairs(0.5, 0) == 0


# Brute force --------------------------------------------------------------


def brute_force(data, beta, predicate_entities=True, relation_edges=True):
    """Python sets and loops, straight from the definition."""
    N, R = data.num_nodes, data.num_relations
    h, t = data.edge_index[:, data.train_mask].tolist()
    r = data.edge_type[data.train_mask].tolist()
    triples = set(zip(h, r, t)) | {(b, rel + R, a) for a, rel, b in zip(h, r, t)}
    constraints = set()
    for a, rs, e in triples:
        for e2, ro, b in triples:
            if e2 == e and rs % R != ro % R:
                constraints.add((rs, e, ro))
    count = Counter((rs, ro) for rs, _, ro in constraints)
    ranked = sorted(count.values(), reverse=True)
    k = math.ceil(round(beta * len(ranked), 9))
    kept_pairs = set()
    if k > 0:
        kept_pairs = {p for p, c in count.items() if c >= ranked[k - 1]}
    edges = set()
    for rs, e, ro in constraints:
        if (rs, ro) not in kept_pairs:
            continue
        new = []
        if predicate_entities:
            new += [(N + rs, e), (e, N + ro)]
        if relation_edges:
            new += [(N + rs, N + ro)]
        edges |= {(min(u, v), max(u, v)) for u, v in new}
    return constraints, count, kept_pairs, sorted(edges)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("dense", [True, False])
def test_brute_force_random(seed, dense, monkeypatch):
    # Both ways of counting pairs: a dense (2R)^2 table and sparse merging
    # over chunks (forced here with tiny chunks).
    if not dense:
        monkeypatch.setattr(relation_focused, "DENSE_PAIR_TABLE", 0)
        monkeypatch.setattr(relation_focused, "MAX_CHUNK_PRODUCTS", 60)
    data = random_kg(num_entities=10 + seed, num_relations=2 + seed % 3, num_triples=40 + 10 * seed, seed=seed)
    for beta in [0.0, 0.1, 0.25, 0.5, 0.8, 1.0]:
        constraints, count, kept_pairs, edges = brute_force(data, beta)
        out = relation_focused_constraints(data, beta=beta)
        assert {tuple(c) for c in out.constraints.tolist()} == constraints
        assert out.num_constraints == len(constraints)
        assert dict(zip(map(tuple, out.pairs.tolist()), out.pair_count.tolist())) == dict(count)
        assert {tuple(p) for p, k in zip(out.pairs.tolist(), out.pair_kept.tolist()) if k} == kept_pairs
        kept = {tuple(c) for c, k in zip(out.constraints.tolist(), out.constraint_kept.tolist()) if k}
        assert kept == {c for c in constraints if (c[0], c[2]) in kept_pairs}
        assert out.num_kept_constraints == len(kept)
        assert rf_pairs(data, beta) == edges
        for pe, re in [(True, False), (False, True)]:
            assert rf_pairs(data, beta, pe, re) == brute_force(data, beta, pe, re)[3]


def rf_pairs(data, beta, predicate_entities=True, relation_edges=True):
    out = RelationFocusedTransform(beta, predicate_entities, relation_edges)(data.clone())
    assert_simple_undirected(out.rf_edge_index, out.rf_num_nodes)
    return pairs(out.rf_edge_index)


def test_chunked_equals_unchunked():
    data = random_kg(num_entities=30, num_relations=5, num_triples=300, seed=7)
    full = relation_focused_constraints(data, beta=0.3)
    assert full.num_kept_constraints > 0
    for chunk in [1, 50]:
        part = relation_focused_constraints(data, beta=0.3, max_chunk_products=chunk)
        assert torch.equal(part.constraints, full.constraints)
        assert torch.equal(part.constraint_kept, full.constraint_kept)
        assert torch.equal(part.pairs, full.pairs)
        assert torch.equal(part.pair_count, full.pair_count)
        assert part.cutoff == full.cutoff


def test_counts_only():
    out = relation_focused_constraints(hand_kg(), beta=0.1, return_constraints=False)
    assert out.constraints is None and out.constraint_kept is None
    assert (out.num_constraints, out.num_kept_constraints) == (14, 4)


def test_hub_entity_is_cheap():
    # 2000 triples into one hub through one relation and 2000 out of it
    # through another: 4e6 (in-triple, out-triple) combinations, but only
    # one distinct constraint (r0, hub, r1) and its mirror (r1^-1, hub, r0^-1).
    n = 2000
    hub = 0
    head = torch.cat([torch.arange(1, n + 1), torch.full((n,), hub)])
    tail = torch.cat([torch.full((n,), hub), torch.arange(n + 1, 2 * n + 1)])
    rel = torch.cat([torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.long)])
    from torch_geometric.data import Data

    data = Data(
        edge_index=torch.stack([head, tail]),
        edge_type=rel,
        train_mask=torch.ones(2 * n, dtype=torch.bool),
        num_nodes=2 * n + 1,
        num_relations=2,
    )
    out = relation_focused_constraints(data, beta=1.0)
    assert out.constraints.tolist() == [[0, 0, 1], [3, 0, 2]]


# No leakage ---------------------------------------------------------------


def test_evaluation_triples_do_not_change_any_view():
    for seed in range(3):
        data = random_kg(num_entities=15, num_relations=3, num_triples=80, seed=seed)
        # Add evaluation triples that would create new edges and constraints,
        # including a self loop and a brand-new entity pair.
        extra = torch.tensor([[0, 1, 14], [14, 2, 3], [5, 0, 5], [2, 1, 0]])
        more = data.clone()
        more.edge_index = torch.cat([data.edge_index, extra[:, [0, 2]].t()], 1)
        more.edge_type = torch.cat([data.edge_type, extra[:, 1]])
        new_val = torch.tensor([True, False, True, False])
        more.train_mask = torch.cat([data.train_mask, torch.zeros(4, dtype=torch.bool)])
        more.val_mask = torch.cat([data.val_mask, new_val])
        more.test_mask = torch.cat([data.test_mask, ~new_val])
        for transform, key in [
            (EntityFocusedTransform(), "ef_edge_index"),
            (RelationFocusedTransform(0.2), "rf_edge_index"),
            (RelationFocusedTransform(1.0, predicate_entities=False, relation_edges=True), "rf_edge_index"),
            (LeviGraphTransform(), "levi_edge_index"),
        ]:
            a = transform(data.clone())[key]
            b = transform(more.clone())[key]
            assert torch.equal(a, b), (transform, seed)


def test_empty_training_set():
    data = hand_kg()
    data.train_mask[:] = False
    out = RelationFocusedTransform(beta=1.0)(data)
    assert out.rf_edge_index.shape == (2, 0) and out.rf_num_nodes == 12
    stats = relation_focused_constraints(data, beta=1.0)
    assert (stats.num_constraints, stats.num_pairs, stats.cutoff) == (0, 0, None)
    assert stats.constraints.shape == (0, 3)
