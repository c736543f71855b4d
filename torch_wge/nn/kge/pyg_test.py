r"""PyG's :meth:`~torch_geometric.nn.kge.KGEModel.test` for models that
score a query against every entity at once."""

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
    among all :math:`N` entities (raw, unfiltered), from
    ``score_fn(heads [B], relations [B]) -> [B, N]`` instead of :math:`N`
    calls of ``forward`` per triple. A rank is counted, not sorted, by
    :func:`~torch_wge.evaluation.ranks.all_filtered_ranks` (unfiltered) with
    its tie rule: a tail tied with other entities gets the mean of the best
    and the worst position it could take (the realistic rank; PyG's sort puts
    tied entities in an unspecified order). With :math:`\mathrm{rank}_i \geq 1`
    that realistic rank of tail :math:`i` of :math:`T`, the results are

    .. math::
        \frac{1}{T} \sum_i (\mathrm{rank}_i - 1), \qquad
        \frac{1}{T} \sum_i \frac{1}{\mathrm{rank}_i}, \qquad
        \frac{1}{T} \left|\{i : \mathrm{rank}_i \leq k\}\right|,

    PyG's numbers exactly where no tail ties.

    :obj:`batch_size` bounds memory as in PyG, where it is the number of
    triples per ``forward`` call: a chunk of queries holds at most as many
    scores as those triples hold embedding numbers (``batch_size *
    channels``), and at least one query.
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
        """PyG's :meth:`~torch_geometric.nn.kge.KGEModel.test`: raw mean rank (from 0), MRR and Hits@:obj:`k`
        of the tails, from 1-N scores (:func:`raw_tail_ranking`)."""
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
