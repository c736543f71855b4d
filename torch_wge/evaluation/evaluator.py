r"""Filtered link-prediction evaluation of a scoring function over a split.

Every evaluated triple :math:`(h, r, t)` gives two queries, each ranked
against all :math:`N` entities:

- a *tail* query :math:`(h, r, ?)` with answer :math:`t`,
- a *head* query :math:`(t, r^{-1}, ?)` with answer :math:`h`, where the
  inverse relation has id :math:`r + R`.

In the *filtered* setting the other known answers of a query, i.e. the
entities :math:`e \neq` target with :math:`(h, r, e)` (tail side) or
:math:`(e, r, t)` (head side) among the known (train, valid and test)
triples, are removed before ranking. The target is never removed.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

import torch
from torch import Tensor
from torch_geometric.nn.kge import KGEModel
from torch_geometric.utils import cumsum
from tqdm.auto import tqdm

from torch_wge.data import kg_triples, num_kg_relations
from torch_wge.evaluation.kge import kge_score_fn
from torch_wge.evaluation.ranks import RANK_TYPES, RankType, count_dtype, rank_counts
from torch_wge.evaluation.results import HEAD, TAIL, LinkPredictionResults
from torch_wge.utils.segments import expand_segments
from torch_wge.utils.triples import add_inverse_triples, query_key

__all__ = ["LinkPredictionEvaluator", "ScoreFn"]

#: ``score_fn(entities [B], relations [B]) -> scores [B, N]``; relation ids in
#: ``[0, 2R)``, ids ``>= R`` being inverse relations.
ScoreFn = Callable[[Tensor, Tensor], Tensor]

_FILTER_TENSORS = ("query_target", "filter_start", "filter_count", "filter_answers")


def _check_triples(name: str, triples: Tensor, num_entities: int, num_relations: int) -> Tensor:
    triples = torch.as_tensor(triples).to("cpu", torch.long)
    if triples.dim() != 2 or triples.size(1) != 3:
        raise ValueError(f"{name} must have shape [T, 3] (head, relation, tail), got {tuple(triples.shape)}")
    if triples.numel() > 0:
        entities = triples[:, [0, 2]]
        if int(entities.min()) < 0 or int(entities.max()) >= num_entities:
            raise ValueError(f"{name}: entity ids must lie in [0, {num_entities})")
        if int(triples[:, 1].min()) < 0 or int(triples[:, 1].max()) >= num_relations:
            raise ValueError(f"{name}: relation ids must lie in [0, {num_relations})")
    return triples


class LinkPredictionEvaluator:
    r"""Ranks every head and tail of a split, filtered by the known triples.

    The queries and their filters are prepared once, vectorised (sorting and
    ``searchsorted`` on combined keys, no Python loop per triple). The filter
    is stored in CSR form, shared by the queries that have the same
    (entity, relation) pair: the known answers of query :math:`q` are
    ``filter_answers[filter_start[q] : filter_start[q] + filter_count[q]]``
    (sorted, the target included; it is skipped when ranking).

    **Query order** (:math:`Q = 2T`): query :math:`i < T` is the tail query
    :math:`(h_i, r_i, ?)` of triple :math:`i`; query :math:`T + i` is the head
    query :math:`(t_i, r_i + R, ?)` of triple :math:`i`. The tensors
    :attr:`query_entity`, :attr:`query_relation` (ids in :math:`[0, 2R)`),
    :attr:`query_target`, :attr:`query_side` (``0`` = tail, ``1`` = head) and
    :attr:`query_kg_relation` (:math:`r \in [0, R)`) describe them. Ranks of
    the shards ``[start, stop)`` of several processes, concatenated in order,
    are what :meth:`summarize` expects.

    Args:
        triples (torch.LongTensor): the split to evaluate, rows
            ``(head, relation, tail)``.
        known_triples (torch.LongTensor, optional): every known triple
            (train, valid and test) used to filter; the evaluated triples are
            always added. :obj:`None` evaluates unfiltered ("raw") ranks.
        num_entities (int): :math:`N`.
        num_relations (int): :math:`R`, relations without inverses.

    Shapes:
        - **triples:** :math:`(T, 3)`
        - **known_triples:** :math:`(K, 3)`

    Example:
        >>> import torch
        >>> known = torch.tensor([[0, 0, 1], [0, 0, 2], [1, 0, 2]])
        >>> ev = LinkPredictionEvaluator(known[:1], known, num_entities=3, num_relations=1)
        >>> ev.query_entity.tolist(), ev.query_relation.tolist(), ev.query_target.tolist()
        ([0, 1], [0, 1], [1, 0])
        >>> table = torch.zeros(2, 3, 3)  # table[r, e] scores the answers of (e, r, ?)
        >>> table[0, 0] = torch.tensor([0.0, 1.0, 2.0])
        >>> score_fn = lambda e, r: table[r, e]
        >>> # tail (0, 0, ?): entity 2 is filtered; head (1, 0^-1, ?): a 3-way tie
        >>> ev.compute_ranks(score_fn).tolist()
        [1.0, 2.0]
        >>> print(ev.evaluate(score_fn).summary_line())
        MRR 0.7500 | MR 1.5 | H@1 0.5000 | H@3 1.0000 | H@10 1.0000
    """

    def __init__(
        self,
        triples: Tensor,
        known_triples: Optional[Tensor],
        num_entities: int,
        num_relations: int,
    ) -> None:
        self.num_entities = int(num_entities)
        self.num_relations = int(num_relations)
        triples = _check_triples("triples", triples, self.num_entities, self.num_relations)
        self.triples = triples
        self.filtered = known_triples is not None

        relation = triples[:, 1]
        num_triples = triples.size(0)
        queries = add_inverse_triples(triples, self.num_relations)
        #: Entity of each query, ``[Q]``.
        self.query_entity = queries[:, 0]
        #: Relation of each query in ``[0, 2R)`` (``r + R`` for head queries), ``[Q]``.
        self.query_relation = queries[:, 1]
        #: Entity to rank, ``[Q]``.
        self.query_target = queries[:, 2]
        #: ``0`` (tail query) or ``1`` (head query), ``[Q]``.
        self.query_side = torch.cat([torch.full((num_triples,), TAIL), torch.full((num_triples,), HEAD)])
        #: KG relation id :math:`r \in [0, R)` of each query, ``[Q]``.
        self.query_kg_relation = torch.cat([relation, relation])

        if known_triples is None:
            known = triples.new_empty((0, 3))
        else:
            known = _check_triples("known_triples", known_triples, self.num_entities, self.num_relations)
            known = torch.cat([known, triples])
        self._build_filter(known)
        self._device_cache: dict[str, dict[str, Tensor]] = {}

    @classmethod
    def from_data(cls, data, split: str = "test", filtered: bool = True) -> "LinkPredictionEvaluator":
        """An evaluator for one split of a knowledge graph in any layout of
        :mod:`torch_wge.data.knowledge_graph`: one ``Data`` with
        ``train_mask``/``val_mask``/``test_mask`` (:mod:`torch_wge.datasets`,
        PyG's ``WordNet18RR``, PyG's ``FB15k_237`` splits joined by
        :func:`~torch_wge.data.combine_splits`) or the split attributes of
        PyG's ``RelLinkPredDataset``. The triples of all splits filter.

        Args:
            data (torch_geometric.data.Data): the graph.
            split (str, optional): ``"train"``, ``"val"`` (or ``"valid"``) or
                ``"test"``. (default: ``"test"``)
            filtered (bool, optional): filter known triples. (default: :obj:`True`)
        """
        if split == "all":
            raise ValueError("split must be 'train', 'val' or 'test', got 'all'")
        return cls(
            kg_triples(data, split),
            kg_triples(data, "all") if filtered else None,
            int(data.num_nodes),
            num_kg_relations(data),
        )

    # --------------------------------------------------------------- filter
    def _build_filter(self, known: Tensor) -> None:
        num_entities, num_rel2 = self.num_entities, 2 * self.num_relations
        # Known answers of (entity, relation) for both directions, by query key
        known = add_inverse_triples(known, self.num_relations)
        key, answer = query_key(known[:, 0], known[:, 1], self.num_relations), known[:, 2]
        if num_entities * num_entities * num_rel2 < 2**62:
            pair = torch.unique(key * num_entities + answer)  # sorted, duplicates removed
            key, answer = pair // num_entities, pair % num_entities
        else:  # combined key would overflow int64
            pair = torch.unique(torch.stack([key, answer], dim=1), dim=0)
            key, answer = pair[:, 0].contiguous(), pair[:, 1].contiguous()
        group_key, group_count = torch.unique_consecutive(key, return_counts=True)
        group_start = torch.cumsum(group_count, 0) - group_count

        keys = query_key(self.query_entity, self.query_relation, self.num_relations)
        num_queries = keys.numel()
        if group_key.numel() == 0:
            start = torch.zeros(num_queries, dtype=torch.long)
            count = torch.zeros(num_queries, dtype=torch.long)
        else:
            pos = torch.searchsorted(group_key, keys).clamp_(max=group_key.numel() - 1)
            found = group_key[pos] == keys
            start = torch.where(found, group_start[pos], 0)
            count = torch.where(found, group_count[pos], 0)
        #: Known answers of all (entity, relation) groups, sorted within a group, ``[M]``.
        self.filter_answers = answer
        #: Offset of each query's known answers in :attr:`filter_answers`, ``[Q]``.
        self.filter_start = start
        #: Number of known answers of each query (target included), ``[Q]``.
        self.filter_count = count
        self._filter_cumsum = cumsum(count)

    def _tensors_on(self, device: torch.device) -> dict[str, Tensor]:
        name = str(device)
        if name not in self._device_cache:
            self._device_cache[name] = {k: getattr(self, k).to(device) for k in _FILTER_TENSORS}
        return self._device_cache[name]

    def _filter_pairs(
        self, start: int, stop: int, tensors: dict[str, Tensor]
    ) -> tuple[Optional[Tensor], Optional[Tensor]]:
        total = int(self._filter_cumsum[stop] - self._filter_cumsum[start])
        if total == 0:
            return None, None
        rows, position = expand_segments(
            tensors["filter_start"][start:stop], tensors["filter_count"][start:stop], total
        )
        return rows, tensors["filter_answers"][position]

    def filter_index(self, start: int = 0, stop: Optional[int] = None) -> Tensor:
        """The filter of queries ``[start, stop)`` as ``(row, entity)`` pairs,
        rows counted from ``start`` (targets excluded): the ``filter_index``
        argument of :func:`~torch_wge.evaluation.filtered_ranks`, ``[2, F]``."""
        start, stop = self._check_range(start, stop)
        rows, cols = self._filter_pairs(start, stop, self._tensors_on(torch.device("cpu")))
        if rows is None or cols is None:
            return torch.empty((2, 0), dtype=torch.long)
        keep = cols != self.query_target[start:stop][rows]
        return torch.stack([rows[keep], cols[keep]])

    # -------------------------------------------------------------- ranking
    @property
    def num_queries(self) -> int:
        """:math:`Q = 2T`."""
        return self.query_entity.numel()

    def __len__(self) -> int:
        return self.num_queries

    def _check_range(self, start: int, stop: Optional[int]) -> tuple[int, int]:
        stop = self.num_queries if stop is None else int(stop)
        start = int(start)
        if not 0 <= start <= stop <= self.num_queries:
            raise ValueError(f"need 0 <= start <= stop <= {self.num_queries}, got start={start}, stop={stop}")
        return start, stop

    def compute_ranks(
        self,
        score_fn: ScoreFn,
        batch_size: int = 1024,
        start: int = 0,
        stop: Optional[int] = None,
        progress: bool = False,
        *,
        device: Optional[Union[torch.device, str]] = None,
        rank_type: RankType = "realistic",
    ) -> Tensor:
        r"""Filtered ranks of queries ``[start, stop)``, in query order.

        Queries are scored ``batch_size`` at a time, so memory stays at about
        two ``[batch_size, N]`` tensors (the scores and one scratch buffer).
        Counting and masking run on the device of the scores; the result is
        on the CPU. Runs under :func:`torch.no_grad`.

        Args:
            score_fn (callable or KGEModel): ``score_fn(entities, relations)``
                returning the scores ``[B, N]`` of every candidate answer
                (higher is better); ``relations`` holds ids in ``[0, 2R)``.
                A :class:`torch_geometric.nn.kge.KGEModel` is scored by
                :func:`~torch_wge.evaluation.kge_score_fn` (put it in eval
                mode first).
            batch_size (int, optional): queries per call of ``score_fn``.
                (default: ``1024``)
            start (int, optional): first query. (default: ``0``)
            stop (int, optional): one past the last query; :obj:`None` for
                all. (default: :obj:`None`)
            progress (bool, optional): show a tqdm progress bar.
                (default: :obj:`False`)
            device (torch.device or str, optional): device the query tensors
                are moved to before calling ``score_fn``. (default: CPU)
            rank_type (str, optional): ``"realistic"``, ``"optimistic"`` or
                ``"pessimistic"``. (default: ``"realistic"``)

        Shapes:
            - **output:** :math:`(\text{stop} - \text{start})`, float32 on CPU

        Raises:
            ValueError: when ``score_fn`` returns scores of another shape, or
                NaN scores (which compare false with every score, so they
                would rank as ties instead of failing).
        """
        if rank_type not in RANK_TYPES:
            raise ValueError(f"rank_type must be one of {RANK_TYPES}, got {rank_type!r}")
        if isinstance(score_fn, KGEModel):
            score_fn = kge_score_fn(score_fn, self.num_relations)
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        start, stop = self._check_range(start, stop)
        num_entities = self.num_entities
        out = torch.empty(stop - start, dtype=torch.float32)
        buffer: Optional[Tensor] = None
        bar = tqdm(total=stop - start, disable=not progress, unit="query", desc="ranking", leave=False)
        try:
            with torch.no_grad():
                for lo in range(start, stop, batch_size):
                    hi = min(lo + batch_size, stop)
                    entities = self.query_entity[lo:hi]
                    relations = self.query_relation[lo:hi]
                    if device is not None:
                        entities, relations = entities.to(device), relations.to(device)
                    scores = score_fn(entities, relations)
                    if not isinstance(scores, Tensor) or scores.shape != (hi - lo, num_entities):
                        shape = tuple(scores.shape) if isinstance(scores, Tensor) else type(scores)
                        raise ValueError(
                            f"score_fn must return scores of shape [{hi - lo}, {num_entities}], got {shape}"
                        )
                    if not scores.is_floating_point():
                        scores = scores.float()
                    elif bool(scores.isnan().any()):  # a NaN compares false with every score: a silent tie
                        raise ValueError(
                            f"score_fn returned NaN scores for queries {lo}..{hi - 1}; they cannot be ranked "
                            f"(a diverged model, or damaged weights?)"
                        )
                    tensors = self._tensors_on(scores.device)
                    if buffer is None or buffer.device != scores.device:
                        size = min(batch_size, stop - start) * num_entities
                        buffer = torch.empty(size, dtype=count_dtype(num_entities), device=scores.device)
                    rows, cols = self._filter_pairs(lo, hi, tensors)
                    ranks = rank_counts(scores, tensors["query_target"][lo:hi], rows, cols, buffer)
                    out[lo - start : hi - start] = ranks.get(rank_type).to("cpu", torch.float32)
                    del scores
                    bar.update(hi - lo)
        finally:
            bar.close()
        return out

    def summarize(self, ranks: Tensor, rank_type: RankType = "realistic") -> LinkPredictionResults:
        """Metrics of the ranks of all :math:`Q` queries, given in query order
        (e.g. the concatenated shards of :meth:`compute_ranks`). ``rank_type``
        only labels the report.

        Raises:
            ValueError: for an evaluator of no triples, whose every metric would
                be NaN (an empty split), or ranks of another number than :math:`Q`.
        """
        if self.num_queries == 0:
            raise ValueError(
                "no triples to evaluate (an empty split): every metric would be NaN; give a split with triples"
            )
        ranks = torch.as_tensor(ranks).view(-1)
        if ranks.numel() != self.num_queries:
            raise ValueError(f"expected {self.num_queries} ranks (one per query), got {ranks.numel()}")
        return LinkPredictionResults(
            ranks,
            self.query_side,
            self.query_kg_relation,
            self.num_relations,
            rank_type=rank_type,
            filtered=self.filtered,
        )

    def evaluate(
        self,
        score_fn: ScoreFn,
        batch_size: int = 1024,
        progress: bool = False,
        *,
        device: Optional[Union[torch.device, str]] = None,
        rank_type: RankType = "realistic",
    ) -> LinkPredictionResults:
        r"""Filtered link-prediction metrics of a model: the entry point for
        any model. ``score_fn(entities [B], relations [B])`` scores every
        entity as the answer of the queries :math:`(e_b, r_b, ?)` (relation
        ids :math:`r + R` ask for heads); a PyG
        :class:`~torch_geometric.nn.kge.KGEModel` may be passed as it is and
        scores all candidates of a batch in one call
        (:func:`~torch_wge.evaluation.kge_score_fn`). Same as
        ``summarize(compute_ranks(score_fn, batch_size, progress=progress))``.

        Example:
            >>> from torch_geometric.nn.kge import DistMult
            >>> known = torch.tensor([[0, 0, 1], [1, 1, 2], [2, 0, 3]])
            >>> ev = LinkPredictionEvaluator(known[2:], known, num_entities=4, num_relations=2)
            >>> results = ev.evaluate(DistMult(num_nodes=4, num_relations=2, hidden_channels=8))
            >>> results.num_queries, 0 < results["both.mrr"] <= 1
            (2, True)
        """
        ranks = self.compute_ranks(score_fn, batch_size, progress=progress, device=device, rank_type=rank_type)
        return self.summarize(ranks, rank_type=rank_type)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(num_triples={self.triples.size(0)}, "
            f"num_entities={self.num_entities}, num_relations={self.num_relations}, "
            f"filtered={self.filtered})"
        )
