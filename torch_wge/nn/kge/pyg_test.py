r"""PyG's :meth:`~torch_geometric.nn.kge.KGEModel.test` for models that
score a query against every entity at once, a tied tail ranked at the mean
of its positions (PyG's: wherever its sort leaves it)."""

from typing import Callable, Tuple

import torch
from torch import Tensor
from tqdm.auto import tqdm

from torch_wge.evaluation.ranks import all_filtered_ranks


def raw_tail_ranking(
    score_fn: Callable[[Tensor, Tensor], Tensor],
    num_nodes: int,
    channels: int,
    head_index: Tensor,
    rel_type: Tensor,
    tail_index: Tensor,
    batch_size: int,
    k: int = 10,
    log: bool = True,
) -> Tuple[float, float, float]:
    r"""The results of PyG's :meth:`~torch_geometric.nn.kge.KGEModel.test`:
    the mean rank (counted from 0), MRR and Hits@:obj:`k` of each true tail
    among all :math:`N` entities (raw, unfiltered, tails only), from
    ``score_fn(heads [B], relations [B]) -> [B, N]`` instead of :math:`N`
    calls of ``forward`` per triple, but for ties.

    A rank is counted, not sorted, by
    :func:`~torch_wge.evaluation.ranks.all_filtered_ranks` (unfiltered) with
    its tie rule: a tail tied with other entities gets the mean of the best
    and the worst position it could take (the realistic rank). PyG's
    :meth:`~torch_geometric.nn.kge.KGEModel.test` takes the tail's position
    in ``scores.argsort(descending=True)`` instead: among the entities it
    ties with, wherever the sort leaves it (torch's sort is not stable there,
    even on the CPU), so anything from the best to the worst of those
    positions, not a function of the scores. With :math:`b_i` the entities
    scored above tail :math:`i` of :math:`T` and :math:`m_i` those tied with
    it, the realistic rank is
    :math:`\mathrm{rank}_i = 1 + b_i + m_i / 2` (PyG's, from 1, is one of
    :math:`1 + b_i, \dots, 1 + b_i + m_i`), and the results are

    .. math::
        \frac{1}{T} \sum_i (\mathrm{rank}_i - 1), \qquad
        \frac{1}{T} \sum_i \frac{1}{\mathrm{rank}_i}, \qquad
        \frac{1}{T} \left|\{i : \mathrm{rank}_i \leq k\}\right|,

    PyG's numbers exactly where no tail ties (:math:`m_i = 0`).

    :obj:`batch_size` bounds memory as in PyG, where it is the number of
    triples per ``forward`` call: a chunk of queries holds at most as many
    scores as those triples hold embedding numbers (``batch_size *
    channels``), and at least one query; :obj:`log` shows a progress bar over
    the chunks (PyG's: over the triples).
    """
    num_queries = max(1, batch_size * channels // num_nodes)
    starts = range(0, head_index.numel(), num_queries)
    ranks = []
    for start in tqdm(starts) if log else starts:
        chunk = slice(start, start + num_queries)
        ranks.append(all_filtered_ranks(score_fn(head_index[chunk], rel_type[chunk]), tail_index[chunk]).realistic)
    rank = torch.cat(ranks)
    # averaged in float32 (from float64 reciprocals), as PyG does
    mean_rank = float((rank - 1).float().mean())
    mrr = float(rank.double().reciprocal().float().mean())
    return mean_rank, mrr, int((rank <= k).sum()) / rank.numel()


class OneToNTest:
    r"""Gives a :class:`~torch_geometric.nn.kge.KGEModel` whose embeddings
    hold :obj:`hidden_channels` quaternions and which has
    ``query_score_fn() -> score_fn(heads [B], relations [B]) -> [B, N]`` the
    :meth:`test` of PyG with its arguments and results, computed by
    :func:`raw_tail_ranking` from one ``query_score_fn()`` (one encoding of
    the graph for :class:`~torch_wge.nn.kge.WGEKGE`) instead of :math:`N` /
    :obj:`batch_size` calls of ``forward`` per triple."""

    # of the KGEModel it is mixed into
    num_nodes: int
    hidden_channels: int
    query_score_fn: Callable[[], Callable[[Tensor, Tensor], Tensor]]

    @torch.no_grad()
    def test(
        self,
        head_index: Tensor,
        rel_type: Tensor,
        tail_index: Tensor,
        batch_size: int,
        k: int = 10,
        log: bool = True,
    ) -> Tuple[float, float, float]:
        r"""PyG's :meth:`~torch_geometric.nn.kge.KGEModel.test`, its arguments
        and results, but for the rank of a tied tail: the mean rank (counted
        from 0), MRR and Hits@:obj:`k` of each true tail :math:`t` of
        :math:`(h, r, t)` among all entities, raw (not filtered by known
        triples) and for tails only, as PyG's; computed by
        :func:`~torch_wge.nn.kge.pyg_test.raw_tail_ranking` from 1-N scores,
        one :meth:`query_score_fn` call (for :class:`~torch_wge.nn.kge.WGEKGE`
        one encoding of the graph), not :math:`N` / :obj:`batch_size` calls
        of :meth:`forward` per triple.

        **Ties differ from PyG's.** A tail tied with :math:`m` other
        entities, :math:`b` entities scored above it, gets the tie-averaged
        (realistic) rank :math:`b + m / 2` counted from 0, a function of the
        scores; PyG's :meth:`~torch_geometric.nn.kge.KGEModel.test` takes its
        position in ``scores.argsort(descending=True)``, any of
        :math:`b, \dots, b + m` as the sort leaves the tied entities (torch's
        sort is not stable). So the numbers are PyG's exactly where no true
        tail ties with another entity (trained float models, in practice),
        and may differ where one does (e.g. constant or quantised scores).
        :obj:`batch_size` bounds the scores held at once, as PyG's bounds a
        ``forward`` call (:func:`~torch_wge.nn.kge.pyg_test.raw_tail_ranking`)."""
        return raw_tail_ranking(
            self.query_score_fn(),
            self.num_nodes,
            4 * self.hidden_channels,
            head_index,
            rel_type,
            tail_index,
            batch_size,
            k,
            log,
        )
