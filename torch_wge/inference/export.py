r"""The entity and relation representations of a trained run, in memory or as
files: NumPy ``.npy`` or PyTorch ``.pt`` arrays, and TSV files in the format of
TensorBoard's embedding projector (https://projector.tensorflow.org: a
vectors file and a metadata file of the same rows).

A model with :math:`K` encoder layers has :math:`K + 1` representations of
each entity and relation: layer 0 is the input embedding table, layer
:math:`k` the output of encoder layer :math:`k`; the decoders score with all
of them. Relation tables have :math:`2R` rows, relation :math:`r` at row
:math:`r` and its inverse at row :math:`R + r`.
"""

import io as bytes_io
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import torch

from torch_wge import io
from torch_wge.inference.trained import graph_inputs_on, load_trained
from torch_wge.training.run_folder import checkpoint_file

FORMATS = ("npy", "pt")


@torch.no_grad()
def load_embeddings(
    run: Union[str, Path],
    all_layers: bool = False,
    root: Optional[str] = None,
    device: Optional[str] = None,
    force_reload: bool = False,
) -> Dict[str, Any]:
    r"""The representations of a run's best checkpoint, with the names of their rows.

    Args:
        run (str or Path): A run folder (its ``best.pt``) or a checkpoint file.
        all_layers (bool, optional): Every layer :math:`0, \dots, K`, not only the
            input embeddings (layer 0) and the encoder's output (layer :math:`K`).
            (default: :obj:`False`)
        root (str, optional): Dataset cache folder. (default: the run's own)
        device (str, optional): Where the encoder runs. (default: CUDA when available)
        force_reload (bool, optional): Process the dataset's raw files anew. (default: :obj:`False`)

    Returns:
        ``entities_layer{k}`` (``[N, C]`` float tensors on the CPU) and
        ``relations_layer{k}`` (``[2R, C]``) for each layer ``k`` exported;
        ``entity_names`` (``N`` identifiers as in the dataset's files),
        ``entity_labels`` (``N`` human labels, or :obj:`None` for a dataset without them),
        ``relation_names`` and ``relation_labels`` (``2R``, the inverse
        relation's name being its relation's with ``" (inverse)"``).
    """
    model, _, dataset, data = load_trained(checkpoint_file(run), root, device, force_reload=force_reload)
    assert dataset is not None  # the run's own dataset, read from the checkpoint's settings
    encoded = model.encode(**graph_inputs_on(model, data))
    last = len(encoded.entities) - 1
    layers = range(last + 1) if all_layers else sorted({0, last})
    arrays: Dict[str, Any] = {}
    for k in layers:
        arrays[f"entities_layer{k}"] = encoded.entities[k].detach().float().cpu()
        arrays[f"relations_layer{k}"] = encoded.relations[k].detach().float().cpu()
    names = list(dataset.relation_names)
    labels = dataset.relation_labels
    arrays.update(
        entity_names=list(dataset.entity_names),
        entity_labels=None if dataset.entity_labels is None else list(dataset.entity_labels),
        relation_names=names + [f"{name} (inverse)" for name in names],
        relation_labels=None if labels is None else list(labels) + [label and f"{label} (inverse)" for label in labels],
    )
    return arrays


