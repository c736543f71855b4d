import torch
import torch.nn.functional as F
from torch import Tensor


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    r"""Dropout, as :func:`torch.nn.functional.dropout`: in training each
    element of ``x`` is zeroed with probability :math:`p` and the others are
    scaled by :math:`1 / (1 - p)`; otherwise ``x`` is returned unchanged.

    On the CPU the mask is drawn as 24-bit random integers (:math:`p` is
    rounded to a multiple of :math:`2^{-24}`), which is 3-4x faster there
    than the Bernoulli sampling of :func:`torch.nn.functional.dropout`; on
    other devices that function is used. The masks differ from it for the
    same seed, not in distribution.

    Shapes: ``x [*]`` gives ``[*]``.

    Example:
        >>> x = torch.ones(2, 4)
        >>> dropout(x, 0.5, training=False).equal(x)
        True
        >>> out = dropout(x, 0.5)
        >>> bool(((out == 0) | (out == 2)).all())
        True
    """
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training)
    levels = 1 << 24  # the mask's random integers lie in [0, 2^24)
    mask = torch.randint(0, levels, x.shape, dtype=torch.int32).ge_(int(p * levels + 0.5)).to(x.dtype)
    return x * mask.mul_(1.0 / (1.0 - p))
