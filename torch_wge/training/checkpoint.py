"""Checkpoint files: atomic writes, safe loading with a checksum, and the
checks that a checkpoint fits the run or the data it is used with."""

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

import torch
from torch import Tensor

from torch_wge import io
from torch_wge.training.config import TrainConfig

FORMAT = "torch_wge-checkpoint-v1"

#: Settings a resumed run may change: they do not alter the training
#: trajectory of the epochs already run (``epochs``, ``patience`` and
#: ``time_limit`` only move the end) or only say where data and computation
#: live and how it is rounded (``root``, ``device``, ``eval_batch_size``,
#: ``precision``). A changed ``device`` or ``precision`` (or thread count)
#: rounds the later epochs otherwise: the resumed run is then not bit for
#: bit an uninterrupted one, and the trainer says so.
RESUMABLE_CHANGES = ("epochs", "patience", "time_limit", "root", "device", "eval_batch_size", "precision", "encoder")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit the run it is loaded into."""


def content_digest(value: Any) -> str:
    """The sha256 of ``value``: tensors (dtype, shape and bytes), numbers,
    strings, :obj:`None` and lists, tuples and dicts of them, in order.

    Raises:
        ValueError: for a tensor that is not dense (sparse, ...)."""
    digest = hashlib.sha256()

    def feed(item: Any) -> None:
        if isinstance(item, Tensor):
            if item.layout != torch.strided:  # a sparse tensor of a forged file: no checkpoint holds one
                raise ValueError(f"holds a {item.layout} tensor; checkpoints hold dense tensors only")
            flat = item.detach().cpu().contiguous().reshape(-1)
            digest.update(f"tensor {flat.dtype} {tuple(item.shape)}\n".encode())
            digest.update(flat.view(torch.uint8).numpy())  # type: ignore[arg-type]  # numpy stubs: ndarray is a Buffer only from Python 3.12
        elif isinstance(item, dict):
            digest.update(f"dict {len(item)}\n".encode())
            for key, entry in item.items():
                feed(key)
                feed(entry)
        elif isinstance(item, (list, tuple)):
            digest.update(f"{type(item).__name__} {len(item)}\n".encode())
            for entry in item:
                feed(entry)
        else:
            digest.update(f"{type(item).__name__} {item!r}\n".encode())

    feed(value)
    return digest.hexdigest()


def save_checkpoint(state: Dict[str, Any], path: Union[str, Path]) -> None:
    """Writes ``state`` atomically (see :mod:`torch_wge.io`) with its
    :func:`content_digest` as ``checksum``: a kill at any moment leaves
    either the previous checkpoint or the new one, and :func:`load_checkpoint`
    refuses a file changed since. ``state`` must hold only tensors, numbers,
    strings, lists and dicts, so that it can be read without running
    pickled code."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {"format": FORMAT, **{key: value for key, value in state.items() if key != "checksum"}}
    io.torch_save({**content, "checksum": content_digest(content)}, path)


def load_checkpoint(path: Union[str, Path], map_location: Union[str, torch.device] = "cpu") -> Dict[str, Any]:
    """Reads a checkpoint written by :func:`save_checkpoint` with
    ``weights_only=True`` (see :func:`torch_wge.io.torch_load`): a file that
    holds anything but tensors, numbers, strings and containers of them is
    refused before any of its code runs. Its ``checksum`` must match its
    contents (checkpoints written before checksums were stored have none).

    Raises:
        CheckpointError: if the file is missing, unreadable, damaged, holds
            other objects or is not a torch_wge checkpoint.
        OSError: naming a path that is no regular file (a FIFO, device or folder), a symbolic
            link loop or a link to a missing file.
    """
    path = Path(path)
    if not path.exists():
        if path.is_symlink():  # a loop, or a link to a missing file: said so
            raise io.missing(path)
        raise CheckpointError(f"checkpoint {path} does not exist")
    io.readable_file(path)  # a FIFO or device is refused, never read
    try:
        state = io.torch_load(path, map_location=map_location)
    except io.UnreadableFileError as error:
        raise CheckpointError(f"checkpoint {error}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a torch_wge checkpoint (expected format {FORMAT})")
    try:
        digest = content_digest({key: value for key, value in state.items() if key != "checksum"})
    except ValueError as error:
        raise CheckpointError(f"checkpoint {path} {error}; refused") from None
    if "checksum" in state:
        stored = state.pop("checksum")
        if stored != digest:
            raise CheckpointError(f"checkpoint {path} is damaged: its contents no longer match its checksum")
    return state


