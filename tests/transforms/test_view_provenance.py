"""The graph views follow the graph they are read from, or are refused.

Each PyG operation that changes a TwoViewData's nodes or triples either leaves views equal to
the view transforms applied to its result, or every reader of the views (WGE.graph_inputs,
WGEKGE, the Trainer, TwoViewData.validate) refuses them with one line naming the view."""

import copy
import pickle
import re

import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from torch_wge.nn import WGE
from torch_wge.testing import random_kg
from torch_wge.transforms import (
    LEVI,
    RELATION_FOCUSED,
    EntityFocusedTransform,
    LeviGraphTransform,
    RelationFocusedTransform,
    TwoViewData,
    check_views,
    view_fingerprint,
)
from torch_wge.transforms.views import GRAPH_VIEWS, STORAGE_VERSION, fingerprint_triples

VIEWS = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5), LeviGraphTransform()])
#: What every refusal of a view the graph no longer matches says to do.
AFTER = "apply the view transforms (torch_wge.transforms) after"
#: The view each setting of WGE reads first, which its refusal names.
FIRST_VIEW = {
    "two-view": "ef_edge_index",
    "entity": "ef_edge_index",
    "relation": "rf_edge_index",
    "levi": "levi_edge_index",
}
MODELS = {views: WGE(40, 3, hidden_channels=2, num_layers=1, views=views) for views in FIRST_VIEW}
KG_KEYS = ("edge_index", "edge_type", "train_mask", "val_mask", "test_mask", "num_nodes", "num_relations")


def sparse_kg():
    """40 entities and 60 triples: some entities in no triple, several components."""
    kg = VIEWS(random_kg(40, 3, 60, seed=0))
    assert torch.unique(kg.edge_index).numel() < 40
    return kg


def dense_kg():
    """12 entities and 50 triples: every entity in a triple, one component."""
    kg = VIEWS(random_kg(12, 3, 50, seed=0))
    assert torch.unique(kg.edge_index).numel() == 12
    return kg


def rebuilt(data):
    """The view transforms applied to the knowledge graph of ``data``, its views left behind."""
    return VIEWS(Data(**{key: data[key] for key in KG_KEYS if key in data}))


def assert_views_equal_rebuilt(data):
    fresh = rebuilt(data)
    assert torch.equal(data.ef_edge_index, fresh.ef_edge_index)
    for view in (RELATION_FOCUSED, LEVI):
        assert getattr(data, view.num_nodes) == getattr(fresh, view.num_nodes)
        assert torch.equal(getattr(data, view.edge_index), getattr(fresh, view.edge_index)), view.edge_index
    for view in GRAPH_VIEWS:
        assert int(getattr(data, view.fingerprint)) == getattr(fresh, view.fingerprint)
    assert data.validate()
    for model in MODELS.values():
        got, expected = model.graph_inputs(data, sparse=False), model.graph_inputs(fresh, sparse=False)
        assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got)


def assert_refused(data, fragment=AFTER):
    for views, model in MODELS.items():
        with pytest.raises(ValueError) as info:
            model.graph_inputs(data)
        message = str(info.value)
        assert message.startswith(FIRST_VIEW[views]) and fragment in message and "\n" not in message, message
    if isinstance(data, TwoViewData):
        with pytest.raises(ValueError, match="^ef_edge_index .*apply the view transforms"):
            data.validate()
        with pytest.warns(UserWarning, match="apply the view transforms"):
            assert data.validate(raise_on_error=False) is False


def edited(data, key, index, value):
    data = data.clone()
    data[key][index] = value
    return data


def _training_edge(data):
    return int(torch.nonzero(data.train_mask)[0])


def _test_edge(data):
    return int(torch.nonzero(data.test_mask)[0])


def _moved_to_training(data):
    data = data.clone()
    data.train_mask[_test_edge(data)] = True  # a test triple leaks into the training triples
    data.test_mask[_test_edge(data)] = False
    return data


def _another_entity(data, edge):
    return (int(data.edge_index[0, edge]) + 1) % int(data.num_nodes)


