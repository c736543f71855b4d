"""Training: the loop, its settings, checkpoints and run folder.

The names below are imported from their modules when first used (PEP 562), so
that ``torch_wge.training.config`` (the settings, read by ``torch-wge --help``)
loads without torch, PyG or the model.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see; the same names as _MODULE_OF
    from torch_wge.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint  # noqa: F401
    from torch_wge.training.config import RECIPES, TrainConfig  # noqa: F401
    from torch_wge.training.data import graph_transform, load_data, open_dataset, split_triples  # noqa: F401
    from torch_wge.training.evaluate import evaluate_model  # noqa: F401
    from torch_wge.training.model import build_loss, build_model  # noqa: F401
    from torch_wge.training.queries import TrainingQueries  # noqa: F401
    from torch_wge.training.trackers import TensorBoardTracker, Tracker  # noqa: F401
    from torch_wge.training.trainer import Trainer  # noqa: F401

#: public name -> the module of ``torch_wge.training`` that defines it
_MODULE_OF = {
    "CheckpointError": "checkpoint",
    "load_checkpoint": "checkpoint",
    "save_checkpoint": "checkpoint",
    "RECIPES": "config",
    "TrainConfig": "config",
    "graph_transform": "data",
    "load_data": "data",
    "open_dataset": "data",
    "split_triples": "data",
    "TrainingQueries": "queries",
    "Trainer": "trainer",
    "Tracker": "trackers",
    "TensorBoardTracker": "trackers",
    "build_loss": "model",
    "build_model": "model",
    "evaluate_model": "evaluate",
}

__all__ = list(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
