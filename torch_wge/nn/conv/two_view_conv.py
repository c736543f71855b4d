from typing import Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.typing import Adj

from torch_wge.nn.conv.quaternion_gcn_conv import QuaternionGCNConv

#: The graph convolution of each view: the paper's quaternion GCN, or PyG's
#: GCN (ablation 2 of the paper).
CONVS = {"quaternion": QuaternionGCNConv, "gcn": GCNConv}


class TwoViewConv(MessagePassing):
    r"""One layer of the two-view encoder of WGE
    (`"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_, Eqs. 4-7): a graph convolution on
    the entity-focused graph :math:`\mathcal{G}_{ef}` (entities only) and one
    on the relation-focused graph :math:`\mathcal{G}_{rf}` (the entities
    followed by the relation nodes), combined element-wise:

    .. math::
        \mathbf{X}_{ef}' &= g\left(\mathrm{BN}_{ef}\left(\mathbf{\hat{A}}_{ef}
            \left(\mathbf{W}_{ef} \otimes \mathbf{X}\right)
            + \mathbf{b}_{ef}\right)\right) \\
        \begin{bmatrix} \mathbf{X}_{rf}' \\ \mathbf{R}' \end{bmatrix} &=
            g\left(\mathrm{BN}_{rf}\left(\mathbf{\hat{A}}_{rf}
            \left(\mathbf{W}_{rf} \otimes
            \begin{bmatrix} \mathbf{X} \\ \mathbf{R} \end{bmatrix}\right)
            + \mathbf{b}_{rf}\right)\right) \\
        \mathbf{X}' &= \mathbf{X}_{ef}' * \mathbf{X}_{rf}'

    with :math:`\mathbf{\hat{A}} = \mathbf{\hat{D}}^{-1/2} (\mathbf{A} +
    \mathbf{I}) \mathbf{\hat{D}}^{-1/2}` the normalised adjacency of a view,
    :math:`*` the element-wise product, :math:`g = \tanh` and
    :math:`\mathrm{BN}` a :class:`torch.nn.BatchNorm1d`. Each view's
    convolution is a :class:`~torch_wge.nn.QuaternionGCNConv`
    (:attr:`ef_conv`, :attr:`rf_conv`), or PyG's
    :class:`~torch_geometric.nn.conv.GCNConv` with :obj:`conv="gcn"`
    (ablation 2 of the paper). With :obj:`relation_view=False` the layer is
    :math:`\mathbf{X}' = \mathbf{X}_{ef}'` and returns the relations unchanged
    (ablation 3); with :obj:`entity_view=False` it is
    :math:`\mathbf{X}' = \mathbf{X}_{rf}'` (ablation 4, and the Levi graph
    ablation 5 with :class:`~torch_wge.transforms.LeviGraphTransform`'s
    graph as :obj:`rf_edge_index`).

    The message passing of each view is done by its convolution, itself a
    :class:`~torch_geometric.nn.conv.MessagePassing`: hooks such as
    :meth:`register_propagate_forward_hook` go on :attr:`ef_conv` or
    :attr:`rf_conv`, and an explainer's edge mask reaches both (set
    :obj:`rf_conv.explain = False` to explain the entity-focused view alone).
    PyG utilities that count message-passing modules, such as
    :func:`~torch_geometric.utils.get_num_hops`, count the layer and its
    view convolutions.

    Args:
        in_channels (int): Size of each input entity and relation embedding
            (a multiple of 4 for quaternion convolutions).
        out_channels (int): Size of each output embedding (a multiple of 4
            for quaternion convolutions).
        entity_view (bool, optional): Use the entity-focused view.
            (default: :obj:`True`)
        relation_view (bool, optional): Use the relation-focused view.
            (default: :obj:`True`)
        conv (str, optional): :obj:`"quaternion"` or :obj:`"gcn"`.
            (default: :obj:`"quaternion"`)
        batch_norm (bool, optional): Apply :class:`torch.nn.BatchNorm1d`
            after each convolution. (default: :obj:`True`)
        cached (bool, optional): Cache each view's normalised adjacency
            (transductive use only). (default: :obj:`False`)

    Shapes:
        - **input:** entities :math:`(N, F_{in})`, relations
          :math:`(M, F_{in})`, ``ef_edge_index`` :math:`(2, |\mathcal{E}_{ef}|)`
          over the :math:`N` entities, ``rf_edge_index``
          :math:`(2, |\mathcal{E}_{rf}|)` over :math:`N + M` nodes (relation
          :math:`m` is node :math:`N + m`); either may be a sparse adjacency
          instead, and a view the layer does not use may be :obj:`None`.
        - **output:** entities :math:`(N, F_{out})`, relations
          :math:`(M, F_{out})` (the input relations with
          :obj:`relation_view=False`)

    Example:
        >>> conv = TwoViewConv(8, 16)
        >>> x, rel = torch.randn(3, 8), torch.randn(2, 8)
        >>> ef_edge_index = torch.tensor([[0, 1], [1, 0]])
        >>> rf_edge_index = torch.tensor([[0, 3, 2, 4], [3, 0, 4, 2]])
        >>> x, rel = conv(x, rel, ef_edge_index, rf_edge_index)
        >>> x.shape, rel.shape
        (torch.Size([3, 16]), torch.Size([2, 16]))
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        entity_view: bool = True,
        relation_view: bool = True,
        conv: str = "quaternion",
        batch_norm: bool = True,
        cached: bool = False,
    ):
        super().__init__()
        name = self.__class__.__name__
        if conv not in CONVS:
            raise ValueError(f"'{name}' conv must be one of {sorted(CONVS)}, got {conv!r}")
        if not (entity_view or relation_view):
            raise ValueError(f"'{name}' needs at least one of entity_view and relation_view")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.entity_view = entity_view
        self.relation_view = relation_view
        self.conv = conv

        def view_conv(use: bool) -> Optional[MessagePassing]:
            return CONVS[conv](in_channels, out_channels, cached=cached) if use else None

        def view_norm(use: bool) -> Optional[torch.nn.BatchNorm1d]:
            return torch.nn.BatchNorm1d(out_channels) if use and batch_norm else None

        self.ef_conv, self.ef_norm = view_conv(entity_view), view_norm(entity_view)
        self.rf_conv, self.rf_norm = view_conv(relation_view), view_norm(relation_view)

    def reset_parameters(self):
        super().reset_parameters()
        for module in (self.ef_conv, self.ef_norm, self.rf_conv, self.rf_norm):
            if module is not None:
                module.reset_parameters()

    @staticmethod
    def _view(conv: MessagePassing, norm: Optional[torch.nn.Module], x: Tensor, adj: Adj) -> Tensor:
        out = conv(x, adj)
        if norm is not None:
            out = norm(out)
        return torch.tanh(out)

    def forward(
        self,
        x: Tensor,
        rel: Tensor,
        ef_edge_index: Optional[Adj] = None,
        rf_edge_index: Optional[Adj] = None,
    ) -> Tuple[Tensor, Tensor]:
        name = self.__class__.__name__
        if self.entity_view and ef_edge_index is None:
            raise ValueError(f"'{name}' uses the entity-focused view but got no ef_edge_index")
        if self.relation_view and rf_edge_index is None:
            raise ValueError(f"'{name}' uses the relation-focused view but got no rf_edge_index")
        out = None
        if self.relation_view:
            xr = self._view(self.rf_conv, self.rf_norm, torch.cat([x, rel], dim=0), rf_edge_index)
            out, rel = xr[: x.size(0)], xr[x.size(0) :]
        if self.entity_view:
            x_ef = self._view(self.ef_conv, self.ef_norm, x, ef_edge_index)
            out = x_ef if out is None else x_ef * out
        return out, rel

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
            f"entity_view={self.entity_view}, relation_view={self.relation_view}, conv={self.conv!r})"
        )