#: (operation, the graph before, the operation): its result's views are refused.
REFUSED = [
    (
        "subgraph, all nodes permuted",
        sparse_kg,
        lambda d: d.subgraph(torch.randperm(40, generator=torch.Generator().manual_seed(0))),
    ),
    ("subgraph, all but the last two nodes", sparse_kg, lambda d: d.subgraph(torch.arange(38))),
    ("subgraph, a node mask", dense_kg, lambda d: d.subgraph(torch.arange(12) != 5)),
    ("edge_subgraph, training triples dropped", sparse_kg, lambda d: d.edge_subgraph(torch.arange(60) % 3 != 0)),
    ("RemoveIsolatedNodes", sparse_kg, T.RemoveIsolatedNodes()),
    ("RandomLinkSplit, train", sparse_kg, lambda d: T.RandomLinkSplit()(d)[0]),
    ("RandomLinkSplit, val", sparse_kg, lambda d: T.RandomLinkSplit()(d)[1]),
    ("RandomLinkSplit, test", sparse_kg, lambda d: T.RandomLinkSplit()(d)[2]),
    ("RandomNodeSplit of the nodes", sparse_kg, T.RandomNodeSplit(key=None)),
    ("ToUndirected", dense_kg, T.ToUndirected()),
    ("to_heterogeneous", dense_kg, lambda d: d.to_heterogeneous()),
    (
        "edge_index in place",
        dense_kg,
        lambda d: edited(d, "edge_index", (0, _training_edge(d)), _another_entity(d, _training_edge(d))),
    ),
    (
        "edge_type in place",
        dense_kg,
        lambda d: edited(d, "edge_type", _training_edge(d), (int(d.edge_type[_training_edge(d)]) + 1) % 3),
    ),
    ("every triple reversed in place", dense_kg, lambda d: edited(d, "edge_index", slice(None), d.edge_index.flip(0))),
    ("a test triple moved to training", dense_kg, _moved_to_training),
    ("one more entity", dense_kg, lambda d: d.update(dict(num_nodes=13))),
    ("one more relation", dense_kg, lambda d: d.update(dict(num_relations=4))),
]

#: (operation, the graph before, the operation): its result's views are those rebuilt on it.
FOLLOWED = [
    ("subgraph of every node in order", sparse_kg, lambda d: d.subgraph(torch.arange(40))),
    ("edge_subgraph, every triple in another order", sparse_kg, lambda d: d.edge_subgraph(torch.randperm(60))),
    ("edge_subgraph, test triples dropped", sparse_kg, lambda d: d.edge_subgraph(~d.test_mask)),
    ("RemoveIsolatedNodes without isolated nodes", dense_kg, T.RemoveIsolatedNodes()),
    (
        "RandomLinkSplit without val and test edges",
        dense_kg,
        lambda d: T.RandomLinkSplit(num_val=0.0, num_test=0.0)(d)[0],
    ),
    ("RandomNodeSplit without labels (no change)", sparse_kg, T.RandomNodeSplit()),
    (
        "a test triple's edge_index in place",
        dense_kg,
        lambda d: edited(d, "edge_index", (0, _test_edge(d)), _another_entity(d, _test_edge(d))),
    ),
    ("clone", sparse_kg, lambda d: d.clone()),
    ("deepcopy", sparse_kg, copy.deepcopy),
    ("pickle", sparse_kg, lambda d: pickle.loads(pickle.dumps(d))),
    ("a batch of one graph", sparse_kg, lambda d: Batch.from_data_list([d])),
]


@pytest.mark.parametrize("case", REFUSED, ids=lambda case: case[0])
def test_an_operation_that_changes_the_graph_leaves_views_that_are_refused(case):
    _, graph, operation = case
    assert_refused(operation(graph()))


@pytest.mark.parametrize("case", FOLLOWED, ids=lambda case: case[0])
def test_an_operation_that_keeps_the_graph_leaves_views_equal_to_rebuilt_ones(case):
    _, graph, operation = case
    assert_views_equal_rebuilt(operation(graph()))


