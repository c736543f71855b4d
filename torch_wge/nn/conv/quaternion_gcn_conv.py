import math
from typing import Optional

import torch
from torch import Tensor
from torch.nn import Parameter
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.typing import Adj, OptPairTensor, OptTensor, SparseTensor
from torch_geometric.utils import spmm

from torch_wge.utils.quaternion import check_quaternion_size, quaternion_matrix
from torch_wge.utils.sparse import csr_transpose, matmul_with_transpose

#: :func:`gcn_norm` run eagerly inside a :func:`torch.compile` region (one
#: graph break): TorchDynamo cannot trace it on a ``torch.sparse`` adjacency.
_eager_gcn_norm = torch.compiler.disable(gcn_norm)
_eager_csr_transpose = torch.compiler.disable(csr_transpose)


class QuaternionGCNConv(MessagePassing):
    r"""The quaternion graph convolution of QGNN
    (`"Quaternion Graph Neural Networks" <https://arxiv.org/abs/2008.05089>`_),
    the building block of WGE
    (`"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_):

    .. math::
        \mathbf{X}^{\prime} = \mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}}
        \mathbf{\hat{D}}^{-1/2} \left( \mathbf{W} \otimes \mathbf{X} \right)
        + \mathbf{b}

    where :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` has self loops
    inserted, :math:`\hat{D}_{ii} = \sum_{j} \hat{A}_{ij}`, and
    :math:`\mathbf{W} \otimes \mathbf{x}` is the Hamilton product of the
    quaternion weight matrix :math:`\mathbf{W} = W_r + W_i\mathsf{i} +
    W_j\mathsf{j} + W_k\mathsf{k}` with each node's quaternion vector. Node-wise,

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \frac{e_{j,i}}{\sqrt{\hat{d}_j \hat{d}_i}} \, \mathbf{W} \otimes \mathbf{x}_j
        + \mathbf{b}

    Node features use the quaternion block layout ``[r | i | j | k]`` of
    :mod:`torch_wge.utils.quaternion`, so both channel counts must be
    multiples of 4. The product is applied as one matmul with the real
    :math:`4n_{in} \times 4n_{out}` matrix assembled from the four blocks
    (:func:`~torch_wge.utils.quaternion.quaternion_matrix`). There is no
    activation or normalisation inside the layer.

    Args:
        in_channels (int): Size of each input sample (a multiple of 4).
        out_channels (int): Size of each output sample (a multiple of 4).
        cached (bool, optional): If set to :obj:`True`, the layer caches the
            normalised adjacency :math:`\mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}}
            \mathbf{\hat{D}}^{-1/2}` on first execution and reuses it; a
            ``torch.sparse_csr`` adjacency is cached with its transpose, which
            the backward pass multiplies by (twice the adjacency's memory, no
            transposition per step). Only for transductive use, where the
            graph never changes. (default: :obj:`False`)
        add_self_loops (bool, optional): If set to :obj:`False`, does not add
            self loops. (default: :obj:`True`)
        normalize (bool, optional): If set to :obj:`False`, uses the given
            adjacency (and edge weights) as they are. (default: :obj:`True`)
        bias (bool, optional): If set to :obj:`False`, learns no additive bias.
            (default: :obj:`True`)
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
    _cached_transpose: Optional[Tensor]

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        cached: bool = False,
        add_self_loops: bool = True,
        normalize: bool = True,
        bias: bool = True,
        **kwargs,
    ):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        name = self.__class__.__name__
        in_quaternions = check_quaternion_size(in_channels, f"'{name}' in_channels")
        out_quaternions = check_quaternion_size(out_channels, f"'{name}' out_channels")
        if add_self_loops and not normalize:
            raise ValueError(
                f"'{name}' does not support adding self-loops to the graph when no on-the-fly normalization is applied"
            )

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.cached = cached
        self.add_self_loops = add_self_loops
        self.normalize = normalize
        self._cached_edge_index = None
        self._cached_adj_t = None
        self._cached_transpose = None

        self.weight = Parameter(torch.empty(4, in_quaternions, out_quaternions))
        if bias:
            self.bias = Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        r"""Glorot-uniform initialisation of the real matrix the quaternion
        weight represents, :math:`U(-a, a)` with
        :math:`a = \sqrt{6 / (F_{in} + F_{out})}`; zero bias; clears caches."""
        super().reset_parameters()
        bound = math.sqrt(6.0 / (self.in_channels + self.out_channels))
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        self._cached_edge_index = None
        self._cached_adj_t = None
        self._cached_transpose = None

    def quaternion_matrix(self) -> Tensor:
        r"""The real matrix ``[F_in, F_out]`` that applies :math:`\mathbf{W} \otimes`."""
        return quaternion_matrix(self.weight)

    def forward(self, x: Tensor, edge_index: Adj, edge_weight: OptTensor = None) -> Tensor:
        if isinstance(x, (tuple, list)):
            raise ValueError(
                f"'{self.__class__.__name__}' received a tuple of node features; "
                f"bipartite message passing is not supported"
            )
        if x.size(-1) != self.in_channels:
            raise ValueError(
                f"'QuaternionGCNConv' expected {self.in_channels} input "
                f"channels, got node features of shape {list(x.shape)}"
            )

        if self.normalize:
            if isinstance(edge_index, Tensor):
                cache = self._cached_edge_index
                if cache is None:
                    if torch.jit.is_scripting():
                        norm = gcn_norm
                    else:
                        norm = _eager_gcn_norm
                    edge_index, edge_weight = norm(
                        edge_index, edge_weight, x.size(self.node_dim), False, self.add_self_loops, self.flow, x.dtype
                    )
                    if self.cached:
                        self._cached_edge_index = (edge_index, edge_weight)
                        if not torch.jit.is_scripting():
                            if edge_index.layout == torch.sparse_csr:
                                self._cached_transpose = _eager_csr_transpose(edge_index)
                else:
                    edge_index, edge_weight = cache[0], cache[1]
            elif isinstance(edge_index, SparseTensor):
                cache = self._cached_adj_t
                if cache is None:
                    edge_index = gcn_norm(
                        edge_index, edge_weight, x.size(self.node_dim), False, self.add_self_loops, self.flow, x.dtype
                    )
                    if self.cached:
                        self._cached_adj_t = edge_index
                else:
                    edge_index = cache

        x = x @ self.quaternion_matrix()
        # propagate_type: (x: Tensor, edge_weight: OptTensor)
        out = self.propagate(edge_index, x=x, edge_weight=edge_weight)
        if self.bias is not None:
            out = out + self.bias
        return out

    def message(self, x_j: Tensor, edge_weight: OptTensor) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def message_and_aggregate(self, adj_t: Adj, x: Tensor) -> Tensor:
        if not torch.jit.is_scripting():
            # the cached torch.sparse adjacency: backward reuses its cached
            # transpose instead of transposing (and sorting) it on every call
            cache, transpose = self._cached_edge_index, self._cached_transpose
            if cache is not None and transpose is not None and adj_t is cache[0]:
                return matmul_with_transpose(adj_t, transpose, x)
        return spmm(adj_t, x, reduce=self.aggr)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
