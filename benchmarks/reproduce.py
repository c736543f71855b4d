"""Run one row of the paper's tables (or a sensitivity point) and keep its JSON record.

Every row is a :class:`torch_wge.training.TrainConfig` on top of the paper's CoDEx-S
setting; the run folder ``<out>/<row>`` holds ``log.jsonl`` (validation MRR every
``eval_every`` epochs, with wall time), ``results.json`` (best validation and test
metrics, per side and per relation) and checkpoints, and a killed run continues
with ``--resume`` (``--time-limit`` counts the run's minutes over all its sessions, so a
resumed run needs a larger one). A run stopped before its planned epochs is closed with ``--finish``
(its best checkpoint is evaluated on valid and test; nothing is trained). Every finished
run's ``config.json``, ``log.jsonl`` and ``results.json`` are copied, with the command,
commit and machine, to ``<records>/<dataset>/<model>/<recipe>-<epochs>ep[-<variant>][-<row setting>]``
(``benchmarks/records`` by default; see :func:`record_folder`), which is what
``benchmarks/RESULTS.md``, ``benchmarks/make_figures.py`` and ``benchmarks/records_index.py`` read.

    python benchmarks/reproduce.py --list
    python benchmarks/reproduce.py codex-s/wge --epochs 3000
    python benchmarks/reproduce.py codex-s/ablation/gcn --epochs 200 --lr 2e-3
    python benchmarks/reproduce.py codex-s/beta/0.5 --epochs 200 --resume
    python benchmarks/reproduce.py codex-m/wge --finish   # close a run stopped early
    python benchmarks/reproduce.py codex-s/wge --recipe fast --seed 1 --variant seed1
    python benchmarks/reproduce.py --table benchmarks/records/codex-s/wge/paper-60ep-lr2e-3-beta*   # markdown rows
    python benchmarks/reproduce.py --summary study.json RECORD...   # a study's records as one JSON record

A study of several runs (the ablations, a sensitivity sweep, what was tried) is kept as one
``--summary`` record: per run its name, settings, commands, machine, best epoch, validation and test
metrics (both directions, head and tail), minutes and validations (epoch, minutes, MRR); a run stopped by hand
(no ``results.json``) with what its log holds.

Datasets are read from ``--root`` (``<root>/<dataset>/raw``) or downloaded there.
"""

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from torch_wge.cli import add_config_arguments
from torch_wge.training import TrainConfig, Trainer, load_data
from torch_wge.training.checkpoint import load_checkpoint