def test_the_refused_views_were_wrong_and_the_transforms_after_the_operation_fit():
    data = sparse_kg()
    permuted = data.subgraph(torch.randperm(40, generator=torch.Generator().manual_seed(0)))
    # the views came through unrelabelled: they are not the views of the permuted graph
    assert torch.equal(permuted.ef_edge_index, data.ef_edge_index)
    assert not torch.equal(permuted.ef_edge_index, rebuilt(permuted).ef_edge_index)
    # the relation-focused view of 38 of 40 entities: entity ids 38 and 39 are relation nodes now,
    # within the view's node count, so only the fingerprint tells
    smaller = data.subgraph(torch.arange(38))
    assert (
        int(smaller.rf_entity_relation_index[0].max()) >= 38 and int(smaller.rf_edge_index.max()) < smaller.rf_num_nodes
    )
    for changed in (permuted, smaller, T.RemoveIsolatedNodes()(data), T.RandomLinkSplit()(data)[2]):
        assert_refused(changed)
        assert_views_equal_rebuilt(VIEWS(changed))  # the transforms applied after the operation


def test_random_link_split_after_the_views_would_leak_the_test_edges():
    data = dense_kg()
    train, _, test = T.RandomLinkSplit(num_val=0.0, num_test=0.3)(data)
    positives = test.edge_label_index[:, test.edge_label == 1]
    in_view = set(map(tuple, data.ef_edge_index.t().tolist()))
    assert any(pair in in_view for pair in map(tuple, positives.t().tolist()))  # what would leak
    assert_refused(train)
    assert_refused(test)
    # the views built after the split: of the training edges alone, so no held-out pair among them
    in_view = set(map(tuple, VIEWS(train).ef_edge_index.t().tolist()))
    training_pairs = {frozenset(pair) for pair in map(tuple, train.edge_index.t().tolist())}
    held_out = [pair for pair in map(tuple, positives.t().tolist()) if frozenset(pair) not in training_pairs]
    assert held_out and not any(pair in in_view for pair in held_out)


def test_largest_connected_components():
    pytest.importorskip("scipy")
    assert_views_equal_rebuilt(T.LargestConnectedComponents()(dense_kg()))
    assert_refused(T.LargestConnectedComponents()(sparse_kg()))


def test_the_other_readers_refuse_too(tmp_path):
    from torch_wge.nn.kge import WGEKGE
    from torch_wge.training import TrainConfig, Trainer

    stale = sparse_kg().subgraph(torch.arange(38))
    with pytest.raises(ValueError, match=f"^ef_edge_index .*{re.escape(AFTER)}"):
        WGEKGE(38, 3, hidden_channels=2, data=stale, num_layers=1)
    config = TrainConfig(dataset="random", epochs=1, hidden_channels=2, num_layers=1, device="cpu")
    with pytest.raises(ValueError, match=f"^ef_edge_index .*{re.escape(AFTER)}"):
        Trainer(config, stale, tmp_path / "run", progress=False)
    # the same graph with its views built after the operation is read
    Trainer(config, VIEWS(stale), tmp_path / "rebuilt", progress=False)


def test_an_in_place_edit_is_seen_by_the_next_read():
    data = dense_kg()
    model = MODELS["two-view"]
    model.graph_inputs(data)
    data.edge_index[1, _training_edge(data)] = _another_entity(data, _training_edge(data))
    with pytest.raises(ValueError, match=f"^ef_edge_index .*{re.escape(AFTER)}"):
        model.graph_inputs(data)


def test_the_views_rebuilt_replace_the_fingerprints():
    data = sparse_kg().subgraph(torch.arange(38))
    only_ef = EntityFocusedTransform()(data)  # the other views stay stale, and are named
    assert MODELS["entity"].graph_inputs(only_ef) is not None
    with pytest.raises(ValueError, match=f"^rf_edge_index .*{re.escape(AFTER)}"):
        MODELS["two-view"].graph_inputs(only_ef)
    with pytest.raises(ValueError, match=f"^levi_edge_index .*{re.escape(AFTER)}"):
        MODELS["levi"].graph_inputs(only_ef)


