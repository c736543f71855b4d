from typing import Any, Dict, Optional

import torch

from torch_wge.distributed import DistributedContext
from torch_wge.evaluation import LinkPredictionEvaluator, LinkPredictionResults
from torch_wge.evaluation.sharding import sharded_ranks
from torch_wge.nn import WGE


@torch.no_grad()
def evaluate_model(
    model: WGE,
    graph_inputs: Dict[str, Any],
    evaluator: LinkPredictionEvaluator,
    batch_size: int = 1024,
    progress: bool = False,
    distributed: Optional[DistributedContext] = None,
) -> LinkPredictionResults:
    """Filtered ranking with ``model`` in eval mode; the encoder runs once for all queries.

    With a ``distributed`` context of several processes (call it in every
    process), each process ranks its chunk-aligned part of the queries and
    every process returns the metrics of all of them, equal to a single
    process's (see :func:`~torch_wge.evaluation.sharding.sharded_ranks`)."""
    model.eval()
    encoded = model.encode(**graph_inputs)
    device = encoded.entities[0].device

    def score_fn(entities, relations):
        return model.score_all(encoded, entities.to(device), relations.to(device))

    if distributed is not None and distributed.enabled:
        gather_device = distributed.device if distributed.device.type == "cuda" else None
        ranks = sharded_ranks(
            evaluator, score_fn, batch_size, device=gather_device, progress=progress and distributed.is_main
        )
        return evaluator.summarize(ranks)
    return evaluator.evaluate(score_fn, batch_size=batch_size, progress=progress)
