import os
from typing import Dict, Tuple, Union

import torch
from torch_geometric.data import Data

from torch_wge.data import num_kg_relations
from torch_wge.nn import WGE, OneToNLoss
from torch_wge.training.config import TrainConfig
from torch_wge.training.precision import PRECISIONS, resolve_precision

#: The deepest encoder a run may have. A layer adds a fixed time to every step whatever the graph's
#: size (about 8 ms forward and backward on a CPU core, 64 quaternions on a 30-entity graph), so
#: depth multiplies the time of each step where the floating-point count stays small: 100,000
#: layers on 400 triples pass the memory and work estimates and take minutes a step. The paper's
#: encoders have at most 3 layers.
MAX_LAYERS = 100

#: The most floating-point operations an epoch may need (:func:`epoch_flops`): about five hours
#: an epoch at 60 TFLOP/s, 500 times what the paper's recipe needs on CoDEx-L with 128
#: quaternions and 3 layers (1.9e15).
MAX_EPOCH_FLOPS = 10**18


def epoch_flops(config: TrainConfig, graph: Dict[str, int]) -> Tuple[int, int]:
    r"""An estimate of the floating-point operations of one training epoch of ``config`` on a
    graph of the sizes ``graph`` (:data:`~torch_wge.training.validation.GRAPH_KEYS`), as
    ``(encoder, scoring)``: every step runs the encoder over the whole graph,
    :math:`4 c^2 (N + R)` per layer (each view's :math:`c \times c` real weight on its rows:
    entities, then entities and relation nodes; :math:`c` = 4 ``hidden_channels``), and the
    loss scores the :math:`Q \le 2T` training queries against all entities (or the sampled
    candidates), :math:`2 c` per score and layer; the backward pass counts twice the forward."""
    c = 4 * config.hidden_channels
    entities, relations = graph["num_entities"], graph["num_relations"]
    queries = 2 * graph["num_train"]  # each triple's tail and head query: at most this many distinct
    steps = -(-queries // config.batch_size)
    candidates = entities if not config.candidates else min(entities, config.candidates + config.batch_size)
    encoder = 3 * steps * config.num_layers * 4 * c * c * (entities + relations)
    scoring = 3 * 2 * queries * candidates * c * (config.num_layers + 1)
    return encoder, scoring


def check_memory(config: TrainConfig, graph: Dict[str, int], device: torch.device) -> None:
    """Raises :class:`ValueError` when the model's parameters with their
    gradients and Adam state (a lower bound of what training needs) exceed
    the memory of ``device``, when an epoch would need more than
    :data:`MAX_EPOCH_FLOPS` floating-point operations (:func:`epoch_flops`), or
    when the encoder is deeper than :data:`MAX_LAYERS`: one line naming the
    setting. The trainer calls it before it builds a model, and so do the
    checks of a checkpoint (:func:`~torch_wge.training.validation.model_checkpoint`)."""
    c = 4 * config.hidden_channels  # real numbers per embedding
    embeddings = (graph["num_entities"] + 2 * graph["num_relations"]) * c
    layers = config.num_layers * c * c // 4
    needed = 16 * (embeddings + layers)  # float32 weights, gradients and two Adam moments
    if device.type == "cuda":
        available = torch.cuda.get_device_properties(device).total_memory
    else:
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    size = f"hidden_channels {config.hidden_channels}"
    if needed > available:
        # the option whose parameters are the larger part
        cause = f"num_layers {config.num_layers} ({size})" if layers > embeddings else size
        raise ValueError(
            f"{cause}: the model needs at least {needed / 2**30:.1f} GiB for its parameters, "
            f"gradients and optimiser state, more than the {available / 2**30:.1f} GiB of {device}"
        )
    if config.num_layers > MAX_LAYERS:
        raise ValueError(
            f"num_layers {config.num_layers}: at most {MAX_LAYERS} encoder layers (each adds a fixed time to "
            f"every step, whatever the graph's size; the paper's encoders have 1 to 3)"
        )
    encoder, scoring = epoch_flops(config, graph)
    if encoder + scoring > MAX_EPOCH_FLOPS:
        cause = f"num_layers {config.num_layers} ({size})" if encoder > scoring else size
        raise ValueError(
            f"{cause}: an epoch needs about {encoder + scoring:.1e} floating-point operations on this graph, "
            f"more than the {MAX_EPOCH_FLOPS:.0e} torch_wge trains (hours an epoch on the fastest GPU)"
        )


def build_model(config: TrainConfig, data: Data, device: Union[str, torch.device] = "cpu") -> WGE:
    """The :class:`~torch_wge.nn.WGE` model that ``config`` describes, for
    ``data``'s sizes: the one mapping of the settings to the model, used by
    the trainer, by inference from checkpoints and by scripts that train a
    model in their own loop. The graph settings (:obj:`beta`,
    :obj:`predicate_entities`, :obj:`relation_edges`) shape ``data``'s views
    instead (:func:`~torch_wge.training.graph_transform`), the objective's
    settings the loss (:func:`build_loss`); the optimisation settings are the
    training loop's. Its encoder caches the normalised views (:obj:`cached=True`):
    the model is for the graph of ``data``. Its encoder's quaternion matmuls take
    the dtype :obj:`precision` gives on ``device``.

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
        cached=True,  # transductive: trained and evaluated on the graph of `data` only
        matmul_dtype=PRECISIONS[resolve_precision(config.precision, device)].encoder_matmul_dtype,
    )


def build_loss(config: TrainConfig, device: Union[str, torch.device] = "cpu") -> OneToNLoss:
    """The training objective that ``config`` describes (:class:`~torch_wge.nn.OneToNLoss`) for
    training on ``device`` (which ``precision="auto"`` resolves on, see
    :func:`~torch_wge.training.precision.resolve_precision`), used by the trainer and by scripts
    that train a model in their own loop.

    Example:
        >>> build_loss(TrainConfig(objective="softmax", label_smoothing=0.0, candidates=500, precision="float32"))
        OneToNLoss(objective='softmax', label_smoothing=0.0, n3=0.0, relation_prediction=0.0, candidates=500)
    """
    return OneToNLoss(
        objective=config.objective,
        label_smoothing=config.label_smoothing,
        n3=config.n3,
        relation_prediction=config.relation_prediction,
        candidates=config.candidates,
        matmul_dtype=PRECISIONS[resolve_precision(config.precision, device)].loss_matmul_dtype,
    )