def export_embeddings(
    run: Union[str, Path],
    out_dir: Optional[Union[str, Path]] = None,
    all_layers: bool = False,
    format: str = "npy",
    root: Optional[str] = None,
    device: Optional[str] = None,
    force_reload: bool = False,
) -> Dict[str, Path]:
    r"""Writes :func:`load_embeddings` of ``run`` to ``out_dir``, each file atomically:

    - ``entities_layer{k}.npy`` / ``relations_layer{k}.npy`` (or ``.pt`` with
      ``format="pt"``), one ``[rows, C]`` float32 array each;
    - ``entities_layer{k}.tsv`` / ``relations_layer{k}.tsv``: the same, one
      row per line, values separated by tabs (the projector's vectors file);
    - ``entities_metadata.tsv`` / ``relations_metadata.tsv``: the rows' names
      in the same order (the projector's metadata file): one name per line,
      or with a header ``name\tlabel`` (entities with labels) or
      ``name\tlabel\tdirection`` (relations: ``forward`` or ``inverse``).

    Args:
        run (str or Path): A run folder (its ``best.pt``) or a checkpoint file.
        out_dir (str or Path, optional): The folder to write, made if missing.
            (default: ``<run>/embeddings``, or beside the checkpoint file)
        all_layers (bool, optional): Every encoder layer (see :func:`load_embeddings`).
            (default: :obj:`False`)
        format (str, optional): ``"npy"`` or ``"pt"``. (default: ``"npy"``)
        root, device, force_reload: As for :func:`load_embeddings`.

    Returns:
        The files written, by name (``"entities_layer2"``, ``"entities_metadata"``, ...).
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    checkpoint = checkpoint_file(run)
    out = Path(out_dir) if out_dir is not None else checkpoint.parent / "embeddings"
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out}: is a file, not a folder to export into")
    arrays = load_embeddings(checkpoint, all_layers, root, device, force_reload)
    out.mkdir(parents=True, exist_ok=True)
    written: Dict[str, Path] = {}
    for name, table in arrays.items():
        if isinstance(table, torch.Tensor):
            written[name] = out / f"{name}.{format}"
            write_array(table, written[name])
            written[f"{name}_tsv"] = out / f"{name}.tsv"
            io.write_text(written[f"{name}_tsv"], vectors_tsv(table))
    written["entities_metadata"] = out / "entities_metadata.tsv"
    io.write_text(written["entities_metadata"], metadata_tsv(entity_columns(arrays)))
    written["relations_metadata"] = out / "relations_metadata.tsv"
    io.write_text(written["relations_metadata"], metadata_tsv(relation_columns(arrays)))
    return written


def write_array(table: torch.Tensor, path: Path) -> None:
    """``table`` as ``.npy`` or ``.pt`` (by ``path``'s suffix), atomically."""
    if path.suffix == ".pt":
        io.torch_save(table.contiguous(), path)
        return
    buffer = bytes_io.BytesIO()
    np.save(buffer, table.numpy())
    io.write_bytes(path, buffer.getvalue())


def vectors_tsv(table: torch.Tensor) -> str:
    """The projector's vectors file: one row of ``table`` per line, tab-separated,
    each float32 value written so that it reads back exactly."""
    return "".join("\t".join(f"{value:.9g}" for value in row) + "\n" for row in table.tolist())


def entity_columns(arrays: Dict[str, Any]) -> Dict[str, Sequence[Optional[str]]]:
    columns: Dict[str, Sequence[Optional[str]]] = {"name": arrays["entity_names"]}
    if arrays["entity_labels"] is not None:
        columns["label"] = arrays["entity_labels"]
    return columns


def relation_columns(arrays: Dict[str, Any]) -> Dict[str, Sequence[Optional[str]]]:
    count = len(arrays["relation_names"]) // 2
    names = arrays["relation_names"][:count]
    labels = arrays["relation_labels"][:count] if arrays["relation_labels"] is not None else [None] * count
    return {"name": names * 2, "label": labels * 2, "direction": ["forward"] * count + ["inverse"] * count}


def metadata_tsv(columns: Dict[str, Sequence[Optional[str]]]) -> str:
    """The projector's metadata file: one row per line, a header naming the
    columns when there is more than one (the projector's rule); a missing
    label is empty; tabs, line breaks, every other control character and the
    line and paragraph separators inside a value (U+2028, U+0085, ``\x1e``,
    ... at which ``str.splitlines`` and other readers break lines) become
    spaces, so that the file's rows are the vectors' rows."""
    rows: List[Sequence[Optional[str]]] = list(zip(*columns.values()))
    lines = ["\t".join(columns)] if len(columns) > 1 else []
    lines += ["\t".join(_cell(value) for value in row) for row in rows]
    return "".join(line + "\n" for line in lines)


#: What a metadata cell may not hold: C0 controls (tab and line breaks among them), DEL, C1 controls
#: (U+0085 among them) and the line and paragraph separators.
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _cell(value: Optional[str]) -> str:
    return "" if value is None else _BREAKS.sub(" ", str(value))
