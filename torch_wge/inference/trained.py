"""Trained models from their checkpoints: loading one with the graph it was trained on, its
filtered metrics on a split, and its top answers to a query."""

import difflib
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from torch_geometric.data import Data, InMemoryDataset

from torch_wge.data import num_kg_relations
from torch_wge.distributed import resolve_device
from torch_wge.evaluation import LinkPredictionEvaluator, LinkPredictionResults
from torch_wge.nn import WGE
from torch_wge.training import validation
from torch_wge.training.checkpoint import (
    check_compatible,
    check_training_triples,
    check_vocabulary,
    load_checkpoint,
    triples_fingerprint,
    vocabulary_digest,
)
from torch_wge.training.config import TrainConfig
from torch_wge.training.data import graph_sizes, graph_transform, load_data, split_triples
from torch_wge.training.evaluate import evaluate_model
from torch_wge.training.model import build_model


def load_trained(
    checkpoint: Union[str, Path],
    root: Optional[str] = None,
    device: Optional[str] = None,
    data: Optional[Data] = None,
    force_reload: bool = False,
    log: bool = True,
) -> Tuple[WGE, TrainConfig, Optional[InMemoryDataset], Data]:
    """The model of a ``best.pt`` or ``last.pt`` checkpoint, in eval mode, with
    the dataset it was trained on (loaded from ``root`` or the run's own root;
    ``force_reload`` processes its raw files anew, ``log`` prints its
    processing messages), or with the knowledge
    graph ``data`` it was trained on, passed from Python (any layout of
    :mod:`torch_wge.data.knowledge_graph`; the dataset is then :obj:`None` and
    the graph views are built with the checkpoint's settings).

    Raises:
        CheckpointError: if the file is unreadable or damaged, or the graph
            does not match it (other sizes, ids that name other entities or
            relations, or other training triples).
        torch_wge.training.validation.StoredError: a field of the checkpoint
            of the wrong type, dtype, shape or range, or missing; settings of a
            model larger than the memory of ``device`` (checked before the data
            is loaded or a model built).
    """
    state = load_checkpoint(checkpoint)
    target = resolve_device(device)  # an unusable device is refused before the data is loaded
    config = validation.model_checkpoint(state, checkpoint, target)  # sizes within the memory of `target`
    config.root = root or config.root
    config.device = device
    if data is None:
        dataset, data = load_data(config, force_reload, log)
    else:
        dataset, data = None, graph_transform(config)(data.clone())
    check_compatible(state, config.to_dict(), graph_sizes(data), checkpoint)
    where = f"{config.dataset} (root {config.root})" if dataset is not None else "the graph passed as data"
    if dataset is not None:  # a graph passed from Python has no names to compare
        vocabulary = vocabulary_digest(dataset.entity_names, dataset.relation_names)
        check_vocabulary(state, vocabulary, checkpoint, where)
    check_training_triples(state, triples_fingerprint(split_triples(data, "train")), checkpoint, where)
    model = build_model(config, data, target).to(target)
    validation.load_weights(model, state["model"], checkpoint)
    return model.eval(), config, dataset, data


def graph_inputs_on(model: WGE, data: Data) -> Dict[str, Any]:
    device = model.entity_embedding.weight.device
    return {key: value.to(device) for key, value in model.graph_inputs(data).items()}


def evaluate_checkpoint(
    checkpoint: Union[str, Path],
    split: str = "test",
    root: Optional[str] = None,
    device: Optional[str] = None,
    progress: bool = False,
    data: Optional[Data] = None,
    force_reload: bool = False,
    log: bool = True,
) -> Tuple[LinkPredictionResults, Optional[InMemoryDataset]]:
    """Filtered link-prediction metrics of a checkpoint on ``split``; returns them and the dataset
    (:obj:`None` when the graph is passed as ``data``, see :func:`load_trained`)."""
    model, config, dataset, data = load_trained(checkpoint, root, device, data, force_reload, log)
    evaluator = LinkPredictionEvaluator.from_data(data, split)
    results = evaluate_model(model, graph_inputs_on(model, data), evaluator, config.eval_batch_size, progress)
    return results, dataset


def _index(
    names: Optional[List[str]],
    labels: Optional[List[Optional[str]]],
    name: Union[str, int],
    kind: str,
    dataset: str,
    count: int,
) -> int:
    """The id of the entity or relation ``name``: its identifier, or else its
    label when exactly one has that label; without an exact match, the same
    regardless of case. An unknown name is refused with the closest identifiers
    and labels."""
    if names is None:  # a graph passed from Python: integer ids
        if str(name).isdigit() and int(name) < count:
            return int(name)
        raise ValueError(f"{kind} {name!r} must be an id in [0, {count}) of the graph passed as data")
    if isinstance(name, str) and name in names:
        return names.index(name)
    plural = "entities" if kind == "entity" else f"{kind}s"
    labelled = [i for i, label in enumerate(labels or ()) if label == name]
    if not labelled:  # no exact match: an identifier, else a label, regardless of case
        folded = str(name).casefold()
        labelled = [i for i, n in enumerate(names) if n.casefold() == folded] or [
            i for i, label in enumerate(labels or ()) if label is not None and label.casefold() == folded
        ]
    if len(labelled) == 1:
        return labelled[0]
    if labelled:
        some = ", ".join(names[i] for i in labelled[:5])
        raise ValueError(
            f"{kind} label {name!r} names {len(labelled)} {plural} of {dataset} ({some}, ...); give its identifier"
        )
    known = list(names) + [label for label in labels or () if label is not None]
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"unknown {kind} {name!r}: not among the {len(names)} {plural} of {dataset}, by identifier or label{hint}"
    )


