r"""Filtered ranks of target entities among scored candidates.

All functions here count, they never sort: the rank of a target is obtained
from the number of candidates that score higher than it and the number that
score at least as high, which is :math:`O(BN)` work, memory bound, and exact
for ties.

For a row of candidate scores :math:`s \in \mathbb{R}^N`, a target index
:math:`y` and the set :math:`\mathcal{C} \subseteq \{1,\dots,N\}` of candidates
left after filtering (the target is always in :math:`\mathcal{C}`):

.. math::

    \mathrm{rank}^{\mathrm{opt}} &= 1 + |\{c \in \mathcal{C} : s_c > s_y\}| \\
    \mathrm{rank}^{\mathrm{pes}} &= |\{c \in \mathcal{C} : s_c \geq s_y\}| \\
    \mathrm{rank}^{\mathrm{real}} &= \tfrac{1}{2}\left(\mathrm{rank}^{\mathrm{opt}}
        + \mathrm{rank}^{\mathrm{pes}}\right)

The pessimistic count includes the target itself, so all three ranks agree
when there are no ties, and a model that scores every candidate alike gets the
realistic rank :math:`(|\mathcal{C}| + 1) / 2` (the expected rank of a random
order), never 1.

**NaN rule.** A NaN score ranks below every number, :math:`-\infty` included,
and NaN scores tie with one another. So a NaN candidate never outranks a
non-NaN target, and a NaN target is outranked by every non-NaN candidate and
ties with the other NaN candidates. A model that outputs NaN therefore gets
bad ranks instead of good ones; no error is raised. :math:`\pm\infty` are
ordinary values (they tie with themselves).

**Filtering.** Filtered candidates are *removed* from the counts, not set to
:math:`-\infty`: their contribution is gathered and subtracted, so no copy of
the score matrix is made, and a target that itself scores :math:`-\infty`
does not tie with the filtered entries.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Optional

import torch
from torch import Tensor

__all__ = ["RankType", "RANK_TYPES", "Ranks", "filtered_ranks", "all_filtered_ranks"]

RankType = Literal["optimistic", "realistic", "pessimistic"]
#: The accepted values of ``rank_type``.
RANK_TYPES: tuple[str, ...] = ("optimistic", "realistic", "pessimistic")


class Ranks(NamedTuple):
    r"""The three ranks of each target, and how many candidates it was ranked among.

    All fields have shape ``[B]`` and a floating dtype (integers are exact up
    to :math:`2^{24}` candidates in ``float32``).
    """

    #: :math:`1 + \#\{s_c > s_y\}`, ``[B]``.
    optimistic: Tensor
    #: mean of optimistic and pessimistic, ``[B]``.
    realistic: Tensor
    #: :math:`\#\{s_c \geq s_y\}` (counting the target), ``[B]``.
    pessimistic: Tensor
    #: :math:`|\mathcal{C}|`, the candidates left after filtering, target included, ``[B]``.
    num_candidates: Tensor

    def get(self, rank_type: str) -> Tensor:
        """The ranks of one type (``"optimistic"``, ``"realistic"`` or ``"pessimistic"``)."""
        if rank_type not in RANK_TYPES:
            raise ValueError(f"rank_type must be one of {RANK_TYPES}, got {rank_type!r}")
        return getattr(self, rank_type)


def count_dtype(num_entities: int) -> torch.dtype:
    """dtype of the counting buffer of :func:`rank_counts`: comparisons written
    straight into a float buffer and summed in float are several times faster
    on CPU than summing a bool tensor; float32 counts are exact below 2**24."""
    return torch.float32 if num_entities < 2**24 else torch.float64


def _compare(values: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Element-wise (value better than target, value at least as good), NaN-aware."""
    target_nan = torch.isnan(target)
    better = (values > target) | (target_nan & ~torch.isnan(values))
    at_least = (values >= target) | target_nan
    return better, at_least


