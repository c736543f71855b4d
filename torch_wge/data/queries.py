r"""The 1-N training queries of a knowledge graph (:class:`TrainingQueries`): what a training
loop batches, as ``torch-wge train`` and ``examples/link_pred_codex.py`` do."""

import copy
from typing import Iterator, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.utils import cumsum

from torch_wge.utils.segments import expand_segments
from torch_wge.utils.triples import add_inverse_triples, query_from_key, query_key


class TrainingQueries:
    r"""The 1-N training queries of a knowledge graph: every distinct
    (head, relation) pair of the training triples with inverse relations added,
    and the tails that answer it, in CSR form.

    Args:
        triples (Tensor): Training triples ``[T, 3]`` as ``(head, relation, tail)``.
        num_entities (int): Number of entities :math:`N`.
        num_relations (int): Number of KG relations :math:`R` (without inverses).

    Attributes:
        heads (Tensor): ``[Q]`` head of each query.
        relations (Tensor): ``[Q]`` relation of each query, in ``[0, 2R)``.
        answer_ptr (Tensor): ``[Q + 1]`` CSR offsets into :obj:`answers`.
        answers (Tensor): ``[2T']`` tails (``T'`` distinct triples), grouped by query.

    Example:
        >>> triples = torch.tensor([[0, 0, 1], [0, 0, 2], [2, 1, 0]])  # (head, relation, tail)
        >>> queries = TrainingQueries(triples, num_entities=3, num_relations=2)
        >>> queries.heads.tolist(), queries.relations.tolist()  # inverse relations r + 2 included
        ([0, 0, 1, 2, 2], [0, 3, 2, 1, 2])
        >>> for heads, relations, positives in queries.batches(2, torch.Generator().manual_seed(0)):
        ...     print(heads.tolist(), relations.tolist(), positives.tolist())  # (row in the batch, answer)
        [2, 0] [2, 0] [[0, 1, 1], [0, 1, 2]]
        [0, 2, 1] [3, 1, 2] [[0, 1, 2], [2, 0, 0]]
    """

    def __init__(self, triples: Tensor, num_entities: int, num_relations: int):
        triples = torch.unique(add_inverse_triples(triples.long(), num_relations), dim=0)
        keys = query_key(triples[:, 0], triples[:, 1], num_relations)  # sorted, as unique sorts rows
        keys, counts = torch.unique_consecutive(keys, return_counts=True)
        self.num_entities = num_entities
        self.heads, self.relations = query_from_key(keys, num_relations)
        self.answer_ptr = cumsum(counts)
        self.answers = triples[:, 2].contiguous()

    def __len__(self) -> int:
        return self.heads.numel()

    def batch(self, index: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        r"""Queries ``index [B]``: returns ``heads [B]``, ``relations [B]`` and the
        positive pairs ``[2, P]`` as ``(row in batch, answer entity)``."""
        start = self.answer_ptr[index]
        rows, position = expand_segments(start, self.answer_ptr[index + 1] - start)
        return self.heads[index], self.relations[index], torch.stack([rows, self.answers[position]])

    def subset(self, index: Tensor) -> "TrainingQueries":
        """The queries ``index [B]`` (ascending) with their answers, as a new
        :class:`TrainingQueries`."""
        start, count = self.answer_ptr[index], self.answer_ptr[index + 1] - self.answer_ptr[index]
        _, position = expand_segments(start, count)
        subset = copy.copy(self)
        subset.heads, subset.relations = self.heads[index], self.relations[index]
        subset.answer_ptr = cumsum(count)
        subset.answers = self.answers[position]
        return subset

    def batch_indices(
        self, batch_size: int, generator: Optional[torch.Generator] = None, shuffle: bool = True
    ) -> Tuple[Tensor, ...]:
        """The query indices of each batch of an epoch: all queries once, in
        a random order drawn from ``generator``, in batches of ``batch_size``.
        A last batch of a single query (which batch norm cannot normalise in
        training) joins the batch before it, which then holds
        ``batch_size + 1``."""
        order = torch.randperm(len(self), generator=generator) if shuffle else torch.arange(len(self))
        batches = order.split(batch_size)
        if len(batches) > 1 and batches[-1].numel() == 1:
            batches = (*batches[:-2], order[-(batch_size + 1) :])
        return batches

    def batches(
        self, batch_size: int, generator: Optional[torch.Generator] = None, shuffle: bool = True
    ) -> Iterator[Tuple[Tensor, Tensor, Tensor]]:
        """Yields :meth:`batch` of each of :meth:`batch_indices`."""
        for index in self.batch_indices(batch_size, generator, shuffle):
            yield self.batch(index)

    def num_batches(self, batch_size: int) -> int:
        """The number of batches of :meth:`batch_indices`."""
        batches = -(-len(self) // batch_size)
        return batches - 1 if batches > 1 and len(self) % batch_size == 1 else batches
