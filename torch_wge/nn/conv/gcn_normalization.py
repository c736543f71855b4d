r"""The GCN normalisation of a view's adjacency, kept for the graph it was
computed from."""

from typing import Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.typing import Adj, OptTensor, SparseTensor
from torch_geometric.utils import spmm

from torch_wge.utils.sparse import csr_transpose, matmul_with_transpose

#: :func:`gcn_norm` of a ``torch.sparse`` adjacency, run eagerly inside a
#: :func:`torch.compile` region: TorchDynamo cannot trace it on sparse layouts
#: (an ``edge_index`` tensor is traced as usual).
_eager_sparse_gcn_norm = torch.compiler.disable(gcn_norm)
_eager_csr_transpose = torch.compiler.disable(csr_transpose)


def _version(tensor: OptTensor) -> Optional[int]:
    return getattr(tensor, "_version", None)


class GCNNormalization:
    r"""The symmetric normalisation of graph convolutions
    (:func:`torch_geometric.nn.conv.gcn_conv.gcn_norm`),

    .. math::
        \mathbf{\hat{A}} = \mathbf{\hat{D}}^{-1/2} (\mathbf{A} + \mathbf{I})
        \mathbf{\hat{D}}^{-1/2}, \qquad \hat{D}_{ii} = \sum_j \hat{A}_{ij},

    (:math:`2\mathbf{I}` with :obj:`improved=True`, no :math:`\mathbf{I}`
    with :obj:`add_self_loops=False`), optionally cached.

    A cached normalisation belongs to the graph it was computed from: it is
    reused only while the same adjacency object (and edge-weight object) comes
    in unchanged — same tensors, not modified in place — with the same node
    count and dtype, and recomputed for any other graph. A model can therefore
    be called on one graph after another, moved with :meth:`~torch.nn.Module.to`
    (which makes new tensors) or given a new graph, and never scores with a
    stale adjacency; training on one fixed graph, which passes the same
    adjacency every step, normalises it once. A ``torch.sparse_csr``
    adjacency is cached with its transpose, which the backward pass of the
    fused message passing multiplies by (:meth:`propagate_sparse`).

    Args:
        improved (bool): Self loops of weight 2.
        add_self_loops (bool): Add self loops (where a node has none).
        flow (str): The message direction of the convolution.
        cached (bool): Keep the result for the graph it was computed from.
    """

    def __init__(self, improved: bool, add_self_loops: bool, flow: str, cached: bool):
        self.improved = improved
        self.add_self_loops = add_self_loops
        self.flow = flow
        self.cached = cached
        self.clear()

    def __deepcopy__(self, memo) -> "GCNNormalization":
        # the copy starts without the cache: it is derived from the graph, and
        # torch.sparse tensors cannot be deep-copied or pickled
        return GCNNormalization(self.improved, self.add_self_loops, self.flow, self.cached)

    def __getstate__(self) -> dict:
        return {name: getattr(self, name) for name in ("improved", "add_self_loops", "flow", "cached")}

    def __setstate__(self, state: dict):
        GCNNormalization.__init__(self, **state)

    def clear(self):
        """Forgets the cached graph."""
        self._source: Optional[tuple] = None
        self._result: Optional[Tuple[Adj, OptTensor]] = None
        self._transpose: Optional[Tensor] = None

    def _is_source(self, edge_index: Adj, edge_weight: OptTensor, num_nodes: int, dtype: torch.dtype) -> bool:
        source = self._source
        return (
            source is not None
            and source[0] is edge_index
            and source[1] == _version(edge_index)
            and source[2] is edge_weight
            and source[3] == _version(edge_weight)
            and source[4:] == (num_nodes, dtype)
        )

    def __call__(
        self, edge_index: Adj, edge_weight: OptTensor, num_nodes: int, dtype: torch.dtype
    ) -> Tuple[Adj, OptTensor]:
        r"""The normalised adjacency of ``edge_index`` over ``num_nodes``
        nodes: ``(edge_index [2, E'], edge_weight [E'])`` for an
        ``edge_index`` tensor (self loops appended), or ``(adj_t, None)`` for
        a sparse adjacency ``adj_t [num_nodes, num_nodes]`` (weights inside)."""
        if self.cached and self._result is not None and self._is_source(edge_index, edge_weight, num_nodes, dtype):
            return self._result
        args = (edge_weight, num_nodes, self.improved, self.add_self_loops, self.flow, dtype)
        if isinstance(edge_index, SparseTensor):
            result = (gcn_norm(edge_index, *args), None)
        elif edge_index.layout != torch.strided:
            result = _eager_sparse_gcn_norm(edge_index, *args)
        else:
            result = gcn_norm(edge_index, *args)
        if self.cached:
            self._source = (edge_index, _version(edge_index), edge_weight, _version(edge_weight), num_nodes, dtype)
            self._result = result
            adj_t = result[0]
            is_csr = isinstance(adj_t, Tensor) and adj_t.layout == torch.sparse_csr
            self._transpose = _eager_csr_transpose(adj_t) if is_csr else None
        return result

    def holds(self, adj_t: Adj) -> bool:
        """Whether ``adj_t`` is this normalisation's cached result."""
        return self._result is not None and adj_t is self._result[0]

    def propagate_sparse(self, adj_t: Adj, x: Tensor, reduce: str) -> Tensor:
        r""":math:`\mathbf{\hat{A}} \mathbf{X}` for the fused message passing
        of a sparse adjacency, ``[num_nodes, F]``: with the cached transpose
        when ``adj_t`` is this normalisation's cached result (no transposing
        and sorting in every backward), else :func:`torch_geometric.utils.spmm`."""
        if self._transpose is not None and self.holds(adj_t):
            return matmul_with_transpose(adj_t, self._transpose, x)
        return spmm(adj_t, x, reduce=reduce)


def gcn_convolution(
    conv: MessagePassing,
    normalization: Optional[GCNNormalization],
    lin: torch.nn.Module,
    bias: OptTensor,
    x: Tensor,
    edge_index: Adj,
    edge_weight: OptTensor = None,
) -> Tensor:
    r"""The update of a graph convolution,
    :math:`\mathbf{\hat{A}} (\mathbf{W} \mathbf{X}) + \mathbf{b}`, ``[num_nodes, F_out]``:
    ``edge_index`` normalised by ``normalization`` (as it is where that is
    :obj:`None`), ``x`` mapped by ``lin`` (:math:`\mathbf{W}`, a quaternion
    or a real weight), the messages passed by ``conv``'s
    :meth:`~torch_geometric.nn.conv.MessagePassing.propagate` (so that its
    hooks and explainer see them) and ``bias`` added. The one update of
    :class:`~torch_wge.nn.QuaternionGCNConv` and of each view of
    :class:`~torch_wge.nn.TwoViewConv`."""
    if normalization is not None:
        edge_index, edge_weight = normalization(edge_index, edge_weight, x.size(int(conv.node_dim)), x.dtype)
    out = conv.propagate(edge_index, x=lin(x), edge_weight=edge_weight)
    return out if bias is None else out + bias


def weighted_message(x_j: Tensor, edge_weight: OptTensor) -> Tensor:
    r"""The message :math:`e_{j,i} \mathbf{x}_j` of a graph convolution, ``[E, F]``."""
    return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j
