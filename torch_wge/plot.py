"""Figures of training runs: loss and validation MRR against epochs and minutes,
and per-relation MRR (``torch-wge plot``; needs matplotlib, ``pip install "torch_wge[plot]"``).

Figures are :class:`matplotlib.figure.Figure` objects made without pyplot, so
importing this module changes no matplotlib backend; :func:`save_figure` writes
one atomically.

Example:
    >>> from torch_wge.plot import curves_figure, read_run, save_figure
    >>> run = read_run('runs/codex-s')  # doctest: +SKIP
    >>> save_figure(curves_figure([run]), 'codex-s.png')  # doctest: +SKIP
"""

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from torch_wge import io
from torch_wge.training.run_folder import read_log

PathLike = Union[str, Path]

#: The curves :func:`curves_figure` can draw: name -> (log record event, field, axis label).
CURVES = {
    "loss": ("epoch", "loss", "training loss"),
    "mrr": ("eval", "both.mrr", "validation MRR (filtered)"),
}
#: The x axes of :func:`curves_figure`: name -> (log record field, its unit in the field's, axis label).
X_AXES = {
    "epoch": ("epoch", 1, "epoch"),
    "minutes": ("wall_seconds", 60, "training and validation time (min)"),
}


@dataclass
class Run:
    """What :func:`read_run` reads from a run folder: its log's records (every record a curve
    reads holds numbers in the fields it reads), its name for a legend (:obj:`None`: the folder
    and its settings, see :func:`legend_labels`), the folder and its settings (``config.json``)."""

    label: Optional[str]
    records: List[Dict[str, Any]]
    folder: Optional[Path] = None
    config: Optional[Dict[str, Any]] = None

    def points(self, curve: str, x_axis: str):
        """The ``(x, y)`` values of ``curve`` (:data:`CURVES`) against ``x_axis`` (:data:`X_AXES`),
        one per log record of the curve's event, in log order."""
        event, field, _ = CURVES[curve]
        x_field, unit, _ = X_AXES[x_axis]
        rows = [r for r in self.records if r.get("event") == event]
        return [r[x_field] / unit for r in rows], [r[field] for r in rows]


@dataclass
class RelationTable:
    """Per-relation metrics of one evaluation: a legend ``label``, ``relation_names[r]`` and
    the rows of :meth:`~torch_wge.evaluation.LinkPredictionResults.per_relation`."""

    label: str
    relation_names: List[str]
    rows: List[Dict[str, Any]]


