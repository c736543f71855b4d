from typing import Optional

import torch
from torch import Tensor
from torch.nn import Parameter
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.typing import Adj, OptTensor

from torch_wge.nn.conv.gcn_normalization import GCNNormalization, gcn_convolution, weighted_message
from torch_wge.nn.dense import QuaternionLinear


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
    multiples of 4. The constructor options and their defaults are
    :class:`~torch_geometric.nn.conv.GCNConv`'s. There is no activation or
    normalisation inside the layer.

    Args:
        in_channels (int): Size of each input sample (a multiple of 4), or
            :obj:`-1` to infer it from the first input.
        out_channels (int): Size of each output sample (a multiple of 4).
        improved (bool, optional): If set to :obj:`True`, the layer computes
            :math:`\mathbf{\hat{A}}` as :math:`\mathbf{A} + 2\mathbf{I}`.
            (default: :obj:`False`)
        cached (bool, optional): If set to :obj:`True`, the layer keeps the
            normalised adjacency of the graph it was computed from and reuses
            it while that same adjacency tensor comes in again; another graph
            (another tensor, or the same one modified in place) is normalised
            anew, so a stale graph is never used. A ``torch.sparse_csr``
            adjacency is kept with its transpose, which the backward pass
            multiplies by. (default: :obj:`False`)
        add_self_loops (bool, optional): If set to :obj:`False`, does not add
            self loops. (default: :obj:`None`: the value of :obj:`normalize`)
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

    #: The arguments of :meth:`propagate` (called by
    #: :func:`~torch_wge.nn.conv.gcn_normalization.gcn_convolution`).
    propagate_type = {"x": Tensor, "edge_weight": OptTensor}

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
        self.gcn_normalization = GCNNormalization(improved, add_self_loops, self.flow, cached)
        self.lin = QuaternionLinear(in_channels, out_channels, bias=False)
        if bias:
            self.bias = Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        r"""Glorot-uniform quaternion weight (:meth:`QuaternionLinear.reset_parameters`),
        zero bias; forgets the cached graph."""
        super().reset_parameters()
        self.lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        self.gcn_normalization.clear()

    def quaternion_matrix(self) -> Tensor:
        r"""The real matrix ``[F_in, F_out]`` that applies :math:`\mathbf{W} \otimes`."""
        return self.lin.matrix()

    def forward(self, x: Tensor, edge_index: Adj, edge_weight: OptTensor = None) -> Tensor:
        if isinstance(x, (tuple, list)):
            raise ValueError(
                f"'{self.__class__.__name__}' received a tuple of node features; "
                f"bipartite message passing is not supported"
            )
        normalization = self.gcn_normalization if self.normalize else None
        return gcn_convolution(self, normalization, self.lin, self.bias, x, edge_index, edge_weight)

    def message(self, x_j: Tensor, edge_weight: OptTensor) -> Tensor:
        return weighted_message(x_j, edge_weight)

    def message_and_aggregate(self, adj_t: Adj, x: Tensor) -> Tensor:
        return self.gcn_normalization.propagate_sparse(adj_t, x, self.aggr)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