def rank_counts(
    scores: Tensor,
    targets: Tensor,
    filter_row: Optional[Tensor] = None,
    filter_col: Optional[Tensor] = None,
    buffer: Optional[Tensor] = None,
) -> Ranks:
    """Optimistic and pessimistic ranks of ``targets [B]`` in ``scores [B, N]``
    by counting, everything on ``scores.device`` (the routine behind
    :func:`filtered_ranks` and the evaluator).

    ``filter_row``/``filter_col`` must not contain duplicate pairs; pairs that
    equal the target of their row are ignored. ``buffer`` is an optional
    scratch tensor with at least ``B * N`` elements of the count dtype.
    """
    num_rows, num_entities = scores.shape
    device = scores.device
    dtype = count_dtype(num_entities)
    rows = torch.arange(num_rows, device=device)
    target_score = scores[rows, targets]
    column = target_score.unsqueeze(1)

    if buffer is None or buffer.numel() < num_rows * num_entities or buffer.dtype != dtype:
        buffer = torch.empty(num_rows * num_entities, dtype=dtype, device=device)
    work = buffer.view(-1)[: num_rows * num_entities].view(num_rows, num_entities)
    # One [B, N] scratch tensor, written twice; NaN candidates compare False.
    torch.gt(scores, column, out=work)
    greater = work.sum(dim=1)
    torch.ge(scores, column, out=work)
    at_least = work.sum(dim=1)

    # A NaN target: every non-NaN candidate is better, NaN candidates tie.
    nan_rows = torch.isnan(target_score).nonzero().view(-1)
    if nan_rows.numel() > 0:
        nan_block = torch.isnan(scores[nan_rows])
        greater[nan_rows] = (num_entities - nan_block.sum(dim=1)).to(dtype)
        at_least[nan_rows] = float(num_entities)

    num_candidates = torch.full((num_rows,), float(num_entities), dtype=dtype, device=device)
    if filter_row is not None and filter_col is not None and filter_row.numel() > 0:
        keep = filter_col != targets[filter_row]
        filter_row = filter_row[keep]
        filter_col = filter_col[keep]
        better, tied_or_better = _compare(scores[filter_row, filter_col], target_score[filter_row])
        ones = torch.ones(filter_row.numel(), dtype=dtype, device=device)
        greater.index_add_(0, filter_row, better.to(dtype), alpha=-1)
        at_least.index_add_(0, filter_row, tied_or_better.to(dtype), alpha=-1)
        num_candidates.index_add_(0, filter_row, ones, alpha=-1)

    optimistic = greater + 1
    return Ranks(
        optimistic=optimistic,
        realistic=0.5 * (optimistic + at_least),
        pessimistic=at_least,
        num_candidates=num_candidates,
    )


