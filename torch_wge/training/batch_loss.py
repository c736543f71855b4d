from typing import Optional, Tuple

import torch
from torch import Tensor

from torch_wge.nn import WGE, OneToNLoss


class BatchLoss(torch.nn.Module):
    r"""The training loss of a batch as a module, for
    :class:`~torch.nn.parallel.DistributedDataParallel` (whose hooks run on
    ``forward``): encodes the whole graph, then returns ``scale *
    loss_fn(model, ...)`` for the given queries.

    With no queries (an empty part of a sharded batch) it returns zero times
    the scores of the empty batch, so that every parameter still receives a
    (zero) gradient and the decoders' synchronised batch norms still take
    part in their all-reduce.

    Args:
        model (WGE): The model.
        loss_fn (OneToNLoss): The objective.
        graph_inputs (dict): The adjacency arguments of ``model.encode``.

    Shapes:
        - **input:** ``heads [B_j]``, ``relations [B_j]``, ``positives [2, P_j]``,
          a float ``scale`` and optionally ``sampled`` candidates (``[M]``, ``[P_j]``, see
          :meth:`OneToNLoss.forward <torch_wge.nn.OneToNLoss.forward>`)
        - **output:** a scalar
    """

    def __init__(self, model: WGE, loss_fn: OneToNLoss, graph_inputs: dict):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        self.graph_inputs = graph_inputs

    def forward(
        self,
        heads: Tensor,
        relations: Tensor,
        positives: Tensor,
        scale: float = 1.0,
        sampled: Optional[Tuple[Tensor, Tensor]] = None,
    ) -> Tensor:
        encoded = self.model.encode(**self.graph_inputs)
        if heads.numel() == 0:
            return self.model.layer_scores(encoded, heads, relations).sum() * 0.0
        loss = self.loss_fn(self.model, encoded, heads, relations, positives, sampled)
        return loss if scale == 1.0 else loss * scale
