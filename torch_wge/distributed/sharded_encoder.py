r"""The two-view encoder sharded over the processes of a run: each process
computes its own rows of every layer.

With :math:`P` processes, process :math:`p` owns a share :math:`E_p` of the
:math:`N` entity rows and a share :math:`Q_p` of the :math:`M = 2R`
relation-node rows (:class:`RowShares`): rows dealt out by their stored
adjacency entries, so that every process has :math:`1/P` of the rows (whose
quaternion products cost the same) and about :math:`1/P` of the entries
(the sparse sums), in the forward and the backward pass alike. A view's layer :math:`\mathbf{H}' = g(\mathrm{norm}(
\mathbf{\hat{A}} (\mathbf{W} \otimes \mathbf{H}) + \mathbf{b}))` is computed,
with the sparse sum first (:math:`\mathbf{\hat{A}} (\mathbf{W} \otimes
\mathbf{H}) = \mathbf{W} \otimes (\mathbf{\hat{A}} \mathbf{H})`: the map
:math:`\mathbf{W} \otimes` acts on each row), as

.. math::
    \mathbf{H}'_{p} = g\left(\mathrm{norm}\left(\mathbf{W} \otimes
    (\mathbf{\hat{A}}_{p,:} \mathbf{H}) + \mathbf{b}\right)\right), \qquad
    \mathbf{H}' = \mathrm{all\_gather}_p(\mathbf{H}'_{p})

with :math:`p` the process's rows of the view (:math:`E_p` in the
entity-focused view; :math:`E_p` and :math:`N + Q_p` in the relation-focused
or Levi view, whose :math:`N + M` nodes are entities, then relation nodes).
Every process holds the whole input :math:`\mathbf{H}` of a layer (the
embeddings, or the previous layer's gathered output), so it needs nothing
from the others before its sparse sums. Each process does :math:`1/P` of the
sparse sums, of the quaternion products and of the activations, and keeps
:math:`1/P` of the activations for backward. The batch norms normalise with
the mean and variance of all rows of all processes
(:func:`~torch_wge.distributed.batch_norm.batch_norm_together` on the
layers' own batch norms, both views' statistics in one all-reduce), as one process does over the whole view. The decoders read
every entity and relation at every layer: the gathered :math:`\mathbf{H}'`
is what :class:`~torch_wge.nn.TwoViewEncoder` returns, in every process.

Backward, each all-gather is a reduce-scatter (:class:`GatherRows`): process
:math:`p` receives the sum over all processes of the gradients of its rows
(from the decoders and from the next layer's sparse sums, which reach every
row), and back-propagates through its rows only. Parameters' gradients are
then each process's share, and
:class:`~torch.nn.parallel.DistributedDataParallel`'s average over the
processes makes them the gradient of the global batch, as for the replicated
encoder. Per layer and step, forward: one all-gather of the layer's output,
:math:`(N + M) C` numbers, and one all-reduce of the batch norms'
statistics, :math:`2 (2C + 1)` numbers with both views; backward: one
reduce-scatter of :math:`(N + M) C` numbers (on gloo an all-to-all, see
:class:`GatherRows`) and one all-reduce of as many statistics. Each
process's part of a gather is padded to the largest part (shares differ by
at most one row a block).

The encoder has no dropout (only the decoders do, per process and per query,
see :mod:`torch_wge.distributed.context`), so with any dropout the sharded
encoder computes what the replicated one computes, to the order of
floating-point sums.
"""

from functools import partial
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from torch_wge.distributed.batch_norm import normalize_synced
from torch_wge.nn import TwoViewConv, TwoViewEncoder
from torch_wge.utils.autograd import matmul_with_transpose
from torch_wge.utils.sparse import csr_parts, csr_rows, csr_tensor, csr_transpose

__all__ = ["RowShares", "RowGather", "GatherRows", "ShardedTwoViewEncoder", "shard_encoder"]