def predict(
    checkpoint: Union[str, Path],
    entity: Union[str, int],
    relation: Union[str, int],
    predict_tails: bool = True,
    top_k: int = 10,
    filter_known: bool = False,
    root: Optional[str] = None,
    device: Optional[str] = None,
    data: Optional[Data] = None,
    force_reload: bool = False,
    log: bool = True,
) -> List[Dict[str, Any]]:
    """Top-``k`` answers of ``(entity, relation, ?)`` (or ``(?, relation, entity)``
    with ``predict_tails=False``): the rows of :func:`predict_query`, which takes the same arguments."""
    return predict_query(
        checkpoint, entity, relation, predict_tails, top_k, filter_known, root, device, data, force_reload, log
    )[1]


@torch.no_grad()
def predict_query(
    checkpoint: Union[str, Path],
    entity: Union[str, int],
    relation: Union[str, int],
    predict_tails: bool = True,
    top_k: int = 10,
    filter_known: bool = False,
    root: Optional[str] = None,
    device: Optional[str] = None,
    data: Optional[Data] = None,
    force_reload: bool = False,
    log: bool = True,
) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    r"""Top-``k`` answers of ``(entity, relation, ?)`` (or ``(?, relation, entity)``
    with ``predict_tails=False``). ``entity`` and ``relation`` are identifiers
    as in the dataset's files, or labels that name one entity or relation
    (a dataset with labels), or integer ids when the graph is passed as
    ``data`` (see :func:`load_trained`).

    The score of a triple is the model's logit :math:`f(h, r, t) = \sum_k
    \alpha_k f_k(h, r, t)`: answers are ranked by it, and under the ``bce``
    objective :math:`\sigma(f)` is the model's probability that the triple holds.

    Returns:
        The query, ``{"entity", "entity_label", "relation", "relation_label", "objective"}``
        (identifiers and labels, ``None`` where there is none, and the run's
        training objective, which says what a score means), and one dict
        per answer, best first: ``entity`` (identifier), ``label`` (human
        label or ``None``), ``score`` (logit) and ``known`` (whether the
        triple is in train, valid or test). With ``filter_known`` no known
        answer is listed, nor the query's own entity (a query asks for other
        entities; a known self-loop is listed without it, marked known), so
        fewer than ``top_k`` rows come when fewer unknown entities remain.
    """
    if top_k <= 0:
        raise ValueError(f"top-k must be positive, got {top_k}")
    model, config, dataset, data = load_trained(checkpoint, root, device, data, force_reload, log)
    num_relations = num_kg_relations(data)
    entity_names = None if dataset is None else list(dataset.entity_names)
    relation_names = None if dataset is None else list(dataset.relation_names)
    labels = getattr(dataset, "entity_labels", None)
    relation_labels = getattr(dataset, "relation_labels", None)
    query_entity = _index(entity_names, labels, entity, "entity", config.dataset, int(data.num_nodes))
    query_relation = _index(relation_names, relation_labels, relation, "relation", config.dataset, num_relations)
    query = {
        "entity": query_entity if entity_names is None else entity_names[query_entity],
        "entity_label": labels[query_entity] if labels else None,
        "relation": query_relation if relation_names is None else relation_names[query_relation],
        "relation_label": relation_labels[query_relation] if relation_labels else None,
        "objective": config.objective,
    }
    if not predict_tails:
        query_relation += num_relations
    encoded = model.encode(**graph_inputs_on(model, data))
    device_ = encoded.entities[0].device
    scores = model.score_all(
        encoded, torch.tensor([query_entity], device=device_), torch.tensor([query_relation], device=device_)
    )[0].cpu()
    triples = split_triples(data, "all")
    if predict_tails:
        known = triples[(triples[:, 0] == query_entity) & (triples[:, 1] == query_relation), 2]
    else:
        known = triples[(triples[:, 2] == query_entity) & (triples[:, 1] == query_relation - num_relations), 0]
    is_known = torch.zeros_like(scores, dtype=torch.bool)
    is_known[known] = True
    left_out = is_known.clone()
    left_out[query_entity] = True  # the query's own entity answers nothing new: (X, r, X) is no answer sought
    candidates = (~left_out).nonzero().view(-1) if filter_known else torch.arange(scores.numel())
    values, order = scores[candidates].topk(min(top_k, candidates.numel()))
    indices = candidates[order]
    return query, [
        {
            "entity": i if entity_names is None else entity_names[i],
            "label": labels[i] if labels else None,
            "score": float(v),
            "known": bool(is_known[i]),
        }
        for v, i in zip(values.tolist(), indices.tolist())
    ]
