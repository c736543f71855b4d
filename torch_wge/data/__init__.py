r"""Knowledge graphs as :class:`~torch_geometric.data.Data` objects: the PyG
layouts torch_wge reads (see :mod:`torch_wge.data.knowledge_graph`)."""
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

__all__ = [
    "SPLITS",
    "check_edge_index",
    "check_knowledge_graph",
    "combine_splits",
    "has_split_attributes",
    "kg_triples",
    "num_kg_relations",
    "unseen_triples",
]
