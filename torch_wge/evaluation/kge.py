r"""Scoring every entity as the answer of a query with a PyG KGE model
(:class:`torch_geometric.nn.kge.KGEModel`), for the filtered evaluator."""
from typing import Callable

import torch
from torch import Tensor
from torch_geometric.nn.kge import KGEModel

__all__ = ["kge_score_fn"]


def kge_score_fn(model: KGEModel, num_relations: int, max_triples: int = 1 << 18) -> Callable[[Tensor, Tensor], Tensor]:
    r"""A ``score_fn(entities [B], relations [B]) -> [B, N]`` of a
    :class:`~torch_geometric.nn.kge.KGEModel` (ComplEx, DistMult, RotatE,
    TransE, :class:`torch_wge.nn.kge.QuatE`, ...), as
    :meth:`~torch_wge.evaluation.LinkPredictionEvaluator.evaluate` wants it.

    A tail query :math:`(e, r, ?)`, :math:`r < R`, scores
    :math:`d(e, r, n)` for every entity :math:`n`; a head query
    :math:`(e, r + R, ?)` scores :math:`d(n, r, e)`, so the model needs no
    inverse relations. All :math:`BN` triples of a batch go to the model in
    one call (or in calls of at most :obj:`max_triples` triples), never one
    query at a time. A model with a ``query_score_fn()`` method (such as
    :class:`torch_wge.nn.kge.WGEKGE`) scores its queries itself.

    Args:
        model (torch_geometric.nn.kge.KGEModel): The model.
        num_relations (int): :math:`R`, the number of relations of the
            evaluated graph (without inverses).
        max_triples (int, optional): The most triples scored in one call of
            the model. (default: :obj:`262144`)

    Example:
        >>> from torch_geometric.nn.kge import DistMult
        >>> model = DistMult(num_nodes=4, num_relations=2, hidden_channels=8)
        >>> score_fn = kge_score_fn(model, num_relations=2)
        >>> scores = score_fn(torch.tensor([0, 1]), torch.tensor([1, 3]))  # (0, 1, ?), (?, 1, 1)
        >>> torch.allclose(scores[0, 3], model(torch.tensor([0]), torch.tensor([1]), torch.tensor([3])))
        True
        >>> torch.allclose(scores[1, 2], model(torch.tensor([2]), torch.tensor([1]), torch.tensor([1])))
        True
    """
    if hasattr(model, "query_score_fn"):
        if model.num_relations != num_relations:
            raise ValueError(
                f"{type(model).__name__} has num_relations={model.num_relations} but the evaluated graph has "
                f"{num_relations}; build the model with the graph's number of relations"
            )
        return model.query_score_fn()

    def score_fn(entities: Tensor, relations: Tensor) -> Tensor:
        num_nodes = model.num_nodes
        candidates = torch.arange(num_nodes, device=entities.device).view(1, -1)
        inverse = (relations >= num_relations).view(-1, 1)
        entity = entities.view(-1, 1)
        head = torch.where(inverse, candidates, entity).reshape(-1)
        tail = torch.where(inverse, entity, candidates).reshape(-1)
        rel = (relations % num_relations).view(-1, 1).expand(-1, num_nodes).reshape(-1)
        scores = [
            model(head[i : i + max_triples], rel[i : i + max_triples], tail[i : i + max_triples])
            for i in range(0, head.numel(), max_triples)
        ]
        return torch.cat(scores).view(-1, num_nodes)

    return score_fn
