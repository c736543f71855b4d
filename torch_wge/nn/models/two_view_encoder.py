from typing import List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.nn import GCNConv
from torch_geometric.typing import Adj

from torch_wge.nn.conv import QuaternionGCNConv
from torch_wge.utils.quaternion import check_quaternion_size

CONVS = {"quaternion": QuaternionGCNConv, "gcn": GCNConv}


class TwoViewEncoder(torch.nn.Module):
    r"""The two-view encoder of WGE
    (`"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_, Eqs. 4-7).

    With :math:`\mathbf{X}^{(0)}` the entity and :math:`\mathbf{R}^{(0)}` the
    relation input embeddings, each layer :math:`k = 0, \ldots, K-1` runs one
    convolution on the entity-focused graph :math:`\mathcal{G}_{ef}` (entities
    only) and one on the relation-focused graph :math:`\mathcal{G}_{rf}`
    (entities followed by relation nodes):

    .. math::
        \mathbf{X}_{ef}' &= g\left(\mathrm{BN}\left(\mathrm{Conv}_{ef}^{(k)}
            (\mathbf{X}^{(k)}, \mathbf{A}_{ef})\right)\right) \\
        [\mathbf{X}_{rf}' ; \mathbf{R}'] &= g\left(\mathrm{BN}\left(
            \mathrm{Conv}_{rf}^{(k)}([\mathbf{X}^{(k)} ; \mathbf{R}^{(k)}],
            \mathbf{A}_{rf})\right)\right) \\
        \mathbf{X}^{(k+1)} &= \mathbf{X}_{ef}' * \mathbf{X}_{rf}', \qquad
        \mathbf{R}^{(k+1)} = \mathbf{R}'

    with :math:`*` the element-wise product, :math:`g = \tanh` and
    :math:`\mathrm{Conv}` a :class:`~torch_wge.nn.QuaternionGCNConv`. The
    ablations of the paper are options: :obj:`conv="gcn"` uses PyG's
    :class:`~torch_geometric.nn.conv.GCNConv` (ablation 2),
    :obj:`relation_view=False` the entity-focused view only
    (:math:`\mathbf{X}^{(k+1)} = \mathbf{X}_{ef}'`, relations passed through
    unchanged; ablation 3), :obj:`entity_view=False` the relation-focused view
    only (:math:`\mathbf{X}^{(k+1)} = \mathbf{X}_{rf}'`; ablation 4). The Levi
    graph ablation (5) is :obj:`entity_view=False` with the Levi graph
    (:class:`~torch_wge.transforms.LeviGraphTransform`) passed as
    :obj:`rf_edge_index`; the relation-focused view without predicate
    entities (1) is the same encoder on that view's graph.

    Args:
        channels (int): Size of every embedding (a multiple of 4 for
            quaternion convolutions).
        num_layers (int): Number of layers :math:`K`.
        entity_view (bool, optional): Use the entity-focused view.
            (default: :obj:`True`)
        relation_view (bool, optional): Use the relation-focused view.
            (default: :obj:`True`)
        conv (str, optional): :obj:`"quaternion"` or :obj:`"gcn"`.
            (default: :obj:`"quaternion"`)
        batch_norm (bool, optional): Apply :class:`torch.nn.BatchNorm1d` after
            each convolution. (default: :obj:`True`)
        cached (bool, optional): Cache each convolution's normalised
            adjacency (transductive use only). (default: :obj:`False`)

    Shapes:
        - **input:** entities ``x [N, C]``, relations ``rel [M, C]``,
          ``ef_edge_index [2, E_ef]`` over the ``N`` entities,
          ``rf_edge_index [2, E_rf]`` over ``N + M`` nodes (relation ``m`` is
          node ``N + m``); either may be a sparse adjacency instead.
        - **output:** a list of ``K + 1`` pairs ``(x_k [N, C], rel_k [M, C])``,
          the input first.

    Example:
        >>> encoder = TwoViewEncoder(8, num_layers=2)
        >>> x, rel = torch.randn(3, 8), torch.randn(2, 8)
        >>> ef = torch.tensor([[0, 1], [1, 0]])
        >>> rf = torch.tensor([[0, 3, 2, 4], [3, 0, 4, 2]])
        >>> [tuple(h.shape) for h, _ in encoder(x, rel, ef, rf)]
        [(3, 8), (3, 8), (3, 8)]
    """

    def __init__(
        self,
        channels: int,
        num_layers: int,
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
        if conv == "quaternion":
            check_quaternion_size(channels, f"'{name}' channels")
        if num_layers < 1:
            raise ValueError(f"'{name}' needs num_layers >= 1, got {num_layers}")
        if not (entity_view or relation_view):
            raise ValueError(f"'{name}' needs at least one of entity_view and relation_view")
        self.channels = channels
        self.num_layers = num_layers
        self.entity_view = entity_view
        self.relation_view = relation_view
        self.conv = conv

        def layers(use: bool) -> Optional[torch.nn.ModuleList]:
            if not use:
                return None
            return torch.nn.ModuleList(
                CONVS[conv](channels, channels, cached=cached) for _ in range(num_layers)
            )

        def norms(use: bool) -> Optional[torch.nn.ModuleList]:
            if not (use and batch_norm):
                return None
            return torch.nn.ModuleList(torch.nn.BatchNorm1d(channels) for _ in range(num_layers))

        self.ef_convs, self.ef_norms = layers(entity_view), norms(entity_view)
        self.rf_convs, self.rf_norms = layers(relation_view), norms(relation_view)

    def reset_parameters(self):
        for modules in (self.ef_convs, self.ef_norms, self.rf_convs, self.rf_norms):
            for module in modules or []:
                module.reset_parameters()

    @staticmethod
    def _layer(conv, norm, x: Tensor, adj: Adj) -> Tensor:
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
    ) -> List[Tuple[Tensor, Tensor]]:
        name = self.__class__.__name__
        if self.entity_view and ef_edge_index is None:
            raise ValueError(f"'{name}' uses the entity-focused view but got no ef_edge_index")
        if self.relation_view and rf_edge_index is None:
            raise ValueError(f"'{name}' uses the relation-focused view but got no rf_edge_index")
        num_entities = x.size(0)
        states = [(x, rel)]
        for k in range(self.num_layers):
            x_next = None
            if self.relation_view:
                norm = self.rf_norms[k] if self.rf_norms is not None else None
                xr = self._layer(self.rf_convs[k], norm, torch.cat([x, rel], dim=0), rf_edge_index)
                x_next, rel = xr[:num_entities], xr[num_entities:]
            if self.entity_view:
                norm = self.ef_norms[k] if self.ef_norms is not None else None
                x_ef = self._layer(self.ef_convs[k], norm, x, ef_edge_index)
                x_next = x_ef if x_next is None else x_ef * x_next
            x = x_next
            states.append((x, rel))
        return states

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.channels}, num_layers={self.num_layers}, "
            f"entity_view={self.entity_view}, relation_view={self.relation_view}, conv={self.conv!r})"
        )
