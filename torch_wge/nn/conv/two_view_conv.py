from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.nn import Linear
from torch_geometric.nn.resolver import activation_resolver, normalization_resolver
from torch_geometric.typing import Adj

from torch_wge.nn.conv.quaternion_gcn_conv import QuaternionGCNConv
from torch_wge.nn.dense import QuaternionLinear


def _view_norm(norm: Union[str, Callable, torch.nn.Module, None], channels: int, kwargs: Dict[str, Any]):
    if norm is None:
        return None
    if norm == "batch_norm":  # a plain BatchNorm1d, as the paper (and saved models) have it
        return torch.nn.BatchNorm1d(channels, **kwargs)
    return normalization_resolver(norm, channels, **kwargs)


class _RealGCNConv(QuaternionGCNConv):
    r"""A view convolution of :class:`TwoViewConv` with :obj:`quaternion=False`:
    PyG's :class:`~torch_geometric.nn.conv.GCNConv` (a real glorot-initialised
    weight), with the adjacency normalised and cached as
    :class:`~torch_wge.nn.QuaternionGCNConv` does."""

    def _weight(self, in_channels: int, out_channels: int) -> Union[QuaternionLinear, Linear]:
        return Linear(in_channels, out_channels, bias=False, weight_initializer="glorot")

    def quaternion_matrix(self) -> Tensor:
        raise TypeError(f"'{self.__class__.__name__}' has a real weight, not a quaternion one")


class TwoViewConv(torch.nn.Module):
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
    by default. Each view's convolution :math:`\mathbf{\hat{A}}
    (\mathbf{W} \otimes \cdot) + \mathbf{b}` is a
    :class:`~torch_wge.nn.QuaternionGCNConv` (:attr:`entity_conv`,
    :attr:`relation_conv`) followed by its own normalisation
    (:attr:`entity_norm`, :attr:`relation_norm`); with
    :obj:`quaternion=False` (ablation 2 of the paper) :math:`\mathbf{W}` is a
    real matrix, as in :class:`~torch_geometric.nn.conv.GCNConv`. With
    :obj:`relation_view=False` the layer is :math:`\mathbf{X}' =
    \mathbf{X}_{ef}'` and returns the relations unchanged (ablation 3); with
    :obj:`entity_view=False` it is :math:`\mathbf{X}' = \mathbf{X}_{rf}'`
    (ablation 4, and the Levi graph ablation 5 with
    :class:`~torch_wge.transforms.LeviGraphTransform`'s graph as
    :obj:`rf_edge_index`).

    The message passing is done by the two view convolutions, so PyG's
    hooks (:meth:`~torch_geometric.nn.conv.MessagePassing.register_propagate_forward_hook`)
    go on :attr:`entity_conv` or :attr:`relation_conv`, and
    :func:`~torch_geometric.utils.get_num_hops` counts two message-passing
    modules per layer (as for :class:`~torch_geometric.nn.conv.HeteroConv`),
    though a layer reaches one hop in each view. An
    :class:`~torch_geometric.explain.Explainer` sets its edge mask on both
    view convolutions; the layer keeps it on the view whose ``edge_index``
    it was made for (the one with as many edges as the mask) and switches it
    off on the other. Give that view an ``edge_index`` tensor, not a sparse
    adjacency.

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
        **kwargs (optional): Additional arguments of each view's
            :class:`~torch_wge.nn.QuaternionGCNConv`.

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
        super().__init__()
        if not (entity_view or relation_view):
            raise ValueError(f"'{self.__class__.__name__}' needs at least one of entity_view and relation_view")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.entity_view = entity_view
        self.relation_view = relation_view
        self.quaternion = quaternion
        self.act = activation_resolver(act, **(act_kwargs or {})) if act is not None else None

        conv = QuaternionGCNConv if quaternion else _RealGCNConv
        conv_kwargs = dict(improved=improved, cached=cached, bias=bias, **kwargs)
        norm_kwargs = norm_kwargs or {}
        self.entity_conv = conv(in_channels, out_channels, **conv_kwargs) if entity_view else None
        self.entity_norm = _view_norm(norm, out_channels, norm_kwargs) if entity_view else None
        self.relation_conv = conv(in_channels, out_channels, **conv_kwargs) if relation_view else None
        self.relation_norm = _view_norm(norm, out_channels, norm_kwargs) if relation_view else None
        self.reset_parameters()

    def reset_parameters(self):
        for module in (self.entity_conv, self.entity_norm, self.relation_conv, self.relation_norm):
            if module is not None and hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def _activate(self, norm: Optional[torch.nn.Module], h: Tensor) -> Tensor:
        """g(norm(h))."""
        if norm is not None:
            h = norm(h)
        return self.act(h) if self.act is not None else h

    def forward(
        self,
        x: Tensor,
        rel: Tensor,
        ef_edge_index: Optional[Adj] = None,
        rf_edge_index: Optional[Adj] = None,
    ) -> Tuple[Tensor, Tensor]:
        name = self.__class__.__name__
        if self.entity_conv is not None and ef_edge_index is None:
            raise ValueError(f"'{name}' uses the entity-focused view but got no ef_edge_index")
        if self.relation_conv is not None and rf_edge_index is None:
            raise ValueError(f"'{name}' uses the relation-focused view but got no rf_edge_index")
        self._keep_edge_mask_on_its_view(ef_edge_index, rf_edge_index)
        x_rf = None
        if self.relation_conv is not None:  # Eq. 6 over [X; R]
            h = self._activate(self.relation_norm, self.relation_conv(torch.cat([x, rel]), rf_edge_index))
            # split, not two slices: its backward writes both gradients into one tensor
            x_rf, rel = h.split([x.size(0), rel.size(0)])
        if self.entity_conv is None:  # ablation 4
            assert x_rf is not None  # a layer reads at least one view
            return x_rf, rel
        x_ef = self._activate(self.entity_norm, self.entity_conv(x, ef_edge_index))  # Eq. 4
        return (x_ef if x_rf is None else x_ef * x_rf), rel  # Eqs. 5 and 7

    def _keep_edge_mask_on_its_view(self, ef_edge_index: Optional[Adj], rf_edge_index: Optional[Adj]):
        """Switches an explainer's edge mask off on the view convolution it was not made for."""
        explained = [
            (conv, adj)
            for conv, adj in ((self.entity_conv, ef_edge_index), (self.relation_conv, rf_edge_index))
            if conv is not None and conv.explain
        ]
        if not explained:
            return
        size = explained[0][0]._edge_mask.size(0)
        fits = [isinstance(adj, Tensor) and adj.layout == torch.strided and adj.size(1) == size for _, adj in explained]
        if sum(fits) != 1:
            raise ValueError(
                f"'{self.__class__.__name__}' got an edge mask of {size} edges, which fits "
                f"{'both views' if sum(fits) else 'neither view'}: explain one view's edge_index tensor"
            )
        for (conv, _), fit in zip(explained, fits):
            conv.explain = fit

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
            f"entity_view={self.entity_view}, relation_view={self.relation_view}, quaternion={self.quaternion})"
        )
