"""Checks of what a run stored before it is used: the settings of a run
folder's ``config.json`` or of a checkpoint, and a checkpoint's contents.

``--resume``, ``evaluate`` and ``predict`` read these files back; a file
edited by hand or damaged must give one line naming the file and the field
(exit code 2 on the command line), not a traceback from deep inside the
trainer. Every check here raises :class:`StoredError` (a
:class:`ValueError`) with such a line.
"""

import math
import re
import warnings
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

import torch

from torch_wge import io
from torch_wge.training.checkpoint import (
    CheckpointError,
    check_compatible,
    check_resumable,
    check_training_triples,
    check_vocabulary,
    load_checkpoint,
)
from torch_wge.training.config import TrainConfig
from torch_wge.training.settings_file import StoredError, is_of_kind, settings

__all__ = ["StoredError", "settings"]  # the stored settings' checks live in settings_file (no torch there)

PathLike = Union[str, Path]

#: The graph sizes every checkpoint records (see :func:`torch_wge.training.data.graph_sizes`).
GRAPH_KEYS = ("num_entities", "num_relations", "num_train", "num_valid", "num_test")

_is = is_of_kind


def _field(state: Mapping, key: str, kind: type, path: PathLike, what: str) -> Any:
    # state[key], checked to be of `kind`
    if key not in state:
        raise StoredError(f"{path}: no {key!r} (damaged, or not a torch_wge checkpoint)")
    value = state[key]
    if not _is(value, kind):
        raise StoredError(f"{path}: {key!r} must be {what}, found {type(value).__name__} {_short(value)}")
    return value


def _short(value: Any) -> str:
    return io.short_repr(value)


def _tensors(value: Any) -> bool:
    # a dict of tensors (model weights, an average of them)
    return isinstance(value, dict) and all(isinstance(entry, torch.Tensor) for entry in value.values())


def _finite_number(value: Any) -> bool:
    return _is(value, float) and math.isfinite(value)


def _weights_error(weights: Any) -> Optional[str]:
    # why `weights` is no dict of the model's dense tensors: of the dtype models are built in
    # (torch's default, float32 unless set otherwise), int64 batch counts
    if not isinstance(weights, dict):
        return f"must be a dict of tensors, found {type(weights).__name__}"
    for name, value in weights.items():
        if not isinstance(name, str):
            return f"weight names must be strings, found {_short(name)}"
        if not isinstance(value, torch.Tensor):
            return f"{_short(name)} must be a tensor, found {type(value).__name__}"
        expected = torch.int64 if name.endswith("num_batches_tracked") else torch.get_default_dtype()
        if value.layout != torch.strided or value.dtype != expected:
            return (
                f"weight {_short(name)} must be a dense {str(expected).removeprefix('torch.')} tensor, "
                f"found {str(value.dtype).removeprefix('torch.')} ({value.layout})"
            )
    return None


