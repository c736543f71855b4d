from typing import Optional, Tuple

import torch
from torch import Tensor


def expand_segments(start: Tensor, count: Tensor, total: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    r"""Flat positions of :math:`S` segments, segment :math:`s` being the
    ``count[s]`` consecutive items from ``start[s]`` (as CSR rows are): returns
    the segment of each item and its position,

    .. math::
        \text{segment} = [\underbrace{0, \dots, 0}_{c_0}, \underbrace{1, \dots, 1}_{c_1}, \dots],
        \qquad \text{position}_i = \text{start}_{\text{segment}_i} + (i - \textstyle\sum_{s' < \text{segment}_i} c_{s'})

    without a Python loop over the segments.

    Args:
        start (Tensor): ``[S]`` first position of each segment.
        count (Tensor): ``[S]`` number of items of each segment.
        total (int, optional): ``count.sum()``, when known (saves a sync on a GPU).

    Shapes:
        - **output:** two long tensors of shape ``[sum(count)]``

    Example:
        >>> expand_segments(torch.tensor([10, 0, 5]), torch.tensor([2, 0, 3]))
        (tensor([0, 0, 2, 2, 2]), tensor([10, 11,  5,  6,  7]))
    """
    total = int(count.sum()) if total is None else total
    segment = torch.repeat_interleave(torch.arange(count.numel(), device=count.device), count, output_size=total)
    first_item = torch.cumsum(count, 0) - count
    position = torch.arange(total, device=count.device) + (start - first_item)[segment]
    return segment, position
