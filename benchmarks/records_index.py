"""Write ``benchmarks/records/INDEX.md``, one row per record, from the record files; or export a
``torch-wge tune`` study's trials as a record.

A training run's record is a folder ``<dataset>/<model>/<recipe>-<epochs>ep[-<variant>]`` holding
``config.json``, ``log.jsonl``, ``record.json`` (commands with commit and date, machine) and, when
the run finished, ``results.json``; every other ``.json`` or ``.txt`` file under the records is a
benchmark's record (see ``benchmarks/README.md`` for the layout). The index holds, per training
run, its dataset, model, recipe and variant, epochs, best validation MRR, test MRR and Hits@10 of
the best checkpoint, minutes of training and validation, machine, commits and dates; per
benchmark, what it measured, its dataset, machine, commit, date and command.

    python benchmarks/records_index.py            # rewrite benchmarks/records/INDEX.md
    python benchmarks/records_index.py --check    # exit 1 when INDEX.md is not what it would write

``--export-study FOLDER`` reads the study a tune folder's ``study.json`` names and writes to
``--out``, per trial: its number, state, validation MRR (complete trials; in a study of several
seeds, each seed's too), the validation MRR it reported at each validation (what a pruner saw), its
minutes, the settings the space drew, every setting of its run and, for a trial that failed, why;
and the study's name, the command that ran it (``--command``), the search space file's content
(``--space``) and the export's own command::

    python benchmarks/records_index.py --export-study ~/runs/tune-litwd1k-cpu --space examples/tune/small-cpu-space.json \\
        --command "torch-wge tune --dataset litwd1k ..." --out benchmarks/records/tune/litwd1k/small-cpu/trials.json

A record that does not parse, or whose folder names another dataset or model than its
``config.json``, ends the script with one line naming the file (exit 2).
"""

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

from torch_wge.io import write_text

RECORDS = Path(__file__).resolve().parent / "records"
INDEX = "INDEX.md"

#: ``# commit abc1234, 2026-11-23`` (or ``# working tree of abc1234 ..., 2026-11-23``) after a command.
_COMMIT = re.compile(r"\b(?:commit|of) ([0-9a-f]{7,40})\b")
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


class RecordError(ValueError):
    """A record file that does not parse or contradicts its folder name."""


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RecordError(f"{path}: not a readable JSON file ({error})") from None


def read_log(path: Path) -> List[Dict[str, Any]]:
    lines = path.read_text().splitlines() if path.is_file() else []
    if not lines:
        raise RecordError(f"{path}: missing or empty")
    try:
        return [json.loads(line) for line in lines]
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}: not one JSON object per line ({error})") from None


def cell(value: Any) -> str:
    """A markdown table cell: ``|`` escaped, one line."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def unique(values: List[str]) -> str:
    return ", ".join(dict.fromkeys(values))


def training_row(folder: Path, root: Path) -> List[str]:
    """The index row of one training run's record folder."""
    relative = folder.relative_to(root)
    if len(relative.parts) != 3:
        raise RecordError(f"{folder}: a training record lies at <dataset>/<model>/<recipe>-<epochs>ep[-<variant>]")
    dataset, model, name = relative.parts
    config = read_json(folder / "config.json")
    record = read_json(folder / "record.json")
    log = read_log(folder / "log.jsonl")
    config_model = "quate" if config.get("num_layers") == 0 else "wge"
    if (config.get("dataset"), config_model) != (dataset, model):
        raise RecordError(
            f"{folder / 'config.json'}: a {config.get('dataset')} {config_model} run, "
            f"but its folder says {dataset} {model}"
        )
    comments = [command.split("#", 1)[1] for command in record["commands"] if "#" in command]
    commits = unique([m for c in comments for m in _COMMIT.findall(c)])
    dates = unique([m for c in comments for m in _DATE.findall(c)])
    if (folder / "results.json").is_file():
        results = read_json(folder / "results.json")
        valid = results["valid"]["metrics"]["both"]
        epochs, best = f"{results['epochs_trained']:,}", f"{results['best_epoch']:,}"
        numbers = [f"{valid['mrr']:.4f}", "-", "-"]  # a tune trial's run: validation only
        if results["test"] is not None:
            test = results["test"]["metrics"]["both"]
            numbers[1:] = [f"{test['mrr']:.4f}", f"{100 * test['hits@10']:.2f}"]
        minutes = results["wall_seconds"] / 60
    else:  # stopped by hand: what its log holds
        evals = [r for r in log if r.get("event") == "eval" and r.get("split", "valid") == "valid"]
        trained = [r for r in log if r.get("event") == "epoch"]
        if not trained:
            raise RecordError(f"{folder / 'log.jsonl'}: no epoch logged")
        best_eval = max(evals, key=lambda r: r["both.mrr"]) if evals else None
        epochs = f"{trained[-1]['epoch']:,} (stopped)"
        best = f"{best_eval['epoch']:,}" if best_eval else "-"
        numbers = [f"{best_eval['both.mrr']:.4f}" if best_eval else "-", "-", "-"]
        minutes = max(r["wall_seconds"] for r in trained + evals) / 60
    link = f"[`{relative.as_posix()}`]({relative.as_posix()})"
    return [link, dataset, model, name, epochs, best, *numbers, f"{minutes:.1f}", record["machine"], commits, dates]