ROWS = {
    # Table 2: WGE and its strongest baseline, QuatE (K = 0)
    **{
        f"{d}/wge": dict(dataset=d)
        for d in ("codex-s", "codex-m", "codex-l", "litwd1k", "litwd19k", "litwd48k", "fb15k-237")
    },
    **{f"{d}/quate": dict(dataset=d, num_layers=0) for d in ("codex-s", "codex-m", "litwd1k", "fb15k-237")},
    # Table 3 ablations (CoDEx-S validation)
    "codex-s/ablation/no-predicate-entities": dict(
        predicate_entities=False, relation_edges=True
    ),  # only r_s - r_o edges
    "codex-s/ablation/gcn": dict(conv="gcn"),
    "codex-s/ablation/entity-view-only": dict(views="entity"),
    "codex-s/ablation/relation-view-only": dict(views="relation"),
    "codex-s/ablation/levi-graph": dict(views="levi"),
    "codex-s/ablation/with-relation-edges": dict(relation_edges=True),
    # Figure 2: sensitivity to beta and to the embedding size (CoDEx-S validation)
    **{f"codex-s/beta/{b / 10:.1f}": dict(beta=b / 10) for b in range(1, 10)},
    **{f"codex-s/hidden-channels/{h}": dict(hidden_channels=h) for h in (8, 16, 32, 64, 128, 256)},
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("row", nargs="?", help="row name (see --list)")
    parser.add_argument("--list", action="store_true", help="list the rows and their settings")
    parser.add_argument(
        "--summary",
        nargs="+",
        type=Path,
        metavar=("OUT", "RECORD"),
        help="write one JSON record summarising these records (or run folders) to OUT and exit",
    )
    parser.add_argument(
        "--table",
        nargs="+",
        type=Path,
        metavar="RECORD",
        help="print a markdown table of these records (or run folders) and exit",
    )
    # every TrainConfig setting, as `torch-wge train` takes it (given ones override the row's)
    add_config_arguments(parser)
    parser.add_argument("--out", default="runs/reproduce")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--finish",
        action="store_true",
        help="evaluate the best checkpoint of a run stopped early and write its results",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (validation lines are still printed)"
    )
    parser.add_argument("--records", default="benchmarks/records", help="where finished runs' JSON records are kept")
    parser.add_argument(
        "--variant",
        default="",
        help="how the run differs from its recipe beyond the row, in its record's folder name "
        "(e.g. lr2e-3-seed1; the settings themselves are in the record's config.json)",
    )
    args = parser.parse_args()

    if args.table:
        print(markdown_table(args.table))
        return
    if args.summary:
        if len(args.summary) < 2:
            parser.error("--summary OUT RECORD...: name the record to write and the records it summarises")
        out, *records = args.summary
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(summary(records, " ".join(["python", *sys.argv])), indent=1) + "\n")
        print(f"{len(records)} runs summarised in {out}")
        return
    if args.list or not args.row:
        for name, settings in ROWS.items():
            print(f"{name:45s} {settings}")
        return
    if args.row not in ROWS:
        parser.error(f"unknown row {args.row!r}; see --list")
    if "/" in args.variant:
        parser.error(f"--variant {args.variant!r}: one folder name, without '/'")
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out) / args.row
    # a run continued or closed keeps its own settings, as with `torch-wge train --resume`
    saved = saved_settings(out / "config.json") if args.resume or args.finish else {}
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if f.name in args}
    try:
        config = row_config(args.row, given, saved)
    except ValueError as error:
        parser.error(str(error))
    if args.finish:  # train no further: the run ends at the epoch of its last checkpoint
        config = dataclasses.replace(config, epochs=load_checkpoint(out / "last.pt", map_location="cpu")["epoch"])
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "commands.txt", "a") as f:  # every command that trained, resumed or closed this run
        f.write(f"{' '.join(['python', *sys.argv])}  # commit {git_commit()}, {datetime.date.today()}\n")
    _, data = load_data(config)
    result = Trainer(config, data, out, progress=not args.no_progress).fit(resume=args.resume or args.finish)
    stopped_by_time = (
        result["epochs_trained"] < config.epochs
        and config.time_limit is not None
        and result["wall_seconds"] >= 60 * config.time_limit
    )
    if stopped_by_time:  # an unfinished run is not a result: no record
        print(
            f"stopped by --time-limit {config.time_limit:g} at epoch {result['epochs_trained']} of {config.epochs}: "
            f"no record kept; continue with --resume and a larger (total) --time-limit, or close with --finish",
            file=sys.stderr,
        )
    else:
        keep_record(out, Path(args.records) / record_folder(args.row, config, args.variant))
    valid, test = result["valid"]["metrics"]["both"], result["test"]["metrics"]["both"]
    print(
        json.dumps(
            {
                "row": args.row,
                "epochs": result["epochs_trained"],
                "best_epoch": result["best_epoch"],
                "wall_seconds": round(result["wall_seconds"]),
                "valid_mrr": valid["mrr"],
                "valid_hits@10": valid["hits@10"],
                "test_mrr": test["mrr"],
                "test_hits@10": test["hits@10"],
            }
        )
    )


def saved_settings(path: Path) -> dict:
    """The settings of a run folder's ``config.json``, checked as ``torch-wge train --resume`` reads them."""
    try:
        from torch_wge.training.settings_file import read_stored_settings
    except ImportError:  # a torch_wge whose command line reads them itself
        from torch_wge.cli import read_saved_config

        return read_saved_config(path)
    return read_stored_settings(path).to_dict()


def row_config(row: str, given: dict, saved: dict) -> TrainConfig:
    """The validated :class:`TrainConfig` of a row.

    Later sources override earlier ones: the paper's CoDEx-S setting (the rows are the
    paper's tables, so the ``"paper"`` recipe), the row's own settings, ``saved`` (the
    ``config.json`` of a run continued or closed) and ``given`` (the options on the command
    line). ``row`` is a name of :data:`ROWS`. Raises :class:`ValueError` for a ``dataset``
    that is not the row's or an invalid setting.
    """
    dataset = ROWS[row].get("dataset", "codex-s")
    if given.get("dataset", dataset) != dataset:
        raise ValueError(f"--dataset {given['dataset']} is not the dataset of row {row}")
    config = TrainConfig.from_dict(
        {"dataset": "codex-s", "root": "data", "recipe": "paper", **ROWS[row], **saved, **given}
    )
    config.validate()
    return config


