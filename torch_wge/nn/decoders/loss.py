r"""1-N training objectives of WGE and QuatE (:class:`OneToNLoss`), fused with the scoring matmul.

Every objective scores a batch of queries :math:`q_{kb}` (``[L, B, C]``: one
query per layer :math:`k` and batch row :math:`b`) against every entity
:math:`x_{kn}` (``[L, N, C]``) with the logits :math:`f_{kbn} = q_{kb} \cdot
x_{kn}`, and weights layer :math:`k` by :math:`\alpha_k`. By default the
logits are never held whole: rows of queries are scored a chunk at a time,
each chunk's loss and logit gradient are formed in place in one small reused
buffer, and the gradients of the queries and entities are accumulated from it
at once, so backward is two scalings
(:class:`~torch_wge.utils.autograd.FusedOneToNLoss`, first-order only). With
:obj:`fused=False` each objective is written with plain autograd instead, for
second-order gradients.
"""

from typing import Callable, Dict, List, NamedTuple, Optional, Protocol, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from torch_wge.utils.autograd import FusedOneToNLoss
from torch_wge.utils.quaternion import hamilton_product, normalize_quaternion, quaternion_conjugate, quaternion_norm
from torch_wge.utils.sparse import in_function_transform
from torch_wge.utils.triples import add_inverse_triples, query_from_key, query_key

#: Rows of logits processed together: about 2 MiB of float32 per chunk, so
#: that a chunk's element-wise passes run in cache ...
CHUNK_ELEMENTS = 1 << 19
#: ... but at least this many rows: with fewer, the scoring matmuls of a large
#: graph become thin and slow (128,000 entities: 4-row chunks took 7x longer).
MIN_CHUNK_ROWS = 128
#: Logits processed together on a GPU (128 MiB of float32): there a
#: chunk costs a few dozen kernel launches whatever its size, so a batch is
#: scored in one or a few chunks rather than in cache-sized ones.
GPU_CHUNK_ELEMENTS = 1 << 25


def _bce_chunk(logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float) -> Tensor:
    r"""Sum over the chunk of :math:`\mathrm{softplus}(f) - y f` with targets
    :math:`y = (1 - \epsilon)[\text{answer}] + 1/N`; overwrites ``logits``
    with the gradient :math:`\sigma(f) - y`."""
    off_target, on_target = 1.0 / logits.size(1), 1.0 - label_smoothing
    loss = F.softplus(logits).sum() - off_target * logits.sum() - on_target * logits[rows, cols].sum()
    torch.sigmoid(logits, out=logits)
    logits.sub_(off_target)
    _add_at(logits, rows, cols, logits.new_full((rows.numel(),), -on_target))
    return loss


def _cross_entropy_chunk(
    logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float, row_weights: Tensor, pair_weights: Tensor
) -> Tensor:
    r"""Softmax cross-entropy of each row :math:`b` of the chunk against the
    target :math:`y_b = (1 - \epsilon) \sum_{(b, t)} w_{bt} e_t + \epsilon / N`,
    weighted by :math:`a_b`: the sum over rows of
    :math:`a_b (\log \sum_n e^{f_{bn}} - \frac{\epsilon}{N} \sum_n f_{bn})
    - (1 - \epsilon) \sum_{(b, t)} w_{bt} f_{bt}` (the weights satisfy
    :math:`\sum_t w_{bt} = a_b`); overwrites ``logits`` with the gradient
    :math:`a_b (\mathrm{softmax}(f_b) - \epsilon / N) - (1 - \epsilon) \sum_t w_{bt} e_t`.

    ``row_weights`` is ``[c, 1]`` (:math:`a_b`), ``pair_weights`` ``[P]``
    (:math:`w_{bt}` of each positive pair)."""
    off_target, on_target = label_smoothing / logits.size(1), 1.0 - label_smoothing
    loss = -on_target * (pair_weights * logits[rows, cols]).sum()
    loss = loss - off_target * (logits.sum(dim=1, keepdim=True) * row_weights).sum()
    shift = logits.amax(dim=1, keepdim=True)
    logits.sub_(shift).exp_()
    normaliser = logits.sum(dim=1, keepdim=True)
    loss = loss + ((normaliser.log() + shift) * row_weights).sum()
    logits.div_(normaliser).sub_(off_target).mul_(row_weights)
    _add_at(logits, rows, cols, -on_target * pair_weights)
    return loss


