from torch_wge.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from torch_wge.training.config import RECIPES, TrainConfig
from torch_wge.training.data import graph_transform, load_data, open_dataset, split_triples
from torch_wge.training.export import export_embeddings, load_embeddings
from torch_wge.training.inference import evaluate_checkpoint, evaluate_model, load_trained, predict
from torch_wge.training.model import build_model, resolve_device
from torch_wge.training.queries import TrainingQueries, add_inverse_triples
from torch_wge.training.trackers import TensorBoardTracker, Tracker
from torch_wge.training.trainer import Trainer

__all__ = [
    "CheckpointError",
    "load_checkpoint",
    "save_checkpoint",
    "RECIPES",
    "TrainConfig",
    "graph_transform",
    "load_data",
    "open_dataset",
    "split_triples",
    "TrainingQueries",
    "add_inverse_triples",
    "Trainer",
    "Tracker",
    "TensorBoardTracker",
    "build_model",
    "resolve_device",
    "evaluate_checkpoint",
    "evaluate_model",
    "load_trained",
    "predict",
    "export_embeddings",
    "load_embeddings",
]
