from typing import Optional

import torch
from torch_geometric.data import Data

from torch_wge.data import num_kg_relations
from torch_wge.nn import WGE
from torch_wge.training.config import TrainConfig


def resolve_device(device: Optional[str]) -> torch.device:
    """``device`` as given, or CUDA when available, else the CPU."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def build_model(config: TrainConfig, data: Data) -> WGE:
    """The :class:`~torch_wge.nn.WGE` model that ``config`` describes, for ``data``'s sizes."""
    return WGE(
        int(data.num_nodes),
        num_kg_relations(data),
        channels=config.channels,
        num_layers=config.num_layers,
        alpha0=config.alpha0,
        dropout=config.dropout,
        views=config.views,
        conv=config.conv,
        label_smoothing=config.label_smoothing,
        objective=config.objective,
        n3_weight=config.n3,
        relation_prediction_weight=config.relation_prediction,
    )