def _answer_counts(logits: Tensor, rows: Tensor) -> Tensor:
    """``[c, 1]``: the number of positive pairs of each row of the chunk (counted by
    ``index_add_``, whose output size is known without reading ``rows``: no wait on a GPU)."""
    counts = logits.new_zeros(logits.size(0), 1)
    return counts.index_add_(0, rows, logits.new_ones(rows.numel(), 1))


def _softmax_chunk(logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float) -> Tensor:
    r"""Every positive pair :math:`(b, t)` one example: the sum of
    :math:`\log \sum_n e^{f_{bn}} - (1 - \epsilon) f_{bt} - \frac{\epsilon}{N}
    \sum_n f_{bn}` over the chunk's pairs, a row of :math:`a_b` answers
    counting :math:`a_b` times."""
    weights = logits.new_ones(rows.numel())
    return _cross_entropy_chunk(logits, rows, cols, label_smoothing, _answer_counts(logits, rows), weights)


def _kl_chunk(logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float) -> Tensor:
    r"""Every query with answers one example whose target spreads
    :math:`1 - \epsilon` evenly over its :math:`a_b` answers: the sum over the
    chunk's rows of :math:`\log \sum_n e^{f_{bn}} - \frac{1 - \epsilon}{a_b}
    \sum_{(b, t)} f_{bt} - \frac{\epsilon}{N} \sum_n f_{bn}`."""
    answers = _answer_counts(logits, rows)
    row_weights = (answers > 0).to(logits.dtype)
    return _cross_entropy_chunk(logits, rows, cols, label_smoothing, row_weights, 1.0 / answers[rows, 0])


def _filtered_softmax_chunk(logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float) -> Tensor:
    r"""Every positive pair :math:`(b, t)` one example whose candidates are
    :math:`t` and the entities that do not answer :math:`b` (the set
    :math:`\bar A_b`): the sum over the chunk's pairs of
    :math:`\log(e^{f_{bt}} + \sum_{n \in \bar A_b} e^{f_{bn}}) - (1 - \epsilon) f_{bt}
    - \frac{\epsilon}{N} \sum_n f_{bn}`. The gradient of a logit outside
    :math:`A_b` is :math:`e^{f_{bn}} \sum_{(b, t)} 1 / Z_{bt}` (:math:`Z_{bt}` the
    sum in the logarithm), of an answer's own logit :math:`e^{f_{bt}} / Z_{bt}`,
    each less the smoothing terms."""
    off_target, on_target = label_smoothing / logits.size(1), 1.0 - label_smoothing
    answer_counts = _answer_counts(logits, rows)
    answer_logits = logits[rows, cols]
    loss = -on_target * answer_logits.sum() - off_target * (logits.sum(dim=1, keepdim=True) * answer_counts).sum()
    # log-sum-exp over each row's non-answers, shifted by their largest logit
    logits[rows, cols] = -torch.inf
    shift = logits.amax(dim=1, keepdim=True)
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))  # a row of answers only
    logits.sub_(shift).exp_()
    others = (logits.sum(dim=1).log() + shift.squeeze(1))[rows]
    log_normalisers = torch.logaddexp(answer_logits, others)  # log Z_bt
    loss = loss + log_normalisers.sum()
    other_weights = torch.zeros_like(answer_counts).index_add_(
        0, rows, (shift.squeeze(1)[rows] - log_normalisers).exp().unsqueeze(1)
    )
    logits.mul_(other_weights)  # the answers' entries are 0 here
    _add_at(logits, rows, cols, (answer_logits - log_normalisers).exp() - on_target)
    logits.sub_(off_target * answer_counts)
    return loss


def _add_at(matrix: Tensor, rows: Tensor, cols: Tensor, values: Tensor) -> None:
    """Adds ``values[i]`` to ``matrix[rows[i], cols[i]]`` for every ``i`` (repeats add up)."""
    matrix.view(-1).index_add_(0, rows * matrix.size(1) + cols, values.to(matrix.dtype))


# The same objectives with plain autograd (fused=False): the summed loss of the logits [c, N] of
# a chunk, written with differentiable operations only, so that autograd differentiates it to any
# order (the fused chunk functions above leave a first-order gradient in their logits instead).


