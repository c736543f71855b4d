"""PyG's knowledge-graph layouts, built by hand here exactly as PyG's dataset
classes build them (WordNet18RR, FB15k_237, RelLinkPredDataset), on the small
graph of tests/transforms/hand_kg.py: every layout must give the same graph
views, evaluation queries and training data as torch_wge's own layout."""
import sys
from pathlib import Path

import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import Data
from torch_geometric.utils import index_sort

from torch_wge.data import combine_splits, kg_triples, num_kg_relations
from torch_wge.evaluation import LinkPredictionEvaluator
from torch_wge.training import TrainConfig, Trainer, graph_transform
from torch_wge.transforms import EntityFocusedTransform, LeviGraphTransform, RelationFocusedTransform

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transforms"))
from hand_kg import N, R, TEST, TRAIN, VALID, hand_kg, pairs  # noqa: E402


def split_tensors():
    return [torch.tensor(split) for split in (TRAIN, VALID, TEST)]


def word_net_layout() -> Data:
    """As WordNet18RR.process: all splits in one edge_index sorted by (src, dst), masks, no num_relations."""
    srcs, dsts, types = zip(*[(s[:, 0], s[:, 2], s[:, 1]) for s in split_tensors()])
    src, dst, edge_type = torch.cat(srcs), torch.cat(dsts), torch.cat(types)
    sizes = [s.numel() for s in srcs]
    train_mask = torch.zeros(src.size(0), dtype=torch.bool)
    train_mask[: sizes[0]] = True
    val_mask = torch.zeros(src.size(0), dtype=torch.bool)
    val_mask[sizes[0] : sizes[0] + sizes[1]] = True
    test_mask = torch.zeros(src.size(0), dtype=torch.bool)
    test_mask[sizes[0] + sizes[1] :] = True
    num_nodes = max(int(src.max()), int(dst.max())) + 1
    _, perm = index_sort(num_nodes * src + dst)
    return Data(
        edge_index=torch.stack([src[perm], dst[perm]], dim=0), edge_type=edge_type[perm],
        train_mask=train_mask[perm], val_mask=val_mask[perm], test_mask=test_mask[perm], num_nodes=num_nodes,
    )


def freebase_splits() -> list:
    """As FB15k_237.process: one Data per split (edge_index, edge_type, num_nodes of all splits), no masks."""
    return [
        Data(edge_index=s[:, [0, 2]].t().contiguous(), edge_type=s[:, 1].contiguous(), num_nodes=N)
        for s in split_tensors()
    ]


def rel_link_pred_layout() -> Data:
    """As RelLinkPredDataset.process: split attributes, and edge_index = train triples plus reverse edges of type r + R."""
    kwargs = {}
    for name, s in zip(("train", "valid", "test"), split_tensors()):
        kwargs[f"{name}_edge_index"] = s[:, [0, 2]].t().contiguous()
        kwargs[f"{name}_edge_type"] = s[:, 1].contiguous()
    row, col = kwargs["train_edge_index"]
    edge_index = torch.stack([torch.cat([row, col]), torch.cat([col, row])])
    edge_type = torch.cat([kwargs["train_edge_type"], kwargs["train_edge_type"] + R])
    return Data(num_nodes=N, edge_index=edge_index, edge_type=edge_type, **kwargs)


LAYOUTS = {
    "torch_wge": hand_kg,
    "WordNet18RR": word_net_layout,
    "FB15k_237 combined": lambda: combine_splits(*freebase_splits()),
    "RelLinkPredDataset": rel_link_pred_layout,
}
VIEWS = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=1.0), LeviGraphTransform()])


def as_set(triples):
    return sorted(map(tuple, triples.tolist()))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_triples_and_relation_count(layout):
    data = LAYOUTS[layout]()
    assert num_kg_relations(data) == R == 3  # RelLinkPredDataset: 3, not its 6 edge types
    assert as_set(kg_triples(data, "train")) == sorted(TRAIN)
    assert as_set(kg_triples(data, "val")) == sorted(VALID) == as_set(kg_triples(data, "valid"))
    assert as_set(kg_triples(data, "test")) == sorted(TEST)
    assert as_set(kg_triples(data, "all")) == sorted(TRAIN + VALID + TEST)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_views_equal_torch_wge_layout(layout):
    data = VIEWS(LAYOUTS[layout]())
    # hand-computed: the training pairs {h, t}, h != t
    assert pairs(data.ef_edge_index) == [(0, 1), (1, 2), (1, 3), (1, 4), (2, 4)]
    # entities 0-5, relation nodes 6-8, their inverses 9-11: inverses never doubled
    assert data.rf_num_nodes == data.levi_num_nodes == N + 2 * R == 12
    reference = VIEWS(hand_kg())
    assert torch.equal(data.rf_edge_index, reference.rf_edge_index)
    assert torch.equal(data.levi_edge_index, reference.levi_edge_index)
    assert int(data.rf_edge_index.max()) < 12