class RowShares:
    """The processes' shares of ``count`` rows, ``rank``'s own among them, each of ``count / world_size``
    rows (give or take one) and, with ``weights [count]``, of about equal total weight: the rows are
    dealt out in decreasing weight (ties in order) as cards are, ``0, 1, ..., P - 1, P - 1, ..., 1, 0,
    0, 1, ...``, so the shares' totals differ by at most the largest weight. ``rows[p]`` holds share
    ``p``'s rows in increasing order.

    The sharded encoder deals a view's rows by their stored adjacency entries: every row costs the same
    quaternion products and its entries' sparse sums, so each process gets an equal part of both, in
    the forward and in the backward pass alike. (Contiguous shares of equal total cost cannot do that
    when the most frequent entities come first: the process with fewer rows waits for the other in the
    one pass and is waited for in the other.)

    Example:
        >>> shares = RowShares(5, world_size=2, rank=0, weights=torch.tensor([1.0, 9, 1, 8, 1]))
        >>> [rows.tolist() for rows in shares.rows]
        [[1, 2, 4], [0, 3]]
        >>> shares.own.tolist(), shares.sizes
        ([1, 2, 4], [3, 2])
    """

    def __init__(self, count: int, world_size: int, rank: int, weights: Optional[Tensor] = None):
        self.count = count
        device = None if weights is None else weights.device  # the rows' indices live where the weights do
        order = torch.arange(count, device=device)
        if weights is not None:
            order = torch.sort(weights, descending=True, stable=True).indices
        turn = torch.arange(count, device=device) % (2 * world_size)  # a row's turn in the deal
        owner = torch.where(turn < world_size, turn, 2 * world_size - 1 - turn)
        self.rows = [order[owner == p].sort().values for p in range(world_size)]
        self.sizes = [rows.numel() for rows in self.rows]
        self.own = self.rows[rank]
        self.own_count = self.sizes[rank]


def sums_by_all_to_all(group) -> bool:
    """Whether :class:`GatherRows` sums gradients with an all-to-all of the row blocks followed by a
    local sum, rather than a reduce-scatter: on gloo, whose reduce-scatter takes longer."""
    return dist.get_backend(group) == "gloo"


class RowGather:
    """Where the rows of one output made of ``blocks`` (a :class:`RowShares` each, one after the other)
    travel in a gather of :class:`GatherRows`: process :math:`p` gives its rows of every block, block
    after block, as part :math:`p` of the gathered buffer ``[P * largest, C]``, each part padded to the
    largest.

    Attributes:
        positions (Tensor): ``[sum of the blocks' counts]``, the gathered buffer's row of each output row.
        sources (Tensor): ``[P * largest]``, the output row each row of the buffer comes from (0 for a
            padding row, whose value is never read).
        largest (int): Rows of the largest part.

    Example:
        >>> entities = RowShares(3, world_size=2, rank=0)
        >>> relations = RowShares(2, world_size=2, rank=0)
        >>> gather = RowGather([entities, relations])
        >>> gather.positions.tolist(), gather.sources.tolist()
        ([0, 3, 4, 1, 5], [0, 3, 0, 1, 2, 4])
    """

    def __init__(self, blocks: Sequence[RowShares]):
        world_size = len(blocks[0].sizes)
        parts = [sum(block.sizes[p] for block in blocks) for p in range(world_size)]
        self.largest = max(parts)
        device = blocks[0].own.device
        self.positions = torch.empty(sum(block.count for block in blocks), dtype=torch.long, device=device)
        filled, first_row = [0] * world_size, 0
        for block in blocks:
            for p, rows in enumerate(block.rows):
                start = p * self.largest + filled[p]
                self.positions[first_row + rows] = torch.arange(start, start + rows.numel(), device=device)
                filled[p] += rows.numel()
            first_row += block.count
        self.sources = torch.zeros(world_size * self.largest, dtype=torch.long, device=device)
        self.sources[self.positions] = torch.arange(self.positions.numel(), device=device)