def _bce_plain(logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float) -> Tensor:
    off_target, on_target = 1.0 / logits.size(1), 1.0 - label_smoothing
    return F.softplus(logits).sum() - off_target * logits.sum() - on_target * logits[rows, cols].sum()


def _cross_entropy_plain(
    logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float, row_weights: Tensor, pair_weights: Tensor
) -> Tensor:
    off_target, on_target = label_smoothing / logits.size(1), 1.0 - label_smoothing
    per_row = torch.logsumexp(logits, dim=1, keepdim=True) - off_target * logits.sum(dim=1, keepdim=True)
    return (per_row * row_weights).sum() - on_target * (pair_weights * logits[rows, cols]).sum()


def _softmax_plain(logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float) -> Tensor:
    weights = logits.new_ones(rows.numel())
    return _cross_entropy_plain(logits, rows, cols, label_smoothing, _answer_counts(logits, rows), weights)


def _kl_plain(logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float) -> Tensor:
    answers = _answer_counts(logits, rows)
    row_weights = (answers > 0).to(logits.dtype)
    return _cross_entropy_plain(logits, rows, cols, label_smoothing, row_weights, 1.0 / answers[rows, 0])


def _filtered_softmax_plain(logits: Tensor, rows: Tensor, cols: Tensor, label_smoothing: float) -> Tensor:
    off_target, on_target = label_smoothing / logits.size(1), 1.0 - label_smoothing
    answer_counts = _answer_counts(logits, rows)
    answer_logits = logits[rows, cols]
    loss = -on_target * answer_logits.sum() - off_target * (logits.sum(dim=1, keepdim=True) * answer_counts).sum()
    is_answer = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
    is_answer[rows, cols] = True
    has_others = ~is_answer.all(dim=1, keepdim=True)  # [c, 1]: the row has entities that do not answer it
    # log-sum-exp over each row's non-answers, shifted by their largest logit (a constant: the value
    # does not depend on it); a row of answers only sums to 1 instead of 0, so that no logarithm
    # or gradient of it is infinite, and its pairs take the answer's logit alone below
    others = logits.masked_fill(is_answer, -torch.inf)
    shift = torch.where(has_others, others.detach().amax(dim=1, keepdim=True), torch.zeros_like(answer_counts))
    sums = torch.exp(others - shift).sum(dim=1, keepdim=True) + (~has_others).to(logits.dtype)
    log_others = (sums.log() + shift).squeeze(1)[rows]
    log_normalisers = torch.where(
        has_others.squeeze(1)[rows], torch.logaddexp(answer_logits, log_others), answer_logits
    )  # log Z_bt
    return loss + log_normalisers.sum()


class Objective(NamedTuple):
    """A 1-N objective: its fused chunk function (the loss of a chunk's logits, leaving their
    gradient in them), the divisor of a layer's summed loss as a function of the number of queries
    B, of entities N and of the sorted rows of the positive pairs, and the same chunk loss with
    plain autograd."""

    chunk: Callable[[Tensor, Tensor, Tensor, float], Tensor]
    examples: Callable[[int, int, Tensor], int]
    plain: Callable[[Tensor, Tensor, Tensor, float], Tensor]


#: name -> :class:`Objective`; the divisor is B N for "bce", the number of positive pairs T for
#: "softmax" and "filtered-softmax", the number of queries with answers for "kl".
OBJECTIVES: Dict[str, Objective] = {
    "bce": Objective(_bce_chunk, lambda num_queries, num_entities, rows: num_queries * num_entities, _bce_plain),
    "softmax": Objective(_softmax_chunk, lambda num_queries, num_entities, rows: rows.numel(), _softmax_plain),
    "kl": Objective(
        _kl_chunk, lambda num_queries, num_entities, rows: torch.unique_consecutive(rows).numel(), _kl_plain
    ),
    "filtered-softmax": Objective(
        _filtered_softmax_chunk, lambda num_queries, num_entities, rows: rows.numel(), _filtered_softmax_plain
    ),
}


def _plain_loss(
    queries: Tensor,
    entities: Tensor,
    rows: Tensor,
    cols: Tensor,
    scale: Tensor,
    plain_fn: Callable[[Tensor, Tensor, Tensor, float], Tensor],
    label_smoothing: float,
    matmul_dtype: Optional[torch.dtype],
) -> Tensor:
    """The weighted loss of :func:`one_to_n_loss` with plain autograd: each layer's logits whole."""
    loss = queries.new_zeros(())
    for k in range(queries.size(0)):
        q, x = queries[k], entities[k]
        logits = q @ x.t() if matmul_dtype is None else (q.to(matmul_dtype) @ x.to(matmul_dtype).t()).to(q.dtype)
        loss = loss + scale[k] * plain_fn(logits, rows, cols, label_smoothing)
    return loss


