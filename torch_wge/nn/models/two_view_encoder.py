from typing import List, Optional, Tuple, cast

import torch
from torch import Tensor
from torch_geometric.typing import Adj, OptTensor

from torch_wge.nn.conv import TwoViewConv


class TwoViewEncoder(torch.nn.Module):
    r"""The two-view encoder of WGE
    (`"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_, Eqs. 4-7): a stack of :math:`K`
    :class:`~torch_wge.nn.TwoViewConv` layers, which returns every layer's
    entity and relation representations (the decoders of
    :class:`~torch_wge.nn.WGE` read them all). With :math:`\mathbf{X}^{(0)}`
    the entity and :math:`\mathbf{R}^{(0)}` the relation input embeddings,

    .. math::
        \left(\mathbf{X}^{(k+1)}, \mathbf{R}^{(k+1)}\right) =
        \mathrm{TwoViewConv}^{(k)}\left(\mathbf{X}^{(k)}, \mathbf{R}^{(k)},
        \mathcal{G}_{ef}, \mathcal{G}_{rf}\right), \qquad k = 0, \ldots, K - 1.

    The ablations of the paper are options of
    :class:`~torch_wge.nn.TwoViewConv`, passed through :obj:`**kwargs`:
    :obj:`quaternion=False` (ablation 2), :obj:`relation_view=False` (3),
    :obj:`entity_view=False` (4), and :obj:`entity_view=False` with the Levi
    graph of :class:`~torch_wge.transforms.LeviGraphTransform` as
    :obj:`rf_edge_index` (5); the relation-focused view without predicate
    entities (1) is the same encoder on that view's graph.

    Args:
        channels (int): Size of every embedding (a multiple of 4 for
            quaternion weights).
        num_layers (int): Number of layers :math:`K`.
        **kwargs (optional): Arguments of every
            :class:`~torch_wge.nn.TwoViewConv` layer (:obj:`entity_view`,
            :obj:`relation_view`, :obj:`quaternion`, :obj:`act`, :obj:`norm`,
            :obj:`cached`, :obj:`normalize`, ...).

    Shapes:
        - **input:** entities ``x [N, C]``, relations ``rel [M, C]``,
          ``ef_edge_index [2, E_ef]`` over the ``N`` entities,
          ``rf_edge_index [2, E_rf]`` over ``N + M`` nodes (relation ``m`` is
          node ``N + m``; a batch's ``batch.rf_edge_index``); either may be a
          sparse adjacency instead; edge weights ``ef_edge_weight [E_ef]``,
          ``rf_edge_weight [E_rf]`` *(optional)*.
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

    def __init__(self, channels: int, num_layers: int, **kwargs):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"'{self.__class__.__name__}' needs num_layers >= 1, got {num_layers}")
        self.channels = channels
        self.num_layers = num_layers
        self.convs = torch.nn.ModuleList(TwoViewConv(channels, channels, **kwargs) for _ in range(num_layers))

    def reset_parameters(self):
        for conv in cast(List[TwoViewConv], self.convs):
            conv.reset_parameters()

    def forward(
        self,
        x: Tensor,
        rel: Tensor,
        ef_edge_index: Optional[Adj] = None,
        rf_edge_index: Optional[Adj] = None,
        ef_edge_weight: OptTensor = None,
        rf_edge_weight: OptTensor = None,
    ) -> List[Tuple[Tensor, Tensor]]:
        states = [(x, rel)]
        for conv in self.convs:
            x, rel = conv(x, rel, ef_edge_index, rf_edge_index, ef_edge_weight, rf_edge_weight)
            states.append((x, rel))
        return states

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.channels}, num_layers={self.num_layers}, layer={self.convs[0]!r})"
