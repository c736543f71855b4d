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


class SyncedBatchNorm1d(torch.nn.BatchNorm1d):
    r""":class:`~torch.nn.BatchNorm1d` over the union of the batches of all
    processes of ``process_group``, on any device.

    In training mode the per-channel sums :math:`\sum_b x_b`,
    :math:`\sum_b x_b^2` and the count are summed over the processes (in
    float64, one differentiable all-reduce, :class:`AllReduceSum`), the input is normalised with the
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

    def _synchronised(self) -> bool:
        return (
            self.training
            and dist.is_available()
            and dist.is_initialized()
            and dist.get_world_size(self.process_group) > 1
        )

    def forward(self, input: Tensor) -> Tensor:
        if not self._synchronised():
            return super().forward(input)
        if input.dim() != 2:
            raise ValueError(f"'{self.__class__.__name__}' expects input of shape [B, C], got {tuple(input.shape)}")
        x = input.to(torch.float64)
        local = torch.cat([x.sum(0), (x * x).sum(0), x.new_full((1,), input.size(0))])
        stats = AllReduceSum.apply(local, self.process_group or dist.group.WORLD)
        channels = self.num_features
        total_sum, total_squares, count = stats[:channels], stats[channels : 2 * channels], stats[-1]
        n = int(count.item())
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got a global batch of {n}")
        mean = total_sum / n
        var = (total_squares / n - mean * mean).clamp_min(0.0)
        invstd = torch.rsqrt(var + self.eps)
        if self.affine:
            scale = (invstd * self.weight.to(torch.float64)).to(input.dtype)
            shift = (self.bias.to(torch.float64) - mean * invstd * self.weight.to(torch.float64)).to(input.dtype)
        else:
            scale, shift = invstd.to(input.dtype), (-mean * invstd).to(input.dtype)
        if self.track_running_stats:
            # buffers that track_running_stats creates
            assert self.running_mean is not None and self.running_var is not None
            assert self.num_batches_tracked is not None
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
                self.running_mean.mul_(1 - factor).add_(mean.to(self.running_mean.dtype), alpha=factor)
                unbiased = var * (n / (n - 1))
                self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)
        return input * scale + shift