def _check_inputs(
    scores: Tensor, targets: Tensor, filter_index: Optional[Tensor]
) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    if scores.dim() != 2:
        raise ValueError(f"scores must have shape [B, N], got {tuple(scores.shape)}")
    if not scores.is_floating_point():
        scores = scores.float()
    num_rows, num_entities = scores.shape
    targets = targets.to(device=scores.device, dtype=torch.long).view(-1)
    if targets.numel() != num_rows:
        raise ValueError(f"targets must have shape [{num_rows}], got {tuple(targets.shape)}")
    if num_rows > 0 and (int(targets.min()) < 0 or int(targets.max()) >= num_entities):
        raise ValueError(f"targets must lie in [0, {num_entities})")
    if filter_index is not None:
        filter_index = filter_index.to(device=scores.device, dtype=torch.long)
        if filter_index.dim() != 2 or filter_index.size(0) != 2:
            raise ValueError(f"filter_index must have shape [2, F], got {tuple(filter_index.shape)}")
        if filter_index.numel() > 0:
            if int(filter_index[0].min()) < 0 or int(filter_index[0].max()) >= num_rows:
                raise ValueError(f"filter_index rows must lie in [0, {num_rows})")
            if int(filter_index[1].min()) < 0 or int(filter_index[1].max()) >= num_entities:
                raise ValueError(f"filter_index columns must lie in [0, {num_entities})")
            # Duplicate pairs would be subtracted twice.
            pair = torch.unique(filter_index[0] * num_entities + filter_index[1])
            filter_index = torch.stack([pair // num_entities, pair % num_entities])
    return scores, targets, filter_index


def all_filtered_ranks(
    scores: Tensor,
    targets: Tensor,
    filter_index: Optional[Tensor] = None,
) -> Ranks:
    r"""Optimistic, realistic and pessimistic filtered ranks in one pass.

    Same arguments and rules as :func:`filtered_ranks`; returns a
    :class:`Ranks` tuple (on the device of ``scores``) that also holds the
    number of candidates of each row.

    Example:
        >>> import torch
        >>> scores = torch.tensor([[0.5, 0.9, 0.5, 0.1]])
        >>> r = all_filtered_ranks(scores, torch.tensor([0]))
        >>> r.optimistic.tolist(), r.pessimistic.tolist(), r.realistic.tolist()
        ([2.0], [3.0], [2.5])
        >>> r.num_candidates.tolist()
        [4.0]
    """
    scores, targets, filter_index = _check_inputs(scores, targets, filter_index)
    if filter_index is None:
        return rank_counts(scores, targets)
    return rank_counts(scores, targets, filter_index[0], filter_index[1])


def filtered_ranks(
    scores: Tensor,
    targets: Tensor,
    filter_index: Optional[Tensor] = None,
    rank_type: RankType = "realistic",
) -> Tensor:
    r"""Filtered rank of each target among the scores of its row.

    Higher scores are better. With :math:`\mathcal{C}_b` the entities of row
    :math:`b` that are not filtered (the target :math:`y_b` always is in
    :math:`\mathcal{C}_b`):

    .. math::

        \mathrm{rank}^{\mathrm{real}}_b = \frac{1}{2}\Big(
            \underbrace{1 + |\{c \in \mathcal{C}_b : s_{bc} > s_{by_b}\}|}_{\text{optimistic}}
            + \underbrace{|\{c \in \mathcal{C}_b : s_{bc} \geq s_{by_b}\}|}_{\text{pessimistic}}
        \Big)

    Ties thus get the mean of the best and the worst position they could
    take; a constant-score row gets :math:`(|\mathcal{C}_b| + 1) / 2`. The
    ranks are counted with two comparisons over the row, never by sorting.
    A NaN score ranks below every number and ties with other NaNs (see the
    module documentation).

    Args:
        scores (torch.Tensor): candidate scores, any device, floating dtype.
        targets (torch.LongTensor): index of the true entity of each row.
        filter_index (torch.LongTensor, optional): ``(row, entity)`` pairs to
            leave out of the ranking, e.g. the other known answers of each
            query. Pairs equal to ``(b, targets[b])`` are ignored (the target
            is never filtered); duplicate pairs are allowed.
            (default: :obj:`None`)
        rank_type (str, optional): ``"realistic"``, ``"optimistic"`` or
            ``"pessimistic"``. (default: ``"realistic"``)

    Shapes:
        - **scores:** :math:`(B, N)`
        - **targets:** :math:`(B)`
        - **filter_index:** :math:`(2, F)`
        - **output:** :math:`(B)`, float, on the device of ``scores``

    Example:
        >>> import torch
        >>> scores = torch.tensor([[0.1, 0.7, 0.3, 0.7, 0.9],
        ...                        [0.2, 0.2, 0.2, 0.2, 0.2]])
        >>> targets = torch.tensor([1, 0])
        >>> filtered_ranks(scores, targets).tolist()
        [2.5, 3.0]
        >>> filter_index = torch.tensor([[0, 0], [4, 3]])  # drop entities 4 and 3 of row 0
        >>> filtered_ranks(scores, targets, filter_index).tolist()
        [1.0, 3.0]
        >>> filtered_ranks(scores, targets, rank_type="pessimistic").tolist()
        [3.0, 5.0]
    """
    if rank_type not in RANK_TYPES:
        raise ValueError(f"rank_type must be one of {RANK_TYPES}, got {rank_type!r}")
    return all_filtered_ranks(scores, targets, filter_index).get(rank_type)
