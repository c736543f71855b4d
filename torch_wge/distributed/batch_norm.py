from typing import List, Optional, Sequence

import torch
import torch.distributed as dist
from torch import Tensor


class AllReduceSum(torch.autograd.Function):
    r"""The sum :math:`y = \sum_j x_j` of a tensor over the processes of a
    group, differentiable: every process's loss :math:`L_j` depends on the
    same :math:`y`, so the gradient of the total loss with respect to
    :math:`x_i` is :math:`\sum_j \partial L_j / \partial y`, the sum of
    the incoming gradients over the processes (an all-reduce in backward too).
    ``AllReduceSum.apply(x, group)``: :math:`x` of any shape, the same on
    every process."""

    @staticmethod
    def forward(ctx, x: Tensor, group) -> Tensor:
        ctx.group = group
        total = x.clone()
        dist.all_reduce(total, group=group)
        return total

    @staticmethod
    def backward(ctx, grad: Tensor):
        total = grad.clone()
        dist.all_reduce(total, group=ctx.group)
        return total, None


class ChannelMoments(torch.autograd.Function):
    r"""The per-channel sums :math:`\sum_b x_b` and :math:`\sum_b x_b^2` of
    ``x [B, C]`` as float64, ``[2C]``, accurate whatever the channels' means.

    The sums are taken in the dtype of :math:`x` about its column means
    :math:`s`, then shifted back in float64:

    .. math::
        \sum_b x_b = B s + \sum_b (x_b - s), \qquad
        \sum_b x_b^2 = B s^2 + 2 s \sum_b (x_b - s) + \sum_b (x_b - s)^2,

    so a variance :math:`\sum_b x_b^2 / B - \bar{x}^2` computed from them
    loses nothing to cancellation when :math:`|\bar{x}|` is large against
    the standard deviation, and no float64 copy of :math:`x` is made.
    Backward keeps only :math:`x` itself (which a batch norm keeps anyway)
    and computes :math:`\partial / \partial x_b = g_1 + 2 x_b g_2` in the
    dtype of :math:`x`. ``ChannelMoments.apply(x)``."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        shift = x.sum(0) / max(x.size(0), 1)
        centered = x - shift
        first = centered.sum(0).to(torch.float64)
        second = centered.square_().sum(0).to(torch.float64)
        shift = shift.to(torch.float64)
        count = x.size(0)
        return torch.cat([count * shift + first, count * shift * shift + 2 * shift * first + second])

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        grad_sum, grad_squares = grad.to(x.dtype).chunk(2)
        return torch.addcmul(grad_sum, x, grad_squares, value=2.0)


class SyncedBatchNorm1d(torch.nn.BatchNorm1d):
    r""":class:`~torch.nn.BatchNorm1d` over the union of the batches of all
    processes of ``process_group``, on any device.

    In training mode the per-channel sums :math:`\sum_b x_b`,
    :math:`\sum_b x_b^2` and the count are summed over the processes (as
    float64, :class:`ChannelMoments`; one differentiable all-reduce,
    :class:`AllReduceSum`), the input is normalised with the
    global mean and biased variance, and the running averages are updated
    with the global mean and unbiased variance, as one
    :class:`~torch.nn.BatchNorm1d` over the whole global batch would. A
    process may hold an empty batch. In evaluation mode, or in one process,
    this is :class:`~torch.nn.BatchNorm1d`. Parameters and buffers are those
    of :class:`~torch.nn.BatchNorm1d`, so state dicts load either way.

    Args:
        num_features (int): Channels :math:`C`.
        process_group (optional): Group to synchronise over. (default: all
            processes)
        **kwargs: :class:`~torch.nn.BatchNorm1d`'s other arguments.

    Shapes:
        - **input:** :math:`(B_j, C)` in process :math:`j`
        - **output:** :math:`(B_j, C)`
    """

    def __init__(self, num_features: int, process_group=None, **kwargs):
        super().__init__(num_features, **kwargs)
        self.process_group = process_group

    @classmethod
    def from_batch_norm(cls, module: torch.nn.BatchNorm1d, process_group=None) -> "SyncedBatchNorm1d":
        """A copy of ``module`` (parameters, buffers and settings) that synchronises."""
        synced = cls(
            module.num_features,
            process_group,
            eps=module.eps,
            momentum=module.momentum,
            affine=module.affine,
            track_running_stats=module.track_running_stats,
        )
        ref = module.weight if module.affine else module.running_mean
        if ref is not None:
            synced = synced.to(device=ref.device, dtype=ref.dtype)
        synced.load_state_dict(module.state_dict())
        synced.train(module.training)
        return synced

    @classmethod
    def convert(cls, module: torch.nn.Module, process_group=None) -> torch.nn.Module:
        """Replaces every :class:`~torch.nn.BatchNorm1d` in ``module`` (and
        ``module`` itself if it is one) by a synchronising copy; on CUDA by
        :class:`torch.nn.SyncBatchNorm`, elsewhere by this class. Returns the
        converted module. Build the optimiser afterwards: the parameters are
        new objects."""
        if isinstance(module, torch.nn.BatchNorm1d) and not isinstance(module, cls):
            ref = module.weight if module.affine else module.running_mean
            if ref is not None and ref.is_cuda:
                return torch.nn.SyncBatchNorm.convert_sync_batchnorm(module, process_group)
            return cls.from_batch_norm(module, process_group)
        for name, child in module.named_children():
            module.add_module(name, cls.convert(child, process_group))
        return module

    def forward(self, input: Tensor) -> Tensor:
        (output,) = batch_norm_together([self], [input], self.process_group)
        return output


def _synchronised(norm: torch.nn.BatchNorm1d, group) -> bool:
    return norm.training and dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def batch_norm_together(norms: Sequence[torch.nn.BatchNorm1d], inputs: Sequence[Tensor], group=None) -> List[Tensor]:
    r"""``norms[i](inputs[i])`` for every :math:`i`, each a
    :class:`~torch.nn.BatchNorm1d` over the union of the batches of all
    processes of ``group``: in training mode the per-channel sums of all of
    them are summed over the processes in one all-reduce of :math:`\sum_i
    (2 C_i + 1)` numbers (float64, :class:`ChannelMoments`; differentiable,
    :class:`AllReduceSum`), each input is normalised with the global mean and
    biased variance, and each norm's running averages are updated with the
    global mean and unbiased variance, as one
    :class:`~torch.nn.BatchNorm1d` over the whole global batch would. A
    process may hold an empty batch. Out of training mode, or in one
    process, each norm is applied as it is. The norms' parameters and
    buffers are used where they are: nothing is copied or replaced.

    Shapes: ``inputs[i]`` :math:`(B_j, C_i)` in process :math:`j` gives
    :math:`(B_j, C_i)`."""
    if not all(_synchronised(norm, group) for norm in norms):
        return [torch.nn.BatchNorm1d.forward(norm, input) for norm, input in zip(norms, inputs)]
    local = []
    for norm, input in zip(norms, inputs):
        if input.dim() != 2:
            raise ValueError(f"'{norm.__class__.__name__}' expects input of shape [B, C], got {tuple(input.shape)}")
        count = input.new_full((1,), input.size(0), dtype=torch.float64)
        local += [ChannelMoments.apply(input), count]
    stats = AllReduceSum.apply(torch.cat(local), group or dist.group.WORLD)
    sizes = [size for norm in norms for size in (2 * norm.num_features, 1)]
    parts = stats.split(sizes)
    return [
        _normalize(norm, input, moments, count)
        for norm, input, moments, count in zip(norms, inputs, parts[0::2], parts[1::2])
    ]


def _normalize(norm: torch.nn.BatchNorm1d, input: Tensor, moments: Tensor, count: Tensor) -> Tensor:
    """``input`` normalised with the global per-channel sums ``moments [2C]`` (of :math:`x`, then of
    :math:`x^2`) of ``count [1]`` rows; ``norm``'s running averages updated."""
    channels = norm.num_features
    total_sum, total_squares = moments[:channels], moments[channels:]
    n = int(count.item())
    if n <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got a global batch of {n}")
    mean = total_sum / n
    var = (total_squares / n - mean * mean).clamp_min(0.0)
    invstd = torch.rsqrt(var + norm.eps)
    if norm.affine:
        weight = norm.weight.to(torch.float64)
        scale = (invstd * weight).to(input.dtype)
        shift = (norm.bias.to(torch.float64) - mean * invstd * weight).to(input.dtype)
    else:
        scale, shift = invstd.to(input.dtype), (-mean * invstd).to(input.dtype)
    if norm.track_running_stats:
        # buffers that track_running_stats creates
        assert norm.running_mean is not None and norm.running_var is not None
        assert norm.num_batches_tracked is not None
        with torch.no_grad():
            norm.num_batches_tracked.add_(1)
            factor = 1.0 / float(norm.num_batches_tracked) if norm.momentum is None else norm.momentum
            norm.running_mean.mul_(1 - factor).add_(mean.to(norm.running_mean.dtype), alpha=factor)
            unbiased = var * (n / (n - 1))
            norm.running_var.mul_(1 - factor).add_(unbiased.to(norm.running_var.dtype), alpha=factor)
    return torch.addcmul(shift, input, scale)


