r"""Filtered link-prediction evaluation: ranks and metrics.

Takes scores (or a score callable); imports nothing from :mod:`torch_wge.nn`.

- :func:`filtered_ranks`: realistic (or optimistic / pessimistic) filtered
  ranks of targets in a score matrix, by counting, without sorting.
- :class:`LinkPredictionEvaluator`: both-direction queries of a split with
  their filters, ranked in chunks from a ``score_fn(entities, relations)``
  or a PyG :class:`~torch_geometric.nn.kge.KGEModel` (:func:`kge_score_fn`).
- :class:`LinkPredictionResults`: MRR, MR, Hits@k overall, per side and per
  relation, with ``results["both.mrr"]`` keys and JSON export.
"""

from torch_wge.evaluation.evaluator import LinkPredictionEvaluator, ScoreFn
from torch_wge.evaluation.kge import kge_score_fn
from torch_wge.evaluation.ranks import RANK_TYPES, Ranks, RankType, all_filtered_ranks, filtered_ranks
from torch_wge.evaluation.results import HEAD, METRICS, SIDES, TAIL, LinkPredictionResults

__all__ = [
    "filtered_ranks",
    "all_filtered_ranks",
    "Ranks",
    "RankType",
    "RANK_TYPES",
    "LinkPredictionEvaluator",
    "ScoreFn",
    "kge_score_fn",
    "LinkPredictionResults",
    "SIDES",
    "METRICS",
    "HEAD",
    "TAIL",
]
