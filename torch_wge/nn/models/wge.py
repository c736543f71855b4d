from dataclasses import dataclass, field
from typing import List, Optional, cast

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data
from torch_geometric.typing import Adj

from torch_wge.nn.decoders import QuatEDecoder
from torch_wge.nn.models.two_view_encoder import TwoViewEncoder
from torch_wge.transforms.views import ENTITY_FOCUSED, LEVI, RELATION_FOCUSED, check_views
from torch_wge.utils.quaternion import normalize_quaternion
from torch_wge.utils.sparse import csr_adjacency

#: Encoder views of WGE and its single-view ablations: the graph view of
#: :mod:`torch_wge.transforms` that each encoder input reads.
VIEWS = {
    "two-view": dict(ef_edge_index=ENTITY_FOCUSED, rf_edge_index=RELATION_FOCUSED),
    "entity": dict(ef_edge_index=ENTITY_FOCUSED),
    "relation": dict(rf_edge_index=RELATION_FOCUSED),
    "levi": dict(rf_edge_index=LEVI),
}


@dataclass
class EncodedGraph:
    r"""Entity and relation representations of every encoder layer.

    Attributes:
        entities (List[Tensor]): ``K + 1`` tensors ``[N, C]``, layer 0 first.
        relations (List[Tensor]): ``K + 1`` tensors ``[2R, C]`` (inverse
            relation of ``r`` at ``r + R``).
    """

    entities: List[Tensor]
    relations: List[Tensor]
    _candidates: Optional[Tensor] = field(default=None, repr=False)

    def candidates(self) -> Tensor:
        """All layers' entity matrices side by side, ``[N, (K + 1) C]``, built once."""
        if self._candidates is None:
            self._candidates = torch.cat(self.entities, dim=-1)
        return self._candidates