def normalize_synced(norms: Sequence[Optional[torch.nn.Module]], inputs: Sequence[Tensor], group=None) -> List[Tensor]:
    """``norms[i](inputs[i])`` for every :math:`i` (``inputs[i]`` itself where ``norms[i]`` is
    :obj:`None`), the batch norms among them over the processes of ``group`` with one all-reduce
    (:func:`batch_norm_together`): the ``normalize`` of
    :meth:`torch_wge.nn.TwoViewConv.activate` in an encoder sharded over processes.

    Example:
        >>> norms = [torch.nn.BatchNorm1d(4), None]
        >>> x, y = torch.randn(3, 4), torch.randn(3, 4)
        >>> outputs = normalize_synced(norms, [x, y])  # one process: as the norms are
        >>> torch.equal(outputs[0], norms[0](x)), torch.equal(outputs[1], y)
        (True, True)
    """
    outputs = list(inputs)
    batch_norms = {i: norm for i, norm in enumerate(norms) if isinstance(norm, torch.nn.BatchNorm1d)}
    for i, norm in enumerate(norms):
        if norm is not None and i not in batch_norms:
            raise ValueError(f"statistics over several processes are for batch norms only, got {type(norm).__name__}")
    together = batch_norm_together(list(batch_norms.values()), [inputs[i] for i in batch_norms], group)
    for i, output in zip(batch_norms, together):
        outputs[i] = output
    return outputs
