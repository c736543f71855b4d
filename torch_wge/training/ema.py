"""An exponential moving average (EMA) of a model's weights, evaluated in
place of the trained weights."""

import copy
from typing import Any, Dict

import torch


class WeightAverage:
    r"""Keeps a copy of ``model`` whose floating-point parameters and buffers
    are the exponential moving average of ``model``'s after every optimiser
    step :math:`t = 1, 2, \ldots`:

    .. math::
        \bar\theta_0 = \theta_0, \qquad
        \bar\theta_t = d\,\bar\theta_{t-1} + (1 - d)\,\theta_t

    with decay :math:`d`: a weight of step :math:`t - s` counts
    :math:`(1 - d)\,d^{s}`, so the average spans about :math:`1 / (1 - d)`
    recent steps. Batch-norm running statistics are buffers and are averaged
    the same way, so the average model normalises with statistics of the
    same window of steps; integer buffers (batch counts) are copied.

    The copy (:attr:`model`) is in evaluation mode and needs no gradients;
    evaluate it like the model itself. Its state dict is what a checkpoint
    stores (:meth:`state_dict`, :meth:`load_state_dict`).

    Args:
        model (torch.nn.Module): The model being trained.
        decay (float): :math:`d \in (0, 1)`.
    """

    def __init__(self, model: torch.nn.Module, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"EMA decay must be in (0, 1), got {decay}")
        self.decay = decay
        self.model = copy.deepcopy(model).eval().requires_grad_(False)

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        """One step of the average towards ``model``'s current weights."""
        averages = self.model.state_dict(keep_vars=True)
        for name, value in model.state_dict(keep_vars=True).items():
            average = averages[name]
            if average.is_floating_point():
                average.lerp_(value.detach(), 1.0 - self.decay)
            else:
                average.copy_(value)

    def state_dict(self) -> Dict[str, Any]:
        return self.model.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.model.load_state_dict(state)