def _digest_or_none(value: Any) -> bool:
    # a sha256 hex digest (vocabulary, training triples), or None in files written before them
    return value is None or (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


#: What a checkpoint's ``device`` field may read: ``cpu``, ``cuda:1``, ... (what ``str(torch.device)`` gives).
_DEVICE = re.compile(r"[a-z][a-z0-9_]{0,15}(:[0-9]{1,4})?")

#: The largest thread count or number of processes a checkpoint may record.
MAX_COUNT = 2**20


def model_checkpoint(state: Mapping, path: PathLike, device: Optional[Union[str, torch.device]] = None) -> TrainConfig:
    """Checks the fields every checkpoint holds (``best.pt`` and ``last.pt``),
    before anything is built from them: ``config`` (see :func:`settings`),
    ``graph`` (the integer sizes :data:`GRAPH_KEYS`), the model those sizes
    make through the trainer's own estimates of memory (on ``device``, by
    default the CPU) and work per epoch
    (:func:`~torch_wge.training.model.check_memory`), ``epoch`` (an integer
    in [0, ``config.epochs``]), ``model`` (a dict of dense tensors of
    torch's default dtype, float32 unless set otherwise, and int64 batch counts), ``version`` (a short string), ``vocabulary`` and
    ``train_triples`` (sha256 digests, or :obj:`None`) and ``valid`` (numbers,
    in ``best.pt``); returns the checkpoint's settings. Fields it does not
    name are never read. The weights' names and shapes are checked where they
    are loaded into a model (:func:`load_weights`).

    Raises:
        StoredError: naming ``path`` and the field.
    """
    from torch_wge.training.model import check_memory  # the model's modules: only once a checkpoint is read

    config = settings(_field(state, "config", dict, path, "a dict of settings"), path, "config: ")
    graph = _field(state, "graph", dict, path, "a dict of graph sizes")
    for key in GRAPH_KEYS:
        if not (_is(graph.get(key), int) and 0 <= graph[key] < 2**63):
            raise StoredError(f"{path}: graph: {key!r} must be an integer >= 0, found {_short(graph.get(key))}")
    try:
        check_memory(config, graph, torch.device(device if device is not None else "cpu"))
    except ValueError as error:
        sizes = ", ".join(f"{key} {graph[key]}" for key in GRAPH_KEYS[:3])
        raise StoredError(f"{path}: config: {error} (graph: {sizes})") from None
    epoch = _field(state, "epoch", int, path, "an integer")
    if not 0 <= epoch <= config.epochs:
        raise StoredError(
            f"{path}: 'epoch' must lie in [0, {config.epochs}] (the run's epochs, config: epochs), found {_short(epoch)}"
        )
    wrong = _weights_error(_field(state, "model", dict, path, "a dict of tensors"))
    if wrong is not None:
        raise StoredError(f"{path}: model: {wrong}")
    version = state.get("version")
    if version is not None and not (isinstance(version, str) and len(version) <= 64 and version.isprintable()):
        raise StoredError(f"{path}: 'version' must be a short string, found {_short(version)}")
    for key in ("vocabulary", "train_triples"):
        if not _digest_or_none(state.get(key)):
            raise StoredError(f"{path}: {key!r} must be a sha256 hex digest, found {_short(state.get(key))}")
    valid = state.get("valid")
    if valid is not None and not (isinstance(valid, dict) and all(_is(v, float) for v in valid.values())):
        raise StoredError(f"{path}: 'valid' must be a dict of numbers, found {_short(valid)}")
    return config


def training_checkpoint(
    state: Mapping, path: PathLike, device: Optional[Union[str, torch.device]] = None
) -> TrainConfig:
    """Checks a ``last.pt`` for a resume: the fields of
    :func:`model_checkpoint` and ``optimizer`` (a dict with ``state`` and
    ``param_groups``), ``scheduler`` (a dict or :obj:`None`, if present),
    ``rng`` (``torch`` and ``shuffle`` states, byte
    tensors, and ``cuda``, a list of them or :obj:`None`), ``world_size`` and
    ``threads`` (integers >= 1, or absent), ``device`` (a device's name, such as
    ``cuda:1``, or absent), ``best``
    (``epoch`` with ``mrr`` in [0, 1], or no epoch and ``mrr`` -inf before the
    first validation; ``evaluations_since``), ``best_model`` and ``ema`` (if
    present: weights of the model's names, shapes and dtypes), ``best_valid`` (numbers,
    with ``best_model``) and ``wall_seconds``. A file whose checksum was
    recomputed after an edit passes the checksum, not these checks.

    Raises:
        StoredError: naming ``path`` and the field.
    """
    config = model_checkpoint(state, path, device)
    optimizer = _field(state, "optimizer", dict, path, "a dict (an optimiser's state)")
    if not (isinstance(optimizer.get("state"), dict) and isinstance(optimizer.get("param_groups"), list)):
        raise StoredError(f"{path}: optimizer: expected 'state' (a dict) and 'param_groups' (a list)")
    scheduler = state.get("scheduler")
    if scheduler is not None and not isinstance(scheduler, dict):
        raise StoredError(f"{path}: scheduler: must be a dict (a scheduler's state) or None, found {_short(scheduler)}")
    rng = _field(state, "rng", dict, path, "a dict of random-number states")
    for key in ("torch", "shuffle"):
        value = rng.get(key)
        if not (isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1):
            raise StoredError(f"{path}: rng: {key!r} must be a byte tensor, found {_short(value)}")
    cuda = rng.get("cuda")
    if cuda is not None and not (isinstance(cuda, list) and all(isinstance(t, torch.Tensor) for t in cuda)):
        raise StoredError(f"{path}: rng: 'cuda' must be a list of byte tensors or None, found {_short(cuda)}")
    model = state["model"]
    for key in ("best_model", "ema"):  # copies of the model's weights (or None)
        value = state.get(key)
        if value is None:
            continue
        if not _tensors(value):
            raise StoredError(f"{path}: {key!r} must be a dict of tensors or None, found {_short(value)}")
        shapes = {name: (tuple(tensor.shape), tensor.dtype, tensor.layout) for name, tensor in value.items()}
        if shapes != {name: (tuple(tensor.shape), tensor.dtype, tensor.layout) for name, tensor in model.items()}:
            raise StoredError(
                f"{path}: {key!r}: its weights are not those of the model (other names, shapes or dtypes)"
            )
    for key in ("world_size", "threads"):  # recorded by the run; a resume says when its own differ
        value = state.get(key)
        if value is not None and not (_is(value, int) and 1 <= value <= MAX_COUNT):
            raise StoredError(f"{path}: {key!r} must be an integer in [1, {MAX_COUNT}], found {_short(value)}")
    recorded = state.get("device")
    if recorded is not None and not (isinstance(recorded, str) and _DEVICE.fullmatch(recorded)):
        raise StoredError(f"{path}: 'device' must name a device (cpu, cuda:1, ...), found {_short(recorded)}")
    best = _field(state, "best", dict, path, "a dict (the best epoch so far)")
    validated = best.get("epoch") is not None
    checks = {
        "epoch": not validated or (_is(best.get("epoch"), int) and 0 <= best["epoch"] <= state["epoch"]),
        # the best validation MRR: in [0, 1] once a validation ran, -inf before
        "mrr": _finite_number(best.get("mrr")) and 0 <= best["mrr"] <= 1 if validated else best.get("mrr") == -math.inf,
        "evaluations_since": _is(best.get("evaluations_since"), int) and best["evaluations_since"] >= 0,
    }
    for key, ok in checks.items():
        if not ok:
            raise StoredError(
                f"{path}: best: {key!r} is missing or of the wrong type or value: {_short(best.get(key))}"
            )
    if state.get("best_model") is not None:
        valid = state.get("best_valid")
        if not (isinstance(valid, dict) and all(_is(value, float) for value in valid.values())):
            raise StoredError(f"{path}: 'best_valid' must be a dict of numbers, found {_short(valid)}")
    seconds = _field(state, "wall_seconds", float, path, "a number")
    if not (math.isfinite(seconds) and seconds >= 0):
        raise StoredError(f"{path}: 'wall_seconds' must be finite and >= 0, found {seconds}")
    return config


def load_weights(module: torch.nn.Module, weights: Dict[str, torch.Tensor], path: PathLike) -> None:
    """``module.load_state_dict(weights)``; missing or unexpected names,
    other shapes or dtypes and weights that are NaN or infinite are one line
    naming ``path``.

    Raises:
        StoredError: when the weights do not fit ``module`` or are not finite.
    """
    own = module.state_dict()
    for name, value in weights.items():
        if isinstance(value, torch.Tensor) and name in own and value.dtype != own[name].dtype:
            raise StoredError(
                f"{path}: model: weight {_short(name)} is {str(value.dtype).removeprefix('torch.')}, the model's "
                f"{str(own[name].dtype).removeprefix('torch.')}"
            )
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(value.isfinite().all()):
            raise StoredError(f"{path}: model: weight {name!r} holds NaN or infinite values; it cannot score")
    try:
        module.load_state_dict(weights)
    except RuntimeError as error:
        # torch lists each problem on a line of its own after a heading line
        details = [line.strip() for line in str(error).splitlines()[1:] if line.strip()]
        raise StoredError(
            f"{path}: model: the weights do not fit the model of its settings ({'; '.join(details)[:300]})"
        ) from None


def _same_kind(value: Any, reference: Any) -> bool:
    # `value` of the kind of `reference`: a number for a number, a pair of numbers for a pair, ...
    if isinstance(reference, (tuple, list)):
        return isinstance(value, (tuple, list)) and len(value) == len(reference)
    if reference is None or isinstance(reference, (bool, str)):
        return type(value) is type(reference) or value is None
    if isinstance(reference, (int, float)):
        return _is(value, float)
    return isinstance(value, type(reference))


#: Settings of how an optimiser computes its step, not of the step: a loaded optimiser keeps its own,
#: so that a run saved on one device resumes on another.
IMPLEMENTATION_SETTINGS = ("foreach", "fused", "capturable")


def load_optimizer(optimizer: torch.optim.Optimizer, saved: Dict[str, Any], path: PathLike) -> None:
    """``optimizer.load_state_dict(saved)``, checked: every setting of a
    saved parameter group of the kind of the optimiser's own (a number for
    ``lr``, a pair for ``betas``, ...) and every per-parameter state tensor
    (``exp_avg``, ...) of its parameter's shape. The optimiser keeps its own
    :obj:`IMPLEMENTATION_SETTINGS` (``fused``, ...), and its step counts are
    put where those want them (on the parameter's device when fused or
    capturable, on the CPU otherwise).

    Raises:
        StoredError: naming ``path`` and what does not fit.
    """
    groups = saved.get("param_groups")
    if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
        raise StoredError(f"{path}: optimizer: expected {len(optimizer.param_groups)} parameter group(s)")
    for group, own in zip(groups, optimizer.param_groups):
        if not isinstance(group, dict):
            raise StoredError(f"{path}: optimizer: a parameter group must be a dict, found {_short(group)}")
        for key, value in own.items():
            if key != "params" and key not in IMPLEMENTATION_SETTINGS and not _same_kind(group.get(key), value):
                raise StoredError(f"{path}: optimizer: {key!r} must be like {value!r}, found {_short(group.get(key))}")
    implementation = [
        {key: group[key] for key in IMPLEMENTATION_SETTINGS if key in group} for group in optimizer.param_groups
    ]
    try:
        optimizer.load_state_dict(saved)
    except (ValueError, KeyError, TypeError, RuntimeError) as error:
        raise StoredError(f"{path}: optimizer: does not fit the model ({error})") from None
    for group, own_settings in zip(optimizer.param_groups, implementation):
        group.update(own_settings)
        on_device = bool(group.get("fused") or group.get("capturable"))
        for parameter in group["params"]:
            state = optimizer.state.get(parameter, {})
            if isinstance(state.get("step"), torch.Tensor):
                device = parameter.device if on_device else torch.device("cpu")
                state["step"] = state["step"].to(device=device, dtype=torch.float32)
            for key, value in state.items():
                if key != "step" and (not isinstance(value, torch.Tensor) or value.shape != parameter.shape):
                    raise StoredError(
                        f"{path}: optimizer: {key!r} of shape {_short(getattr(value, 'shape', value))} "
                        f"for a parameter of shape {tuple(parameter.shape)}"
                    )


def run_checkpoint(
    path: PathLike,
    config: TrainConfig,
    graph: Dict[str, int],
    train_triples: Optional[str],
    map_location: Union[str, torch.device] = "cpu",
) -> Dict[str, Any]:
    """A ``best.pt`` of the run of ``config`` on the graph of sizes
    ``graph``: read, checked (:func:`model_checkpoint`), of the same model
    settings and graph, trained on the same triples (fingerprint ``train_triples``).

    Raises:
        StoredError, CheckpointError: naming ``path`` and what does not fit.
    """
    state = load_checkpoint(path, map_location=map_location)
    model_checkpoint(state, path, map_location)
    check_compatible(state, config.to_dict(), graph, path)
    check_training_triples(state, train_triples, path, f"{config.dataset} (root {config.root})")
    return state


def resume_checkpoint(
    path: PathLike,
    config: TrainConfig,
    graph: Dict[str, int],
    vocabulary: Optional[str],
    train_triples: Optional[str],
    map_location: Union[str, torch.device] = "cpu",
) -> Dict[str, Any]:
    """The ``last.pt`` a run of ``config`` resumes from: read, checked
    (:func:`training_checkpoint`), of the same model settings and graph,
    with no setting changed but :data:`~torch_wge.training.checkpoint.RESUMABLE_CHANGES`,
    and of the same vocabulary and training triples.

    Raises:
        StoredError, CheckpointError: naming ``path`` and what does not fit.
    """
    state = load_checkpoint(path, map_location=map_location)
    if "optimizer" not in state:
        raise CheckpointError(f"{path} holds no training state (only a model); it cannot be resumed")
    training_checkpoint(state, path, map_location)
    check_compatible(state, config.to_dict(), graph, path)
    check_resumable(state, config.to_dict(), path)
    where = f"{config.dataset} (root {config.root})"
    check_vocabulary(state, vocabulary, path, where)
    check_training_triples(state, train_triples, path, where)
    return state


def optimizer_step_kind(optimizer_state: Mapping) -> Optional[str]:
    """Which implementation an optimiser's state dict steps with: ``"fused"``,
    ``"foreach"`` or ``"default"`` (torch's choice for the device), from its
    first parameter group; :obj:`None` without one."""
    groups = optimizer_state.get("param_groups") or [None]
    if not isinstance(groups[0], Mapping):
        return None
    return "fused" if groups[0].get("fused") else "foreach" if groups[0].get("foreach") else "default"


def warn_rounding_changes(state: Mapping, path: PathLike, now: Dict[str, Any]) -> None:
    """Warns when a resumed run computes on another ``device``, ``precision``,
    ``threads`` count or optimiser step (``optimizer``, see
    :func:`optimizer_step_kind`) than its checkpoint ``state`` records
    (``now``): allowed, but the later epochs are then rounded otherwise than
    in an uninterrupted run."""
    recorded = {
        "device": state.get("device"),
        "precision": state.get("precision", state["config"]["precision"]),  # as resolved on its device
        "threads": state.get("threads"),
        "optimizer": optimizer_step_kind(state.get("optimizer") or {}),
    }
    changes = [
        f"{'the optimiser step' if key == 'optimizer' else '--' + key} {value} -> {now[key]}"
        for key, value in recorded.items()
        if value is not None and value != now[key]
    ]
    if changes:
        warnings.warn(
            f"resuming {path} with {', '.join(changes)}: the later epochs are rounded otherwise, "
            f"so the run is not bit for bit an uninterrupted one",
            stacklevel=3,
        )
