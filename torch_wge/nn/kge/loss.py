import torch
import torch.nn.functional as F
from torch import Tensor


class _WeightedOneToNBCE(torch.autograd.Function):
    """Loss value and its gradient in one pass over the logits (see :func:`one_to_n_bce`)."""

    @staticmethod
    def forward(ctx, logits: Tensor, positives: Tensor, layer_weights: Tensor, label_smoothing: float) -> Tensor:
        num_layers, num_queries, num_entities = logits.shape
        scale = layer_weights.to(logits.dtype) / (num_queries * num_entities)  # [L]
        rows, cols = positives
        off_target = 1.0 / num_entities
        on_target = 1.0 - label_smoothing
        per_layer = (
            F.softplus(logits).sum(dim=(1, 2))
            - off_target * logits.sum(dim=(1, 2))
            - on_target * logits[:, rows, cols].sum(dim=-1)
        )
        loss = (per_layer * scale).sum()
        if ctx.needs_input_grad[0]:
            # d loss / d logits = w_k / (B N) * (sigmoid(f) - y), built in place
            grad = torch.sigmoid(logits)
            grad.sub_(off_target)
            flat = grad.view(num_layers, -1)
            flat.index_add_(1, rows * num_entities + cols, flat.new_full((num_layers, rows.numel()), -on_target))
            grad.mul_(scale.view(-1, 1, 1))
            ctx.save_for_backward(grad)
        return loss

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        (grad,) = ctx.saved_tensors
        return grad * grad_output, None, None, None


def one_to_n_bce(logits: Tensor, positives: Tensor, layer_weights: Tensor, label_smoothing: float = 0.1) -> Tensor:
    r"""Weighted 1-N binary cross-entropy with label smoothing over the
    per-layer logits :math:`f_k(h_b, r_b, n)`:

    .. math::
        \mathcal{L} = \sum_k \frac{\alpha_k}{BN} \sum_{b, n}
        \mathrm{BCE}\left(\sigma(f_{kbn}), y_{bn}\right)
        = \sum_k \frac{\alpha_k}{BN} \sum_{b, n}
        \left(\mathrm{softplus}(f_{kbn}) - y_{bn} f_{kbn}\right),
        \qquad y_{bn} = (1 - \epsilon)\,[n \text{ answers } b] + \frac{1}{N}

    The dense targets are never built: the positives enter as an index. The
    gradient :math:`\alpha_k (\sigma(f) - y) / (BN)` is formed during the
    forward pass in one buffer, so backward is a single multiplication.
    Duplicate positive pairs count once per occurrence.

    Args:
        logits (Tensor): ``[L, B, N]`` logits of ``L`` layers.
        positives (Tensor): ``[2, P]`` pairs ``(b, n)`` with target 1.
        layer_weights (Tensor): ``[L]`` weights :math:`\alpha_k`.
        label_smoothing (float, optional): :math:`\epsilon`. (default: :obj:`0.1`)

    Returns:
        A scalar tensor.
    """
    return _WeightedOneToNBCE.apply(logits, positives, layer_weights, label_smoothing)