def test_batches_are_checked_graph_by_graph():
    graphs = [VIEWS(random_kg(12, 3, 40, seed=0)), VIEWS(random_kg(9, 2, 30, seed=1)), VIEWS(random_kg(5, 4, 20))]
    batch = Batch.from_data_list(graphs)
    assert batch.ef_fingerprint.tolist() == [g.ef_fingerprint for g in graphs] and batch.validate()
    for g, graph in enumerate(graphs):
        example = batch.get_example(g)
        assert example.validate() and int(example.rf_fingerprint) == view_fingerprint(graph)
    for loaded in DataLoader(graphs, batch_size=2):
        assert loaded.validate()
    # a stale graph in a batch
    stale = Batch.from_data_list([graphs[0], graphs[1].subgraph(torch.arange(8)), graphs[2]])
    with pytest.raises(ValueError, match=f"^ef_edge_index .*{re.escape(AFTER)}"):
        stale.validate()
    # a training triple of the second graph edited in place, within its own entities
    edited_batch = Batch.from_data_list(graphs)
    edge = 40 + _training_edge(graphs[1])
    head = int(edited_batch.edge_index[0, edge])
    edited_batch.edge_index[0, edge] = 12 + (head - 12 + 1) % 9
    with pytest.raises(ValueError, match=f"^ef_edge_index .*{re.escape(AFTER)}"):
        edited_batch.validate()
    # WGE embeds one graph: a batch of one is read, more are refused as before
    one = Batch.from_data_list([graphs[0]])
    model = WGE(12, 3, hidden_channels=2, num_layers=1)
    assert torch.equal(model.graph_inputs(one, sparse=False)["rf_edge_index"], graphs[0].rf_edge_index)
    with pytest.raises(ValueError, match="batch of 3 graphs"):
        model.graph_inputs(batch)


@pytest.mark.parametrize("view", GRAPH_VIEWS, ids=lambda view: view.edge_index)
def test_validate_checks_every_id_against_its_count(view):
    data = VIEWS(random_kg(30, 3, 90, seed=0))
    assert data.validate()
    cases = (
        [(view.edge_index, (0, 0), 99, "ef_edge_index holds node id 99, but the graph has num_nodes=30")]
        if view.entity_relation_index is None
        else [
            # past the entities, but within the view's node count: entity 30 would be relation node 0
            (
                view.entity_relation_index,
                (0, 0),
                30,
                f"{view.entity_relation_index} holds entity id 30, but the graph has num_nodes=30",
            ),
            (view.entity_relation_index, (0, 0), 99, f"{view.edge_index} holds node id 99, but the graph has"),
            # a negative relation node would be entity 29
            (
                view.entity_relation_index,
                (1, 0),
                -1,
                f"{view.entity_relation_index} holds relation node id -1; ids must be >= 0",
            ),
            (
                view.entity_relation_index,
                (1, 0),
                99,
                f"{view.edge_index} holds node id 129, but the graph has num_nodes=36",
            ),
        ]
    )
    for name, index, value, message in cases:
        bad = data.clone()
        bad[name][index] = value
        with pytest.raises(ValueError, match=message):
            bad.validate()
        with pytest.warns(UserWarning, match=message):
            assert bad.validate(raise_on_error=False) is False
        settings = {"ef_edge_index": "entity", "rf_edge_index": "relation", "levi_edge_index": "levi"}
        model = WGE(30, 3, hidden_channels=2, num_layers=1, views=settings[view.edge_index])
        with pytest.raises(ValueError, match=message):
            model.graph_inputs(bad)


def test_relation_relation_ids_are_checked():
    data = VIEWS(random_kg(30, 3, 90, seed=0))
    data = RelationFocusedTransform(beta=1.0, relation_edges=True)(data)
    assert data.rf_relation_relation_index.numel() > 0
    data.rf_relation_relation_index[0, 0] = -3  # would be entity 27
    with pytest.raises(ValueError, match="rf_relation_relation_index holds relation node id -3"):
        data.validate()


def test_a_view_without_a_fingerprint_is_refused():
    data = sparse_kg()
    del data.rf_fingerprint
    assert MODELS["entity"].graph_inputs(data) is not None
    with pytest.raises(ValueError, match="^rf_edge_index holds no rf_fingerprint .* apply the view transforms"):
        MODELS["relation"].graph_inputs(data)
    with pytest.raises(ValueError, match="rf_fingerprint"):
        data.validate()


