"""Trained models from their run folders and checkpoints: load one (:func:`load_trained`), rank a
split (:func:`evaluate_checkpoint`), answer a query (:func:`predict`, :func:`predict_query`) and
export its embeddings (:func:`export_embeddings`, :func:`load_embeddings`)."""

from torch_wge.inference.export import export_embeddings, load_embeddings
from torch_wge.inference.trained import evaluate_checkpoint, graph_inputs_on, load_trained, predict, predict_query

__all__ = [
    "evaluate_checkpoint",
    "export_embeddings",
    "graph_inputs_on",
    "load_embeddings",
    "load_trained",
    "predict",
    "predict_query",
]
