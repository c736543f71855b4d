from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Parameter
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.inits import zeros
from torch_geometric.typing import Adj, OptPairTensor, OptTensor, SparseTensor
from torch_geometric.utils import add_self_loops as add_self_loops_fn
from torch_geometric.utils import is_torch_sparse_tensor

from torch_wge.nn.dense import QuaternionLinear
from torch_wge.utils.autograd import matmul_with_transpose
from torch_wge.utils.sparse import (
    csr_edges,
    csr_parts,
    csr_tensor,
    csr_transpose,
    in_function_transform,
    sparse_edges,
    sparse_matmul,
    to_csr,
)

#: A normalised ``torch.sparse`` adjacency :math:`\mathbf{\hat{A}}^{\top}` and its transpose
#: :math:`\mathbf{\hat{A}}` as the parts of two CSR matrices (:func:`~torch_wge.utils.sparse.csr_parts`).
CSRPair = Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]


def sparse_gcn_norm(
    adj_t: Tensor, num_nodes: int, improved: bool, add_self_loops: bool, dtype: Optional[torch.dtype], transpose: bool
) -> Tuple[Tensor, OptTensor]:
    r""":func:`~torch_geometric.nn.conv.gcn_conv.gcn_norm` of a ``torch.sparse`` adjacency
    ``adj_t [num_nodes, num_nodes]`` (weights in its values) and, with :obj:`transpose`, the
    transpose of the result (:obj:`None` without), both then in CSR layout.

    Example:
        >>> adj_t = torch.tensor([[0.0, 1.0], [0.0, 0.0]]).to_sparse_csr()
        >>> norm, norm_t = sparse_gcn_norm(adj_t, 2, False, True, torch.float, True)
        >>> norm.to_dense()
        tensor([[0.5000, 0.7071],
                [0.0000, 1.0000]])
        >>> torch.equal(norm_t.to_dense(), norm.to_dense().t())
        True
    """
    if not torch.jit.is_scripting():
        return _eager_sparse_gcn_norm(adj_t, num_nodes, improved, add_self_loops, dtype, transpose)
    return _sparse_gcn_norm(adj_t, num_nodes, improved, add_self_loops, dtype, transpose)


def _sparse_gcn_norm(
    adj_t: Tensor, num_nodes: int, improved: bool, add_self_loops: bool, dtype: Optional[torch.dtype], transpose: bool
) -> Tuple[Tensor, OptTensor]:
    norm, _ = gcn_norm(adj_t, None, num_nodes, improved, add_self_loops, "source_to_target", dtype)
    if not transpose:
        return norm, None
    norm = to_csr(norm)
    return norm, csr_transpose(norm)


#: run eagerly inside a torch.compile region: TorchDynamo cannot trace gcn_norm on sparse layouts
_eager_sparse_gcn_norm = torch.compiler.disable(_sparse_gcn_norm)


def weighted_message(x_j: Tensor, edge_weight: OptTensor) -> Tensor:
    r"""The message :math:`e_{j,i} \mathbf{x}_j` of a graph convolution, ``[E, F]``."""
    return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j


def aggregate_sparse(adj_t: Adj, x: Tensor, adj: OptTensor, aggr: str) -> Tensor:
    r"""The fused message passing :math:`\mathbf{\hat{A}} \mathbf{X}` of a sparse adjacency
    ``adj_t [N, N]`` and ``x [N, F]``; with a cached adjacency's transpose ``adj``, the backward
    pass multiplies by it instead of transposing ``adj_t`` again."""
    if adj is not None and isinstance(adj_t, Tensor) and aggr in ["add", "sum"] and not torch.jit.is_scripting():
        return matmul_with_transpose(adj_t, adj, x)
    return sparse_matmul(adj_t, x, reduce=aggr)


