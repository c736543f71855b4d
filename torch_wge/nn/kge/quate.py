from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.kge import KGEModel

from torch_wge.nn.decoders import quate_query
from torch_wge.nn.kge.pyg_test import OneToNTest
from torch_wge.utils.quaternion import quaternion_conjugate


class QuatE(OneToNTest, KGEModel):
    r"""The QuatE model from the `"Quaternion Knowledge Graph Embeddings"
    <https://arxiv.org/abs/1904.10281>`_ paper, as a
    :class:`torch_geometric.nn.kge.KGEModel`: a drop-in replacement of PyG's
    :class:`~torch_geometric.nn.kge.ComplEx` or
    :class:`~torch_geometric.nn.kge.RotatE` (same constructor, :meth:`forward`,
    :meth:`loss`, :meth:`loader`, :meth:`test` and :meth:`random_sample`).

    Entities and relations are vectors of :obj:`hidden_channels`
    quaternions, stored in the block layout ``[r | i | j | k]`` of
    :mod:`torch_wge.utils.quaternion` (real width
    :obj:`4 * hidden_channels`), and a triple scores

    .. math::
        d(h, r, t) = \left(\mathbf{e}_h \otimes \mathbf{e}_r^{\triangleleft}\right)
        \bullet \mathbf{e}_t

    with :math:`\mathbf{e}_r^{\triangleleft}` the relation with every
    quaternion normalised to unit length, :math:`\otimes` the element-wise
    Hamilton product and :math:`\bullet` the quaternion inner product
    (:class:`~torch_wge.nn.QuatEDecoder` without batch norm or dropout).
    :meth:`loss` is the logistic loss of the paper on the given triples and
    as many negatives from :meth:`random_sample`, as in PyG's
    :class:`~torch_geometric.nn.kge.ComplEx`. For speed in PyG's loop,
    :meth:`loss` scores positives and negatives in one call, and
    :meth:`test` gives PyG's ranks from one matrix product per chunk of
    queries instead of :math:`N` calls of :meth:`forward` per triple, but
    for a true tail tied with other entities, which gets the mean of the
    positions it could take where PyG's takes its place in a sort (see
    :meth:`test`).
    :class:`~torch_geometric.nn.kge.KGEModel`'s constructor creates
    :obj:`node_emb` and :obj:`rel_emb` with :obj:`4 * hidden_channels` real
    numbers per row, the weights :meth:`forward` reads (the state dict holds
    :obj:`node_emb.weight` and :obj:`rel_emb.weight`, as PyG's models').

    With Adam, QuatE needs a smaller learning rate than ComplEx tolerates:
    its unit relations scale an entity's gradient by 1 where ComplEx's
    xavier-initialised relations scale it by about 0.1 (FB15k-237, 50
    channels), so at first one step moves QuatE's scores about ten times
    further (in PyG's loop on FB15k-237 QuatE did best at 0.005 and lost
    much more than ComplEx at 0.01).

    Args:
        num_nodes (int): The number of nodes/entities in the graph.
        num_relations (int): The number of relations in the graph.
        hidden_channels (int): The number of quaternions of each embedding.
        sparse (bool, optional): If set to :obj:`True`, gradients w.r.t. to
            the embedding matrices will be sparse. (default: :obj:`False`)

    Shapes:
        - **forward:** ``head_index [B]``, ``rel_type [B]``,
          ``tail_index [B]`` give ``[B]``

    Example:
        >>> model = QuatE(num_nodes=5, num_relations=2, hidden_channels=3)
        >>> model.node_emb.weight.shape  # 3 quaternions per entity
        torch.Size([5, 12])
        >>> head, rel, tail = torch.tensor([0, 1]), torch.tensor([1, 0]), torch.tensor([2, 4])
        >>> model(head, rel, tail).shape
        torch.Size([2])
        >>> loader = model.loader(head, rel, tail, batch_size=2)
        >>> model.loss(*next(iter(loader))).item() > 0
        True
    """

    def __init__(self, num_nodes: int, num_relations: int, hidden_channels: int, sparse: bool = False):
        if hidden_channels < 1:
            raise ValueError(f"'{self.__class__.__name__}' hidden_channels must be positive, got {hidden_channels}")
        super().__init__(num_nodes, num_relations, 4 * hidden_channels, sparse)
        self.hidden_channels = hidden_channels
        self.reset_parameters()

    def reset_parameters(self):
        torch.nn.init.xavier_uniform_(self.node_emb.weight)
        torch.nn.init.xavier_uniform_(self.rel_emb.weight)

    def forward(self, head_index: Tensor, rel_type: Tensor, tail_index: Tensor) -> Tensor:
        query = quate_query(self.node_emb(head_index), self.rel_emb(rel_type))
        return (query * self.node_emb(tail_index)).sum(dim=-1)

    def loss(self, head_index: Tensor, rel_type: Tensor, tail_index: Tensor) -> Tensor:
        # the positives and the negatives of random_sample, scored in one forward call
        negatives = self.random_sample(head_index, rel_type, tail_index)
        triples = [torch.cat([pos, neg]) for pos, neg in zip((head_index, rel_type, tail_index), negatives)]
        scores = self(*triples)
        target = torch.zeros_like(scores)
        target[: head_index.numel()] = 1.0
        return F.binary_cross_entropy_with_logits(scores, target)

    def query_score_fn(self) -> Callable[[Tensor, Tensor], Tensor]:
        r"""``score_fn(entities [B], relations [B]) -> [B, N]``: every entity
        scored as the answer of :math:`(e_b, r_b, ?)`, with relation ids
        :math:`r + R` asking for heads, as one matrix product. A head query
        uses :math:`(\mathbf{x} \otimes \mathbf{r}) \bullet \mathbf{e} =
        \mathbf{x} \bullet (\mathbf{e} \otimes \bar{\mathbf{r}})`, with
        :math:`\bar{\mathbf{r}}` the conjugate."""

        def score_fn(entities: Tensor, relations: Tensor) -> Tensor:
            r = self.rel_emb(relations % self.num_relations)
            r = torch.where((relations >= self.num_relations).view(-1, 1), quaternion_conjugate(r), r)
            return quate_query(self.node_emb(entities), r) @ self.node_emb.weight.t()

        return score_fn
