import os
from typing import Dict

import torch
from torch_geometric.data import Data

from torch_wge.data import num_kg_relations
from torch_wge.nn import WGE, OneToNLoss
from torch_wge.training.config import TrainConfig
from torch_wge.training.precision import PRECISIONS


def check_memory(config: TrainConfig, graph: Dict[str, int], device: torch.device) -> None:
    """Raises :class:`ValueError` when the model's parameters with their
    gradients and Adam state (a lower bound of what training needs) exceed
    the memory of ``device``."""
    c = 4 * config.hidden_channels  # real numbers per embedding
    embeddings = (graph["num_entities"] + 2 * graph["num_relations"]) * c
    layers = config.num_layers * c * c // 4
    needed = 16 * (embeddings + layers)  # float32 weights, gradients and two Adam moments
    if device.type == "cuda":
        available = torch.cuda.get_device_properties(device).total_memory
    else:
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if needed > available:
        # the option whose parameters are the larger part
        size = f"hidden_channels {config.hidden_channels}"
        cause = f"num_layers {config.num_layers} ({size})" if layers > embeddings else size
        raise ValueError(
            f"{cause}: the model needs at least {needed / 2**30:.1f} GiB for its parameters, "
            f"gradients and optimiser state, more than the {available / 2**30:.1f} GiB of {device}"
        )


def build_model(config: TrainConfig, data: Data) -> WGE:
    """The :class:`~torch_wge.nn.WGE` model that ``config`` describes, for
    ``data``'s sizes: the one mapping of the settings to the model, used by
    the trainer, by inference from checkpoints and by scripts that train a
    model in their own loop. The graph settings (:obj:`beta`,
    :obj:`predicate_entities`, :obj:`relation_edges`) shape ``data``'s views
    instead (:func:`~torch_wge.training.graph_transform`), the objective's
    settings the loss (:func:`build_loss`); the optimisation settings are the
    training loop's.

    Example:
        >>> from torch_wge.testing import random_kg
        >>> model = build_model(TrainConfig(hidden_channels=4, num_layers=1), random_kg(10, 2, 30, seed=0))
        >>> model.hidden_channels, model.num_layers, model.entity_embedding.weight.shape
        (4, 1, torch.Size([10, 16]))
    """
    return WGE(
        int(data.num_nodes),
        num_kg_relations(data),
        hidden_channels=config.hidden_channels,
        num_layers=config.num_layers,
        alpha0=config.alpha0,
        dropout=config.dropout,
        views=config.views,
        conv=config.conv,
    )


def build_loss(config: TrainConfig) -> OneToNLoss:
    """The training objective that ``config`` describes (:class:`~torch_wge.nn.OneToNLoss`), used
    by the trainer and by scripts that train a model in their own loop.

    Example:
        >>> build_loss(TrainConfig(objective="softmax", label_smoothing=0.0, candidates=500))
        OneToNLoss(objective='softmax', label_smoothing=0.0, n3=0.0, relation_prediction=0.0, candidates=500)
    """
    return OneToNLoss(
        objective=config.objective,
        label_smoothing=config.label_smoothing,
        n3=config.n3,
        relation_prediction=config.relation_prediction,
        candidates=config.candidates,
        matmul_dtype=PRECISIONS[config.precision].loss_matmul_dtype,
    )
