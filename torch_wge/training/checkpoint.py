import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Union

import torch

from torch_wge.training.config import TrainConfig

FORMAT = "torch_wge-checkpoint-v1"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit the run it is loaded into."""


def save_checkpoint(state: Dict[str, Any], path: Union[str, Path]) -> None:
    """Writes ``state`` atomically: to a temporary file in the same folder,
    flushed to disk, then renamed over ``path``. A kill at any moment leaves
    either the previous checkpoint or the new one, never a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save({"format": FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Union[str, Path], map_location: Union[str, torch.device] = "cpu") -> Dict[str, Any]:
    """Reads a checkpoint written by :func:`save_checkpoint`.

    Raises:
        CheckpointError: if the file is missing, unreadable or not a torch_wge checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as error:  # torch raises many kinds on a damaged file
        raise CheckpointError(f"checkpoint {path} is corrupt or unreadable: {error}") from error
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a torch_wge checkpoint (expected format {FORMAT})")
    return state


def check_compatible(state: Dict[str, Any], config: Dict[str, Any], graph: Dict[str, int], path) -> None:
    """Raises :class:`CheckpointError` naming every setting or graph size in
    which the checkpoint differs from the current run."""
    differences = [
        f"{key}: checkpoint {state['config'].get(key)!r}, here {config.get(key)!r}"
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
