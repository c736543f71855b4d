r"""Graph views of a knowledge graph as PyG transforms.

- :class:`EntityFocusedTransform`: undirected entity graph (``ef_edge_index``)
- :class:`RelationFocusedTransform`: entity + relation nodes from RF
  constraints (``rf_edge_index``, ``rf_num_nodes``)
- :class:`LeviGraphTransform`: one Levi graph (``levi_edge_index``,
  ``levi_num_nodes``)

All read only the training triples, from any knowledge-graph layout of
:mod:`torch_wge.data.knowledge_graph` (PyG's ``WordNet18RR``,
``RelLinkPredDataset``, ``FB15k_237`` splits joined by
:func:`~torch_wge.data.combine_splits`), and return a
:class:`TwoViewData`, which batches entities and relation nodes each by
their own count;
:obj:`ENTITY_FOCUSED`, :obj:`RELATION_FOCUSED` and :obj:`LEVI` name the
attributes of each view. Each view carries the fingerprint of the graph it
was built from: a view the graph no longer matches (its nodes or training
triples changed afterwards, e.g. by ``data.subgraph(...)``) is refused by
its readers (:func:`check_views`).
"""

from torch_wge.transforms.entity_focused import EntityFocusedTransform
from torch_wge.transforms.levi import LeviGraphTransform
from torch_wge.transforms.relation_focused import (
    RelationFocusedConstraints,
    RelationFocusedTransform,
    relation_focused_constraints,
)
from torch_wge.transforms.views import (
    ENTITY_FOCUSED,
    LEVI,
    RELATION_FOCUSED,
    GraphView,
    TwoViewData,
    check_views,
    view_fingerprint,
)

__all__ = [
    "EntityFocusedTransform",
    "RelationFocusedTransform",
    "LeviGraphTransform",
    "RelationFocusedConstraints",
    "relation_focused_constraints",
    "TwoViewData",
    "GraphView",
    "ENTITY_FOCUSED",
    "RELATION_FOCUSED",
    "LEVI",
    "check_views",
    "view_fingerprint",
]