def describe_machine(machine: Any) -> str:
    if not isinstance(machine, dict):
        return str(machine)
    parts = [machine.get("cpu"), f"{machine['cpus']} cores" if "cpus" in machine else None]
    parts += [machine.get("device"), f"{machine['threads']} threads" if "threads" in machine else None]
    if machine.get("shared_with_other_jobs"):
        parts.append("shared with other jobs")
    return ", ".join(str(p) for p in parts if p)


def measured(data: Dict[str, Any]) -> str:
    """The headline figures of a benchmark record, where its JSON holds them in a known place:
    seconds per epoch and per test evaluation and peak MB per configuration (``bench_speed.py``),
    median seconds per configuration, epoch seconds per setting (GPU loss chunks), or the runs of a
    study (``reproduce.py --summary``) and the trials of a tune study."""
    results, parts = data.get("results"), []
    if isinstance(results, dict):
        for name, result in results.items():
            if isinstance(result, dict) and ("epoch_s" in result or "epoch_s_median" in result):
                epoch = result.get("epoch_s_median", result.get("epoch_s"))
                test = result.get("test_s_median", result.get("test_eval_s"))
                figure = f"{name}: epoch {epoch:.3g} s" + (f", test {test:.3g} s" if test is not None else "")
                parts.append(figure + (f", {result['peak_rss_mb']:,.0f} MB" if "peak_rss_mb" in result else ""))
    for name, seconds in (data.get("median_seconds") or {}).items():
        parts.append(f"{name}: {seconds:.3g} s")
    for name, seconds in (data.get("epoch_seconds") or {}).items():
        parts.append(f"{name}: epoch {' / '.join(f'{s:g}' for s in seconds)} s")
    if isinstance(data.get("runs"), list):  # reproduce.py --summary: a study's runs
        parts.append(f"{len(data['runs'])} runs")
    if isinstance(data.get("trials"), list):  # a tune study's export
        parts.append(f"{len(data['trials'])} trials")
    return "; ".join(parts) or "-"


def benchmark_row(path: Path, root: Path) -> List[str]:
    """The index row of one benchmark record (a ``.json`` file, or a ``.txt`` profile)."""
    relative = path.relative_to(root)
    kind = relative.parts[0]
    dataset = relative.parts[1] if len(relative.parts) > 2 else "-"
    link = f"[`{relative.as_posix()}`]({relative.as_posix()})"
    if path.suffix == ".txt":
        return [link, kind, dataset, "text profile", "-", "-", "-", "-", "-"]
    data = read_json(path)
    if not isinstance(data, dict):
        raise RecordError(f"{path}: not a JSON object")
    git = data.get("git")
    commit = git.get("commit") if isinstance(git, dict) else data.get("commit", "-")
    machine = data.get("machine") or {key: data[key] for key in ("cpu", "cpus", "device", "threads") if key in data}
    what = data.get("what", "-")
    return [
        link,
        kind,
        data.get("dataset", dataset),
        what,
        measured(data),
        describe_machine(machine),
        commit,
        str(data.get("date", "-"))[:10],
        f"`{data['command']}`" if "command" in data else "-",
    ]


