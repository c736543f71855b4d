"""Export a ``torch-wge tune`` study's trials as a JSON record.

Reads the study a tune folder's ``study.json`` names and writes, per trial: its number, state,
validation MRR (complete trials; in a study of several seeds, each seed's too), the validation
MRR it reported at each validation (what a pruner saw), its minutes, the settings the space drew,
every setting of its run and, for a trial that failed, why. The record also holds the study's name, the command that ran it (``--command``),
the search space file's content (``--space``) and the export's own command (``exported_by``).

Example::

    python benchmarks/export_study.py ~/runs/tune-litwd1k-cpu --space examples/tune/small-cpu-space.json \\
        --command "torch-wge tune --dataset litwd1k ..." --out benchmarks/records/tune/litwd1k/small-cpu/trials.json
"""

import argparse
import json
from pathlib import Path

from bench_speed import script_command, write_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the tune folder (its --out)")
    parser.add_argument("--space", help="the search space file the study ran with")
    parser.add_argument("--command", help="the command that ran the study")
    parser.add_argument("--out", required=True, help="the record to write")
    args = parser.parse_args()

    from torch_wge.tune.study import load_study, read_study_file

    names = read_study_file(args.folder)
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
    write_record(
        args.out,
        "torch-wge tune",
        {
            "exported_by": script_command(),
            "command": args.command,
            "study": names["study"],
            "space": None if args.space is None else json.loads(Path(args.space).read_text()),
            "trials": trials,
        },
    )
    print(f"{len(trials)} trials of study {names['study']} written to {args.out}")


if __name__ == "__main__":
    main()