@pytest.mark.parametrize("layout", LAYOUTS)
def test_evaluator_from_data(layout):
    data = LAYOUTS[layout]()
    evaluator = LinkPredictionEvaluator.from_data(data, "val")
    # valid triple (5, r0, 2): tail query (5, r0, ?) -> 2, head query (2, r0^-1 = 3, ?) -> 5
    assert evaluator.query_entity.tolist() == [5, 2]
    assert evaluator.query_relation.tolist() == [0, 3]
    assert evaluator.query_target.tolist() == [2, 5]
    # known answers of (2, r3, ?): heads h of (h, r0, 2) over all splits = {5}; of (5, r0, ?): {2}
    assert evaluator.filter_index().numel() == 0
    test = LinkPredictionEvaluator.from_data(data, "test")
    assert test.query_entity.tolist() == [3, 5] and test.query_relation.tolist() == [1, 4]
    # (3, r1, ?) has no other answer; nor (5, r4, ?)
    assert (test.num_entities, test.num_relations) == (N, R)


def test_freebase_single_split_is_refused():
    for split in freebase_splits():
        for call in (EntityFocusedTransform(), RelationFocusedTransform(), LeviGraphTransform(),
                     lambda d: LinkPredictionEvaluator.from_data(d, "test")):
            with pytest.raises(ValueError, match=r"no 'train_mask'.*combine_splits"):
                call(split.clone())


def test_freebase_single_split_is_refused_by_trainer(tmp_path):
    with pytest.raises(ValueError, match="combine_splits"):
        Trainer(TrainConfig(hidden_channels=2, num_layers=1, epochs=1), freebase_splits()[2], tmp_path, progress=False)


def test_combine_splits_refuses_data_with_masks():
    with pytest.raises(ValueError, match="already has masks"):
        combine_splits(hand_kg(), *freebase_splits()[1:])


def test_rel_link_pred_with_doubled_num_relations_is_refused():
    data = rel_link_pred_layout()
    data.num_relations = 2 * R  # RelLinkPredDataset.num_relations counts the reverse edge types
    with pytest.raises(ValueError, match="remove data.num_relations"):
        RelationFocusedTransform()(data)


def test_edge_types_beyond_declared_num_relations_are_refused():
    data = hand_kg()
    data.num_relations = 2  # edge types go up to 2
    with pytest.raises(ValueError, match="relation ids up to 2"):
        EntityFocusedTransform()(data)


def test_trainer_on_every_layout_trains_the_same_model(tmp_path, one_torch_thread):
    config = TrainConfig(hidden_channels=2, num_layers=1, epochs=1, batch_size=4, dropout=0.0, seed=3)
    results = {}
    for name, make in LAYOUTS.items():
        data = graph_transform(config)(make())
        trainer = Trainer(config, data, tmp_path / name.replace(" ", "_"), progress=False)
        assert trainer.graph == {"num_entities": 6, "num_relations": 3, "num_train": 7, "num_valid": 1, "num_test": 1}
        # distinct (head, relation) queries of the training triples and their inverses, counted by hand
        assert len(trainer.queries) == 11
        trainer.train_epoch()
        results[name] = trainer.evaluate("test")["both.mrr"]
    assert len(set(results.values())) == 1, results


def test_reverse_edges_as_relation_types_with_masks_are_detected():
    data = hand_kg()
    del data.num_relations
    train = torch.tensor(TRAIN)
    reverse = torch.stack([train[:, 2], train[:, 1] + R, train[:, 0]], dim=1)
    data.edge_index = torch.cat([data.edge_index, reverse[:, [0, 2]].t()], dim=1)
    data.edge_type = torch.cat([data.edge_type, reverse[:, 1]])
    data.train_mask = torch.cat([data.train_mask, torch.ones(len(TRAIN), dtype=torch.bool)])
    data.val_mask = torch.cat([data.val_mask, torch.zeros(len(TRAIN), dtype=torch.bool)])
    data.test_mask = torch.cat([data.test_mask, torch.zeros(len(TRAIN), dtype=torch.bool)])
    with pytest.raises(ValueError, match=r"relations 3..5 are exactly the reverses of those of relations 0..2"):
        RelationFocusedTransform()(data)
    # one reverse edge missing: these are relations of their own
    data.train_mask[-1] = False
    assert num_kg_relations(data) == 6


def test_dataset_statistics_on_every_layout():
    from torch_wge.datasets import dataset_statistics

    reference = dataset_statistics(hand_kg(), beta=1.0)
    # hand-counted: 6 entities (5 in training triples), 3 relations, 7/1/1 triples, 5 entity-focused edges
    assert [reference[k] for k in ("entities", "relations", "train_entities", "train", "valid", "test",
                                   "ef_undirected_edges", "rf_nodes")] == [6, 3, 5, 7, 1, 1, 5, 12]
    for layout in LAYOUTS.values():
        assert dataset_statistics(layout(), beta=1.0) == reference
