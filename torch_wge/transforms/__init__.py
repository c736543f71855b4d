r"""Graph views of a knowledge graph as PyG transforms.

- :class:`EntityFocusedTransform`: undirected entity graph (``ef_edge_index``)
- :class:`RelationFocusedTransform`: entity + relation nodes from RF
  constraints (``rf_edge_index``, ``rf_num_nodes``)
- :class:`LeviGraphTransform`: one Levi graph (``levi_edge_index``,
  ``levi_num_nodes``)

All read only the training triples, from any knowledge-graph layout of
:mod:`torch_wge.data.knowledge_graph` (PyG's ``WordNet18RR``,
``RelLinkPredDataset``, ``FB15k_237`` splits joined by
:func:`~torch_wge.data.combine_splits`).
"""
from torch_wge.transforms.entity_focused import EntityFocusedTransform
from torch_wge.transforms.levi import LeviGraphTransform
from torch_wge.transforms.relation_focused import (
    RelationFocusedConstraints,
    RelationFocusedTransform,
    relation_focused_constraints,
)

__all__ = [
    'EntityFocusedTransform',
    'RelationFocusedTransform',
    'LeviGraphTransform',
    'RelationFocusedConstraints',
    'relation_focused_constraints',
]
