r"""Knowledge graphs as :class:`~torch_geometric.data.Data` objects: the PyG
layouts torch_wge reads (see :mod:`torch_wge.data.knowledge_graph`), and their
1-N training queries in batches (:class:`TrainingQueries`)."""

from torch_wge.data.knowledge_graph import (
    SPLITS,
    check_edge_index,
    check_knowledge_graph,
    combine_splits,
    has_split_attributes,
    kg_triples,
    num_kg_relations,
    unseen_triples,
)
from torch_wge.data.queries import TrainingQueries

__all__ = [
    "SPLITS",
    "TrainingQueries",
    "check_edge_index",
    "check_knowledge_graph",
    "combine_splits",
    "has_split_attributes",
    "kg_triples",
    "num_kg_relations",
    "unseen_triples",
]
