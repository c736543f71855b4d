r"""(head, relation, tail) triples as 1-N queries: a triple :math:`(h, r, t)`
of a graph of :math:`R` relations is the tail query :math:`(h, r, ?)` and,
with the inverse relation :math:`r + R`, the head query :math:`(t, r + R, ?)`.
A query :math:`(e, r)` with :math:`r \in [0, 2R)` has the integer key
:math:`e \cdot 2R + r`, which sorts queries by entity, then relation."""

from typing import Tuple

import torch
from torch import Tensor


def add_inverse_triples(triples: Tensor, num_relations: int) -> Tensor:
    r"""Appends the inverse :math:`(t, r + R, h)` of every triple :math:`(h, r, t)`:
    the rows are the queries (entity, relation) of both directions, each
    with its answer.

    Shapes: ``triples [T, 3]`` gives ``[2T, 3]``.

    Example:
        >>> add_inverse_triples(torch.tensor([[0, 1, 2]]), num_relations=5).tolist()
        [[0, 1, 2], [2, 6, 0]]
    """
    inverse = torch.stack([triples[:, 2], triples[:, 1] + num_relations, triples[:, 0]], dim=1)
    return torch.cat([triples, inverse], dim=0)


def query_key(entity: Tensor, relation: Tensor, num_relations: int) -> Tensor:
    r"""The key :math:`e \cdot 2R + r` of each query :math:`(e, r)`, :math:`r \in [0, 2R)`.

    Shapes: ``entity [Q]``, ``relation [Q]`` give ``[Q]``.

    Example:
        >>> query_key(torch.tensor([0, 2]), torch.tensor([1, 6]), num_relations=5).tolist()
        [1, 26]
    """
    return entity * (2 * num_relations) + relation


def query_from_key(key: Tensor, num_relations: int) -> Tuple[Tensor, Tensor]:
    r"""The entity and relation of each query key (the inverse of :func:`query_key`).

    Shapes: ``key [Q]`` gives ``entity [Q]``, ``relation [Q]``.

    Example:
        >>> [t.tolist() for t in query_from_key(torch.tensor([1, 26]), num_relations=5)]
        [[0, 2], [1, 6]]
    """
    return torch.div(key, 2 * num_relations, rounding_mode="floor"), key % (2 * num_relations)
