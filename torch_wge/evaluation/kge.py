r"""Scoring every entity as the answer of a query with a PyG KGE model
(:class:`torch_geometric.nn.kge.KGEModel`), for the filtered evaluator."""

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.kge import ComplEx, DistMult, KGEModel, TransE

__all__ = ["kge_score_fn"]


# All-candidate scores of PyG's models from their embedding matrices: entity
# [B], relation [B] (< R), inverse [B] (a head query (?, relation, entity)).
def _distmult(model: DistMult, entity: Tensor, rel: Tensor, inverse: Tensor) -> Tensor:
    return (model.node_emb(entity) * model.rel_emb(rel)) @ model.node_emb.weight.t()


def _complex(model: ComplEx, entity: Tensor, rel: Tensor, inverse: Tensor) -> Tensor:
    e_re, e_im = model.node_emb(entity), model.node_emb_im(entity)
    r_re, r_im = model.rel_emb(rel), model.rel_emb_im(rel)
    inverse = inverse.view(-1, 1)
    # d(h, r, t) = <Re(h r), t_re> + <Im(h r), t_im> = <h_re, Re(r conj(t))> + <h_im, -Im(r conj(t))>
    q_re = torch.where(inverse, r_re * e_re + r_im * e_im, e_re * r_re - e_im * r_im)
    q_im = torch.where(inverse, r_re * e_im - r_im * e_re, e_im * r_re + e_re * r_im)
    return q_re @ model.node_emb.weight.t() + q_im @ model.node_emb_im.weight.t()


def _transe(model: TransE, entity: Tensor, rel: Tensor, inverse: Tensor) -> Tensor:
    # d(h, r, t) = -||h + r - t||: a head query is -||h - (t - r)||
    e = F.normalize(model.node_emb(entity), p=model.p_norm, dim=-1)
    r = model.rel_emb(rel)
    query = torch.where(inverse.view(-1, 1), e - r, e + r)
    candidates = F.normalize(model.node_emb.weight, p=model.p_norm, dim=-1)
    return -torch.cdist(query, candidates, p=model.p_norm, compute_mode="donot_use_mm_for_euclid_dist")


_ALL_CANDIDATES = {DistMult: _distmult, ComplEx: _complex, TransE: _transe}


def kge_score_fn(model: KGEModel, num_relations: int, max_triples: int = 1 << 18) -> Callable[[Tensor, Tensor], Tensor]:
    r"""A ``score_fn(entities [B], relations [B]) -> [B, N]`` of a
    :class:`~torch_geometric.nn.kge.KGEModel` (ComplEx, DistMult, RotatE,
    TransE, :class:`torch_wge.nn.kge.QuatE`, ...), as
    :meth:`~torch_wge.evaluation.LinkPredictionEvaluator.evaluate` wants it.

    A tail query :math:`(e, r, ?)`, :math:`r < R`, scores
    :math:`d(e, r, n)` for every entity :math:`n`; a head query
    :math:`(e, r + R, ?)` scores :math:`d(n, r, e)`, so the model needs no
    inverse relations. PyG's :class:`~torch_geometric.nn.kge.DistMult`,
    :class:`~torch_geometric.nn.kge.ComplEx` and
    :class:`~torch_geometric.nn.kge.TransE` are scored against all entities
    with one matrix product (or distance matrix) per batch; a model with a
    ``query_score_fn()`` method (:class:`torch_wge.nn.kge.QuatE`,
    :class:`torch_wge.nn.kge.WGEKGE`) scores its queries itself; any other
    model gets all :math:`BN` triples of a batch in one call of
    :meth:`forward` (or calls of at most :obj:`max_triples` triples), never
    one query at a time.

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
    if type(model) in _ALL_CANDIDATES:
        scores = _ALL_CANDIDATES[type(model)]
        return lambda entities, relations: scores(
            model, entities, relations % num_relations, relations >= num_relations
        )

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