class WGE(torch.nn.Module):
    r"""WGE, the two-view graph neural network for knowledge graph completion
    (`"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_): entity and relation embeddings, a
    :class:`~torch_wge.nn.TwoViewEncoder`, and one
    :class:`~torch_wge.nn.QuatEDecoder` per encoder layer, with the score

    .. math::
        f(h, r, t) = \sum_{k=0}^{K} \alpha_k f_k(h, r, t), \qquad
        \alpha_k = \frac{1 - \alpha_0}{K} \text{ for } k \geq 1,

    where :math:`f_k` is QuatE on the layer-:math:`k` representations. Inverse
    relations are modelled explicitly (relation ``r + R`` is the inverse of
    ``r``), so head prediction for :math:`(?, r, t)` is tail prediction for
    :math:`(t, r^{-1}, ?)`. Scoring is 1-N: a query ``(h, r)`` is scored against
    every entity. :obj:`num_layers=0` is plain QuatE.

    Args:
        num_entities (int): Number of entities :math:`N`.
        num_relations (int): Number of KG relations :math:`R` (without inverses).
        hidden_channels (int, optional): Number of quaternions of each
            embedding, as :obj:`hidden_channels` of PyG's KGE models and of
            :class:`~torch_wge.nn.kge.QuatE` (each holds
            :obj:`4 * hidden_channels` real numbers). (default: :obj:`64`)
        num_layers (int, optional): Encoder layers :math:`K`. (default: :obj:`2`)
        alpha0 (float, optional): Weight :math:`\alpha_0` of layer 0.
            (default: :obj:`0.9`)
        dropout (float, optional): Dropout on each decoder's query.
            (default: :obj:`0.5`)
        batch_norm (bool, optional): Batch norm in the encoder and on each
            decoder's query. (default: :obj:`True`)
        views (str, optional): :obj:`"two-view"` (WGE), or an ablation:
            :obj:`"entity"`, :obj:`"relation"`, :obj:`"levi"`.
            (default: :obj:`"two-view"`)
        conv (str, optional): The encoder's weights: :obj:`"quaternion"`, or
            :obj:`"gcn"` for real ones (ablation 2, a GCN per view).
            (default: :obj:`"quaternion"`)
        cached (bool, optional): If set to :obj:`True`, the encoder's layers
            normalise each view's adjacency on their first call and use that
            result from then on (:class:`~torch_wge.nn.QuaternionGCNConv`'s
            :obj:`cached`, as :class:`~torch_geometric.nn.conv.GCNConv`'s).
            This should only be set to :obj:`True` in transductive learning,
            where every call passes the same graph, as in training on one
            knowledge graph; a model given other graphs must leave it off.
            (default: :obj:`False`)
        matmul_dtype (torch.dtype, optional): The dtype of the encoder's
            quaternion matmuls (:obj:`conv="gcn"` keeps the model's), e.g. :obj:`torch.bfloat16` where the device
            multiplies it natively (:func:`~torch_wge.nn.auto_matmul_dtype`);
            parameters, propagation, norms and outputs stay in the model's
            dtype (:class:`~torch_wge.nn.QuaternionLinear`).
            (default: :obj:`None`)

    The model scores; its training objective is
    :class:`~torch_wge.nn.OneToNLoss`. Every score goes through the decoder
    modules (:attr:`decoders`, one per layer), so hooks on them see every
    query.

    Example:
        >>> model = WGE(num_entities=5, num_relations=2, hidden_channels=2, num_layers=1)
        >>> model = model.eval()  # batch norm on one query needs the running statistics
        >>> ef = torch.tensor([[0, 1], [1, 0]]); rf = torch.tensor([[0, 5], [5, 0]])
        >>> encoded = model.encode(ef, rf)
        >>> model.score_all(encoded, torch.tensor([0]), torch.tensor([1])).shape
        torch.Size([1, 5])
    """

    layer_weights: Tensor  # [K + 1], a buffer

    def __init__(
        self,
        num_entities: int,
        num_relations: int,
        *,
        hidden_channels: int = 64,
        num_layers: int = 2,
        alpha0: float = 0.9,
        dropout: float = 0.5,
        batch_norm: bool = True,
        views: str = "two-view",
        conv: str = "quaternion",
        cached: bool = False,
        matmul_dtype: Optional[torch.dtype] = None,
    ):
        super().__init__()
        name = self.__class__.__name__
        for count_name, count in (("num_entities", num_entities), ("num_relations", num_relations)):
            if not (isinstance(count, int) and count > 0):
                raise ValueError(f"'{name}' {count_name} must be a positive int, got {count!r}")
        if not (isinstance(hidden_channels, int) and hidden_channels > 0):
            raise ValueError(f"'{name}' hidden_channels must be a positive int, got {hidden_channels!r}")
        channels = 4 * hidden_channels
        if views not in VIEWS:
            raise ValueError(f"'{name}' views must be one of {sorted(VIEWS)}, got {views!r}")
        if conv not in ("quaternion", "gcn"):
            raise ValueError(f"'{name}' conv must be 'quaternion' or 'gcn', got {conv!r}")
        if num_layers < 0:
            raise ValueError(f"'{name}' num_layers must be >= 0, got {num_layers}")
        if not 0.0 <= alpha0 <= 1.0:
            raise ValueError(f"'{name}' alpha0 must be in [0, 1], got {alpha0}")
        self.num_entities = num_entities
        self.num_relations = num_relations
        self.hidden_channels = hidden_channels
        self.channels = channels
        self.num_layers = num_layers
        self.alpha0 = alpha0
        self.views = views
        self.conv = conv

        self.entity_embedding = torch.nn.Embedding(num_entities, channels)
        self.relation_embedding = torch.nn.Embedding(2 * num_relations, channels)
        inputs = VIEWS[views]
        self.encoder = (
            TwoViewEncoder(
                channels,
                num_layers,
                entity_view="ef_edge_index" in inputs,
                relation_view="rf_edge_index" in inputs,
                quaternion=conv == "quaternion",
                norm="batch_norm" if batch_norm else None,
                cached=cached,
                matmul_dtype=matmul_dtype if conv == "quaternion" else None,
            )
            if num_layers > 0
            else None
        )
        self.decoders = torch.nn.ModuleList(
            QuatEDecoder(channels, dropout=dropout, batch_norm=batch_norm) for _ in range(num_layers + 1)
        )
        weights = [1.0] if num_layers == 0 else [alpha0] + [(1.0 - alpha0) / num_layers] * num_layers
        self.register_buffer("layer_weights", torch.tensor(weights), persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-normal embeddings (as the research code); resets encoder and decoders."""
        torch.nn.init.xavier_normal_(self.entity_embedding.weight)
        torch.nn.init.xavier_normal_(self.relation_embedding.weight)
        if self.encoder is not None:
            self.encoder.reset_parameters()
        for decoder in cast(List[QuatEDecoder], self.decoders):
            decoder.reset_parameters()

    def graph_inputs(self, data: Data, sparse: bool = True) -> dict:
        r"""The adjacency arguments of :meth:`encode` for this model's views,
        taken from a :class:`~torch_wge.transforms.TwoViewData` made by the
        transforms: the edges and node count of each view in :obj:`VIEWS`
        (``ef_edge_index`` and ``num_nodes``, ``rf_edge_index`` and
        ``rf_num_nodes``, or ``levi_edge_index`` and ``levi_num_nodes``).

        With :obj:`sparse=True` each view becomes a ``torch.sparse_csr``
        adjacency ``adj_t`` (row: target, column: source), so that message
        passing is one sparse-dense matmul instead of a gather and a scatter
        over the edges.

        A view built from another graph than :obj:`data` now is (its nodes or
        training triples changed after the transforms, e.g. by
        :meth:`~torch_geometric.data.Data.subgraph`) or whose ids do not fit
        its node counts is refused with a one-line :class:`ValueError`
        (:func:`~torch_wge.transforms.check_views`), and
        a :class:`~torch_geometric.data.Batch` of several graphs too: WGE
        embeds the entities and relations of one knowledge graph (a
        :class:`~torch_wge.nn.TwoViewEncoder` encodes a batch of graphs from
        ``batch.ef_edge_index`` and ``batch.rf_edge_index``)."""
        if isinstance(data, Batch) and data.num_graphs > 1:
            raise ValueError(
                f"'{self.__class__.__name__}' embeds one knowledge graph, got a batch of {data.num_graphs} graphs; "
                f"encode a batch of graphs with TwoViewEncoder(x, rel, batch.ef_edge_index, batch.rf_edge_index)"
            )
        if self.encoder is None:
            return {}
        views = VIEWS[self.views]
        check_views(data, views.values())  # stale (the graph changed after the transforms) or ids out of range
        missing = [view.edge_index for view in views.values() if getattr(data, view.edge_index, None) is None]
        if missing:
            raise ValueError(
                f"'{self.__class__.__name__}(views={self.views!r})' needs {missing} on the data; "
                f"apply the matching transforms from torch_wge.transforms"
            )
        edges = {arg: getattr(data, view.edge_index) for arg, view in views.items()}
        if not sparse:
            return edges
        dtype = self.entity_embedding.weight.dtype
        return {
            arg: csr_adjacency(edges[arg], int(getattr(data, view.num_nodes)), dtype) for arg, view in views.items()
        }

    def encode(self, ef_edge_index: Optional[Adj] = None, rf_edge_index: Optional[Adj] = None) -> EncodedGraph:
        """Runs the encoder over the whole graph; returns every layer's representations."""
        x, rel = self.entity_embedding.weight, self.relation_embedding.weight
        if self.encoder is None:
            return EncodedGraph([x], [rel])
        states = self.encoder(x, rel, ef_edge_index, rf_edge_index)
        return EncodedGraph([s[0] for s in states], [s[1] for s in states])

    def queries(self, encoded: EncodedGraph, heads: Tensor, relations: Tensor) -> Tensor:
        r"""Each layer's decoder query for ``(heads[b], relations[b])``, ``[K + 1, B, C]``: decoder
        :math:`k` (``decoders[k]``, called as a module) on the layer-:math:`k` head and relation
        rows. Relation ids lie in :math:`[0, 2R)` (inverses at :math:`r + R`); an id outside raises
        :class:`IndexError`, as an entity id outside :math:`[0, N)` does."""
        # each layer's relation table [2R, C] normalised once, before its rows are gathered
        return torch.stack(
            [
                decoder(x.index_select(0, heads), normalize_quaternion(rel).index_select(0, relations), normalized=True)
                for decoder, x, rel in zip(self.decoders, encoded.entities, encoded.relations)
            ]
        )

    def layer_scores(self, encoded: EncodedGraph, heads: Tensor, relations: Tensor) -> Tensor:
        r"""Per-layer logits :math:`f_k(h_b, r_b, n)` against every entity ``n``, ``[K + 1, B, N]``."""
        candidates = torch.stack(encoded.entities).transpose(1, 2)  # [K + 1, C, N]
        return torch.bmm(self.queries(encoded, heads, relations), candidates)

    def score_all(self, encoded: EncodedGraph, heads: Tensor, relations: Tensor) -> Tensor:
        r"""Final logits :math:`f = \sum_k \alpha_k f_k` against every entity, ``[B, N]``,
        computed as one matmul of the weighted queries with all layers'
        entity matrices side by side."""
        queries = self.queries(encoded, heads, relations) * self.layer_weights.view(-1, 1, 1)
        queries = queries.transpose(0, 1).reshape(heads.numel(), -1)  # [B, (K + 1) C]
        return queries @ encoded.candidates().t()

    def score_triples(self, encoded: EncodedGraph, heads: Tensor, relations: Tensor, tails: Tensor) -> Tensor:
        r"""Logits :math:`f(h_b, r_b, t_b) = \sum_k \alpha_k f_k(h_b, r_b, t_b)` of given triples, ``[B]``:
        each layer's query dotted with its tail row only, not scored against every entity."""
        queries = self.queries(encoded, heads, relations)  # [K + 1, B, C]
        tails = torch.stack([x.index_select(0, tails) for x in encoded.entities])  # [K + 1, B, C]
        return ((queries * tails).sum(dim=-1) * self.layer_weights.view(-1, 1)).sum(dim=0)

    def forward(
        self,
        heads: Tensor,
        relations: Tensor,
        ef_edge_index: Optional[Adj] = None,
        rf_edge_index: Optional[Adj] = None,
    ) -> Tensor:
        """Encodes the graph and scores ``(heads[b], relations[b])`` against every entity, ``[B, N]``.
        The graph arguments are adjacencies (``[2, E]`` or sparse), never tail
        indices: to score given triples ``(h, r, t)`` use
        :class:`torch_wge.nn.kge.WGEKGE`."""
        for name, adj in (("ef_edge_index", ef_edge_index), ("rf_edge_index", rf_edge_index)):
            if isinstance(adj, Tensor) and adj.layout == torch.strided and (adj.dim() != 2 or adj.size(0) != 2):
                raise ValueError(
                    f"'{self.__class__.__name__}.forward(heads, relations, ef_edge_index, rf_edge_index)' got "
                    f"{name} of shape {list(adj.shape)}, not a [2, E] graph; it scores against every entity, "
                    f"so to score triples (h, r, t) use torch_wge.nn.kge.WGEKGE"
                )
        return self.score_all(self.encode(ef_edge_index, rf_edge_index), heads, relations)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.num_entities}, {self.num_relations}, "
            f"hidden_channels={self.hidden_channels}, num_layers={self.num_layers}, alpha0={self.alpha0}, "
            f"views={self.views!r}, conv={self.conv!r})"
        )
