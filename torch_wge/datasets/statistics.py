"""Counts describing a knowledge graph and its two WGE views."""

from typing import Any, Dict

import torch
from torch_geometric.data import Data

from torch_wge.data import kg_triples, num_kg_relations
from torch_wge.transforms import (
    EntityFocusedTransform,
    RelationFocusedTransform,
)


def dataset_statistics(data: Data, beta: float = 0.2) -> Dict[str, Any]:
    r"""Counts of a knowledge graph in any layout of
    :mod:`torch_wge.data.knowledge_graph` and of its graph views (built from
    the training triples only). Edge counts are of undirected edges, each
    counted once (a view's ``edge_index`` holds both directions: twice as
    many columns), and say so in their names.

    Keys:
        ``entities``, ``relations`` (inverses not counted),
        ``train_entities`` (entities occurring in a training triple),
        ``train``, ``valid``, ``test`` (triples),
        ``ef_undirected_edges`` (entity-focused view),
        ``rf_nodes`` (:math:`|\mathcal{V}| + 2|\mathcal{R}|`, the node
        layout), ``rf_nodes_with_edges``, ``rf_undirected_edges``
        (relation-focused view with :obj:`relation_edges=True`), of which
        ``rf_relation_entity_undirected_edges`` (the whole view with the
        default :obj:`relation_edges=False`) and
        ``rf_relation_relation_undirected_edges``, ``rf_constraints``,
        ``rf_constraints_kept``, ``rf_pairs``, ``rf_pairs_kept``,
        ``rf_cutoff`` (pair count at the cut-off, :obj:`None` when nothing
        is kept) and ``beta``.

    Args:
        data (torch_geometric.data.Data): The graph, e.g. ``dataset[0]``.
        beta (float, optional): Fraction of RF pairs kept.
            (default: :obj:`0.2`)

    Example:
        >>> from torch_wge.testing import random_kg
        >>> stats = dataset_statistics(random_kg(seed=0))
        >>> stats['entities'], stats['relations']
        (20, 4)
    """
    num_nodes, num_relations = int(data.num_nodes), num_kg_relations(data)
    train = kg_triples(data, "train")
    # the training triples alone, in torch_wge's layout: the views read nothing else
    data_train = Data(
        edge_index=train[:, [0, 2]].t(),
        edge_type=train[:, 1],
        train_mask=torch.ones(train.size(0), dtype=torch.bool),
        num_nodes=num_nodes,
        num_relations=num_relations,
    )
    ef = EntityFocusedTransform()(data_train.clone()).ef_edge_index
    rf, constraints = RelationFocusedTransform(beta=beta, relation_edges=True).extract(data_train)
    rf_upper = rf[:, rf[0] < rf[1]]
    relation_relation = int((rf_upper[0] >= num_nodes).sum())
    return {
        "entities": num_nodes,
        "relations": num_relations,
        "train_entities": int(torch.unique(train[:, [0, 2]]).numel()),
        "train": train.size(0),
        "valid": kg_triples(data, "val").size(0),
        "test": kg_triples(data, "test").size(0),
        "ef_undirected_edges": ef.size(1) // 2,
        "rf_nodes": num_nodes + 2 * num_relations,
        "rf_nodes_with_edges": int(torch.unique(rf[0]).numel()),
        "rf_undirected_edges": rf.size(1) // 2,
        "rf_relation_entity_undirected_edges": rf_upper.size(1) - relation_relation,
        "rf_relation_relation_undirected_edges": relation_relation,
        "rf_constraints": constraints.num_constraints,
        "rf_constraints_kept": constraints.num_kept_constraints,
        "rf_pairs": constraints.num_pairs,
        "rf_pairs_kept": constraints.num_kept_pairs,
        "rf_cutoff": constraints.cutoff,
        "beta": float(beta),
    }