class GatherRows(torch.autograd.Function):
    r"""Whole row blocks from every process's shares of them, with one
    collective. Process :math:`p` gives its rows of every block of ``gather``
    (a :class:`RowGather`), block after block, as the tensors ``parts`` (one
    or more, one after the other), and every process gets the blocks whole,
    one after the other, as one tensor. The processes' parts are padded to
    the largest for one :func:`torch.distributed.all_gather_single` (gloo and
    NCCL alike), then the rows are put in order with one ``index_select``.
    Backward is the matching :func:`torch.distributed.reduce_scatter_single`:
    process :math:`p` receives, for each of its rows, the sum over all
    processes of that row's gradients. On gloo, whose reduce-scatter takes
    longer, each process sends every
    other its gradients of that process's rows in one
    :func:`torch.distributed.all_to_all_single` and sums what it receives.

    ``GatherRows.apply(gather, group, *parts)`` returns the output.

    Shapes:
        - **input:** ``parts``, together ``[sum of this process's shares, C]``
        - **output:** ``[sum of the blocks' counts, C]``
    """

    @staticmethod
    def forward(ctx, gather: RowGather, group, *parts: Tensor):
        world_size = dist.get_world_size(group)
        ctx.gather, ctx.group, ctx.world_size = gather, group, world_size
        ctx.part_sizes = [part.size(0) for part in parts]
        first = parts[0]
        # a part's padding rows are never read, so they are left as they come (here and backward)
        padded = first.new_empty((gather.largest,) + tuple(first.shape[1:]))
        torch.cat(parts, out=padded[: sum(ctx.part_sizes)])
        gathered = first.new_empty((world_size * gather.largest,) + tuple(first.shape[1:]))
        dist.all_gather_single(gathered, padded, group=group)
        return gathered.index_select(0, gather.positions)

    @staticmethod
    def backward(ctx, grad: Tensor):
        gather, largest = ctx.gather, ctx.gather.largest
        padded = grad.index_select(0, gather.sources)
        if sums_by_all_to_all(ctx.group):
            # block q of what arrives: process q's gradients of this process's rows
            received = torch.empty_like(padded)
            dist.all_to_all_single(received, padded, group=ctx.group)
            total = received.view((ctx.world_size, largest) + tuple(padded.shape[1:])).sum(0)
        else:
            total = grad.new_empty((largest,) + tuple(grad.shape[1:]))
            dist.reduce_scatter_single(total, padded, group=ctx.group)
        return (None, None) + total[: sum(ctx.part_sizes)].split(ctx.part_sizes)


_Shares = Tuple[RowShares, RowShares, Dict[str, RowGather]]