def record_folder(row: str, config: TrainConfig, variant: str = "") -> str:
    """The record folder of a run of ``row``, by what it measures:
    ``<dataset>/<model>/<recipe>-<epochs>ep[-<variant>][-<row setting>]``, the model ``wge`` or
    ``quate`` and the row's setting its ablation (``gcn``) or sensitivity point (``beta0.5``,
    ``hidden-channels128``); for example ``codex-s/wge/paper-60ep-lr2e-3-beta0.5``."""
    dataset, *rest = row.split("/")
    model = "quate" if config.num_layers == 0 else "wge"
    settings = {"ablation": rest[-1], "beta": f"beta{rest[-1]}", "hidden-channels": f"hidden-channels{rest[-1]}"}
    setting = settings.get(rest[0], "")
    return "-".join(part for part in (f"{dataset}/{model}/{config.recipe}-{config.epochs}ep", variant, setting) if part)


def markdown_table(records) -> str:
    """One markdown row per record: budget, best epoch, filtered validation and test
    metrics of the best checkpoint (Hits in %), wall time."""
    lines = [
        "| record | epochs | best epoch | valid MRR | valid H@10 | test MRR | test H@1 | test H@3 | test H@10 | wall min |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for record in records:
        result = json.loads((record / "results.json").read_text())
        valid, test = result["valid"]["metrics"]["both"], result["test"]["metrics"]["both"]
        lines.append(
            f"| `{record}` | {result['epochs_trained']:,} | {result['best_epoch']:,} | {valid['mrr']:.4f} | "
            f"{100 * valid['hits@10']:.2f} | {test['mrr']:.4f} | {100 * test['hits@1']:.2f} | "
            f"{100 * test['hits@3']:.2f} | {100 * test['hits@10']:.2f} | {result['wall_seconds'] / 60:.1f} |"
        )
    return "\n".join(lines)


def run_summary(record: Path) -> dict:
    """One run's entry of a :func:`summary`: its settings, commands, best epoch, metrics, minutes and
    validations (epoch, minutes, MRR); a run stopped by hand: what its log holds."""
    config = json.loads((record / "config.json").read_text())
    log = [json.loads(line) for line in (record / "log.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in log if r.get("event") == "eval" and r.get("split", "valid") == "valid"]
    meta = json.loads((record / "record.json").read_text()) if (record / "record.json").is_file() else {}
    try:
        name = record.resolve().relative_to(Path(__file__).resolve().parent / "records").as_posix()
    except ValueError:
        name = str(record)
    entry = {"name": name, "config": config, "commands": meta.get("commands"), "machine": meta.get("machine")}
    if (record / "results.json").is_file():
        result = json.loads((record / "results.json").read_text())
        entry.update(epochs=result["epochs_trained"], best_epoch=result["best_epoch"], stopped=False)
        entry["minutes"] = result["wall_seconds"] / 60
        for split in ("valid", "test"):
            metrics = (result.get(split) or {}).get("metrics")
            entry[split] = None if metrics is None else {side: metrics[side] for side in ("both", "head", "tail")}
    else:  # stopped by hand: no results.json
        trained = [r for r in log if r.get("event") == "epoch"]
        best = max(evals, key=lambda r: r["both.mrr"]) if evals else None
        entry.update(epochs=trained[-1]["epoch"] if trained else 0, stopped=True)
        entry["best_epoch"] = best["epoch"] if best else None
        entry["minutes"] = max((r["wall_seconds"] for r in trained + evals), default=0) / 60
        entry["valid"] = None if best is None else {"both": {"mrr": best["both.mrr"]}}
        entry["test"] = None
    entry["validations"] = [  # epoch, minutes since the run began, validation MRR
        [r["epoch"], round(r["wall_seconds"] / 60, 2) if "wall_seconds" in r else None, r["both.mrr"]]
        for r in evals
        if "both.mrr" in r
    ]
    return entry


def summary(records, command: str) -> dict:
    """A JSON record of several runs' records: the command that wrote it, its date and commit, and
    :func:`run_summary` of each."""
    return {
        "benchmark": "reproduce.py --summary",
        "command": command,
        "date": datetime.date.today().isoformat(),
        "git": {"commit": git_commit()},
        "runs": [run_summary(Path(record)) for record in records],
    }


def git_commit() -> str:
    """The checkout's commit (``unknown`` outside a git checkout)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    return commit or "unknown"


def keep_record(run: Path, record: Path) -> None:
    """Copies the run's JSON files to ``record`` and writes ``record.json`` (the
    commands that made the run, with commit and date, and the machine), so that
    every reported number can be traced."""
    from common import cpu_model  # benchmarks/ is on the path when this runs as a script

    record.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "log.jsonl", "results.json"):
        shutil.copyfile(run / name, record / name)
    (record / "record.json").write_text(
        json.dumps(
            {
                "commands": (run / "commands.txt").read_text().splitlines(),
                "machine": f"{cpu_model()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads",
                "torch": torch.__version__,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