def cache_fits(cache: OptPairTensor, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether a cached ``(index, weight)`` is on ``device`` and in ``dtype``."""
    index, weight = cache
    return index.device == device and (weight is None or weight.dtype == dtype)


def transformed_gcn_norm(
    adj_t: Tensor,
    cache: Optional[CSRPair],
    num_nodes: int,
    improved: bool,
    add_self_loops: bool,
    normalize: bool,
    dtype: torch.dtype,
    flow: str,
) -> Tuple[Tensor, Tensor]:
    r"""Inside a :mod:`torch.func` transform (:func:`~torch_wge.utils.sparse.in_function_transform`),
    which can neither make nor read a CSR matrix: what a layer propagates for a ``torch.sparse``
    adjacency ``adj_t``, as ``(edge_index, edge_weight)`` (:func:`~torch_wge.utils.sparse.sparse_edges`)
    for its ``edge_index`` path. With :obj:`normalize`, :func:`sparse_gcn_norm`'s weights: the
    layer's :obj:`cache` (its parts, where they fit ``adj_t``'s device and :obj:`dtype`, as the
    layer would use them), or else the weights computed as :func:`sparse_gcn_norm` does (a self
    loop added to every node, one already there too) and not cached; the adjacency's own weights
    without. The cache is only read."""
    if flow != "source_to_target":  # as MessagePassing refuses a sparse adjacency with this flow
        raise ValueError(f"Flow direction '{flow}' is invalid for message propagation via 'torch.sparse.Tensor'")
    if not normalize:
        return sparse_edges(adj_t)
    if cache is not None and cache_fits((cache[0], cache[2]), adj_t.device, dtype):
        return csr_edges(cache[0], cache[1], cache[2])
    edge_index, edge_weight = sparse_edges(adj_t)
    if add_self_loops:
        edge_index, edge_weight = add_self_loops_fn(edge_index, edge_weight, 2.0 if improved else 1.0, num_nodes)
    edge_index, norm = gcn_norm(edge_index, edge_weight, num_nodes, improved, False, flow, dtype)
    assert norm is not None
    return edge_index, norm


class QuaternionGCNConv(MessagePassing):
    r"""The quaternion graph convolution of QGNN
    (`"Quaternion Graph Neural Networks" <https://arxiv.org/abs/2008.05089>`_),
    the building block of WGE
    (`"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_): PyG's
    :class:`~torch_geometric.nn.conv.GCNConv` with a quaternion weight,

    .. math::
        \mathbf{X}^{\prime} = \mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}}
        \mathbf{\hat{D}}^{-1/2} \left( \mathbf{W} \otimes \mathbf{X} \right)
        + \mathbf{b}

    where :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` has self loops
    inserted, :math:`\hat{D}_{ii} = \sum_{j} \hat{A}_{ij}`, and
    :math:`\mathbf{W} \otimes \mathbf{x}` is the Hamilton product of the
    quaternion weight matrix with each node's quaternion vector
    (:class:`~torch_wge.nn.QuaternionLinear`, :attr:`lin`). Node-wise,

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \frac{e_{j,i}}{\sqrt{\hat{d}_j \hat{d}_i}} \, \mathbf{W} \otimes \mathbf{x}_j
        + \mathbf{b}

    Node features use the quaternion block layout ``[r | i | j | k]`` of
    :mod:`torch_wge.utils.quaternion`, so both channel counts must be
    multiples of 4.

    Inside a :mod:`torch.func` transform (``grad``, ``vjp``, ``vmap``, ...),
    which can neither make nor read a CSR matrix, a ``torch.sparse``
    adjacency is propagated as its edges with the same weights
    (:func:`transformed_gcn_norm`): the cache is read there, not written.

    Args:
        in_channels (int): Size of each input sample (a multiple of 4), or
            :obj:`-1` to infer it from the first input.
        out_channels (int): Size of each output sample (a multiple of 4).
        improved (bool, optional): If set to :obj:`True`, the layer computes
            :math:`\mathbf{\hat{A}}` as :math:`\mathbf{A} + 2\mathbf{I}`.
            (default: :obj:`False`)
        cached (bool, optional): If set to :obj:`True`, the layer will cache
            the computation of :math:`\mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}}
            \mathbf{\hat{D}}^{-1/2}` on first execution, and will use the
            cached version for further executions (computed anew after
            :meth:`reset_parameters`, or for features of another dtype or
            device). This parameter should only be set to :obj:`True` in
            transductive learning scenarios. (default: :obj:`False`)
        add_self_loops (bool, optional): If set to :obj:`False`, will not add
            self-loops to the input graph. (default: :obj:`None`: the value
            of :obj:`normalize`)
        normalize (bool, optional): Whether to add self-loops and compute
            symmetric normalization coefficients on-the-fly.
            (default: :obj:`True`)
        bias (bool, optional): If set to :obj:`False`, the layer will not learn
            an additive bias. (default: :obj:`True`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:**
          node features :math:`(|\mathcal{V}|, F_{in})`,
          edge indices :math:`(2, |\mathcal{E}|)` or a sparse adjacency
          :math:`(|\mathcal{V}|, |\mathcal{V}|)`,
          edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})`

    Example:
        >>> conv = QuaternionGCNConv(8, 16)
        >>> x = torch.randn(3, 8)
        >>> edge_index = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
        >>> conv(x, edge_index).shape
        torch.Size([3, 16])
    """

    _cached_edge_index: Optional[OptPairTensor]
    _cached_adj_t: Optional[SparseTensor]
    _cached_csr: Optional[CSRPair]  # a torch.sparse adjacency's, with its transpose

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        improved: bool = False,
        cached: bool = False,
        add_self_loops: Optional[bool] = None,
        normalize: bool = True,
        bias: bool = True,
        **kwargs,
    ):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError(
                f"'{self.__class__.__name__}' does not support adding self-loops to the graph "
                f"when no on-the-fly normalization is applied"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.improved = improved
        self.cached = cached
        self.add_self_loops = add_self_loops
        self.normalize = normalize
        self._cached_edge_index = None
        self._cached_adj_t = None
        self._cached_csr = None
        self.lin = QuaternionLinear(in_channels, out_channels, bias=False)
        if bias:
            self.bias = Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        super().reset_parameters()
        self.lin.reset_parameters()
        zeros(self.bias)
        self._cached_edge_index = None
        self._cached_adj_t = None
        self._cached_csr = None

    def quaternion_matrix(self) -> Tensor:
        r"""The real matrix ``[F_in, F_out]`` that applies :math:`\mathbf{W} \otimes`."""
        return self.lin.matrix()

    def forward(self, x: Tensor, edge_index: Adj, edge_weight: OptTensor = None) -> Tensor:
        if isinstance(x, (tuple, list)):
            raise ValueError(
                f"'{self.__class__.__name__}' received a tuple of node features; "
                f"bipartite message passing is not supported"
            )

        adj: OptTensor = None  # the transpose of a cached torch.sparse adjacency, for the backward pass
        if (
            not torch.jit.is_scripting()
            and in_function_transform()
            and isinstance(edge_index, Tensor)
            and is_torch_sparse_tensor(edge_index)
        ):  # no CSR matrix inside torch.func: its edges instead
            edge_index, edge_weight = transformed_gcn_norm(
                edge_index,
                self._cached_csr,
                x.size(int(self.node_dim)),
                self.improved,
                self.add_self_loops,
                self.normalize,
                x.dtype,
                self.flow,
            )
        elif self.normalize:
            num_nodes = x.size(int(self.node_dim))
            if isinstance(edge_index, Tensor) and is_torch_sparse_tensor(edge_index):
                cache = self._cached_csr
                if cache is None or not cache_fits((cache[0], cache[2]), x.device, x.dtype):
                    edge_index, adj = sparse_gcn_norm(
                        edge_index, num_nodes, self.improved, self.add_self_loops, x.dtype, self.cached
                    )
                    if self.cached and adj is not None:
                        self._cached_csr = csr_parts(edge_index) + csr_parts(adj)
                else:
                    edge_index = csr_tensor(cache[0], cache[1], cache[2], [num_nodes, num_nodes])
                    adj = csr_tensor(cache[3], cache[4], cache[5], [num_nodes, num_nodes])

            elif isinstance(edge_index, Tensor):
                cache = self._cached_edge_index
                if cache is None or not cache_fits(cache, x.device, x.dtype):
                    edge_index, edge_weight = gcn_norm(
                        edge_index, edge_weight, num_nodes, self.improved, self.add_self_loops, self.flow, x.dtype
                    )
                    if self.cached:
                        self._cached_edge_index = (edge_index, edge_weight)
                else:
                    edge_index, edge_weight = cache[0], cache[1]

            elif isinstance(edge_index, SparseTensor):
                cache = self._cached_adj_t
                if cache is None:
                    edge_index = gcn_norm(
                        edge_index, edge_weight, num_nodes, self.improved, self.add_self_loops, self.flow, x.dtype
                    )
                    if self.cached:
                        self._cached_adj_t = edge_index
                else:
                    edge_index = cache

        x = self.lin(x)

        # propagate_type: (x: Tensor, edge_weight: OptTensor, adj: OptTensor)
        out = self.propagate(edge_index, x=x, edge_weight=edge_weight, adj=adj)

        if self.bias is not None:
            out = out + self.bias

        return out

    def message(self, x_j: Tensor, edge_weight: OptTensor) -> Tensor:
        return weighted_message(x_j, edge_weight)

    def message_and_aggregate(self, adj_t: Adj, x: Tensor, adj: OptTensor) -> Tensor:
        return aggregate_sparse(adj_t, x, adj, str(self.aggr))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
