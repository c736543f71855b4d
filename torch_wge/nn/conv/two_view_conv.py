from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Parameter
from torch_geometric.nn import Linear
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.resolver import activation_resolver, normalization_resolver
from torch_geometric.typing import Adj, OptPairTensor, OptTensor, SparseTensor
from torch_geometric.utils import is_torch_sparse_tensor

from torch_wge.nn.conv.quaternion_gcn_conv import (
    CSRPair,
    aggregate_sparse,
    cache_fits,
    sparse_gcn_norm,
    transformed_gcn_norm,
    weighted_message,
)
from torch_wge.nn.dense import QuaternionLinear
from torch_wge.utils.sparse import csr_parts, csr_tensor, in_function_transform

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
    <https://arxiv.org/abs/2112.09231>`_, Eqs. 4-7): a quaternion graph
    convolution (:class:`~torch_wge.nn.QuaternionGCNConv`) on the
    entity-focused graph :math:`\mathcal{G}_{ef}` (entities) and one on the
    relation-focused graph :math:`\mathcal{G}_{rf}` (entity and relation
    nodes), each followed by a norm and the activation :math:`g`, combined
    element-wise:

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
    \mathbf{I}) \mathbf{\hat{D}}^{-1/2}` the normalised adjacency of a view
    and :math:`*` the element-wise product. Each view has its own weight
    (:attr:`entity_lin`, :attr:`relation_lin`), bias and norm. The layer
    propagates over both views itself, one :meth:`propagate` per view.

    Args:
        in_channels (int): Size of each input embedding (a multiple of 4 for
            quaternion weights), or :obj:`-1` to infer it from the first input.
        out_channels (int): Size of each output embedding.
        entity_view (bool, optional): Use the entity-focused view; with
            :obj:`False`, :math:`\mathbf{X}' = \mathbf{X}_{rf}'`.
            (default: :obj:`True`)
        relation_view (bool, optional): Use the relation-focused view; with
            :obj:`False`, :math:`\mathbf{X}' = \mathbf{X}_{ef}'` and the
            relations are returned unchanged. (default: :obj:`True`)
        quaternion (bool, optional): Quaternion weights; :obj:`False` for real
            ones (a :class:`~torch_geometric.nn.conv.GCNConv` per view).
            (default: :obj:`True`)
        act (str or Callable, optional): The activation :math:`g`, as
            :func:`~torch_geometric.nn.resolver.activation_resolver` takes it.
            (default: :obj:`"tanh"`)
        norm (str or Callable, optional): The norm of each view:
            :obj:`"batch_norm"` (a :class:`torch.nn.BatchNorm1d`), :obj:`None`,
            or what :func:`~torch_geometric.nn.resolver.normalization_resolver`
            takes. (default: :obj:`"batch_norm"`)
        act_kwargs (Dict[str, Any], optional): Arguments of :obj:`act`.
        norm_kwargs (Dict[str, Any], optional): Arguments of :obj:`norm`.
        improved (bool, optional): :math:`\mathbf{A} + 2\mathbf{I}` in
            :math:`\mathbf{\hat{A}}`. (default: :obj:`False`)
        cached (bool, optional): Cache each view's :math:`\mathbf{\hat{A}}` on
            first execution, as :class:`~torch_wge.nn.QuaternionGCNConv`; only
            for transductive learning. (default: :obj:`False`)
        normalize (bool, optional): Whether to add self-loops and normalise;
            with :obj:`False` each view's adjacency and edge weights are used
            as given. (default: :obj:`True`)
        bias (bool, optional): Learn the biases. (default: :obj:`True`)
        matmul_dtype (torch.dtype, optional): The dtype of the quaternion
            weights' products (:class:`~torch_wge.nn.QuaternionLinear`'s);
            real weights (:obj:`quaternion=False`) take none.
            (default: :obj:`None`)
        explain_view (str, optional): The view an explainer's edge mask
            belongs to, :obj:`"entity"` or :obj:`"relation"`.
            (default: :obj:`"entity"`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:** entities :math:`(N, F_{in})`, relations :math:`(M, F_{in})`,
          ``ef_edge_index`` :math:`(2, |\mathcal{E}_{ef}|)` over the :math:`N`
          entities, ``rf_edge_index`` :math:`(2, |\mathcal{E}_{rf}|)` over
          :math:`N + M` nodes (relation :math:`m` is node :math:`N + m`), or
          sparse adjacencies; edge weights
          :math:`(|\mathcal{E}_{ef}|)`, :math:`(|\mathcal{E}_{rf}|)` *(optional)*
        - **output:** entities :math:`(N, F_{out})`, relations :math:`(M, F_{out})`

    Example:
        >>> conv = TwoViewConv(8, 16)
        >>> x, rel = torch.randn(3, 8), torch.randn(2, 8)
        >>> ef_edge_index = torch.tensor([[0, 1], [1, 0]])
        >>> rf_edge_index = torch.tensor([[0, 3, 2, 4], [3, 0, 4, 2]])
        >>> x, rel = conv(x, rel, ef_edge_index, rf_edge_index)
        >>> x.shape, rel.shape
        (torch.Size([3, 16]), torch.Size([2, 16]))
    """

    _cached_edge_index: Dict[str, OptPairTensor]
    _cached_adj_t: Dict[str, SparseTensor]
    _cached_csr: Dict[str, CSRPair]  # a torch.sparse adjacency's, with its transpose

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
        normalize: bool = True,
        bias: bool = True,
        matmul_dtype: Optional[torch.dtype] = None,
        explain_view: str = "entity",
        **kwargs,
    ):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        name = self.__class__.__name__
        if not (entity_view or relation_view):
            raise ValueError(f"'{name}' needs at least one of entity_view and relation_view")
        if matmul_dtype is not None and not quaternion:
            raise ValueError(f"'{name}' matmul_dtype applies to quaternion weights only (quaternion=True)")
        if explain_view not in VIEWS:
            raise ValueError(f"'{name}' explain_view must be one of {list(VIEWS)}, got {explain_view!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.entity_view = entity_view
        self.relation_view = relation_view
        self.quaternion = quaternion
        self.improved = improved
        self.cached = cached
        self.normalize = normalize
        self.explain_view = explain_view
        self.views = tuple(view for view in VIEWS if {"entity": entity_view, "relation": relation_view}[view])
        self.act = activation_resolver(act, **(act_kwargs or {})) if act is not None else None
        self._cached_edge_index = {}
        self._cached_adj_t = {}
        self._cached_csr = {}

        def lin() -> torch.nn.Module:
            if quaternion:
                return QuaternionLinear(in_channels, out_channels, bias=False, matmul_dtype=matmul_dtype)
            return Linear(in_channels, out_channels, bias=False, weight_initializer="glorot")

        def view_bias() -> Optional[Parameter]:
            return Parameter(torch.empty(out_channels)) if bias else None

        norm_kwargs = norm_kwargs or {}
        self.entity_lin = lin() if entity_view else None
        self.entity_bias = view_bias() if entity_view else None
        self.entity_norm = _view_norm(norm, out_channels, norm_kwargs) if entity_view else None
        self.relation_lin = lin() if relation_view else None
        self.relation_bias = view_bias() if relation_view else None
        self.relation_norm = _view_norm(norm, out_channels, norm_kwargs) if relation_view else None
        self.reset_parameters()

    def reset_parameters(self):
        r"""Glorot weights, zero biases, fresh norms; forgets the cached adjacencies."""
        super().reset_parameters()
        for module in (self.entity_lin, self.entity_norm, self.relation_lin, self.relation_norm):
            reset = getattr(module, "reset_parameters", None)  # a norm without parameters has none
            if callable(reset):
                reset()
        for view_bias in (self.entity_bias, self.relation_bias):
            if view_bias is not None:
                torch.nn.init.zeros_(view_bias)
        self._cached_edge_index = {}
        self._cached_adj_t = {}
        self._cached_csr = {}

    def norm(self, view: str) -> Optional[torch.nn.Module]:
        r"""The norm of ``view`` (:obj:`"entity"` or :obj:`"relation"`), or :obj:`None`."""
        self._check_view(view)
        return self.entity_norm if view == "entity" else self.relation_norm

    def normalized_adjacency(
        self, view: str, adj: Adj, num_nodes: int, dtype: torch.dtype, edge_weight: OptTensor = None
    ) -> Tuple[Adj, OptTensor]:
        r"""The normalised adjacency :math:`\mathbf{\hat{A}}` of ``view``'s graph ``adj`` over
        ``num_nodes`` nodes (cached with :obj:`cached=True`): ``(edge_index [2, E'], edge_weight
        [E'])`` for an ``edge_index``, ``(adj_t, None)`` for a sparse adjacency; ``adj`` and
        ``edge_weight`` as they are with :obj:`normalize=False`. Inside a :mod:`torch.func`
        transform, which can neither make nor read a CSR matrix, a ``torch.sparse`` adjacency
        gives its edges instead, ``(edge_index, edge_weight)`` (:func:`transformed_gcn_norm`; the
        cache read, not written)."""
        self._check_view(view)
        adj, edge_weight, _ = self._normalized(view, adj, edge_weight, num_nodes, dtype)
        return adj, edge_weight

    def _normalized(
        self, view: str, adj: Adj, edge_weight: OptTensor, num_nodes: int, dtype: torch.dtype
    ) -> Tuple[Adj, OptTensor, OptTensor]:
        """:meth:`normalized_adjacency`, and the transpose of a cached ``torch.sparse`` one."""
        transpose: OptTensor = None
        if (
            not torch.jit.is_scripting()
            and in_function_transform()
            and isinstance(adj, Tensor)
            and is_torch_sparse_tensor(adj)
        ):  # no CSR matrix inside torch.func: its edges instead
            adj, edge_weight = transformed_gcn_norm(
                adj, self._cached_csr.get(view), num_nodes, self.improved, True, self.normalize, dtype, self.flow
            )
            return adj, edge_weight, transpose
        if not self.normalize:
            return adj, edge_weight, transpose
        if isinstance(adj, Tensor) and is_torch_sparse_tensor(adj):
            cache = self._cached_csr.get(view)
            if cache is None or not cache_fits((cache[0], cache[2]), adj.device, dtype):
                adj, transpose = sparse_gcn_norm(adj, num_nodes, self.improved, True, dtype, self.cached)
                if self.cached and transpose is not None:
                    self._cached_csr[view] = csr_parts(adj) + csr_parts(transpose)
            else:
                adj = csr_tensor(cache[0], cache[1], cache[2], [num_nodes, num_nodes])
                transpose = csr_tensor(cache[3], cache[4], cache[5], [num_nodes, num_nodes])
        elif isinstance(adj, Tensor):
            cache = self._cached_edge_index.get(view)
            if cache is None or not cache_fits(cache, adj.device, dtype):
                adj, edge_weight = gcn_norm(adj, edge_weight, num_nodes, self.improved, True, self.flow, dtype)
                if self.cached:
                    self._cached_edge_index[view] = (adj, edge_weight)
            else:
                adj, edge_weight = cache[0], cache[1]
        elif isinstance(adj, SparseTensor):
            cache = self._cached_adj_t.get(view)
            if cache is None:
                adj = gcn_norm(adj, edge_weight, num_nodes, self.improved, True, self.flow, dtype)
                if self.cached:
                    self._cached_adj_t[view] = adj
            else:
                adj = cache
        return adj, edge_weight, transpose

    def convolve(self, view: str, h: Tensor, adj: Adj, edge_weight: OptTensor = None) -> Tensor:
        r""":math:`\mathbf{\hat{A}} (\mathbf{W} \otimes \mathbf{H}) + \mathbf{b}` of ``view``, the
        message passing of the view over its graph ``adj``, ``[num_nodes, F_out]``."""
        adj_t, edge_weight, transpose = self._normalized(view, adj, edge_weight, h.size(int(self.node_dim)), h.dtype)
        # propagate_type: (x: Tensor, edge_weight: OptTensor, adj: OptTensor, view: str)
        out = self.propagate(adj_t, x=self._lin(view, h), edge_weight=edge_weight, adj=transpose, view=view)
        return self._add_bias(view, out)

    def transform(self, view: str, h: Tensor) -> Tensor:
        r""":math:`\mathbf{W} \otimes \mathbf{H} + \mathbf{b}` of ``view``, ``[rows, F_out]``: with
        :math:`\mathbf{H} = \mathbf{\hat{A}} \mathbf{X}` summed beforehand, what :meth:`convolve`
        gives (the map :math:`\mathbf{W} \otimes` acts on each row)."""
        return self._add_bias(view, self._lin(view, h))

    def activate(self, hs: Dict[str, Tensor], normalize: Normalize = normalize_each) -> Dict[str, Tensor]:
        r""":math:`g(\mathrm{norm}(\mathbf{H}))` of each view's :math:`\mathbf{H}` in ``hs`` (view
        name to ``[rows, F_out]``), the views' norms applied by ``normalize(norms, inputs)`` (default:
        each by itself; an encoder over several processes passes one that synchronises them)."""
        views = list(hs)
        normalized = normalize([self.norm(view) for view in views], [hs[view] for view in views])
        return {view: self._act(h) for view, h in zip(views, normalized)}

    def combine(self, hs: Dict[str, Tensor], num_entities: int, rel: Tensor) -> Tuple[Tensor, Tensor]:
        r"""Eqs. 5 and 7: the layer's entities :math:`\mathbf{X}' = \mathbf{X}_{ef}' *
        \mathbf{X}_{rf}'` and relations :math:`\mathbf{R}'` from the activated views ``hs``
        (:obj:`"relation"`: ``[num_entities + M, F_out]``, :obj:`"entity"`: ``[num_entities,
        F_out]``); ``rel``, the input relations, are returned as they are without the
        relation-focused view."""
        x: OptTensor = None
        if "relation" in hs:
            h = hs["relation"]
            # split, not two slices: its backward writes both gradients into one tensor
            parts = h.split([num_entities, h.size(0) - num_entities])
            x, rel = parts[0], parts[1]
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
        ef_edge_weight: OptTensor = None,
        rf_edge_weight: OptTensor = None,
    ) -> Tuple[Tensor, Tensor]:
        if self.entity_view and ef_edge_index is None:
            raise ValueError("'TwoViewConv' uses the entity-focused view but got no ef_edge_index")
        if self.relation_view and rf_edge_index is None:
            raise ValueError("'TwoViewConv' uses the relation-focused view but got no rf_edge_index")
        hs: Dict[str, Tensor] = {}
        if self.relation_view and rf_edge_index is not None:  # Eq. 6 over [X; R]
            h = self.convolve("relation", torch.cat([x, rel]), rf_edge_index, rf_edge_weight)
            if self.relation_norm is not None:
                h = self.relation_norm(h)
            hs["relation"] = self._act(h)
        if self.entity_view and ef_edge_index is not None:  # Eq. 4
            h = self.convolve("entity", x, ef_edge_index, ef_edge_weight)
            if self.entity_norm is not None:
                h = self.entity_norm(h)
            hs["entity"] = self._act(h)
        return self.combine(hs, x.size(0), rel)

    def message(self, x_j: Tensor, edge_weight: OptTensor) -> Tensor:
        return weighted_message(x_j, edge_weight)

    def message_and_aggregate(self, adj_t: Adj, x: Tensor, adj: OptTensor) -> Tensor:
        return aggregate_sparse(adj_t, x, adj, str(self.aggr))

    def explain_message(self, inputs: Tensor, dim_size: Optional[int], view: str) -> Tensor:
        if view != self.explain_view:
            return inputs  # the other view: not explained
        mask, messages = self._edge_mask, inputs.size(self.node_dim)
        if mask is not None and messages not in (mask.numel(), int(self._loop_mask.sum()) + (dim_size or 0)):
            raise ValueError(
                f"'{self.__class__.__name__}' got an edge mask of {mask.numel()} edges for the {view} view, "
                f"which passes {messages} messages: set explain_view to the view the "
                f"explained edge_index is"
            )
        return super().explain_message(inputs, dim_size)

    def _check_view(self, view: str):
        if view not in self.views:
            raise ValueError(f"'TwoViewConv' has no '{view}' view; it uses {list(self.views)}")

    def _lin(self, view: str, h: Tensor) -> Tensor:
        if view == "entity":
            if self.entity_lin is not None:
                return self.entity_lin(h)
        elif view == "relation":
            if self.relation_lin is not None:
                return self.relation_lin(h)
        raise ValueError(f"'TwoViewConv' has no '{view}' view")

    def _add_bias(self, view: str, out: Tensor) -> Tensor:
        bias = self.entity_bias if view == "entity" else self.relation_bias
        return out if bias is None else out + bias

    def _act(self, h: Tensor) -> Tensor:
        return h if self.act is None else self.act(h)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
            f"entity_view={self.entity_view}, relation_view={self.relation_view}, quaternion={self.quaternion})"
        )
