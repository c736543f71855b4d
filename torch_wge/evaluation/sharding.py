r"""Filtered ranking sharded over the processes of a
:mod:`torch.distributed` process group: each process ranks a contiguous,
chunk-aligned part of the queries and every process gets all ranks."""

from typing import Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor


def shard_bounds(size: int, rank: int, world_size: int, chunk: int = 1) -> Tuple[int, int]:
    r"""The contiguous part ``[start, stop)`` of ``range(size)`` of process
    ``rank`` of ``world_size``, made of whole chunks of ``chunk`` items (the
    last chunk may be shorter; the numbers of chunks of two parts differ by at
    most one), so that a part processed chunk by chunk from its start meets
    exactly the chunks of ``range(size)`` processed from 0. With
    :obj:`chunk=1` the part sizes differ by at most one.

    Example:
        >>> [shard_bounds(5, rank, 2) for rank in range(2)]
        [(0, 2), (2, 5)]
        >>> [shard_bounds(10, rank, 2, chunk=3) for rank in range(2)]
        [(0, 6), (6, 10)]
        >>> [shard_bounds(10, rank, 2, chunk=16) for rank in range(2)]
        [(0, 0), (0, 10)]
    """
    num_chunks = -(-size // chunk)
    first, last = num_chunks * rank // world_size, num_chunks * (rank + 1) // world_size
    return min(first * chunk, size), min(last * chunk, size)


def sharded_ranks(
    evaluator, score_fn, batch_size: int, group=None, device: Optional[torch.device] = None, **kwargs
) -> Tensor:
    r"""Ranks of all queries of a
    :class:`~torch_wge.evaluation.LinkPredictionEvaluator`, each process of
    ``group`` (default: all) ranking its part (:func:`shard_bounds`)
    with ``evaluator.compute_ranks(score_fn, batch_size, start, stop, **kwargs)``;
    returns all ranks, in query order, on the CPU of every process (for
    ``evaluator.summarize``). Call it in every process; without an
    initialised process group it is ``compute_ranks`` over all queries.

    Because the parts are whole chunks of ``batch_size`` queries, every query
    is scored in the same chunk as in one process, so the ranks, and the
    metrics, are exactly those of one process.

    Args:
        device (torch.device, optional): Device of the all-gather (the
            process's CUDA device under nccl). (default: the CPU)
    """
    world_size = dist.get_world_size(group) if dist.is_available() and dist.is_initialized() else 1
    if world_size == 1:
        return evaluator.compute_ranks(score_fn, batch_size, **kwargs)
    rank = dist.get_rank(group)
    bounds = [shard_bounds(evaluator.num_queries, r, world_size, chunk=batch_size) for r in range(world_size)]
    local = evaluator.compute_ranks(score_fn, batch_size, *bounds[rank], **kwargs)
    sizes = [stop - start for start, stop in bounds]
    padded = torch.zeros(max(max(sizes), 1), dtype=local.dtype, device=device)  # all_gather wants equal sizes
    padded[: local.numel()] = local.to(padded.device)
    parts = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(parts, padded, group=group)
    return torch.cat([part[:size] for part, size in zip(parts, sizes)]).cpu()