def _short(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


#: Settings a run's description never lists: where it reads and computes, and those its head names.
NOT_DESCRIBED = ("dataset", "recipe", "root", "device", "views", "conv")


def describe_run(config: Dict[str, Any], others: Sequence[Dict[str, Any]] = ()) -> str:
    """A short description of a run's settings, e.g. ``"codex-s, WGE, paper recipe"``,
    followed by the settings the run changed from its recipe and the defaults (``"fast recipe,
    epochs 30, batch size 4096, hidden channels 8, alpha0 0.3"``: the recipe's settings first, then
    the model's and the others), and those in which it differs from any of ``others`` (the
    settings of the runs it is drawn with)."""
    from torch_wge.training.config import RECIPES, TrainConfig

    model = "QuatE" if config.get("num_layers") == 0 else "WGE"
    views = config.get("views", "two-view")
    if model == "WGE" and (views != "two-view" or config.get("conv", "quaternion") != "quaternion"):
        model = f"WGE ({views}, {config.get('conv', 'quaternion')})"
    recipe = config.get("recipe", "paper")
    try:  # the settings of a run that changed nothing
        reference = TrainConfig.from_dict({"dataset": config.get("dataset", "?"), "recipe": recipe}).to_dict()
    except (TypeError, ValueError):  # an unknown recipe or setting: only the differences are listed
        reference = {}
    names = [*RECIPES.get(recipe, {}), *(name for name in reference if name not in RECIPES.get(recipe, {}))]
    names += [name for other in others for name in other if name not in names]
    changed = [
        f"{name.replace('_', ' ')} {_short(config.get(name))}"
        for name in dict.fromkeys(names)
        if name not in NOT_DESCRIBED
        and not (name == "num_layers" and model == "QuatE")
        and (
            (name in reference and config.get(name) != reference[name])
            or any(other.get(name) != config.get(name) for other in others)
        )
    ]
    return ", ".join([str(config.get("dataset", "?")), model, f"{recipe} recipe", *changed])


def legend_labels(runs: Sequence[Run]) -> List[str]:
    """The legend's label of each run: its own :attr:`Run.label`, or else its folder and
    :func:`describe_run` of its settings, naming too the settings in which it differs from the
    other runs (or the folder alone, without settings)."""
    configs = [run.config for run in runs if run.config is not None]
    labels = []
    for run in runs:
        if run.label is not None:
            labels.append(run.label)
        elif run.config is not None:
            others = [config for config in configs if config is not run.config]
            labels.append(f"{run.folder}: {describe_run(run.config, others)}")
        else:
            labels.append(str(run.folder))
    return labels


def read_run(folder: PathLike, label: Optional[str] = None) -> Run:
    """The log of the run folder ``folder`` (its ``log.jsonl``) and its settings (its
    ``config.json``, when there), which describe it in the default label
    ``"<folder>: <dataset>, <model>, <recipe> recipe, <settings changed>"`` (see :func:`legend_labels`).

    Raises:
        ValueError: naming the folder or file when it is no run folder, or the file and line of
            a record that lacks a value a curve needs, or when its log holds no epoch.
    """
    folder = Path(folder)
    log = folder / "log.jsonl"
    if not folder.is_dir() or not log.exists():
        raise ValueError(f"{folder}: not a run folder (no {log.name}: give the --out folder of a training run)")
    records = read_log(log)
    for number, record in enumerate(records, 1):
        missing = _missing_number(record)
        if missing is not None:
            raise ValueError(f"{log}, line {number}: an {record['event']} record without a number in {missing!r}")
    if not any(r.get("event") == "epoch" for r in records):
        raise ValueError(f"{log}: no epoch recorded yet")
    config_path = folder / "config.json"
    config = _read_json(config_path) if config_path.exists() else None
    return Run(label, records, folder, config if isinstance(config, dict) else None)


def read_relation_table(path: PathLike, label: Optional[str] = None) -> RelationTable:
    """The per-relation rows of a file written by ``torch-wge evaluate --json`` (with the
    relation names it holds; relation ids where it holds none).

    Raises:
        ValueError: naming the file when it holds no per-relation metrics.
    """
    content = _read_json(Path(path))
    rows = content.get("per_relation") if isinstance(content, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path}: no per-relation metrics (expected a file of 'torch-wge evaluate --json')")
    names = content.get("relation_names")
    if names is None:  # a file of an earlier version: relation ids
        ids = [row.get("relation") for row in rows if isinstance(row, dict)]
        names = [f"relation {r}" for r in range(1 + max((r for r in ids if isinstance(r, int)), default=-1))]
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ValueError(f"{path}: 'relation_names' is not a list of names")
    for number, row in enumerate(rows, 1):
        if not _is_relation_row(row, len(names)):
            raise ValueError(f"{path}: per-relation row {number} is no relation's metrics: {io.short_repr(row, 100)}")
    if label is None:
        label = f"{content['checkpoint']} ({content['split']})" if "checkpoint" in content else str(path)
    return RelationTable(label, list(names), rows)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _missing_number(record: Dict[str, Any]) -> Optional[str]:
    """The first field that a curve drawn from ``record`` needs and that is no number in it
    (:obj:`None` when it has them all, or when no curve reads it)."""
    for event, field, _ in CURVES.values():
        if record.get("event") == event:
            for name in (field, *(x_field for x_field, _, _ in X_AXES.values())):
                if not _is_number(record.get(name)):
                    return name
    return None


def _is_relation_row(row: Any, num_relations: int) -> bool:
    """Whether ``row`` is a row of :meth:`~torch_wge.evaluation.LinkPredictionResults.per_relation`."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("relation"), int)
        and 0 <= row["relation"] < num_relations
        and row.get("side") in ("both", "head", "tail")
        and _is_number(row.get("count"))
        and _is_number(row.get("mrr"))
    )


def _read_json(path: Path) -> Any:
    """The content of a JSON file (:func:`torch_wge.io.read_document`)."""
    try:
        return io.read_document(path, "json")
    except io.UnreadableFileError as error:
        raise ValueError(str(error)) from None


def curves_figure(runs: Sequence[Run], curves: Sequence[str] = ("loss", "mrr"), log_x: bool = False):
    """One row of panels per curve of :data:`CURVES` (default: training loss, validation
    MRR), against epochs (left) and against training and validation minutes (right); one
    colour per run, the same in every panel. A curve of one point is drawn as a marker.
    The legend lies below the panels, clear of their axis labels."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.2 * len(curves) + 0.35 * len(runs) + 0.4), layout="constrained")
    axes = fig.subplots(len(curves), len(X_AXES), squeeze=False)
    labels = legend_labels(runs)
    for row, curve in zip(axes, curves):
        for ax, x_axis in zip(row, X_AXES):
            for index, run in enumerate(runs):
                x, y = run.points(curve, x_axis)
                marker = "o" if len(x) == 1 else None
                ax.plot(x, y, color=f"C{index % 10}", marker=marker, label=labels[index])
            ax.set_xlabel(X_AXES[x_axis][2])
            ax.set_ylabel(CURVES[curve][2])
            ax.grid(alpha=0.3)
            if log_x:
                ax.set_xscale("log")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncols=1, fontsize=8)
    return fig