def table(header: List[str], rows: List[List[str]], numeric: range = range(0)) -> List[str]:
    """A markdown table; the columns ``numeric`` hold numbers and align right."""
    align = ["---:" if i in numeric else "---" for i in range(len(header))]
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"] + [
        "| " + " | ".join(cell(value) for value in row) + " |" for row in rows
    ]


def index(root: Path = RECORDS) -> str:
    """The text of ``INDEX.md`` for the records under ``root``.

    Raises:
        RecordError: naming the file of a record that does not parse or contradicts its folder.
    """
    runs = sorted(path.parent for path in root.rglob("record.json"))
    inside_runs = {path for run in runs for path in run.iterdir()}
    benchmarks = sorted(
        path
        for path in root.rglob("*")
        if path.suffix in (".json", ".txt") and path.is_file() and path not in inside_runs
    )
    training = [training_row(run, root) for run in runs]
    lines = [
        "# Records",
        "",
        "Generated by `python benchmarks/records_index.py` from the record files; do not edit.",
        "The layout is described in `benchmarks/README.md`, and `RESULTS.md` says what each record shows.",
        "",
        f"## Training runs ({len(training)})",
        "",
        "Valid MRR: best filtered validation MRR; test MRR and H@10 (%): the best checkpoint's, filtered,",
        "both directions. Minutes: training and validation, over all sessions. A run stopped by hand",
        "has no test figures.",
        "",
        *table(
            [
                "record",
                "dataset",
                "model",
                "recipe-variant",
                "epochs",
                "best epoch",
                "valid MRR",
                "test MRR",
                "test H@10",
                "minutes",
                "machine",
                "commits",
                "dates",
            ],
            training,
            numeric=range(4, 10),
        ),
        "",
        f"## Benchmarks ({len(benchmarks)})",
        "",
        *table(
            ["record", "benchmark", "dataset", "what", "measured", "machine", "commit", "date", "command"],
            [benchmark_row(path, root) for path in benchmarks],
        ),
    ]
    return "\n".join(lines) + "\n"


def export_study(folder: Path, out: Path, space: Path = None, command: str = None) -> int:
    """Writes the trials of the study in the tune folder ``folder`` as a record to ``out``; their number."""
    from common import script_command, write_record

    from torch_wge.tune.study import load_study, read_study_file

    names = read_study_file(folder)
    study = load_study(names["study"], names["storage"])
    trials = []
    for trial in study.get_trials(deepcopy=False):
        trials.append(
            {
                "number": trial.number,
                "state": trial.state.name.lower(),
                "validation_mrr": trial.value,
                "reported": {str(epoch): mrr for epoch, mrr in sorted(trial.intermediate_values.items())},
                "minutes": None if trial.duration is None else trial.duration.total_seconds() / 60,
                "params": trial.params,
                "config": trial.user_attrs.get("config"),
                "error": trial.user_attrs.get("error"),
                **({"seed_mrrs": trial.user_attrs["seed_mrrs"]} if "seed_mrrs" in trial.user_attrs else {}),
            }
        )
    fields = {
        "exported_by": script_command(),
        "command": command,
        "study": names["study"],
        "space": None if space is None else json.loads(Path(space).read_text()),
        "trials": trials,
    }
    write_record(out, "torch-wge tune", fields)
    return len(trials)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, default=RECORDS, help="the records folder (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="compare with INDEX.md instead of writing it")
    parser.add_argument("--export-study", type=Path, metavar="FOLDER", help="a tune folder (its --out) to export")
    parser.add_argument("--out", type=Path, help="--export-study: the record to write")
    parser.add_argument("--space", type=Path, help="--export-study: the search space file the study ran with")
    parser.add_argument("--command", help="--export-study: the command that ran the study")
    args = parser.parse_args(argv)
    if args.export_study:
        if args.out is None:
            parser.error("--export-study needs --out")
        count = export_study(args.export_study, args.out, args.space, args.command)
        print(f"{count} trials written to {args.out}")
        return 0
    if not args.records.is_dir():
        parser.exit(2, f"records_index.py: --records {args.records}: no such folder\n")
    try:
        text = index(args.records)
    except RecordError as error:
        parser.exit(2, f"records_index.py: {error}\n")
    path = args.records / INDEX
    if args.check:
        current = path.read_text() if path.is_file() else ""
        if current != text:
            print(f"{path} is out of date: run python benchmarks/records_index.py", file=sys.stderr)
            return 1
        return 0
    write_text(path, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
