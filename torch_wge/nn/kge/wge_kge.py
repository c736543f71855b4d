from typing import Any, Callable, Dict, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn.kge import KGEModel
from torch_geometric.typing import Adj

from torch_wge.nn.decoders import OneToNLoss
from torch_wge.nn.kge.pyg_test import OneToNTest
from torch_wge.nn.models.wge import WGE, EncodedGraph


class WGEKGE(OneToNTest, KGEModel):
    r"""WGE (:class:`~torch_wge.nn.WGE`) behind the interface of
    :class:`torch_geometric.nn.kge.KGEModel`, so that code written for PyG's
    KGE models (:meth:`forward` on triples, :meth:`loss`, :meth:`loader`,
    :meth:`test`, :meth:`random_sample`) trains and evaluates WGE.

    WGE encodes the whole graph before it scores. :meth:`forward` returns the
    score :math:`f(h, r, t) = \sum_k \alpha_k f_k(h, r, t)` of each triple
    (its tail only, not every entity); relation ids :math:`r + R` are the
    inverses. :meth:`loss` is :meth:`OneToNLoss.triples <torch_wge.nn.OneToNLoss.triples>`
    of :obj:`loss_fn`, the 1-N objective for the batch's queries
    :math:`(h, r, ?)` and :math:`(t, r^{-1}, ?)` against all entities (the
    negatives are all other entities, so :meth:`random_sample` is not used).
    In evaluation (:meth:`eval` mode without gradients, as in PyG's
    :meth:`~torch_geometric.nn.kge.KGEModel.test`) the encoding is computed
    once and reused until a parameter changes (an optimizer step or a loaded
    state dict); :meth:`test` encodes once and scores chunks of queries
    against all entities, as the evaluator does. For ranking, :meth:`query_score_fn` scores queries
    against all entities; :meth:`torch_wge.evaluation.LinkPredictionEvaluator.evaluate`
    uses it. The :obj:`node_emb` and :obj:`rel_emb` of
    :class:`~torch_geometric.nn.kge.KGEModel` are WGE's embeddings.

    Args:
        num_nodes (int): The number of entities.
        num_relations (int): The number of relations :math:`R` (without inverses).
        hidden_channels (int): The number of quaternions of each embedding
            (WGE's :obj:`channels` is :obj:`4 * hidden_channels`).
        data (torch_geometric.data.Data): The knowledge graph with the graph
            views the model's :obj:`views` need.
        loss_fn (OneToNLoss, optional): The training objective of :meth:`loss`.
            (default: :obj:`OneToNLoss()`, the paper's 1-N binary cross-entropy)
        **kwargs (optional): Further arguments of :class:`~torch_wge.nn.WGE`
            (:obj:`num_layers`, :obj:`alpha0`, :obj:`dropout`, ...).

    Example:
        >>> import torch_geometric.transforms as T
        >>> from torch_wge.testing import random_kg
        >>> from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform
        >>> data = T.Compose([EntityFocusedTransform(), RelationFocusedTransform()])(random_kg(20, 3, 60))
        >>> model = WGEKGE(20, 3, hidden_channels=2, data=data, num_layers=1).eval()
        >>> model(torch.tensor([0, 1]), torch.tensor([2, 0]), torch.tensor([5, 6])).shape
        torch.Size([2])
    """

    def __init__(
        self,
        num_nodes: int,
        num_relations: int,
        hidden_channels: int,
        data: Data,
        loss_fn: Optional[OneToNLoss] = None,
        **kwargs,
    ):
        torch.nn.Module.__init__(self)
        self.num_nodes = num_nodes
        self.num_relations = num_relations
        self.hidden_channels = hidden_channels
        self.wge = WGE(num_nodes, num_relations, hidden_channels=hidden_channels, **kwargs)
        self.loss_fn = loss_fn if loss_fn is not None else OneToNLoss()
        self.data = data
        self.wge.graph_inputs(data)  # fails early when a view is missing
        self._graph_inputs: Dict[str, Adj] = {}
        self._graph_key: Optional[Tuple[Any, ...]] = None
        self._graph_data: Optional[Data] = None
        self._encoded: Optional[EncodedGraph] = None
        self._encoded_key: Optional[Tuple[Any, ...]] = None

    @property
    def node_emb(self) -> torch.nn.Embedding:
        return self.wge.entity_embedding

    @property
    def rel_emb(self) -> torch.nn.Embedding:
        return self.wge.relation_embedding

    def reset_parameters(self):
        self.wge.reset_parameters()

    def _encode(self) -> EncodedGraph:
        weight = self.wge.entity_embedding.weight
        key = (id(self.data), weight.device, weight.dtype)  # this data, on the embeddings' device and dtype
        if self._graph_key != key or self._graph_data is not self.data:
            self._graph_inputs = {k: v.to(weight.device) for k, v in self.wge.graph_inputs(self.data).items()}
            self._graph_key, self._graph_data = key, self.data
        if self.training or torch.is_grad_enabled():
            self._encoded, self._encoded_key = None, None
            return self.wge.encode(**self._graph_inputs)
        # evaluation: one encoding while no parameter or buffer changes
        versions = (self._graph_key, tuple(t._version for t in (*self.parameters(), *self.buffers())))
        if self._encoded is None or self._encoded_key != versions:
            self._encoded, self._encoded_key = self.wge.encode(**self._graph_inputs), versions
        return self._encoded

    def forward(self, head_index: Tensor, rel_type: Tensor, tail_index: Tensor) -> Tensor:
        return self.wge.score_triples(self._encode(), head_index, rel_type, tail_index)

    def loss(self, head_index: Tensor, rel_type: Tensor, tail_index: Tensor) -> Tensor:
        return self.loss_fn.triples(self.wge, self._encode(), head_index, rel_type, tail_index)

    def query_score_fn(self) -> Callable[[Tensor, Tensor], Tensor]:
        r"""Encodes the graph once and returns ``score_fn(entities [B],
        relations [B]) -> [B, N]``, the scores of every entity as the answer
        of :math:`(e_b, r_b, ?)`, relation ids in :math:`[0, 2R)`."""
        encoded = self._encode()
        return lambda entities, relations: self.wge.score_all(encoded, entities, relations)