class ShardedTwoViewEncoder(TwoViewEncoder):
    r"""A :class:`~torch_wge.nn.TwoViewEncoder` whose rows are computed by
    the processes of ``group``, each its own share (see
    :mod:`torch_wge.distributed.sharded_encoder`); every process gets the
    whole result. It runs the layers of :obj:`encoder` through their public
    steps (:meth:`~torch_wge.nn.TwoViewConv.normalized_adjacency`,
    :meth:`~torch_wge.nn.TwoViewConv.transform`,
    :meth:`~torch_wge.nn.TwoViewConv.activate`,
    :meth:`~torch_wge.nn.TwoViewConv.combine`), with the layers' own
    parameters (their names are those of the encoder: state dicts load
    either way), and normalises with the statistics of all processes' rows
    through the layers' own batch norms (both views' in one all-reduce).
    Call it in every process of ``group``, with the same inputs.

    Args:
        encoder (TwoViewEncoder): The encoder whose layers to run; its
            layers' norms must be batch norms or :obj:`None`.
        group (optional): The process group; its own group keeps the
            encoder's collectives apart from those of
            :class:`~torch.nn.parallel.DistributedDataParallel`.
            (default: all processes)

    Shapes:
        - **input:** as :class:`~torch_wge.nn.TwoViewEncoder`, with each view
          a ``torch.sparse_csr`` adjacency (what
          :meth:`~torch_wge.nn.WGE.graph_inputs` gives)
        - **output:** as :class:`~torch_wge.nn.TwoViewEncoder`, the same in
          every process
    """

    def __init__(self, encoder: TwoViewEncoder, group=None):
        torch.nn.Module.__init__(self)  # the layers are encoder's, not new ones
        self.channels = encoder.channels
        self.num_layers = encoder.num_layers
        self.convs = encoder.convs
        self.group = group or dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)
        for conv in self._layers():
            for view in conv.views:
                norm = conv.norm(view)
                if norm is not None and not isinstance(norm, torch.nn.BatchNorm1d):
                    raise ValueError(
                        f"'{self.__class__.__name__}' normalises with statistics over all processes' rows: "
                        f"batch norms only, got {norm.__class__.__name__}"
                    )
        self._normalize = partial(normalize_synced, group=self.group)
        # each layer's and view's rows of the normalised adjacency and their transpose (CSR parts),
        # kept for layers with cached=True as the layers keep their normalised adjacencies
        self._rows: Dict[Tuple[int, str], Tuple[Tensor, ...]] = {}
        self._kept_shares: Optional[Tuple[Optional[Tensor], Optional[Tensor], _Shares]] = None

    def reset_parameters(self):
        super().reset_parameters()
        self._rows = {}

    def _layers(self) -> List[TwoViewConv]:
        return list(self.convs)  # type: ignore[arg-type]

    def forward(
        self,
        x: Tensor,
        rel: Tensor,
        ef_edge_index: Optional[Tensor] = None,
        rf_edge_index: Optional[Tensor] = None,
        ef_edge_weight: Optional[Tensor] = None,
        rf_edge_weight: Optional[Tensor] = None,
    ) -> List[Tuple[Tensor, Tensor]]:
        if ef_edge_weight is not None or rf_edge_weight is not None:
            raise ValueError(f"'{self.__class__.__name__}' reads edge weights from the CSR adjacencies' values")
        for name, adj in (("ef_edge_index", ef_edge_index), ("rf_edge_index", rf_edge_index)):
            if adj is not None and adj.layout != torch.sparse_csr:
                raise ValueError(
                    f"'{self.__class__.__name__}' takes each view as a torch.sparse_csr adjacency "
                    f"(WGE.graph_inputs), got {name} of layout {adj.layout}"
                )
        entities, relations, gathers = self._shares(x.size(0), rel.size(0), ef_edge_index, rf_edge_index)
        adjacencies = {"entity": ef_edge_index, "relation": rf_edge_index}
        shares = {"entity": [entities], "relation": [entities, relations]}
        states = [(x, rel)]
        nodes = None  # [X; R] of the layer's input as one tensor, when a gather made it so
        for k, conv in enumerate(self._layers()):
            inputs = {"entity": x, "relation": torch.cat([x, rel]) if nodes is None else nodes}
            hs = {}
            for view in conv.views:  # W ⊗ (Â_p H) + b: this process's rows of Eqs. 4 and 6
                adj = adjacencies[view]
                if adj is None:
                    raise ValueError(f"'{self.__class__.__name__}' uses the {view} view but got no adjacency of it")
                rows, rows_t = self._adjacency_rows(k, view, conv, adj, inputs[view].dtype, shares[view])
                hs[view] = conv.transform(view, matmul_with_transpose(rows, rows_t, inputs[view]))
            # this process's rows of Eqs. 5 and 7; the relations as they are without the relation view
            own_x, own_rel = conv.combine(conv.activate(hs, self._normalize), entities.own_count, rel)
            if "relation" in hs:
                nodes = GatherRows.apply(gathers["nodes"], self.group, own_x, own_rel)
                x, rel = nodes.split([entities.count, relations.count])
            else:  # ablation 3
                x = GatherRows.apply(gathers["entities"], self.group, own_x)
                nodes = None
            states.append((x, rel))
        return states

    def _shares(
        self, num_entities: int, num_relations: int, ef_edge_index: Optional[Tensor], rf_edge_index: Optional[Tensor]
    ) -> "_Shares":
        """The entity and relation-node shares, dealt by their stored adjacency entries over the views
        they are in (see :class:`RowShares`), and the gathers of a layer's output: ``"nodes"``
        (entities, then relation nodes) and ``"entities"``. Kept while the adjacencies are the same
        tensors."""
        kept = self._kept_shares
        if kept is not None and kept[0] is ef_edge_index and kept[1] is rf_edge_index:
            return kept[2]
        views = self._layers()[0].views
        device = next((adj.device for adj in (ef_edge_index, rf_edge_index) if adj is not None), None)
        entity_entries = torch.zeros(num_entities, dtype=torch.long, device=device)
        relation_entries = None
        if "entity" in views and ef_edge_index is not None:
            entity_entries += ef_edge_index.crow_indices().diff()
        if "relation" in views and rf_edge_index is not None:
            stored = rf_edge_index.crow_indices().diff()
            entity_entries += stored[:num_entities]
            relation_entries = stored[num_entities:]
        entities = RowShares(num_entities, self.world_size, self.rank, entity_entries)
        relations = RowShares(num_relations, self.world_size, self.rank, relation_entries)
        gathers = {
            "nodes": RowGather([entities, relations]),
            "entities": RowGather([entities]),
        }
        shares = (entities, relations, gathers)
        self._kept_shares = (ef_edge_index, rf_edge_index, shares)
        return shares

    def _adjacency_rows(
        self,
        layer: int,
        view: str,
        conv: TwoViewConv,
        adj: Tensor,
        dtype: torch.dtype,
        shares: List[RowShares],
    ) -> Tuple[Tensor, Tensor]:
        """This process's rows of the view's normalised adjacency and their transpose; kept for a layer
        with ``cached=True`` (whose normalised adjacency is kept too), in ``dtype`` and on ``adj``'s
        device."""
        kept = self._rows.get((layer, view))
        if kept is None or kept[2].dtype != dtype or kept[2].device != adj.device:
            normalized = conv.normalized_adjacency(view, adj, adj.size(0), dtype)[0]
            offsets = [0]
            for share in shares[:-1]:
                offsets.append(offsets[-1] + share.count)
            own = torch.cat([offset + share.own for offset, share in zip(offsets, shares)])
            rows = csr_rows(normalized, own)
            rows_t = csr_transpose(rows)
            if not conv.cached:
                return rows, rows_t
            kept = csr_parts(rows) + csr_parts(rows_t)
            self._rows[(layer, view)] = kept
        size = [int(sum(share.own_count for share in shares)), adj.size(1)]
        return csr_tensor(kept[0], kept[1], kept[2], size), csr_tensor(kept[3], kept[4], kept[5], size[::-1])


def shard_encoder(model: torch.nn.Module, group=None) -> torch.nn.Module:
    """Replaces the :class:`~torch_wge.nn.TwoViewEncoder` of ``model`` (a
    :class:`~torch_wge.nn.WGE`, attribute ``encoder``) by a
    :class:`ShardedTwoViewEncoder` over ``group`` that shares its layers;
    a model without an encoder (``num_layers=0``) is left as it is. Returns
    ``model``; its parameters are the same objects."""
    encoder = getattr(model, "encoder", None)
    if isinstance(encoder, TwoViewEncoder) and not isinstance(encoder, ShardedTwoViewEncoder):
        model.encoder = ShardedTwoViewEncoder(encoder, group)
    return model
