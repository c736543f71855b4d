import re
from typing import List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.typing import Adj

from torch_wge.nn.conv import TwoViewConv
from torch_wge.nn.conv.two_view_conv import CONVS  # noqa: F401 (re-exported from its former home)
from torch_wge.utils.quaternion import check_quaternion_size

#: A key of an encoder state dict written before the encoder became a stack of
#: :class:`~torch_wge.nn.TwoViewConv` layers: ``ef_convs.{k}.weight`` and the like.
_LEGACY_KEY = re.compile(r"^(.*?)(ef|rf)_(conv|norm)s\.(\d+)\.(.+)$")


def current_key(key: str) -> str:
    """The name today of a state-dict entry of a pre-:class:`~torch_wge.nn.TwoViewConv`
    encoder (``[prefix]ef_convs.{k}.rest`` is ``[prefix]convs.{k}.ef_conv.rest``);
    other keys are returned unchanged.

    Example:
        >>> current_key("encoder.rf_norms.1.running_mean")
        'encoder.convs.1.rf_norm.running_mean'
    """
    match = _LEGACY_KEY.match(key)
    if match is None:
        return key
    prefix, view, module, k, rest = match.groups()
    return f"{prefix}convs.{k}.{view}_{module}.{rest}"


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

    The ablations of the paper are the options of
    :class:`~torch_wge.nn.TwoViewConv`: :obj:`conv="gcn"` (ablation 2),
    :obj:`relation_view=False` (3), :obj:`entity_view=False` (4), and
    :obj:`entity_view=False` with the Levi graph of
    :class:`~torch_wge.transforms.LeviGraphTransform` as
    :obj:`rf_edge_index` (5); the relation-focused view without predicate
    entities (1) is the same encoder on that view's graph.

    State dicts written before the encoder became a stack of layers
    (``ef_convs.{k}.*``, ``ef_norms.{k}.*``, ``rf_convs.{k}.*``,
    ``rf_norms.{k}.*``) load as they are: their keys are renamed to
    ``convs.{k}.ef_conv.*``, ``convs.{k}.ef_norm.*``, ... on loading. The
    order of :meth:`parameters` changed with them (layer by layer, not view
    by view), so an optimizer state saved before, which is positional, does
    not fit an encoder of two or more layers.

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
        if conv == "quaternion":
            check_quaternion_size(channels, f"'{name}' channels")
        if num_layers < 1:
            raise ValueError(f"'{name}' needs num_layers >= 1, got {num_layers}")
        self.channels = channels
        self.num_layers = num_layers
        self.entity_view = entity_view
        self.relation_view = relation_view
        self.conv = conv
        self.convs = torch.nn.ModuleList(
            TwoViewConv(channels, channels, entity_view, relation_view, conv, batch_norm, cached)
            for _ in range(num_layers)
        )

    def reset_parameters(self):
        for conv in self.convs:
            conv.reset_parameters()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints written before the encoder became a stack of TwoViewConv
        # layers name each view's modules per list (``ef_convs.{k}.weight``);
        # they load as ``convs.{k}.ef_conv.weight``.
        for key in [key for key in state_dict if key.startswith(prefix) and current_key(key) != key]:
            state_dict[current_key(key)] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(
        self,
        x: Tensor,
        rel: Tensor,
        ef_edge_index: Optional[Adj] = None,
        rf_edge_index: Optional[Adj] = None,
    ) -> List[Tuple[Tensor, Tensor]]:
        states = [(x, rel)]
        for conv in self.convs:
            x, rel = conv(x, rel, ef_edge_index, rf_edge_index)
            states.append((x, rel))
        return states

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.channels}, num_layers={self.num_layers}, "
            f"entity_view={self.entity_view}, relation_view={self.relation_view}, conv={self.conv!r})"
        )
