from dataclasses import dataclass, field
from typing import List, Optional, Tuple, cast

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data
from torch_geometric.typing import Adj

from torch_wge.data import check_edge_index
from torch_wge.nn.decoders import QuatEDecoder
from torch_wge.nn.decoders.loss import OBJECTIVES, one_to_n_loss, sample_candidates
from torch_wge.nn.models.two_view_encoder import TwoViewEncoder
from torch_wge.transforms.views import ENTITY_FOCUSED, LEVI, RELATION_FOCUSED
from torch_wge.utils.quaternion import (
    hamilton_product,
    normalize_quaternion,
    quaternion_conjugate,
    quaternion_norm,
)
from torch_wge.utils.sparse import csr_adjacency
from torch_wge.utils.triples import add_inverse_triples, query_from_key, query_key

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


def _triple_queries(head_index: Tensor, rel_type: Tensor, tail_index: Tensor, num_relations: int):
    r"""The distinct 1-N queries of triples asked in both directions,
    :math:`(h, r, ?)` and :math:`(t, r + R, ?)`: their ``heads [Q]``,
    ``relations [Q]`` and ``positives [2, P]`` (query, answer) over the
    distinct answers, queries sorted by (head, relation)."""
    triples = torch.unique(
        add_inverse_triples(torch.stack([head_index, rel_type, tail_index], dim=1), num_relations), dim=0
    )
    keys, rows = torch.unique_consecutive(query_key(triples[:, 0], triples[:, 1], num_relations), return_inverse=True)
    heads, relations = query_from_key(keys, num_relations)
    return heads, relations, torch.stack([rows, triples[:, 2]])


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
        quaternion (bool, optional): Quaternion weights in the encoder;
            :obj:`False` for real ones (ablation 2, a GCN per view).
            (default: :obj:`True`)
        label_smoothing (float, optional): :math:`\epsilon` of the 1-N targets
            :math:`(1 - \epsilon) y + 1/N`. (default: :obj:`0.1`)
        objective (str, optional): Training loss: :obj:`"bce"`, the 1-N
            binary cross-entropy of the paper, :obj:`"softmax"`, 1-vs-all
            softmax cross-entropy over all entities with one example per
            answer, :obj:`"kl"`, the same with one example per query, or
            :obj:`"filtered-softmax"`, one example per answer whose
            candidates leave the query's other answers out
            (see :func:`~torch_wge.nn.decoders.loss.one_to_n_loss`).
            (default: :obj:`"bce"`)
        n3_weight (float, optional): Weight of the N3 regulariser
            (Lacroix et al. 2018) on the input embeddings of every training
            triple, :math:`\lambda \frac{1}{T} \sum_{(h, r, t)}
            (\|x_h\|_3^3 + \|r\|_3^3 + \|x_t\|_3^3)` with quaternion moduli.
            (default: :obj:`0.0`)
        relation_prediction_weight (float, optional): Weight of relation
            prediction as an auxiliary objective (Chen et al. 2021): each
            training triple's relation is predicted among all :math:`2R`
            with a softmax over the QuatE scores of every layer
            (:meth:`relation_prediction_loss`). (default: :obj:`0.0`)
        num_candidates (int, optional): With :obj:`objective="softmax"`,
            score each training batch against its answers and this many
            entities drawn uniformly for the batch (a sampled softmax, see
            :func:`~torch_wge.nn.decoders.loss.sample_candidates`) instead of all
            entities; evaluation always ranks all entities.
            (default: :obj:`None`, all entities)

    The encoder keeps each view's normalised adjacency for the graph it was
    computed from (:class:`~torch_wge.nn.QuaternionGCNConv`'s
    :obj:`cached`): training on one graph normalises it once, and a call on
    another graph (or the same graph moved to another device or dtype) is
    normalised anew.

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
        quaternion: bool = True,
        label_smoothing: float = 0.1,
        objective: str = "bce",
        n3_weight: float = 0.0,
        relation_prediction_weight: float = 0.0,
        num_candidates: Optional[int] = None,
    ):
        super().__init__()
        name = self.__class__.__name__
        if num_candidates is not None and (objective != "softmax" or num_candidates < 1):
            raise ValueError(
                f"'{name}' num_candidates needs objective='softmax' and a positive count, "
                f"got {num_candidates} with objective={objective!r}"
            )
        for count_name, count in (("num_entities", num_entities), ("num_relations", num_relations)):
            if not (isinstance(count, int) and count > 0):
                raise ValueError(f"'{name}' {count_name} must be a positive int, got {count!r}")
        if not (isinstance(hidden_channels, int) and hidden_channels > 0):
            raise ValueError(f"'{name}' hidden_channels must be a positive int, got {hidden_channels!r}")
        channels = 4 * hidden_channels
        if views not in VIEWS:
            raise ValueError(f"'{name}' views must be one of {sorted(VIEWS)}, got {views!r}")
        if num_layers < 0:
            raise ValueError(f"'{name}' num_layers must be >= 0, got {num_layers}")
        if not 0.0 <= alpha0 <= 1.0:
            raise ValueError(f"'{name}' alpha0 must be in [0, 1], got {alpha0}")
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"'{name}' label_smoothing must be in [0, 1), got {label_smoothing}")
        if objective not in OBJECTIVES:
            raise ValueError(f"'{name}' objective must be one of {sorted(OBJECTIVES)}, got {objective!r}")
        for weight_name, weight in (
            ("n3_weight", n3_weight),
            ("relation_prediction_weight", relation_prediction_weight),
        ):
            if not weight >= 0.0:
                raise ValueError(f"'{name}' {weight_name} must be >= 0, got {weight}")
        self.num_entities = num_entities
        self.num_relations = num_relations
        self.hidden_channels = hidden_channels
        self.channels = channels
        self.num_layers = num_layers
        self.alpha0 = alpha0
        self.views = views
        self.label_smoothing = label_smoothing
        self.objective = objective
        self.n3_weight = n3_weight
        self.relation_prediction_weight = relation_prediction_weight
        self.num_candidates = num_candidates

        self.entity_embedding = torch.nn.Embedding(num_entities, channels)
        self.relation_embedding = torch.nn.Embedding(2 * num_relations, channels)
        inputs = VIEWS[views]
        self.encoder = (
            TwoViewEncoder(
                channels,
                num_layers,
                entity_view="ef_edge_index" in inputs,
                relation_view="rf_edge_index" in inputs,
                quaternion=quaternion,
                norm="batch_norm" if batch_norm else None,
                cached=True,
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

        A view whose ids do not fit its node count is refused with a
        :class:`ValueError` (:func:`~torch_wge.data.check_edge_index`), and
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
        missing = [view.edge_index for view in views.values() if getattr(data, view.edge_index, None) is None]
        if missing:
            raise ValueError(
                f"'{self.__class__.__name__}(views={self.views!r})' needs {missing} on the data; "
                f"apply the matching transforms from torch_wge.transforms"
            )
        edges = {arg: getattr(data, view.edge_index) for arg, view in views.items()}
        for arg, view in views.items():
            check_edge_index(edges[arg], int(getattr(data, view.num_nodes)), view.edge_index)
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
        r"""Each layer's decoder query for ``(heads[b], relations[b])``, ``[K + 1, B, C]``.
        The layers' relation tables ``[K + 1, 2R, C]`` are normalised together, before their rows are
        gathered; the layers' queries are formed together (:meth:`QuatEDecoder.queries_together`)."""
        hs = [x.index_select(0, heads) for x in encoded.entities]
        rs = normalize_quaternion(torch.stack(encoded.relations)).index_select(1, relations).unbind(0)
        return torch.stack(QuatEDecoder.queries_together(cast(List[QuatEDecoder], list(self.decoders)), hs, rs))

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

    def loss(
        self,
        encoded: EncodedGraph,
        head_index: Tensor,
        rel_type: Tensor,
        tail_index: Tensor,
        matmul_dtype: Optional[torch.dtype] = None,
    ) -> Tensor:
        r"""The training loss of a batch of triples :math:`(h, r, t)`, given
        as :meth:`torch_geometric.nn.kge.KGEModel.loss` takes them: each
        triple is asked in both directions, as the 1-N queries
        :math:`(h, r, ?)` and :math:`(t, r^{-1}, ?)` (relation ``r + R``),
        a query asked by several triples of the batch once, with all their
        answers as its positives; then :meth:`query_loss` of these queries.
        On the batch of all training triples of some queries this is the
        loss that :command:`torch-wge train` computes for those queries.

        Args:
            encoded (EncodedGraph): :meth:`encode` of the graph.
            head_index (Tensor): Heads ``[B]``.
            rel_type (Tensor): Relations ``[B]``, in :math:`[0, R)`.
            tail_index (Tensor): Tails ``[B]``.
            matmul_dtype (torch.dtype, optional): See :meth:`query_loss`.
                (default: :obj:`None`)

        Example:
            >>> model = WGE(num_entities=5, num_relations=2, hidden_channels=2, num_layers=1)
            >>> ef = torch.tensor([[0, 1], [1, 0]]); rf = torch.tensor([[0, 5], [5, 0]])
            >>> head, rel, tail = torch.tensor([0, 1, 3]), torch.tensor([0, 1, 0]), torch.tensor([1, 2, 4])
            >>> loss = model.loss(model.encode(ef, rf), head, rel, tail)
            >>> loss.backward()
        """
        name = f"'{self.__class__.__name__}.loss'"
        if not (head_index.dim() == rel_type.dim() == tail_index.dim() == 1):
            raise ValueError(
                f"{name} takes triples as head_index, rel_type, tail_index [B]; got shapes "
                f"{[list(t.shape) for t in (head_index, rel_type, tail_index)]} (1-N queries with "
                f"[2, P] positives go to query_loss)"
            )
        if not (head_index.numel() == rel_type.numel() == tail_index.numel()):
            raise ValueError(
                f"{name} got {head_index.numel()} heads, {rel_type.numel()} relations, {tail_index.numel()} tails"
            )
        heads, relations, positives = _triple_queries(head_index, rel_type, tail_index, self.num_relations)
        return self.query_loss(encoded, heads, relations, positives, matmul_dtype)

    def query_loss(
        self,
        encoded: EncodedGraph,
        heads: Tensor,
        relations: Tensor,
        positives: Tensor,
        matmul_dtype: Optional[torch.dtype] = None,
        candidates: Optional[Tuple[Tensor, Tensor]] = None,
        pair_weights: Optional[Tensor] = None,
    ) -> Tensor:
        r"""The training loss of a batch of 1-N queries
        ``(heads[b], relations[b])`` (relation ids in :math:`[0, 2R)`), what
        the trainer computes: the objective (default
        1-N binary cross-entropy with label smoothing,

        .. math::
            \mathcal{L} = \sum_k \alpha_k \frac{1}{BN} \sum_{b, n}
            \mathrm{BCE}\left(\sigma(f_k(h_b, r_b, n)), (1 - \epsilon) y_{bn} + 1/N\right)

        computed by :func:`~torch_wge.nn.decoders.loss.one_to_n_loss` from the
        queries and the sparse positives, without holding the logits or the
        targets; in training mode with :obj:`num_candidates`, against the
        batch's sampled candidates only), plus the N3 term when :obj:`n3_weight > 0` and the
        relation-prediction term when :obj:`relation_prediction_weight > 0`.

        Args:
            positives (Tensor): ``[2, P]`` pairs ``(b, n)`` with ``y_{bn} = 1``.
            matmul_dtype (torch.dtype, optional): Dtype of the scoring
                matmuls (e.g. :obj:`torch.bfloat16`), see
                :func:`~torch_wge.nn.decoders.loss.one_to_n_loss`.
                (default: :obj:`None`, the parameters' dtype)
            candidates (Tuple[Tensor, Tensor], optional): With
                :obj:`num_candidates`, the batch's candidates and the position
                of each answer among them, :func:`~torch_wge.nn.decoders.loss.sample_candidates`
                of ``positives[1]`` drawn beforehand: on the CPU, before the
                batch moves to a GPU, drawing them costs the GPU no wait.
                (default: :obj:`None`, drawn here)
            pair_weights (Tensor, optional): ``[P]`` weight of each positive
                pair in the softmax objective (see
                :func:`~torch_wge.nn.decoders.loss.one_to_n_loss`): pairs of
                weight 0 pad a batch to a fixed size. Not with the N3 or
                relation-prediction terms, nor with candidates drawn here.
                (default: :obj:`None`, every pair 1)
        """
        sampled = self.num_candidates is not None and self.training
        if pair_weights is not None and (self.n3_weight > 0 or self.relation_prediction_weight > 0):
            raise ValueError(
                f"'{self.__class__.__name__}.query_loss' takes no pair_weights with N3 or relation prediction"
            )
        if pair_weights is not None and sampled and candidates is None:
            raise ValueError(
                f"'{self.__class__.__name__}.query_loss' takes pair_weights with sampled candidates only when they "
                f"are given (candidates=), drawn from the pairs of weight > 0"
            )
        if self.num_candidates is not None and self.training:
            if candidates is None:
                candidates = sample_candidates(positives[1], self.num_entities, self.num_candidates)
            candidate_index, positions = candidates
            # each layer's candidate rows, [K + 1, n, C]: all layers' entities are never stacked
            entities = torch.stack([x.index_select(0, candidate_index) for x in encoded.entities])
            scored = torch.stack([positives[0], positions])
        else:
            entities, scored = torch.stack(encoded.entities), positives
        loss = one_to_n_loss(
            self.queries(encoded, heads, relations),
            entities,
            scored,
            self.layer_weights,
            self.objective,
            self.label_smoothing,
            matmul_dtype,
            pair_weights,
        )
        if self.n3_weight > 0:
            loss = loss + self.n3_weight * self.n3(encoded, heads, relations, positives)
        if self.relation_prediction_weight > 0:
            loss = loss + self.relation_prediction_weight * self.relation_prediction_loss(
                encoded, heads, relations, positives
            )
        return loss

    def relation_prediction_loss(
        self, encoded: EncodedGraph, heads: Tensor, relations: Tensor, positives: Tensor
    ) -> Tensor:
        r"""Relation prediction for the batch's training triples
        :math:`(h_b, r_b, t)`, ``positives [2, T]`` as in :meth:`query_loss`:

        .. math::
            \sum_k \frac{\alpha_k}{T} \sum_{(b, t)} -\log
            \frac{\exp g_k(h_b, r_b, t)}{\sum_{r'} \exp g_k(h_b, r', t)},
            \qquad g_k(h, r, t) = (\mathbf{x}^k_h \otimes \mathbf{r}^{k\triangleleft})
            \bullet \mathbf{x}^k_t
            = \mathbf{r}^{k\triangleleft} \bullet (\bar{\mathbf{x}}^k_h \otimes \mathbf{x}^k_t)

        over all :math:`2R` relations :math:`r'`: the QuatE score of layer
        :math:`k` without the decoder's batch norm and dropout, so that all
        relations are scored with one matmul ``[T, C] @ [C, 2R]``."""
        rows, tails = positives
        losses = []
        for weight, x, rel in zip(self.layer_weights.unbind(), encoded.entities, encoded.relations):
            pair = hamilton_product(quaternion_conjugate(x.index_select(0, heads[rows])), x.index_select(0, tails))
            logits = pair @ normalize_quaternion(rel).t()  # [T, 2R]
            losses.append(weight * torch.nn.functional.cross_entropy(logits, relations[rows]))
        return sum(losses[1:], losses[0])

    @staticmethod
    def n3(encoded: EncodedGraph, heads: Tensor, relations: Tensor, positives: Tensor) -> Tensor:
        r"""The N3 regulariser of the batch's training triples on the input
        (layer-0) embeddings, :math:`\frac{1}{T} \sum_{(b, t)} \sum_q
        (|x_{h_b, q}|^3 + |r_{b, q}|^3 + |x_{t, q}|^3)` over the quaternions
        :math:`q` of each embedding; ``positives [2, T]`` as in :meth:`query_loss`."""
        rows, tails = positives
        x, rel = encoded.entities[0], encoded.relations[0]
        cubes = [quaternion_norm(t).pow(3).sum() for t in (x[heads[rows]], rel[relations[rows]], x[tails])]
        return sum(cubes) / max(rows.numel(), 1)

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
            f"views={self.views!r})"
        )
