import re
import warnings
from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Parameter
from torch_geometric.nn import Linear
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.resolver import activation_resolver, normalization_resolver
from torch_geometric.typing import Adj, OptTensor

from torch_wge.nn.conv.gcn_normalization import GCNNormalization, weighted_message
from torch_wge.nn.dense import QuaternionLinear

#: The two views of a layer: the entity-focused and the relation-focused graph.
VIEW_NAMES = ("ef", "rf")


#: A key of a layer's state dict written when each view was a convolution of
#: its own: ``ef_conv.weight`` (``ef_conv.lin.weight`` for a GCN) and ``ef_conv.bias``.
_CONV_KEY = re.compile(r"^(.*?)(ef|rf)_conv\.(weight|lin\.weight|bias)$")


def current_layer_key(key: str) -> str:
    """The name today of a state-dict entry of a :class:`TwoViewConv` saved
    when each view was a convolution of its own; other keys are returned
    unchanged.

    Example:
        >>> current_layer_key("encoder.convs.0.rf_conv.weight"), current_layer_key("ef_conv.bias")
        ('encoder.convs.0.rf_lin.weight', 'ef_bias')
    """
    match = _CONV_KEY.match(key)
    if match is None:
        return key
    prefix, view, name = match.groups()
    return f"{prefix}{view}_bias" if name == "bias" else f"{prefix}{view}_lin.weight"


def quaternion_from_conv(name: str, conv: str) -> bool:
    """The :obj:`quaternion` setting that the deprecated :obj:`conv` name
    (:obj:`"quaternion"` or :obj:`"gcn"`) of ``name`` stands for, with its
    deprecation warning."""
    warnings.warn(f"'{name}(conv=...)' is deprecated: use quaternion={conv == 'quaternion'}", DeprecationWarning)
    if conv not in ("quaternion", "gcn"):
        raise ValueError(f"'{name}' conv must be 'quaternion' or 'gcn', got {conv!r}")
    return conv == "quaternion"


def _view_norm(norm: Union[str, Callable, torch.nn.Module, None], channels: int, kwargs: Dict[str, Any]):
    if norm is None:
        return None
    if norm == "batch_norm":  # a plain BatchNorm1d, as the paper (and saved models) have it
        return torch.nn.BatchNorm1d(channels, **kwargs)
    return normalization_resolver(norm, channels, **kwargs)


