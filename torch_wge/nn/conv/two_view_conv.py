from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Parameter
from torch_geometric.nn import Linear
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.resolver import activation_resolver, normalization_resolver
from torch_geometric.typing import Adj, OptTensor
from torch_geometric.utils import spmm

from torch_wge.nn.conv.gcn_normalization import GCNNormalization, gcn_convolution, weighted_message
from torch_wge.nn.dense import QuaternionLinear

#: The views of a layer, in the order the layer computes them: the
#: relation-focused view (over entities and relation nodes), then the
#: entity-focused view (over entities).
VIEWS = ("relation", "entity")

#: ``normalize(norms, inputs)``: each input through its norm (itself where the
#: norm is :obj:`None`), as :meth:`TwoViewConv.activate` applies them.
Normalize = Callable[[Sequence[Optional[torch.nn.Module]], Sequence[Tensor]], List[Tensor]]


def normalize_each(norms: Sequence[Optional[torch.nn.Module]], inputs: Sequence[Tensor]) -> List[Tensor]:
    """``norms[i](inputs[i])`` for every :math:`i`, ``inputs[i]`` itself where ``norms[i]`` is :obj:`None`."""
    return [h if norm is None else norm(h) for norm, h in zip(norms, inputs)]


def _view_norm(norm: Union[str, Callable, torch.nn.Module, None], channels: int, kwargs: Dict[str, Any]):
    if norm is None:
        return None
    if norm == "batch_norm":  # a plain BatchNorm1d, as the paper has it
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
    by default. Node-wise, the view update of node :math:`i` is
    :math:`g(\mathrm{norm}(\sum_{j \in \mathcal{N}(i) \cup \{i\}}
    \frac{1}{\sqrt{\hat{d}_j \hat{d}_i}} \mathbf{W} \otimes \mathbf{h}_j +
    \mathbf{b}))`, the update of :class:`~torch_wge.nn.QuaternionGCNConv`
    followed by a norm and the activation.

    The layer holds each view's weight :math:`\mathbf{W}`
    (:attr:`entity_lin`, :attr:`relation_lin`: a
    :class:`~torch_wge.nn.QuaternionLinear`, or a real matrix with
    :obj:`quaternion=False`, ablation 2 of the paper: a
    :class:`~torch_geometric.nn.conv.GCNConv` per view), bias
    (:attr:`entity_bias`, :attr:`relation_bias`) and norm
    (:attr:`entity_norm`, :attr:`relation_norm`). With
    :obj:`relation_view=False` the layer is :math:`\mathbf{X}' =
    \mathbf{X}_{ef}'` and returns the relations unchanged (ablation 3); with
    :obj:`entity_view=False` it is :math:`\mathbf{X}' = \mathbf{X}_{rf}'`
    (ablation 4, and the Levi graph ablation 5 with
    :class:`~torch_wge.transforms.LeviGraphTransform`'s graph as
    :obj:`rf_edge_index`).

    The layer propagates over both views itself, one :meth:`propagate` per
    view (as :class:`~torch_geometric.nn.conv.RGCNConv` propagates once per
    relation type), so PyG's utilities see one message-passing layer per hop
    (:func:`~torch_geometric.utils.get_num_hops` of a stack of :math:`K`
    layers is :math:`K`), and its propagate and message hooks see both
    views. An :class:`~torch_geometric.explain.Explainer`'s edge mask
    applies to the view whose ``edge_index`` it was made for (the one with
    as many edges as the mask); give that view an ``edge_index`` tensor, not
    a sparse adjacency.

    The steps of a layer are public, so that an encoder computing the rows
    of a view in parts (as
    :class:`~torch_wge.distributed.ShardedTwoViewEncoder` does, one share
    of the rows per process) runs the same layer:
    :meth:`normalized_adjacency` (:math:`\mathbf{\hat{A}}`),
    :meth:`convolve` (:math:`\mathbf{\hat{A}} (\mathbf{W} \otimes
    \mathbf{H}) + \mathbf{b}`), :meth:`transform` (:math:`\mathbf{W}
    \otimes \mathbf{S} + \mathbf{b}` of a sum :math:`\mathbf{S} =
    \mathbf{\hat{A}} \mathbf{H}` taken elsewhere: the same, since
    :math:`\mathbf{W} \otimes` acts on each row), :meth:`activate`
    (:math:`g(\mathrm{norm}(\cdot))`) and :meth:`combine` (Eqs. 5 and 7).

    In a :class:`~torch_geometric.data.Batch` of
    :class:`~torch_wge.transforms.TwoViewData`, :obj:`x` holds all entities
    and :obj:`rel` all relation nodes, graph by graph, and
    ``batch.rf_edge_index`` indexes :math:`[\mathbf{X}; \mathbf{R}]` in that
    layout, so each graph gets its own result.

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
          :math:`m` is node :math:`N + m`); either may be a sparse adjacency
          (``torch.sparse`` or ``SparseTensor``) instead, and a view the
          layer does not use may be :obj:`None`.
        - **output:** entities :math:`(N, F_{out})`, relations
          :math:`(M, F_{out})` (the input relations with
          :obj:`relation_view=False`)

    Example:
        >>> conv = TwoViewConv(8, 16)
        >>> conv
        TwoViewConv(8, 16, entity_view=True, relation_view=True, quaternion=True)
        >>> x, rel = torch.randn(3, 8), torch.randn(2, 8)
        >>> ef_edge_index = torch.tensor([[0, 1], [1, 0]])
        >>> rf_edge_index = torch.tensor([[0, 3, 2, 4], [3, 0, 4, 2]])
        >>> x, rel = conv(x, rel, ef_edge_index, rf_edge_index)
        >>> x.shape, rel.shape
        (torch.Size([3, 16]), torch.Size([2, 16]))
    """

    #: The arguments of :meth:`propagate` (called by
    #: :func:`~torch_wge.nn.conv.gcn_normalization.gcn_convolution`).
    propagate_type = {"x": Tensor, "edge_weight": OptTensor}

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
        **kwargs,
    ):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        if not (entity_view or relation_view):
            raise ValueError(f"'{self.__class__.__name__}' needs at least one of entity_view and relation_view")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.entity_view = entity_view
        self.relation_view = relation_view
        self.quaternion = quaternion
        self.improved = improved
        self.cached = cached
        self.views = tuple(view for view in VIEWS if {"entity": entity_view, "relation": relation_view}[view])
        self.act = activation_resolver(act, **(act_kwargs or {})) if act is not None else None

        def lin() -> torch.nn.Module:
            if quaternion:
                return QuaternionLinear(in_channels, out_channels, bias=False)
            return Linear(in_channels, out_channels, bias=False, weight_initializer="glorot")

        def view_bias() -> Optional[Parameter]:
            return Parameter(torch.empty(out_channels)) if bias else None

        def normalization() -> GCNNormalization:
            return GCNNormalization(improved, True, self.flow, cached)

        norm_kwargs = norm_kwargs or {}
        self.entity_lin = lin() if entity_view else None
        self.entity_bias = view_bias() if entity_view else None
        self.entity_norm = _view_norm(norm, out_channels, norm_kwargs) if entity_view else None
        self.entity_normalization = normalization() if entity_view else None
        self.relation_lin = lin() if relation_view else None
        self.relation_bias = view_bias() if relation_view else None
        self.relation_norm = _view_norm(norm, out_channels, norm_kwargs) if relation_view else None
        self.relation_normalization = normalization() if relation_view else None
        self._explained_view: Optional[str] = None  # while an explainer's edge mask is set
        self._propagating_view: Optional[str] = None  # while explaining
        self.reset_parameters()

    def reset_parameters(self):
        r"""Glorot weights, zero biases, fresh norms; forgets the cached graphs."""
        super().reset_parameters()
        for module in (self.entity_lin, self.entity_norm, self.relation_lin, self.relation_norm):
            reset = getattr(module, "reset_parameters", None)  # a norm without parameters has none
            if callable(reset):
                reset()
        for view_bias in (self.entity_bias, self.relation_bias):
            if view_bias is not None:
                torch.nn.init.zeros_(view_bias)
        for normalization in (self.entity_normalization, self.relation_normalization):
            if normalization is not None:
                normalization.clear()

    def _parts(
        self, view: str
    ) -> Tuple[torch.nn.Module, Optional[Tensor], Optional[torch.nn.Module], GCNNormalization]:
        """The weight map, bias, norm and adjacency normalisation of ``view`` (one the layer uses)."""
        if view == "entity" and self.entity_lin is not None and self.entity_normalization is not None:
            return self.entity_lin, self.entity_bias, self.entity_norm, self.entity_normalization
        if view == "relation" and self.relation_lin is not None and self.relation_normalization is not None:
            return self.relation_lin, self.relation_bias, self.relation_norm, self.relation_normalization
        raise ValueError(f"'{self.__class__.__name__}' has no {view!r} view; it uses {list(self.views)}")

    def norm(self, view: str) -> Optional[torch.nn.Module]:
        r"""The norm of ``view`` (:obj:`"entity"` or :obj:`"relation"`), or :obj:`None`."""
        return self._parts(view)[2]

    def normalized_adjacency(self, view: str, adj: Adj, num_nodes: int, dtype: torch.dtype) -> Tuple[Adj, OptTensor]:
        r"""The normalised adjacency :math:`\mathbf{\hat{A}}` of ``view``'s graph ``adj`` over
        ``num_nodes`` nodes, cached with :obj:`cached=True`: ``(edge_index [2, E'], edge_weight [E'])``
        for an ``edge_index``, ``(adj_t, None)`` for a sparse adjacency (see
        :class:`~torch_wge.nn.conv.gcn_normalization.GCNNormalization`)."""
        return self._parts(view)[3](adj, None, num_nodes, dtype)

    def convolve(self, view: str, h: Tensor, adj: Adj) -> Tensor:
        r""":math:`\mathbf{\hat{A}} (\mathbf{W} \otimes \mathbf{H}) + \mathbf{b}` of ``view``, the
        message passing of the view over its graph ``adj``, ``[num_nodes, F_out]``."""
        lin, bias, _, normalization = self._parts(view)
        if not self.explain:
            return gcn_convolution(self, normalization, lin, bias, h, adj)
        self._propagating_view = view
        try:
            return gcn_convolution(self, normalization, lin, bias, h, adj)
        finally:
            self._propagating_view = None

    def transform(self, view: str, h: Tensor) -> Tensor:
        r""":math:`\mathbf{W} \otimes \mathbf{H} + \mathbf{b}` of ``view``, ``[rows, F_out]``: with
        :math:`\mathbf{H} = \mathbf{\hat{A}} \mathbf{X}` summed beforehand, what :meth:`convolve`
        gives (the map :math:`\mathbf{W} \otimes` acts on each row)."""
        lin, bias, _, _ = self._parts(view)
        out = lin(h)
        return out if bias is None else out + bias

    def activate(self, hs: Dict[str, Tensor], normalize: Normalize = normalize_each) -> Dict[str, Tensor]:
        r""":math:`g(\mathrm{norm}(\mathbf{H}))` of each view's :math:`\mathbf{H}` in ``hs`` (view
        name to ``[rows, F_out]``), the views' norms applied by ``normalize(norms, inputs)`` (default:
        each by itself; an encoder over several processes passes one that synchronises them)."""
        views = list(hs)
        normalized = normalize([self.norm(view) for view in views], [hs[view] for view in views])
        return {view: h if self.act is None else self.act(h) for view, h in zip(views, normalized)}

    def combine(self, hs: Dict[str, Tensor], num_entities: int, rel: Tensor) -> Tuple[Tensor, Tensor]:
        r"""Eqs. 5 and 7: the layer's entities :math:`\mathbf{X}' = \mathbf{X}_{ef}' *
        \mathbf{X}_{rf}'` and relations :math:`\mathbf{R}'` from the activated views ``hs``
        (:obj:`"relation"`: ``[num_entities + M, F_out]``, :obj:`"entity"`: ``[num_entities,
        F_out]``); ``rel``, the input relations, are returned as they are without the
        relation-focused view."""
        x = None
        if "relation" in hs:
            # split, not two slices: its backward writes both gradients into one tensor
            x, rel = hs["relation"].split([num_entities, hs["relation"].size(0) - num_entities])
        if "entity" in hs:
            x = hs["entity"] if x is None else hs["entity"] * x
        assert x is not None  # a layer reads at least one view
        return x, rel

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
        if self.explain:
            self._explained_view = self._view_of_edge_mask(ef_edge_index, rf_edge_index)
        hs = {}
        if rf_edge_index is not None and self.relation_view:  # Eq. 6 over [X; R]
            hs["relation"] = self.convolve("relation", torch.cat([x, rel]), rf_edge_index)
        if ef_edge_index is not None and self.entity_view:  # Eq. 4
            hs["entity"] = self.convolve("entity", x, ef_edge_index)
        return self.combine(self.activate(hs), x.size(0), rel)

    def message(self, x_j: Tensor, edge_weight: OptTensor) -> Tensor:
        return weighted_message(x_j, edge_weight)

    def message_and_aggregate(self, adj_t: Adj, x: Tensor) -> Tensor:
        # the view whose cached normalisation adj_t is multiplies with its cached transpose
        for normalization in (self.entity_normalization, self.relation_normalization):
            if normalization is not None and normalization.holds(adj_t):
                return normalization.propagate_sparse(adj_t, x, self.aggr)
        return spmm(adj_t, x, reduce=self.aggr)

    def _view_of_edge_mask(self, ef_edge_index: Optional[Adj], rf_edge_index: Optional[Adj]) -> str:
        """The view an explainer's edge mask was made for: the one with as many edges."""
        size = self._edge_mask.size(0)
        fits = [
            view
            for view, adj in (("entity", ef_edge_index), ("relation", rf_edge_index))
            if view in self.views and isinstance(adj, Tensor) and adj.layout == torch.strided and adj.size(1) == size
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