def test_the_fingerprint_depends_on_the_triples_and_counts_not_their_order():
    triples = random_kg(30, 3, 90, seed=0).edge_index
    triples = torch.stack([triples[0], torch.arange(90) % 3, triples[1]], dim=1)
    base = fingerprint_triples(triples, 30, 3)
    assert 0 <= base < 2**63
    assert fingerprint_triples(triples[torch.randperm(90)], 30, 3) == base
    assert fingerprint_triples(triples.int(), 30, 3) == base
    # two tails exchanged: the sum of each column stays
    i, j = next((0, j) for j in range(1, 90) if (triples[0] != triples[j]).all())
    swapped = triples.clone()
    swapped[[i, j], 2] = swapped[[j, i], 2]
    others = [
        swapped,
        triples[:, [2, 1, 0]],  # every triple reversed
        triples[1:],
        torch.cat([triples, triples[:1]]),  # a duplicate
        triples + torch.tensor([1, 0, 1]),  # entities renumbered
    ]
    assert all(fingerprint_triples(other, 30, 3) != base for other in others)
    assert fingerprint_triples(triples, 31, 3) != base and fingerprint_triples(triples, 30, 4) != base
    assert fingerprint_triples(torch.empty(0, 3, dtype=torch.long), 30, 3) != fingerprint_triples(
        torch.empty(0, 3, dtype=torch.long), 31, 3
    )


def test_the_fingerprint_reads_only_the_training_triples_of_every_layout():
    kg = random_kg(30, 3, 90, seed=0)
    other_splits = kg.clone()
    other_splits.edge_index[:, ~kg.train_mask] = other_splits.edge_index[:, ~kg.train_mask].flip(0)
    assert view_fingerprint(other_splits) == view_fingerprint(kg)
    # the split attributes of RelLinkPredDataset: edge_index (with its reverse edges) is not read
    split = Data(
        train_edge_index=kg.edge_index[:, kg.train_mask],
        train_edge_type=kg.edge_type[kg.train_mask],
        edge_index=torch.cat([kg.edge_index, kg.edge_index.flip(0)], dim=1),
        edge_type=torch.cat([kg.edge_type, kg.edge_type + 3]),
        num_nodes=30,
    )
    assert view_fingerprint(split) == view_fingerprint(kg)
    data = VIEWS(split)
    check_views(data, GRAPH_VIEWS)
    data.train_edge_index, data.train_edge_type = data.train_edge_index[:, 1:], data.train_edge_type[1:]
    with pytest.raises(ValueError, match=f"^ef_edge_index .*{re.escape(AFTER)}"):
        check_views(data, GRAPH_VIEWS)


def test_the_fingerprints_are_stored_with_the_views(tmp_path):
    from torch_wge.datasets import TriplesFolder
    from torch_wge.testing.triples_folder import write_triples_folder
    from torch_wge.training import TrainConfig, load_data

    assert STORAGE_VERSION >= 3  # caches from before the fingerprints are processed anew
    data = VIEWS(random_kg(30, 3, 90, seed=0))
    assert all(type(getattr(data, view.fingerprint)) is int for view in GRAPH_VIEWS)
    assert {getattr(data, view.fingerprint) for view in GRAPH_VIEWS} == {view_fingerprint(data)}
    torch.save(data, tmp_path / "data.pt")
    loaded = torch.load(tmp_path / "data.pt", weights_only=False)
    assert loaded.ef_fingerprint == data.ef_fingerprint and loaded.validate()
    # the datasets' pre_transform, stored and read back from the processed cache
    folder = write_triples_folder(random_kg(30, 3, 90, seed=0), tmp_path / "kg")
    for _ in range(2):
        stored = TriplesFolder(str(folder), cache_root=str(tmp_path / "cache"), pre_transform=VIEWS, log=False)[0]
        assert type(stored.levi_fingerprint) is int and stored.validate()
        assert stored.rf_fingerprint == view_fingerprint(stored)
    config = TrainConfig(dataset=str(folder), root=str(tmp_path / "root"), hidden_channels=2, num_layers=1)
    _, graph = load_data(config, log=False)
    assert WGE(graph.num_nodes, 3, hidden_channels=2, num_layers=1).graph_inputs(graph) is not None
    assert graph.validate()