def one_to_n_loss(
    queries: Tensor,
    entities: Tensor,
    positives: Tensor,
    layer_weights: Tensor,
    objective: str = "bce",
    label_smoothing: float = 0.1,
    matmul_dtype: Optional[torch.dtype] = None,
    fused: bool = True,
) -> Tensor:
    r"""Weighted 1-N loss of the logits :math:`f_{kbn} = q_{kb} \cdot x_{kn}`
    of :math:`L` layers, without materialising them (with :obj:`fused=True`).

    :obj:`objective="bce"`: binary cross-entropy with the research code's
    label smoothing,

    .. math::
        \mathcal{L} = \sum_k \frac{\alpha_k}{BN} \sum_{b, n}
        \left(\mathrm{softplus}(f_{kbn}) - y_{bn} f_{kbn}\right),
        \qquad y_{bn} = (1 - \epsilon)\,[n \text{ answers } b] + \frac{1}{N}.

    :obj:`objective="softmax"`: 1-vs-all softmax cross-entropy, every positive
    pair :math:`(b, t)` one example whose class is its tail among all
    :math:`N` entities (the query's other answers stay among the
    candidates, as in the 1vsAll training of Lacroix et al. 2018),

    .. math::
        \mathcal{L} = \sum_k \frac{\alpha_k}{T} \sum_{(b, t)}
        \left(\log \sum_{n} e^{f_{kbn}} - (1 - \epsilon) f_{kbt}
        - \frac{\epsilon}{N} \sum_n f_{kbn}\right).

    :obj:`objective="kl"`: softmax cross-entropy with one example per query
    (the KL divergence, up to a constant, between the softmax and a target
    that spreads :math:`1 - \epsilon` evenly over the query's :math:`a_b`
    answers), so that a query with many answers weighs as much as one with
    a single answer instead of :math:`a_b` times more,

    .. math::
        \mathcal{L} = \sum_k \frac{\alpha_k}{B'} \sum_{b : a_b > 0}
        \left(\log \sum_{n} e^{f_{kbn}} - \frac{1 - \epsilon}{a_b}
        \sum_{(b, t)} f_{kbt} - \frac{\epsilon}{N} \sum_n f_{kbn}\right),

    :math:`B'` the number of queries with answers.

    :obj:`objective="filtered-softmax"`: as :obj:`"softmax"`, but each pair's
    candidates are its tail and the entities :math:`\bar A_b` that do not
    answer query :math:`b`, so that the answers of a query with many do not
    compete for probability with each other (as filtered ranking leaves them
    out of each other's rank),

    .. math::
        \mathcal{L} = \sum_k \frac{\alpha_k}{T} \sum_{(b, t)}
        \left(\log\left(e^{f_{kbt}} + \sum_{n \in \bar A_b} e^{f_{kbn}}\right)
        - (1 - \epsilon) f_{kbt} - \frac{\epsilon}{N} \sum_n f_{kbn}\right).

    Duplicate positive pairs count once per occurrence. With :obj:`fused=True`
    the gradient is formed during the forward pass (not when no input needs
    one, as under :func:`torch.no_grad`), so call ``backward`` on the result
    (or anything linear in it) once; that gradient is first-order only, and a
    backward pass with ``create_graph=True`` raises :class:`RuntimeError`
    (:class:`~torch_wge.utils.autograd.FusedOneToNLoss`). With
    :obj:`fused=False` the same loss is computed with plain autograd, each
    layer's logits held whole: slower and larger, but differentiable to any
    order. Inside a :mod:`torch.func` transform (``grad``, ``vjp``, ...), which
    differentiates with ``create_graph=True``, the loss is always computed
    that way.

    Args:
        queries (Tensor): ``[L, B, C]`` queries :math:`q_{kb}`.
        entities (Tensor): ``[L, N, C]`` entity representations :math:`x_{kn}`.
        positives (Tensor): ``[2, T]`` pairs ``(b, n)``: query ``b`` is answered by ``n``.
        layer_weights (Tensor): ``[L]`` weights :math:`\alpha_k`.
        objective (str, optional): :obj:`"bce"`, :obj:`"softmax"`, :obj:`"kl"`
            or :obj:`"filtered-softmax"`. (default: :obj:`"bce"`)
        label_smoothing (float, optional): :math:`\epsilon`. (default: :obj:`0.1`)
        matmul_dtype (torch.dtype, optional): Dtype of the scoring matmuls
            and of their gradient products, e.g. :obj:`torch.bfloat16` for
            bf16 tensor cores: queries, entities and each chunk's logit
            gradient are rounded to it, while the logits, the loss and the
            accumulated gradients stay in the queries' dtype.
            (default: :obj:`None`, the queries' dtype)
        fused (bool, optional): Score a chunk of queries at a time and form
            the gradient with the loss (first-order only); :obj:`False`
            computes the loss with plain autograd, for second-order
            gradients. (default: :obj:`True`)

    Returns:
        A scalar tensor.

    Example:
        >>> q, x = torch.randn(1, 2, 8), torch.randn(1, 5, 8)
        >>> positives = torch.tensor([[0, 1], [3, 4]])
        >>> loss = one_to_n_loss(q, x, positives, torch.ones(1), "softmax", 0.0)
        >>> logits = q[0] @ x[0].t()
        >>> reference = torch.nn.functional.cross_entropy(logits, torch.tensor([3, 4]))
        >>> torch.allclose(loss, reference)
        True
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {sorted(OBJECTIVES)}, got {objective!r}")
    num_layers, num_queries, _ = queries.shape
    num_entities = entities.size(1)
    chunk_fn, count_examples, plain_fn = OBJECTIVES[objective]
    rows, cols = positives
    order = torch.argsort(rows, stable=True)
    rows, cols = rows[order], cols[order]
    normaliser = max(count_examples(num_queries, num_entities, rows), 1)
    scale = layer_weights.to(queries.dtype) / normaliser  # [L], left on the device
    if not fused or in_function_transform():
        return _plain_loss(queries, entities, rows, cols, scale, plain_fn, label_smoothing, matmul_dtype)
    chunk_elements = CHUNK_ELEMENTS if queries.device.type == "cpu" else GPU_CHUNK_ELEMENTS
    chunk_rows = max(1, min(num_queries, max(MIN_CHUNK_ROWS, chunk_elements // max(num_entities, 1))))
    if chunk_rows >= num_queries:  # one chunk, as on a GPU: its pairs are all, known without a wait
        bounds = [0, rows.numel()]
    else:
        starts = torch.arange(0, num_queries + chunk_rows, chunk_rows, device=rows.device)
        bounds = torch.searchsorted(rows, starts).tolist()
    # the gradients are formed with the loss, when the inputs need them (not under no_grad)
    gradients = torch.is_grad_enabled() and (queries.requires_grad or entities.requires_grad)
    loss, _, _ = FusedOneToNLoss.apply(
        queries, entities, rows, cols, bounds, scale, chunk_rows, chunk_fn, label_smoothing, matmul_dtype, gradients
    )
    return loss


def sample_candidates(
    answers: Tensor, num_entities: int, num_samples: int, generator: Optional[torch.Generator] = None
) -> Tuple[Tensor, Tensor]:
    r"""The candidate entities of a batch for a sampled softmax: its answers
    and :obj:`num_samples` distinct entities drawn uniformly without
    replacement, shared by all its queries.

    With the entity matrices restricted to the candidates and each answer
    renumbered to its position among them, :func:`one_to_n_loss` with
    :obj:`objective="softmax"` is the softmax cross-entropy of every positive
    pair :math:`(b, t)` over the candidates :math:`\mathcal{C}` instead of all
    :math:`N` entities,

    .. math::
        \log \sum_{c \in \mathcal{C}} e^{f_{bc}} - (1 - \epsilon) f_{bt}
        - \frac{\epsilon}{|\mathcal{C}|} \sum_{c \in \mathcal{C}} f_{bc},

    which costs :math:`O(B |\mathcal{C}|)` instead of :math:`O(BN)`; with
    :obj:`num_samples >= N` it is the exact 1-N objective.

    Args:
        answers (Tensor): ``[T]`` answer entity of each positive pair.
        num_entities (int): Number of entities :math:`N`.
        num_samples (int): Entities drawn besides the answers.
        generator (torch.Generator, optional): Source of the draw.

    Returns:
        ``candidates [M]`` (ascending, distinct) and ``positions [T]``, the
        index of each answer in :obj:`candidates`.

    Example:
        >>> candidates, positions = sample_candidates(torch.tensor([7, 2, 7]), 10, 3)
        >>> len(candidates) >= 3 and bool((candidates[positions] == torch.tensor([7, 2, 7])).all())
        True
    """
    drawn = torch.randperm(num_entities, generator=generator)[:num_samples].to(answers.device)
    candidates, inverse = torch.unique(torch.cat([answers, drawn]), return_inverse=True)
    return candidates, inverse[: answers.numel()]


def triple_queries(
    head_index: Tensor, rel_type: Tensor, tail_index: Tensor, num_relations: int
) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The distinct 1-N queries of triples asked in both directions,
    :math:`(h, r, ?)` and :math:`(t, r + R, ?)`: their ``heads [Q]``,
    ``relations [Q]`` (in :math:`[0, 2R)`) and ``positives [2, P]`` (query,
    answer) over the distinct answers, queries sorted by (head, relation).
    Relations outside :math:`[0, R)` are refused.

    Example:
        >>> heads, relations, positives = triple_queries(
        ...     torch.tensor([0, 0]), torch.tensor([1, 1]), torch.tensor([2, 3]), num_relations=2)
        >>> heads.tolist(), relations.tolist(), positives.tolist()
        ([0, 2, 3], [1, 3, 3], [[0, 0, 1, 2], [2, 3, 0, 0]])
    """
    check_relations(rel_type, num_relations, "rel_type")
    triples = torch.unique(
        add_inverse_triples(torch.stack([head_index, rel_type, tail_index], dim=1), num_relations), dim=0
    )
    keys, rows = torch.unique_consecutive(query_key(triples[:, 0], triples[:, 1], num_relations), return_inverse=True)
    heads, relations = query_from_key(keys, num_relations)
    return heads, relations, torch.stack([rows, triples[:, 2]])


