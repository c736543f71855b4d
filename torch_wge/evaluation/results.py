r"""Rank-based link-prediction metrics, overall, per side and per relation.

For a set :math:`Q` of queries with ranks :math:`\mathrm{rank}_q` (realistic
by default, see :mod:`torch_wge.evaluation.ranks`):

.. math::

    \mathrm{MRR} = \frac{1}{|Q|} \sum_{q \in Q} \frac{1}{\mathrm{rank}_q}
    \qquad
    \mathrm{MR} = \frac{1}{|Q|} \sum_{q \in Q} \mathrm{rank}_q
    \qquad
    \mathrm{Hits@}k = \frac{1}{|Q|} \sum_{q \in Q} [\mathrm{rank}_q \leq k]

MRR and Hits@k lie in :math:`(0, 1]` and :math:`[0, 1]` (higher is better),
MR in :math:`[1, N]` (lower is better). With realistic ranks a tie across
positions :math:`k` and :math:`k + 1` gives rank :math:`k + \tfrac12`, which
is not a hit at :math:`k`.

**Metric keys.** ``results[key]`` accepts ``"<side>.<metric>"`` or just
``"<metric>"`` (side ``both``), case-insensitive, where

- ``side`` is ``both`` (all queries), ``head`` (queries
  :math:`(t, r^{-1}, ?)` that predict the head) or ``tail`` (queries
  :math:`(h, r, ?)` that predict the tail);
- ``metric`` is ``mrr``, ``mr``, ``count`` or ``hits@<k>`` for any
  positive integer ``k`` (``hits@1``, ``hits@3``, ``hits@10`` are reported).

Per-relation values come from :meth:`LinkPredictionResults.metric` with
``relation=r`` or from :meth:`LinkPredictionResults.per_relation`.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence, Union

import torch
from torch import Tensor

__all__ = ["LinkPredictionResults", "SIDES", "METRICS", "TAIL", "HEAD"]

#: ``query_side`` value of a tail query :math:`(h, r, ?)`.
TAIL = 0
#: ``query_side`` value of a head query :math:`(t, r^{-1}, ?)`.
HEAD = 1
#: Side names accepted in metric keys, in report order.
SIDES: tuple[str, ...] = ("both", "head", "tail")
#: Metrics reported by :meth:`LinkPredictionResults.to_flat_dict`, in report order.
METRICS: tuple[str, ...] = ("mrr", "mr", "hits@1", "hits@3", "hits@10")

_HITS = re.compile(r"hits@([1-9][0-9]*)$")
_SIDE_CODE = {"head": HEAD, "tail": TAIL}
_TIES = {
    "realistic": "realistic ranks (ties: mean of optimistic and pessimistic)",
    "optimistic": "optimistic ranks (ties: best position)",
    "pessimistic": "pessimistic ranks (ties: worst position)",
}


def _parse_metric(metric: str) -> tuple[str, int]:
    metric = metric.lower()
    if metric in ("mrr", "mr", "count"):
        return metric, 0
    match = _HITS.match(metric)
    if match is None:
        raise KeyError(f"unknown metric {metric!r}: expected 'mrr', 'mr', 'count' or 'hits@<k>'")
    return "hits", int(match.group(1))


def _parse_key(key: str) -> tuple[str, str]:
    parts = key.lower().split(".")
    if len(parts) == 1:
        side, metric = "both", parts[0]
    elif len(parts) == 2:
        side, metric = parts
    else:
        raise KeyError(f"bad metric key {key!r}: expected '<side>.<metric>', e.g. 'both.mrr'")
    if side not in SIDES:
        raise KeyError(f"bad side {side!r} in {key!r}: expected one of {SIDES}")
    _parse_metric(metric)
    return side, metric


class LinkPredictionResults:
    r"""Metrics of a link-prediction evaluation, computed from per-query ranks.

    Usually created by :meth:`LinkPredictionEvaluator.summarize`; build one
    directly from any ranks to aggregate them the same way.

    Args:
        ranks (torch.Tensor): rank of each query's target (floating).
        query_side (torch.LongTensor): ``0`` (:data:`TAIL`) for a tail
            query :math:`(h, r, ?)`, ``1`` (:data:`HEAD`) for a head query
            :math:`(t, r^{-1}, ?)`.
        query_relation (torch.LongTensor): KG relation id :math:`r \in [0, R)`
            of each query (the inverse offset already removed).
        num_relations (int): :math:`R`.
        rank_type (str, optional): how ties were ranked, only for the
            report. (default: ``"realistic"``)
        filtered (bool, optional): whether known answers were filtered,
            only for the report. (default: :obj:`True`)

    Shapes:
        - **ranks, query_side, query_relation:** :math:`(Q)`

    Example:
        >>> import torch
        >>> res = LinkPredictionResults(
        ...     ranks=torch.tensor([1.0, 2.0, 4.0, 10.5]),
        ...     query_side=torch.tensor([0, 0, 1, 1]),
        ...     query_relation=torch.tensor([0, 1, 0, 1]),
        ...     num_relations=2)
        >>> res["both.mrr"]
        0.4613...
        >>> res["tail.hits@1"], res["head.mr"], res["hits@10"]
        (0.5, 7.25, 0.75)
        >>> res.summary_line()
        'MRR 0.4613 | MR 4.4 | H@1 0.2500 | H@3 0.5000 | H@10 0.7500'
    """

    def __init__(
        self,
        ranks: Tensor,
        query_side: Tensor,
        query_relation: Tensor,
        num_relations: int,
        rank_type: str = "realistic",
        filtered: bool = True,
    ) -> None:
        ranks = torch.as_tensor(ranks).detach().to("cpu", torch.float64).view(-1)
        query_side = torch.as_tensor(query_side).to("cpu", torch.long).view(-1)
        query_relation = torch.as_tensor(query_relation).to("cpu", torch.long).view(-1)
        if not (ranks.numel() == query_side.numel() == query_relation.numel()):
            raise ValueError(
                "ranks, query_side and query_relation must have the same length, got "
                f"{ranks.numel()}, {query_side.numel()} and {query_relation.numel()}"
            )
        if ranks.numel() > 0:
            if bool((ranks < 1).any()) or bool(torch.isnan(ranks).any()):
                raise ValueError("ranks must be >= 1 and not NaN")
            if int(query_side.min()) < 0 or int(query_side.max()) > 1:
                raise ValueError("query_side must be 0 (tail) or 1 (head)")
            if int(query_relation.min()) < 0 or int(query_relation.max()) >= num_relations:
                raise ValueError(f"query_relation must lie in [0, {num_relations})")
        if rank_type not in _TIES:
            raise ValueError(f"rank_type must be one of {tuple(_TIES)}, got {rank_type!r}")
        self.ranks = ranks
        self.query_side = query_side
        self.query_relation = query_relation
        self.num_relations = int(num_relations)
        self.rank_type = rank_type
        self.filtered = bool(filtered)
        # group id = 2 * relation + side; the sums below are over these groups.
        self._group = 2 * query_relation + query_side
        self._sums: dict[tuple[str, int], Tensor] = {}

    # ------------------------------------------------------------------ core
    @property
    def num_queries(self) -> int:
        """Number of ranked queries :math:`Q` (both sides)."""
        return self.ranks.numel()

    def _group_sum(self, name: str, k: int) -> Tensor:
        """Sum of a per-query quantity over each (relation, side) group, ``[R, 2]``."""
        cache_key = (name, k)
        if cache_key not in self._sums:
            if name == "count":
                values = torch.ones_like(self.ranks)
            elif name == "mrr":
                values = self.ranks.reciprocal()
            elif name == "mr":
                values = self.ranks
            else:
                values = (self.ranks <= k).to(torch.float64)
            total = torch.zeros(2 * self.num_relations, dtype=torch.float64)
            total.index_add_(0, self._group, values)
            self._sums[cache_key] = total.view(self.num_relations, 2)
        return self._sums[cache_key]

    def _select(self, table: Tensor, side: str, relation: Optional[int]) -> float:
        rows = table if relation is None else table[relation : relation + 1]
        if side == "both":
            return float(rows.sum())
        return float(rows[:, _SIDE_CODE[side]].sum())

    def metric(self, metric: str, side: str = "both", relation: Optional[int] = None) -> Union[float, int]:
        """One metric (``"mrr"``, ``"mr"``, ``"hits@<k>"``, or ``"count"`` as an
        ``int``) of one side (``"both"``, ``"head"``, ``"tail"``), over all
        relations or over one KG relation id. A metric over zero queries is
        ``nan`` (only possible for an empty split or an unused relation)."""
        side = side.lower()
        if side not in SIDES:
            raise KeyError(f"bad side {side!r}: expected one of {SIDES}")
        name, k = _parse_metric(metric)
        if relation is not None and not 0 <= relation < self.num_relations:
            raise KeyError(f"relation must lie in [0, {self.num_relations}), got {relation}")
        count = self._select(self._group_sum("count", 0), side, relation)
        if name == "count":
            return int(count)
        if count == 0:
            return float("nan")
        return self._select(self._group_sum(name, k), side, relation) / count

    def __getitem__(self, key: str) -> float:
        side, metric = _parse_key(key)
        return self.metric(metric, side)

    def __contains__(self, key: object) -> bool:
        try:
            _parse_key(key)  # type: ignore[arg-type]
        except (KeyError, AttributeError):
            return False
        return True

    def keys(self) -> list[str]:
        """The keys of :meth:`to_flat_dict`: ``"<side>.<metric>"`` for every side and metric."""
        return [f"{side}.{metric}" for side in SIDES for metric in METRICS]

    # ------------------------------------------------------------ exporting
    def to_flat_dict(self) -> dict[str, float]:
        """Overall and per-side metrics, ``{"both.mrr": 0.45, "head.hits@10": 0.6, ...}``,
        as plain Python floats."""
        return {key: self[key] for key in self.keys()}

    def per_relation(self) -> list[dict[str, Any]]:
        """One row per (KG relation, side) with at least one query, ordered by
        relation then side (``both``, ``head``, ``tail``):
        ``{"relation": r, "side": "tail", "count": n, "mrr": ..., "mr": ..., "hits@1": ..., ...}``.
        """
        count = self._group_sum("count", 0)
        tables = {metric: self._group_sum(*_parse_metric(metric)) for metric in METRICS}
        rows = []
        for relation in torch.nonzero(count.sum(1) > 0).view(-1).tolist():
            for side in SIDES:
                n = self._select(count, side, relation)
                if n == 0:
                    continue
                row: dict[str, Any] = {"relation": relation, "side": side, "count": int(n)}
                for metric, table in tables.items():
                    row[metric] = self._select(table, side, relation) / n
                rows.append(row)
        return rows

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON friendly: settings, counts, per-side metrics and
        :meth:`per_relation` rows."""
        return {
            "rank_type": self.rank_type,
            "filtered": self.filtered,
            "ties": _TIES[self.rank_type],
            "num_queries": self.num_queries,
            "num_relations": self.num_relations,
            "counts": {side: self.metric("count", side) for side in SIDES},
            "metrics": {side: {m: self.metric(m, side) for m in METRICS} for side in SIDES},
            "per_relation": self.per_relation(),
        }

    # ------------------------------------------------------------- printing
    def description(self) -> str:
        """How the ranks were obtained, e.g. ``"realistic ranks (ties: ...), filtered"``."""
        return f"{_TIES[self.rank_type]}, {'filtered' if self.filtered else 'unfiltered'}"

    def summary_line(self, side: str = "both") -> str:
        """``"MRR 0.4520 | MR 123.4 | H@1 0.3700 | H@3 0.5000 | H@10 0.6500"`` for one side."""
        return " | ".join(
            [
                f"MRR {self.metric('mrr', side):.4f}",
                f"MR {self.metric('mr', side):.1f}",
                f"H@1 {self.metric('hits@1', side):.4f}",
                f"H@3 {self.metric('hits@3', side):.4f}",
                f"H@10 {self.metric('hits@10', side):.4f}",
            ]
        )

    def format(
        self,
        per_relation: bool = False,
        relation_names: Optional[Sequence[str]] = None,
    ) -> str:
        """A small text table of the per-side metrics (and, if asked, of every
        relation), headed by how ranks were computed.

        Args:
            per_relation (bool, optional): add one line per (relation, side),
                most frequent relations first. (default: :obj:`False`)
            relation_names (Sequence[str], optional): names to print instead of
                relation ids. (default: :obj:`None`)
        """
        header = f"{'':<10}{'count':>8}{'MRR':>9}{'MR':>10}{'Hits@1':>9}{'Hits@3':>9}{'Hits@10':>9}"

        def line(label: str, n: int, values: dict[str, float]) -> str:
            return (
                f"{label:<10}{n:>8d}{values['mrr']:>9.4f}{values['mr']:>10.2f}"
                f"{values['hits@1']:>9.4f}{values['hits@3']:>9.4f}{values['hits@10']:>9.4f}"
            )

        out = [
            f"Link prediction over {self.num_queries} queries: {self.description()}",
            header,
        ]
        for side in SIDES:
            out.append(line(side, int(self.metric("count", side)), {m: self.metric(m, side) for m in METRICS}))
        if per_relation:
            rows = self.per_relation()
            count = {row["relation"]: row["count"] for row in rows if row["side"] == "both"}
            rows.sort(key=lambda row: -count[row["relation"]])  # stable: most frequent relation first
            names = {r: str(r if relation_names is None else relation_names[r]) for r in count}
            width = min(max([len("relation"), *map(len, names.values())]), 48) + 2
            out.append("")
            out.append(f"{'relation':<{width}}{'side':<6}" + header[10:])
            for row in rows:
                name = names[row["relation"]][: width - 2]
                out.append(f"{name:<{width}}{row['side']:<6}" + line("", row["count"], row)[10:])
        return "\n".join(out)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(num_queries={self.num_queries}, "
            f"mrr={self['both.mrr']:.4f}, hits@10={self['both.hits@10']:.4f}, "
            f"rank_type={self.rank_type!r}, filtered={self.filtered})"
        )