class TwoViewConv(MessagePassing):
    r"""One layer of the two-view encoder of WGE
    (`"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_, Eqs. 4-7): a graph convolution on
    the entity-focused graph :math:`\mathcal{G}_{ef}` (entities only) and one
    on the relation-focused graph :math:`\mathcal{G}_{rf}` (entity and
    relation nodes), combined element-wise:

    .. math::
        \mathbf{X}_{ef}' &= g\left(\mathrm{norm}_{ef}\left(\mathbf{\hat{A}}_{ef}
            \left(\mathbf{W}_{ef} \otimes \mathbf{X}\right)
            + \mathbf{b}_{ef}\right)\right) \\
        \begin{bmatrix} \mathbf{X}_{rf}' \\ \mathbf{R}' \end{bmatrix} &=
            g\left(\mathrm{norm}_{rf}\left(\mathbf{\hat{A}}_{rf}
            \left(\mathbf{W}_{rf} \otimes
            \begin{bmatrix} \mathbf{X} \\ \mathbf{R} \end{bmatrix}\right)
            + \mathbf{b}_{rf}\right)\right) \\
        \mathbf{X}' &= \mathbf{X}_{ef}' * \mathbf{X}_{rf}'

    with :math:`\mathbf{\hat{A}} = \mathbf{\hat{D}}^{-1/2} (\mathbf{A} +
    \mathbf{I}) \mathbf{\hat{D}}^{-1/2}` the normalised adjacency of a view,
    :math:`*` the element-wise product, :math:`g = \tanh` and a batch norm
    by default. :math:`\mathbf{W} \otimes` is a
    :class:`~torch_wge.nn.QuaternionLinear` (:attr:`ef_lin`, :attr:`rf_lin`),
    or a real matrix with :obj:`quaternion=False` (ablation 2 of the paper:
    each view a :class:`~torch_geometric.nn.conv.GCNConv`). With
    :obj:`relation_view=False` the layer is :math:`\mathbf{X}' =
    \mathbf{X}_{ef}'` and returns the relations unchanged (ablation 3); with
    :obj:`entity_view=False` it is :math:`\mathbf{X}' = \mathbf{X}_{rf}'`
    (ablation 4, and the Levi graph ablation 5 with
    :class:`~torch_wge.transforms.LeviGraphTransform`'s graph as
    :obj:`rf_edge_index`).

    The layer does the message passing of both views itself (one
    :meth:`propagate` per view), so it is one hop for PyG's utilities such as
    :func:`~torch_geometric.utils.get_num_hops`, and its propagate and
    message hooks see both views. An :class:`~torch_geometric.explain.Explainer`
    edge mask applies to the view whose ``edge_index`` it was made for (the
    one with as many edges as the mask); give that view an ``edge_index``
    tensor, not a sparse adjacency.

    In a :class:`~torch_geometric.data.Batch` of
    :class:`~torch_wge.transforms.TwoViewData` the relation-focused nodes lie
    graph by graph (entities of graph 0, relations of graph 0, entities of
    graph 1, ...), while :obj:`x` and :obj:`rel` hold all entities and all
    relations: pass :obj:`rf_node_type=batch.rf_node_type` (0 for an entity,
    1 for a relation node) so that each graph gets its own result. Without it
    the relation-focused nodes are taken to be :math:`[\mathbf{X};
    \mathbf{R}]`, the layout of a single graph.

    Args:
        in_channels (int): Size of each input entity and relation embedding
            (a multiple of 4 for quaternion weights), or :obj:`-1` to infer
            it from the first input.
        out_channels (int): Size of each output embedding (a multiple of 4
            for quaternion weights).
        entity_view (bool, optional): Use the entity-focused view.
            (default: :obj:`True`)
        relation_view (bool, optional): Use the relation-focused view.
            (default: :obj:`True`)
        quaternion (bool, optional): Quaternion weights; :obj:`False` for
            real ones (a GCN per view). (default: :obj:`True`)
        act (str or Callable, optional): The activation :math:`g`, anything
            :func:`torch_geometric.nn.resolver.activation_resolver` takes.
            (default: :obj:`"tanh"`)
        norm (str or Callable, optional): The normalisation after each
            view's convolution: :obj:`"batch_norm"` (a
            :class:`torch.nn.BatchNorm1d`), :obj:`None`, or anything
            :func:`torch_geometric.nn.resolver.normalization_resolver` takes.
            (default: :obj:`"batch_norm"`)
        act_kwargs (Dict[str, Any], optional): Arguments of :obj:`act`.
        norm_kwargs (Dict[str, Any], optional): Arguments of :obj:`norm`.
        improved (bool, optional): :math:`\mathbf{A} + 2\mathbf{I}` in the
            normalised adjacencies. (default: :obj:`False`)
        cached (bool, optional): Keep each view's normalised adjacency for the
            graph it was computed from (see
            :class:`~torch_wge.nn.QuaternionGCNConv`). (default: :obj:`False`)
        bias (bool, optional): Learn the biases :math:`\mathbf{b}`.
            (default: :obj:`True`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:** entities :math:`(N, F_{in})`, relations
          :math:`(M, F_{in})`, ``ef_edge_index`` :math:`(2, |\mathcal{E}_{ef}|)`
          over the :math:`N` entities, ``rf_edge_index``
          :math:`(2, |\mathcal{E}_{rf}|)` over :math:`N + M` nodes (relation
          :math:`m` is node :math:`N + m`, or as ``rf_node_type`` :math:`(N +
          M)` says); either may be a sparse adjacency instead, and a view the
          layer does not use may be :obj:`None`.
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
        quaternion: bool = True,
        act: Union[str, Callable, None] = "tanh",
        norm: Union[str, Callable, None] = "batch_norm",
        act_kwargs: Optional[Dict[str, Any]] = None,
        norm_kwargs: Optional[Dict[str, Any]] = None,
        improved: bool = False,
        cached: bool = False,
        bias: bool = True,
        conv: Optional[str] = None,
        batch_norm: Optional[bool] = None,
        **kwargs,
    ):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        name = self.__class__.__name__
        if conv is not None:
            quaternion = quaternion_from_conv(name, conv)
        if batch_norm is not None:
            warnings.warn(
                f"'{name}(batch_norm=...)' is deprecated: use norm='batch_norm' or norm=None", DeprecationWarning
            )
            norm = "batch_norm" if batch_norm else None
        if not (entity_view or relation_view):
            raise ValueError(f"'{name}' needs at least one of entity_view and relation_view")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.entity_view = entity_view
        self.relation_view = relation_view
        self.quaternion = quaternion
        self.act = activation_resolver(act, **(act_kwargs or {})) if act is not None else None

        for view, used in zip(VIEW_NAMES, (entity_view, relation_view)):
            if quaternion:
                lin = QuaternionLinear(in_channels, out_channels, bias=False) if used else None
            else:
                lin = Linear(in_channels, out_channels, bias=False, weight_initializer="glorot") if used else None
            setattr(self, f"{view}_lin", lin)
            setattr(self, f"{view}_bias", Parameter(torch.empty(out_channels)) if used and bias else None)
            setattr(self, f"{view}_norm", _view_norm(norm, out_channels, norm_kwargs or {}) if used else None)
            gcn_normalization = GCNNormalization(improved, True, self.flow, cached) if used else None
            setattr(self, f"_{view}_normalization", gcn_normalization)
        self._propagating_view: Optional[str] = None
        self._explained_view: Optional[str] = None
        self.reset_parameters()

    def reset_parameters(self):
        super().reset_parameters()
        for view in VIEW_NAMES:
            for part in ("lin", "norm"):
                module = getattr(self, f"{view}_{part}")
                if module is not None and hasattr(module, "reset_parameters"):
                    module.reset_parameters()
            bias = getattr(self, f"{view}_bias")
            if bias is not None:
                torch.nn.init.zeros_(bias)
            normalization = getattr(self, f"_{view}_normalization")
            if normalization is not None:
                normalization.clear()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # layers saved when each view was a convolution of its own (see current_layer_key)
        for key in [key for key in state_dict if key.startswith(prefix) and current_layer_key(key) != key]:
            state_dict[current_layer_key(key)] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _update_view(self, view: str, h: Tensor, adj: Adj) -> Tensor:
        """g(norm(Â (W ⊗ h) + b)) of one view, ``[nodes, F_out]``."""
        adj, edge_weight = getattr(self, f"_{view}_normalization")(adj, None, h.size(0), h.dtype)
        h = getattr(self, f"{view}_lin")(h)
        self._propagating_view = view
        # propagate_type: (x: Tensor, edge_weight: OptTensor)
        h = self.propagate(adj, x=h, edge_weight=edge_weight)
        self._propagating_view = None
        bias, norm = getattr(self, f"{view}_bias"), getattr(self, f"{view}_norm")
        if bias is not None:
            h = h + bias
        if norm is not None:
            h = norm(h)
        return self.act(h) if self.act is not None else h

    def forward(
        self,
        x: Tensor,
        rel: Tensor,
        ef_edge_index: Optional[Adj] = None,
        rf_edge_index: Optional[Adj] = None,
        rf_node_type: OptTensor = None,
    ) -> Tuple[Tensor, Tensor]:
        name = self.__class__.__name__
        if self.entity_view and ef_edge_index is None:
            raise ValueError(f"'{name}' uses the entity-focused view but got no ef_edge_index")
        if self.relation_view and rf_edge_index is None:
            raise ValueError(f"'{name}' uses the relation-focused view but got no rf_edge_index")
        if self.explain:
            self._explained_view = self._view_of_edge_mask(ef_edge_index, rf_edge_index)
        out = None
        if self.relation_view:
            to_rf, from_rf = _relation_focused_order(x.size(0), rel.size(0), rf_node_type, name)
            nodes = torch.cat([x, rel], dim=0)
            h = self._update_view("rf", nodes if to_rf is None else nodes.index_select(0, to_rf), rf_edge_index)
            h = h if from_rf is None else h.index_select(0, from_rf)
            # split, not two slices: its backward writes both gradients into one tensor, where each
            # slice's would zero a whole [N + M, F] tensor and copy its part in
            out, rel = h.split([x.size(0), rel.size(0)])
        if self.entity_view:
            x_ef = self._update_view("ef", x, ef_edge_index)
            out = x_ef if out is None else x_ef * out
        return out, rel

    def message(self, x_j: Tensor, edge_weight: OptTensor) -> Tensor:
        return weighted_message(x_j, edge_weight)

    def message_and_aggregate(self, adj_t: Adj, x: Tensor) -> Tensor:
        return getattr(self, f"_{self._propagating_view}_normalization").propagate_sparse(adj_t, x, self.aggr)

    def _view_of_edge_mask(self, ef_edge_index: Optional[Adj], rf_edge_index: Optional[Adj]) -> str:
        """The view an explainer's edge mask was made for: the one with as many edges."""
        size = self._edge_mask.size(0)
        fits = [
            view
            for view, adj in zip(VIEW_NAMES, (ef_edge_index, rf_edge_index))
            if isinstance(adj, Tensor) and adj.layout == torch.strided and adj.size(1) == size
        ]
        if len(fits) != 1:
            raise ValueError(
                f"'{self.__class__.__name__}' got an edge mask of {size} edges, which fits "
                f"{'both views' if fits else 'neither view'}: explain one view's edge_index tensor"
            )
        return fits[0]

    def explain_message(self, inputs: Tensor, dim_size: Optional[int]) -> Tensor:
        if self._propagating_view != self._explained_view:
            return inputs  # the other view: not explained
        return super().explain_message(inputs, dim_size)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
            f"entity_view={self.entity_view}, relation_view={self.relation_view}, quaternion={self.quaternion})"
        )


def _relation_focused_order(
    num_entities: int, num_relations: int, rf_node_type: OptTensor, name: str
) -> Tuple[OptTensor, OptTensor]:
    r"""Index maps between ``[x; rel]`` and the relation-focused node order
    ``rf_node_type [N + M]`` (0: entity, 1: relation), entities and relations
    each kept in their order: ``to_rf`` puts ``[x; rel]`` in that order,
    ``from_rf`` back. :obj:`None` for the layout ``[x; rel]`` itself."""
    if rf_node_type is None:
        return None, None
    if rf_node_type.numel() != num_entities + num_relations or int((rf_node_type == 0).sum()) != num_entities:
        raise ValueError(
            f"'{name}' got rf_node_type with {int((rf_node_type == 0).sum())} entities and "
            f"{rf_node_type.numel()} nodes for {num_entities} entities and {num_relations} relations"
        )
    from_rf = torch.sort(rf_node_type, stable=True).indices  # rf position of the i-th row of [x; rel]
    to_rf = torch.empty_like(from_rf)
    to_rf[from_rf] = torch.arange(from_rf.numel(), device=from_rf.device)
    return to_rf, from_rf