def check_relations(relations: Tensor, num_relations: int, name: str = "relations") -> None:
    """Raises :class:`ValueError` when an id of ``relations`` lies outside ``[0, num_relations)``."""
    if relations.numel() and (int(relations.min()) < 0 or int(relations.max()) >= num_relations):
        raise ValueError(
            f"{name} holds ids in [{int(relations.min())}, {int(relations.max())}], "
            f"outside the relations [0, {num_relations})"
        )


class EncodedLayers(Protocol):
    """Every layer's representations, as :class:`~torch_wge.nn.EncodedGraph` holds them."""

    entities: List[Tensor]  # K + 1 of [N, C]
    relations: List[Tensor]  # K + 1 of [2R, C]


class QueryScorer(Protocol):
    """What :class:`OneToNLoss` reads of a model (a :class:`~torch_wge.nn.WGE`)."""

    num_entities: int
    num_relations: int
    layer_weights: Tensor  # [K + 1]

    def queries(self, encoded, heads: Tensor, relations: Tensor) -> Tensor: ...


class OneToNLoss(torch.nn.Module):
    r"""The training objective of :class:`~torch_wge.nn.WGE` (and QuatE,
    :obj:`num_layers=0`) on a batch of 1-N queries :math:`(h_b, r_b, ?)`:
    the model scores every query against the entities with its decoders,
    and the loss is

    .. math::
        \mathcal{L} = \mathcal{L}_{\text{objective}} + \lambda_{N3}
        \mathcal{L}_{N3} + \lambda_{RP} \mathcal{L}_{RP},

    the 1-N objective summed over the layers with the weights
    :math:`\alpha_k` (:func:`one_to_n_loss`, by default fused with the scoring
    matmuls: the logits are never held whole), the N3 regulariser (:meth:`n3`) and
    relation prediction (:meth:`relation_prediction_loss`). The model keeps
    only what scores; this module holds the training recipe, as PyKEEN's
    losses do.

    Args:
        objective (str, optional): :obj:`"bce"`, the 1-N binary
            cross-entropy of the paper, :obj:`"softmax"`, 1-vs-all softmax
            cross-entropy with one example per answer, :obj:`"kl"`, the same
            with one example per query, or :obj:`"filtered-softmax"`, one
            example per answer whose candidates leave the query's other
            answers out (see :func:`one_to_n_loss`). (default: :obj:`"bce"`)
        label_smoothing (float, optional): :math:`\epsilon` of the 1-N
            targets. (default: :obj:`0.1`)
        n3 (float, optional): Weight :math:`\lambda_{N3}` of the N3
            regulariser (Lacroix et al. 2018). (default: :obj:`0.0`)
        relation_prediction (float, optional): Weight :math:`\lambda_{RP}`
            of relation prediction as an auxiliary objective (Chen et al.
            2021). (default: :obj:`0.0`)
        candidates (int, optional): With :obj:`objective="softmax"`, score
            each batch against its answers and this many entities drawn
            uniformly for the batch (a sampled softmax, see
            :func:`sample_candidates`); :obj:`0` scores all entities.
            (default: :obj:`0`)
        matmul_dtype (torch.dtype, optional): Dtype of the scoring matmuls
            (e.g. :obj:`torch.bfloat16`), see :func:`one_to_n_loss`.
            (default: :obj:`None`, the parameters' dtype)
        fused (bool, optional): The 1-N objective fused with the scoring
            matmuls, its gradient formed with the loss: first-order only (a
            backward pass with ``create_graph=True`` raises
            :class:`RuntimeError`). :obj:`False` computes it with plain
            autograd, each layer's logits held whole, for second-order
            gradients (Hessian-vector products, gradient penalties).
            (default: :obj:`True`)

    Example:
        >>> from torch_wge.nn import WGE
        >>> model = WGE(num_entities=5, num_relations=2, hidden_channels=2, num_layers=1)
        >>> loss_fn = OneToNLoss(objective="softmax", label_smoothing=0.0)
        >>> ef = torch.tensor([[0, 1], [1, 0]]); rf = torch.tensor([[0, 5], [5, 0]])
        >>> head, rel, tail = torch.tensor([0, 1, 3]), torch.tensor([0, 1, 0]), torch.tensor([1, 2, 4])
        >>> loss = loss_fn.triples(model, model.encode(ef, rf), head, rel, tail)
        >>> loss.backward()
    """

    def __init__(
        self,
        objective: str = "bce",
        label_smoothing: float = 0.1,
        n3: float = 0.0,
        relation_prediction: float = 0.0,
        candidates: int = 0,
        matmul_dtype: Optional[torch.dtype] = None,
        fused: bool = True,
    ):
        super().__init__()
        name = self.__class__.__name__
        if objective not in OBJECTIVES:
            raise ValueError(f"'{name}' objective must be one of {sorted(OBJECTIVES)}, got {objective!r}")
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"'{name}' label_smoothing must be in [0, 1), got {label_smoothing}")
        for weight_name, weight in (("n3", n3), ("relation_prediction", relation_prediction)):
            if not weight >= 0.0:
                raise ValueError(f"'{name}' {weight_name} must be >= 0, got {weight}")
        if candidates < 0 or (candidates > 0 and objective != "softmax"):
            raise ValueError(
                f"'{name}' candidates needs objective='softmax' and a count >= 0, "
                f"got {candidates} with objective={objective!r}"
            )
        self.objective = objective
        self.label_smoothing = label_smoothing
        self.n3 = n3
        self.relation_prediction = relation_prediction
        self.candidates = candidates
        self.matmul_dtype = matmul_dtype
        self.fused = fused

    def forward(
        self,
        model: QueryScorer,
        encoded: EncodedLayers,
        heads: Tensor,
        relations: Tensor,
        positives: Tensor,
        sampled: Optional[Tuple[Tensor, Tensor]] = None,
    ) -> Tensor:
        r"""The loss of the queries ``(heads[b], relations[b])`` (relation ids
        in :math:`[0, 2R)`, inverses at :math:`r + R`) with the answers
        ``positives [2, P]`` (pairs ``(b, n)``), scored by ``model`` (a
        :class:`~torch_wge.nn.WGE`) on ``encoded``, its
        :meth:`~torch_wge.nn.WGE.encode` of the graph. With :obj:`candidates`,
        ``sampled`` may hold the batch's :func:`sample_candidates` of
        ``positives[1]`` drawn beforehand (on the CPU, before the batch moves
        to a GPU, drawing them costs the GPU no wait); else they are drawn
        here."""
        if self.candidates > 0:
            if sampled is None:
                sampled = sample_candidates(positives[1], model.num_entities, self.candidates)
            candidate_index, positions = sampled
            # each layer's candidate rows, [K + 1, n, C]: all layers' entities are never stacked
            entities = torch.stack([x.index_select(0, candidate_index) for x in encoded.entities])
            scored = torch.stack([positives[0], positions])
        else:
            entities, scored = torch.stack(encoded.entities), positives
        loss = one_to_n_loss(
            model.queries(encoded, heads, relations),
            entities,
            scored,
            model.layer_weights,
            self.objective,
            self.label_smoothing,
            self.matmul_dtype,
            self.fused,
        )
        if self.n3 > 0:
            loss = loss + self.n3 * self.n3_term(encoded, heads, relations, positives)
        if self.relation_prediction > 0:
            loss = loss + self.relation_prediction * self.relation_prediction_loss(
                model, encoded, heads, relations, positives
            )
        return loss

    def triples(
        self, model: QueryScorer, encoded: EncodedLayers, head_index: Tensor, rel_type: Tensor, tail_index: Tensor
    ) -> Tensor:
        r"""The loss of a batch of triples :math:`(h, r, t)`, given as
        :meth:`torch_geometric.nn.kge.KGEModel.loss` takes them (relations in
        :math:`[0, R)`): each triple is asked in both directions, as the
        queries :math:`(h, r, ?)` and :math:`(t, r^{-1}, ?)`, a query asked by
        several triples once with all their answers (:func:`triple_queries`);
        then :meth:`forward` of these queries. On the batch of all training
        triples of some queries this is the loss that :command:`torch-wge
        train` computes for those queries."""
        name = f"'{self.__class__.__name__}.triples'"
        if not (head_index.dim() == rel_type.dim() == tail_index.dim() == 1):
            raise ValueError(
                f"{name} takes triples as head_index, rel_type, tail_index [B]; got shapes "
                f"{[list(t.shape) for t in (head_index, rel_type, tail_index)]} (1-N queries with "
                f"[2, P] positives go to forward)"
            )
        if not (head_index.numel() == rel_type.numel() == tail_index.numel()):
            raise ValueError(
                f"{name} got {head_index.numel()} heads, {rel_type.numel()} relations, {tail_index.numel()} tails"
            )
        heads, relations, positives = triple_queries(head_index, rel_type, tail_index, model.num_relations)
        return self(model, encoded, heads, relations, positives)

    @staticmethod
    def relation_prediction_loss(
        model: QueryScorer, encoded: EncodedLayers, heads: Tensor, relations: Tensor, positives: Tensor
    ) -> Tensor:
        r"""Relation prediction for the batch's training triples
        :math:`(h_b, r_b, t)`, ``positives [2, T]`` as in :meth:`forward`:

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
        for weight, x, rel in zip(model.layer_weights.unbind(), encoded.entities, encoded.relations):
            pair = hamilton_product(quaternion_conjugate(x.index_select(0, heads[rows])), x.index_select(0, tails))
            logits = pair @ normalize_quaternion(rel).t()  # [T, 2R]
            losses.append(weight * F.cross_entropy(logits, relations[rows]))
        return sum(losses[1:], losses[0])

    @staticmethod
    def n3_term(encoded: EncodedLayers, heads: Tensor, relations: Tensor, positives: Tensor) -> Tensor:
        r"""The N3 regulariser of the batch's training triples on the input
        (layer-0) embeddings, :math:`\frac{1}{T} \sum_{(b, t)} \sum_q
        (|x_{h_b, q}|^3 + |r_{b, q}|^3 + |x_{t, q}|^3)` over the quaternions
        :math:`q` of each embedding (their moduli); ``positives [2, T]`` as in
        :meth:`forward`."""
        rows, tails = positives
        x, rel = encoded.entities[0], encoded.relations[0]
        cubes = [quaternion_norm(t).pow(3).sum() for t in (x[heads[rows]], rel[relations[rows]], x[tails])]
        return sum(cubes) / max(rows.numel(), 1)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(objective={self.objective!r}, label_smoothing={self.label_smoothing}, "
            f"n3={self.n3}, relation_prediction={self.relation_prediction}, candidates={self.candidates}"
            + ("" if self.fused else ", fused=False")
            + ")"
        )