def relations_figure(tables: Sequence[RelationTable], top: int = 10, relations: Optional[Sequence[int]] = None):
    """The MRR of head and of tail prediction (two panels) of ``relations`` (ids; by default
    the ``top`` relations with the most queries in the first table), one bar per table
    (horizontal bars, relation names on the left); the legend lies below the panels."""
    from matplotlib.figure import Figure

    if relations is None:
        counts = Counter({row["relation"]: row["count"] for row in tables[0].rows if row["side"] == "both"})
        relations = [r for r, _ in counts.most_common(top)]
    names = [tables[0].relation_names[r][:40] for r in relations]
    height = 0.3 * len(relations) * max(len(tables), 2) + 0.35 * len(tables) + 1.2
    fig = Figure(figsize=(12, height), layout="constrained")
    axes = fig.subplots(1, 2, sharex=True, sharey=True)
    bar = 0.8 / len(tables)
    for ax, side in zip(axes, ("head", "tail")):
        for index, table in enumerate(tables):
            mrr = {row["relation"]: row["mrr"] for row in table.rows if row["side"] == side}
            positions = [i + (index - (len(tables) - 1) / 2) * bar for i in range(len(relations))]
            values = [mrr.get(r, math.nan) for r in relations]  # no bar where a table has no such query
            ax.barh(positions, values, bar, color=f"C{index % 10}", label=table.label)
        ax.set_title(f"{side} prediction")
        ax.set_xlabel("MRR (filtered)")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(relations)), names, fontsize=8)
    axes[0].invert_yaxis()  # the first relation on top
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=1, fontsize=8)
    return fig


def save_figure(fig, path: PathLike, dpi: int = 120) -> None:
    """Writes ``fig`` to ``path`` atomically, in the format its extension names (png, pdf, svg, ...).

    Raises:
        ValueError: naming ``path`` when matplotlib writes no such format.
    """
    path = Path(path)
    formats = fig.canvas.get_supported_filetypes()
    kind = path.suffix.lower().lstrip(".")
    if kind not in formats:
        raise ValueError(f"{path}: unknown figure format {path.suffix!r} (one of .{', .'.join(sorted(formats))})")
    with io.atomic_open(path) as f:
        fig.savefig(f, format=kind, dpi=dpi)


def study_figures(study) -> Dict[str, Any]:
    """The figures of a study of ``torch-wge tune`` (an :class:`optuna.Study`),
    drawn by Optuna's matplotlib plots: ``"history"``, the validation MRR of each
    trial and the best so far against the trial number, and, once two trials are
    complete, ``"importances"``, each searched setting's share of the variance of
    the validation MRR (fANOVA).

    Raises:
        ValueError: when the study holds no complete trial.
    """
    import warnings

    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as optuna_plots

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        raise ValueError(f"study {study.study_name!r} holds no complete trial to plot")
    kinds: Dict[str, Callable[..., Any]] = {"history": optuna_plots.plot_optimization_history}
    if len(complete) >= 2:
        kinds["importances"] = optuna_plots.plot_param_importances
    figures = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        for name, draw in kinds.items():
            figure: Any = draw(study, target_name="validation MRR").figure
            figure.tight_layout()  # room for the settings' names
            figures[name] = figure
            plt.close(figure)  # kept by the caller, not by pyplot
    return figures