def triples_fingerprint(triples: Tensor) -> str:
    """A digest of a set of id triples ``[T, 3]`` (in any order): equal
    fingerprints mean the same (head, relation, tail) id triples."""
    rows = torch.unique(triples.long().cpu(), dim=0) if triples.numel() else triples.long().cpu().view(-1, 3)
    return content_digest(rows)


def check_training_triples(state: Dict[str, Any], fingerprint: Optional[str], path, dataset: str) -> None:
    """Raises :class:`CheckpointError` when the checkpoint was trained on
    other training triples than the data's (checkpoints written without a
    fingerprint are not checked)."""
    stored = state.get("train_triples")
    if stored is not None and fingerprint is not None and stored != fingerprint:
        raise CheckpointError(
            f"the training triples of {dataset} differ from those {path} was trained on "
            f"(same vocabulary and sizes, other triples); it belongs to other data"
        )


def vocabulary_digest(entity_names: Sequence[str], relation_names: Sequence[str]) -> str:
    """A digest of the id -> identifier maps of a dataset: equal digests mean
    that every entity and relation id names the same thing."""
    text = json.dumps([list(entity_names), list(relation_names)], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_vocabulary(state: Dict[str, Any], digest: Optional[str], path, dataset: str) -> None:
    """Raises :class:`CheckpointError` when the checkpoint was trained on a
    vocabulary (entity and relation ids) other than the data's. Checkpoints
    written without a vocabulary digest are only checked by size."""
    stored = state.get("vocabulary")
    if stored is not None and digest is not None and stored != digest:
        raise CheckpointError(
            f"the dataset {dataset} numbers its entities or relations differently from the data "
            f"{path} was trained on (same sizes, other names or order); ranking it would be wrong"
        )


def check_compatible(state: Dict[str, Any], config: Dict[str, Any], graph: Dict[str, int], path) -> None:
    """Raises :class:`CheckpointError` naming every setting or graph size in
    which the checkpoint differs from the current run."""
    differences = [
        f"{key}: checkpoint {io.short_repr(state['config'].get(key))}, here {io.short_repr(config.get(key))}"
        for key in TrainConfig.MODEL_KEYS
        if state["config"].get(key) != config.get(key)
    ]
    differences += [
        f"{key}: checkpoint {state['graph'].get(key)}, here {value}"
        for key, value in graph.items()
        if state["graph"].get(key) != value
    ]
    if differences:
        raise CheckpointError(f"checkpoint {path} does not match this run ({'; '.join(differences)})")


def check_resumable(state: Dict[str, Any], config: Dict[str, Any], path) -> None:
    """Raises :class:`CheckpointError` listing every setting that a resume
    would change, other than :data:`RESUMABLE_CHANGES`: the run would
    otherwise record values its earlier epochs did not use."""
    before = TrainConfig.from_dict(state["config"]).to_dict()
    differences = [
        f"--{key.replace('_', '-')} {io.short_repr(before.get(key))} -> {io.short_repr(config.get(key))}"
        for key in config
        if key not in RESUMABLE_CHANGES and before.get(key) != config.get(key)
    ]
    if differences:
        raise CheckpointError(
            f"cannot resume {path} with changed settings ({'; '.join(differences)}); "
            f"only {', '.join(RESUMABLE_CHANGES)} may change: start a new run in another --out"
        )
