"""Command line: ``python -m torch_wge`` or ``torch-wge``.

Sub-commands: ``train``, ``evaluate RUN``, ``predict RUN``, ``export RUN`` (a run folder or a checkpoint),
``stats``, ``tune`` and ``plot RUN [RUN ...]``. Help and ``--version`` import no torch
(each command imports what it needs).
Every expected failure (a bad option, an unreadable, corrupt or unwritable
file, a full disk, a failed download, a diverged run) prints one line naming
the option or file and exits with 2; ``--debug`` shows the traceback instead.
A bad setting or a missing checkpoint is answered before torch is loaded; what
the commands print of labels, identifiers and messages has its control
characters escaped (:func:`printable`).
"""

import argparse
import contextlib
import dataclasses
import difflib
import json
import os
import re
import sys
import typing
import warnings
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from torch_wge import __version__
from torch_wge.training.config import CHOICES, RECIPES, TrainConfig, setting_help


class CliError(Exception):
    """An error the user can fix; printed as one line."""


def positive_int(text: str) -> int:
    """An ``argparse`` type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


#: The longest error line printed; a longer message is cut (a value quoted in it may be long).
MAX_LINE = 1000


def one_line(error: BaseException) -> str:
    """The message of ``error`` on one line, naming the file of an I/O error,
    cut to :data:`MAX_LINE` characters."""
    if isinstance(error, OSError) and error.filename is not None:
        text = f"{error.filename}: {error.strerror}"
    elif isinstance(error, KeyError) and error.args:
        text = str(error.args[0])
    else:
        lines = str(error).strip().splitlines()
        text = lines[0] if lines else type(error).__name__
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 3] + "..."


#: Characters a terminal acts on rather than shows: C0 and C1 controls (ESC, BEL, carriage
#: return, ...), DEL, line and paragraph separators and the bidirectional overrides.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    r"""``str(text)`` with the characters a terminal would act on escaped as
    Python writes them (``\x1b``, ``\r``, ``\u202e``): what the commands print
    of labels, identifiers and messages, so that a label cannot retitle or
    clear the terminal or overwrite lines.

    Example:
        >>> printable("Q1\x1b]0;owned\x07\r")
        'Q1\\x1b]0;owned\\x07\\r'
    """
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), str(text))


def _is_out_of_memory(error: BaseException) -> bool:
    torch = sys.modules.get("torch")  # an error raised before torch is loaded is no torch error
    return isinstance(error, MemoryError) or (
        torch is not None
        and (
            isinstance(error, torch.OutOfMemoryError)
            or (isinstance(error, RuntimeError) and "can't allocate memory" in str(error))
        )
    )


def _expected_errors() -> Tuple[type, ...]:
    """The errors a command reports as one line; the package's own need torch, and are no
    candidates before it is loaded (a bad value answered at once imports none of them)."""
    builtin: Tuple[type, ...] = (CliError, ValueError, KeyError, OSError)
    if "torch" not in sys.modules:
        return builtin
    from torch_wge.datasets import DownloadError
    from torch_wge.training import CheckpointError
    from torch_wge.training.run_folder import RunFolderBusy
    from torch_wge.training.trainer import TrainingError

    return builtin + (CheckpointError, DownloadError, RunFolderBusy, TrainingError)


def _is_collective_failure(error: BaseException) -> bool:
    if "torch" not in sys.modules:
        return False
    from torch_wge.distributed import is_collective_failure

    return is_collective_failure(error)


def continued_by(args) -> str:
    """What continues a command stopped by Ctrl-C (or SIGINT), said in the line it prints:
    for ``train``, ``--resume`` where the run folder holds a checkpoint to resume from."""
    if args.command == "tune":
        return "the same command continues the study; a trial cut short is trained on from its last checkpoint"
    if args.command != "train":
        return ""
    try:
        _, out = train_settings(args)
    except CliError:
        return ""
    if (out / "last.pt").is_file():
        return f"--resume continues the run from its last checkpoint, {out / 'last.pt'}"
    return f"no epoch was saved in {out}: nothing to resume"


def run_reporting_errors(
    name: str, fn: Callable[[], None], debug: bool = False, continued_by: Callable[[], str] = lambda: ""
) -> int:
    """Calls ``fn`` and returns an exit code: 0, or 2 after printing an
    expected failure as one line (re-raised with ``debug``), or 130 on Ctrl-C,
    after a line that says so and what ``continued_by()`` says continues it."""
    from torch_wge.training.run_folder import RunFolderHoldsRun  # no torch

    try:
        fn()
    except KeyboardInterrupt:
        how = continued_by()
        print(f"{name}: interrupted" + (f" ({how})" if how else ""), file=sys.stderr)
        return 130
    except Exception as error:
        lost_peer = _is_collective_failure(error)
        if debug or not (isinstance(error, _expected_errors()) or _is_out_of_memory(error) or lost_peer):
            raise
        message = one_line(error)
        if isinstance(error, RunFolderHoldsRun):  # the Python wording names fit()
            if error.files:
                message = (
                    f"{error.folder} holds {' and '.join(error.files)} of no torch_wge run; add --overwrite to "
                    f"replace them, or choose another --out"
                )
            else:
                how = (
                    "add --resume to continue it, --overwrite to replace it"
                    if error.resumable
                    else "add --overwrite to replace it"
                )
                message = f"{error.folder} already holds a run; {how}, or choose another --out"
        if _is_out_of_memory(error):
            message = f"out of memory ({message}); try a smaller --hidden-channels, --batch-size or --eval-batch-size"
        elif lost_peer:
            message = f"another process of the run ended (see its own message); stopped: {message[:160]}"
        rank = f" (rank {os.environ['RANK']})" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else ""
        print(f"{name}: error{rank}: {printable(message)}", file=sys.stderr)
        return 2
    return 0


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per :class:`TrainConfig` field, with its default shown (for
    the settings a recipe fills in, each recipe's value). An option not given
    is absent from the parsed arguments, so that :func:`config_from_args` can
    tell what was given explicitly."""
    types = typing.get_type_hints(TrainConfig)
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        kind = next((t for t in typing.get_args(types[field.name]) if t is not type(None)), types[field.name])
        if field.name in RECIPES["paper"]:
            shown = ", ".join(f"{name}: {values[field.name]}" for name, values in RECIPES.items())
            help_text = f"{field.metadata['help']} (default: from --recipe; {shown})"
        elif "(default:" in field.metadata["help"]:  # a default said in words
            help_text = field.metadata["help"]
        else:
            help_text = f"{field.metadata['help']} (default: {field.default})"
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text)
        else:
            choices = CHOICES.get(field.name) or (sorted(RECIPES) if field.name == "recipe" else None)
            parser.add_argument(flag, type=kind, default=argparse.SUPPRESS, choices=choices, help=help_text)


def config_from_args(args: argparse.Namespace, saved: Optional[dict] = None) -> TrainConfig:
    """The run's settings: the options given on the command line, over the
    settings file of ``--config`` (if given), over ``saved`` (the
    ``config.json`` of a run being resumed) or else over the defaults of
    :class:`TrainConfig` and its recipe."""
    from torch_wge.training.settings_file import read_settings_file

    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if f.name in args}
    from_file = read_settings_file(args.config) if getattr(args, "config", None) else {}
    config = TrainConfig.from_dict({**(saved or {}), **from_file, **given})
    config.validate()
    return config


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block) and exit code 2."""

    #: The sub-commands' parsers, by name (of the top-level parser).
    commands: typing.Mapping[str, argparse.ArgumentParser] = {}

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {printable(message)} (see --help)\n")

    def parse_command_line(self, argv: Optional[List[str]] = None) -> argparse.Namespace:
        """The parsed arguments; an option a sub-command does not know is that sub-command's error
        (``torch-wge train: error: ...``), with the closest option it has."""
        args, unknown = self.parse_known_args(argv)
        if unknown:
            command = self.commands[args.command]
            options = [flag for action in command._actions for flag in action.option_strings]
            close = difflib.get_close_matches(unknown[0].split("=")[0], options, n=1)
            hint = f" (did you mean {close[0]}?)" if close and unknown[0].startswith("-") else ""
            command.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
        return args


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="torch-wge", description="WGE knowledge graph completion")
    parser.add_argument("--version", action="version", version=f"torch-wge {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    parser.commands = commands.choices

    train = commands.add_parser("train", help="train a model and evaluate its best checkpoint")
    add_config_arguments(train)
    add_settings_file(train)
    train.add_argument("--out", default=None, help="output folder for checkpoints and logs (default: runs/<dataset>)")
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    train.add_argument(
        "--overwrite", action="store_true", help="replace the run in --out (its checkpoints, log and results)"
    )
    train.add_argument(
        "--tensorboard",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write TensorBoard curves and settings to <out>/tensorboard (default: on when the tensorboard package is installed)",
    )
    add_force_reload(train)
    train.add_argument(
        "--backend",
        choices=["gloo", "nccl"],
        default=None,
        help="process-group backend under torchrun (default: nccl on CUDA, gloo on the CPU)",
    )
    add_common(train)

    evaluate = commands.add_parser("evaluate", help="filtered ranking metrics of a checkpoint")
    evaluate.add_argument("checkpoint", metavar="RUN", help=RUN_HELP)
    evaluate.add_argument("--split", choices=["valid", "test"], default="test", help="split to rank (default: test)")
    evaluate.add_argument("--per-relation", action="store_true", help="also print the per-relation, per-side table")
    evaluate.add_argument(
        "--json",
        default=None,
        help="write all metrics, per relation too, with the relation names, to this JSON file (what 'plot' reads)",
    )
    add_data_override(evaluate)
    add_common(evaluate)

    predict = commands.add_parser("predict", help="top-k answers of a (head, relation, ?) or (?, relation, tail) query")
    predict.add_argument("checkpoint", metavar="RUN", help=RUN_HELP)
    side = predict.add_mutually_exclusive_group(required=True)
    side.add_argument("--head", help="identifier or label of the head entity: predict tails")
    side.add_argument("--tail", help="identifier or label of the tail entity: predict heads")
    predict.add_argument("--relation", required=True, help="identifier or label of the relation")
    predict.add_argument("--top-k", type=positive_int, default=10, help="number of answers (default: 10)")
    predict.add_argument(
        "--filter-known",
        action="store_true",
        help="leave out answers already known in the graph, and the query's own entity",
    )
    add_data_override(predict)
    add_common(predict)

    add_export_parser(commands)

    stats = commands.add_parser("stats", help="entities, relations, triples and graph-view sizes of a dataset")
    stats.add_argument("--dataset", default="codex-s", help=setting_help("dataset") + " (default: codex-s)")
    stats.add_argument("--root", default="data", help="dataset cache folder (default: data)")
    stats.add_argument("--beta", type=float, default=0.2, help="beta of the relation-focused view (default: 0.2)")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_force_reload(stats)
    add_common(stats)

    add_tune_parser(commands)

    plot = commands.add_parser(
        "plot",
        help="training curves of runs, per-relation MRR of 'evaluate --json' files, or a study's history and "
        "parameter importances (needs matplotlib)",
    )
    plot.add_argument(
        "inputs",
        nargs="*",
        metavar="RUN",
        help="run folders (loss and validation MRR against epochs and minutes), or files written by "
        "'evaluate --per-relation --json' (MRR of the most frequent relations, head and tail), or one folder "
        "of 'tune' (its study's optimisation history and parameter importances)",
    )
    plot.add_argument("--study", default=None, help="name of a study of 'tune' to plot (with --storage)")
    plot.add_argument("--storage", default=None, help="database URL of --study, e.g. sqlite:///runs/tune/study.db")
    plot.add_argument(
        "--out", default="plot.png", help="figure file; its extension names the format (default: plot.png)"
    )
    plot.add_argument("--log-x", action="store_true", help="logarithmic epoch and time axes")
    plot.add_argument("--top", type=positive_int, default=10, help="relations drawn, most queries first (default: 10)")
    plot.add_argument("--debug", action="store_true", help="show the traceback of an error")
    plot.set_defaults(threads=None)
    return parser


#: The help of the RUN argument of evaluate, predict and export.
RUN_HELP = "a run folder (its best.pt) or a checkpoint file (best.pt or last.pt of a run)"


def add_tune_parser(commands) -> None:
    tune = commands.add_parser("tune", help="search training settings with Optuna, one run folder per trial")
    for name in ("dataset", "recipe", "root", "device"):
        choices = sorted(RECIPES) if name == "recipe" else None
        tune.add_argument(f"--{name}", default=argparse.SUPPRESS, choices=choices, help=setting_help(name))
    add_settings_file(
        tune,
        "settings every trial shares, never searched (taken out of the default space; a --space file that "
        "searches one is refused)",
    )
    tune.add_argument(
        "--space",
        metavar="FILE",
        default=None,
        help="search space: JSON (or YAML) object of settings to "
        "distribution specs, replacing the default space (see docs/tune.md)",
    )
    tune.add_argument(
        "--enqueue",
        metavar="FILE",
        action="append",
        default=[],
        help="a settings file (such as a recipe's values or another study's best.json) whose values of the "
        "searched settings are tried first, once per study; may be given more than once",
    )
    tune.add_argument("--trials", type=positive_int, default=None, help="finished trials the study is to reach")
    tune.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="MINUTES",
        help="start no new trial after this many minutes of this process (default: no limit; give it or --trials)",
    )
    tune.add_argument("--study", default="wge", help="study name in the storage (default: wge)")
    tune.add_argument(
        "--storage",
        default=None,
        metavar="URL",
        help="Optuna database URL shared by the workers "
        "(sqlite:///FILE, postgresql://..., mysql://...) (default: the SQLite file study.db in --out)",
    )
    tune.add_argument(
        "--out",
        default=None,
        help="tune folder: trials/<number>/ run folders, best.json, study.json (default: runs/tune-<dataset>)",
    )
    tune.add_argument(
        "--pruner",
        choices=["median", "hyperband", "none"],
        default="median",
        help="stops poor trials at a validation (default: median)",
    )
    tune.add_argument(
        "--seed",
        type=int,
        default=argparse.SUPPRESS,
        help="seed of the sampler and of every trial's training (default: 0)",
    )
    tune.add_argument(
        "--seeds",
        type=positive_int,
        default=1,
        metavar="S",
        help="train each trial's settings S times, with the training seed and the next S - 1, and take "
        "the mean validation MRR as the trial's value (default: 1)",
    )
    tune.add_argument(
        "--heartbeat",
        type=positive_int,
        default=60,
        metavar="SECONDS",
        help="seconds between a running trial's heartbeats; a trial silent for twice as long was "
        "killed: marked failed and run again (default: 60)",
    )
    add_common(tune)


def add_export_parser(commands) -> None:
    export = commands.add_parser(
        "export", help="entity and relation representations of a run's best checkpoint, with TSV files for projectors"
    )
    export.add_argument("run", metavar="RUN", help=RUN_HELP)
    export.add_argument("--out", default=None, help="folder to write (default: RUN/embeddings)")
    export.add_argument(
        "--all-layers",
        action="store_true",
        help="every encoder layer's representations, not only the input embeddings (layer 0) and the last layer's",
    )
    export.add_argument("--format", choices=["npy", "pt"], default="npy", help="array files (default: npy)")
    add_data_override(export)
    add_common(export)


def add_settings_file(parser: argparse.ArgumentParser, what: str = "settings of the run") -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help=f"{what}: a JSON (or YAML) object of settings named as the options without dashes (e.g. "
        '{"lr": 0.001, "num_layers": 1}), such as the best.json of \'tune\'; options given here override it',
    )


def add_data_override(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default=None, help="dataset cache folder (default: the one the run used)")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda when available)")
    add_force_reload(parser)


def add_force_reload(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force-reload", action="store_true", help="process the dataset's raw files anew")


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads for PyTorch (default: PyTorch's, at most the CPUs this process may run on)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars and progress messages")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")


# ---------------------------------------------------------------- commands
def train_settings(args) -> Tuple[TrainConfig, Path]:
    """The settings and run folder of ``train``, checked without torch (so that a bad value
    is answered at once): the options over ``--config`` over a resumed run's ``config.json``."""
    from torch_wge.training.settings_file import read_settings_file, read_stored_settings

    if args.out == "":
        raise CliError("--out: empty folder name (leave the option out for the default folder)")
    if args.resume and args.overwrite:
        raise CliError("--resume and --overwrite exclude each other")
    from_file = read_settings_file(args.config) if args.config else {}  # its dataset names the default --out
    dataset = getattr(args, "dataset", from_file.get("dataset", TrainConfig.dataset))
    out = Path(args.out or Path("runs") / Path(dataset).name)
    saved = None
    if args.resume and (out / "config.json").exists():  # the run's own settings, unless given again
        saved = read_stored_settings(out / "config.json").to_dict()
    return config_from_args(args, saved), out


def run_train(args) -> None:
    import torch

    from torch_wge.distributed import DistributedContext
    from torch_wge.training import Trainer, load_data
    from torch_wge.training.checkpoint import vocabulary_digest
    from torch_wge.training.precision import resolve_precision

    config, out = train_settings(args)
    trackers = train_trackers(args.tensorboard, out)
    # under torchrun: join the process group first, so that one process
    # downloads and processes the dataset before the others read it
    context = DistributedContext.from_environment(config.device, args.backend)
    with unseen_said_once():
        dataset, data = context.in_turn(lambda: load_data(config, args.force_reload, log=not args.no_progress))
    vocabulary = vocabulary_digest(dataset.entity_names, dataset.relation_names)
    note = unseen_note(dataset, data, ["valid", "test"])
    if context.is_main and note:
        print(note, file=sys.stderr)
    if context.is_main and not args.no_progress:
        precision = resolve_precision(config.precision, context.device)
        chosen = f"{precision} (auto)" if config.precision == "auto" else precision
        print(
            f"torch-wge: {torch.get_num_threads()} CPU thread(s) (--threads to change), precision {chosen} "
            f"(--precision to change)",
            file=sys.stderr,
        )
    trainer = Trainer(
        config,
        data,
        out,
        progress=not args.no_progress,
        backend=args.backend,
        vocabulary=vocabulary,
        trackers=trackers,
    )
    result = trainer.fit(resume=args.resume, overwrite=args.overwrite)
    if context.is_main:
        print_final(result, out)


@contextlib.contextmanager
def unseen_said_once() -> Iterator[None]:
    """Leaves out the dataset's warnings on valid and test triples with an entity or relation not
    in training, one per file while it processes them: :func:`unseen_note` says it in one line,
    whether the dataset was processed now or earlier."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not occur in training")
        yield


def unseen_note(dataset, data, splits: List[str]) -> Optional[str]:
    """One line on the triples of ``splits`` whose entity or relation no training triple has:
    ranked with untrained embeddings, or left out under ``--unseen drop``; :obj:`None` if none."""
    from torch_wge.data import kg_triples, unseen_triples

    ranked = {split: int(unseen_triples(data, split).sum()) for split in splits}
    dropped = {split: dataset.num_dropped.get(f"{split}.txt:unseen", 0) for split in splits}
    if any(ranked.values()):
        counts = ", ".join(f"{n} of {kg_triples(data, split).size(0)} {split}" for split, n in ranked.items() if n)
        return (
            f"torch-wge: {counts} triples have an entity or relation not in training: ranked with untrained "
            f"embeddings, as published numbers are (--unseen drop leaves them out)"
        )
    if any(dropped.values()):
        counts = ", ".join(f"{n} {split}" for split, n in dropped.items() if n)
        return f"torch-wge: {counts} triples with an entity or relation not in training left out (--unseen drop)"
    return None


def train_trackers(tensorboard: Optional[bool], out: Path) -> list:
    """The trackers of ``train``: TensorBoard's in ``<out>/tensorboard`` when
    ``tensorboard`` is :obj:`True`, or :obj:`None` and the package is installed."""
    from torch_wge.training.trackers import TensorBoardTracker, tensorboard_available

    if tensorboard is False or (tensorboard is None and not tensorboard_available()):
        return []
    if not tensorboard_available():
        raise CliError("--tensorboard needs the tensorboard package: pip install 'torch_wge[tensorboard]'")
    return [TensorBoardTracker(out / "tensorboard")]


def print_final(result: dict, out: Path) -> None:
    test = result["test"]["metrics"]["both"]
    trained = f"{result['epochs_trained']}"
    if result.get("stopped_by") == "time_limit":
        trained += f" trained (stopped by --time-limit; {result['epochs']} planned)"
    best = "none validated" if result["best_epoch"] is None else f"best epoch {result['best_epoch']}"
    print(
        f"{best} of {trained} | "
        f"test MRR {test['mrr']:.4f} | MR {test['mr']:.1f} | H@1 {test['hits@1']:.4f} | "
        f"H@3 {test['hits@3']:.4f} | H@10 {test['hits@10']:.4f} | "
        f"{result['wall_seconds']:.0f}s | results in {out / 'results.json'}"
    )


def checkpoint_file(run: str) -> Path:
    """The checkpoint of the RUN argument: a run folder's ``best.pt``, or the file itself
    (:func:`torch_wge.training.run_folder.checkpoint_file`, no torch)."""
    from torch_wge.training import run_folder

    return run_folder.checkpoint_file(run)


def check_evaluate(args) -> None:
    """The checks of ``evaluate``'s arguments that need no torch."""
    from torch_wge import io

    checkpoint_file(args.checkpoint)
    if args.json and (Path(args.json).is_dir() or not Path(args.json).resolve().parent.is_dir()):
        raise CliError(f"--json {args.json}: is a directory or lies in a folder that does not exist")
    if args.json:
        io.writable_destination(args.json)  # a device or FIFO is refused before the evaluation


def run_evaluate(args) -> None:
    from torch_wge import io
    from torch_wge.inference import evaluate_checkpoint

    check_evaluate(args)
    checkpoint = checkpoint_file(args.checkpoint)
    with unseen_said_once():
        results, dataset = evaluate_checkpoint(
            checkpoint,
            args.split,
            root=args.root,
            device=args.device,
            force_reload=args.force_reload,
            log=not args.no_progress,
        )
    assert dataset is not None  # read for the checkpoint's settings (no graph was passed)
    note = unseen_note(dataset, dataset[0], [args.split])
    if note:
        print(note, file=sys.stderr)
    labelled = dataset.labelled_relation_names
    print(results.format(per_relation=args.per_relation, relation_names=[printable(name) for name in labelled]))
    if args.json:
        io.write_json(
            args.json,
            {"checkpoint": str(checkpoint), "split": args.split, "relation_names": labelled, **results.to_dict()},
        )


def score_meaning(objective: str) -> str:
    """What ``predict``'s score (the model's logit) means under the run's training ``objective``."""
    if objective == "bce":
        return "the run's objective is bce: sigmoid(score) is the model's probability that the triple holds"
    return (
        f"the run's objective is {objective}: scores rank one query's answers against each other; "
        f"a softmax over all entities' scores gives their probabilities"
    )


def run_predict(args) -> None:
    from torch_wge.inference.trained import predict_query

    query_entity = args.head if args.head is not None else args.tail
    query, rows = predict_query(
        checkpoint_file(args.checkpoint),
        query_entity,
        args.relation,
        predict_tails=args.head is not None,
        top_k=args.top_k,
        filter_known=args.filter_known,
        root=args.root,
        device=args.device,
        force_reload=args.force_reload,
        log=not args.no_progress,
    )
    wanted = "tail" if args.head is not None else "head"
    entity = labelled(query["entity"], query["entity_label"])
    relation = labelled(query["relation"], query["relation_label"])
    triple = f"({entity}, {relation}, ?)" if args.head is not None else f"(?, {relation}, {entity})"
    print(
        f"top {len(rows)} {wanted}s of {triple} by score, the model's logit for the triple "
        f"({score_meaning(query['objective'])}):"
    )
    for rank, row in enumerate(rows, 1):
        label = f"  {printable(row['label'])}" if row["label"] else ""
        known = "  [known]" if row["known"] else ""
        print(f"{rank:3d}. {printable(row['entity']):<20} {row['score']:9.4f}{label}{known}")


def labelled(name, label: Optional[str]) -> str:
    """An identifier with its label, ``Q42 "Douglas Adams"``, or alone when it has none (control
    characters escaped, see :func:`printable`)."""
    return printable(f'{name} "{label}"' if label else name)


def run_export(args) -> None:
    from torch_wge.inference import export_embeddings

    written = export_embeddings(
        args.run,
        args.out,
        all_layers=args.all_layers,
        format=args.format,
        root=args.root,
        device=args.device,
        force_reload=args.force_reload,
    )
    folder = next(iter(written.values())).parent
    print(f"{len(written)} files in {folder}: " + ", ".join(sorted(path.name for path in written.values())))


def run_stats(args) -> None:
    from torch_wge.datasets import dataset_statistics
    from torch_wge.training import open_dataset

    if not 0.0 <= args.beta <= 1.0:
        raise CliError(f"beta must be in [0, 1], got {args.beta}")
    dataset = open_dataset(args.dataset, args.root, force_reload=args.force_reload, log=not args.no_progress)
    stats = dataset_statistics(dataset[0], beta=args.beta)
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        width = max(len(k) for k in stats)
        print(f"{args.dataset}")
        for key, value in stats.items():
            print(f"  {key:<{width}}  {value:,}" if isinstance(value, int) else f"  {key:<{width}}  {value}")


def tune_settings(args) -> Dict:
    """The settings every trial of ``tune`` shares (``--config`` and the options), checked without
    torch, and the checks of the other options."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise CliError("tune needs optuna, which is not installed: pip install 'torch_wge[tune]'") from None
    from torch_wge.training.settings_file import read_settings_file

    if args.trials is None and args.time_limit is None:
        raise CliError("tune: give --trials N, --time-limit MINUTES or both")
    if args.time_limit is not None and not args.time_limit > 0:
        raise CliError(f"--time-limit must be positive (minutes), got {args.time_limit}")
    if not args.study.strip():
        raise CliError("--study: empty study name")
    base = read_settings_file(args.config) if args.config else {}
    base.update({name: getattr(args, name) for name in ("dataset", "recipe", "root", "device", "seed") if name in args})
    TrainConfig.from_dict(base).validate()
    return base


def run_tune(args) -> None:
    from torch_wge.training.settings_file import read_mapping
    from torch_wge.tune import DEFAULT_SPACE, best_checkpoint, check_space, fixed_params, tune

    base = tune_settings(args)
    space = check_space(read_mapping(args.space), args.space) if args.space else DEFAULT_SPACE
    fixed = [name for name in space if name in base]  # never searched: every trial shares them
    given = ", ".join(f"{name} ({'--' + name if name in args else '--config ' + str(args.config)})" for name in fixed)
    if fixed and args.space:
        raise CliError(
            f"--space {args.space}: searches settings every trial shares, {given}; a setting is shared or "
            f"searched, not both: leave it out of one of them"
        )
    if fixed:
        space = {name: spec for name, spec in space.items() if name not in fixed}
        if not space:
            raise CliError(f"tune: every setting of the default search space is fixed ({given}); nothing to search")
        print(f"torch-wge tune: not searched, shared by every trial: {given}", file=sys.stderr)
    enqueue = [fixed_params(read_mapping(path), space, path) for path in args.enqueue]
    out = Path(args.out or Path("runs") / f"tune-{Path(base.get('dataset', TrainConfig.dataset)).name}")
    seed = base.pop("seed", 0)
    study = tune(
        {**base, "seed": seed},
        space,
        out,
        trials=args.trials,
        time_limit=args.time_limit,
        study_name=args.study,
        storage=args.storage,
        pruner=args.pruner,
        seed=seed,
        heartbeat=args.heartbeat,
        progress=not args.no_progress and sys.stderr.isatty(),  # no progress bars in a log file
        enqueue=enqueue,
        seeds=args.seeds,
    )
    if (out / "best.json").is_file():
        print(f"best settings in {out / 'best.json'} (torch-wge train --config {out / 'best.json'})")
        best, where = best_checkpoint(study, out, seed, args.seeds)  # the folder of the worker that ran it
        print(
            f"trials rank validation only; when the search is over, rank the best on test once: torch-wge evaluate "
            f"{best}{where}"
        )


def run_plot(args) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CliError("plot needs matplotlib, which is not installed: pip install 'torch_wge[plot]'") from None
    from torch_wge import plot

    paths = [Path(p) for p in args.inputs]
    if args.study is not None or args.storage is not None or (len(paths) == 1 and (paths[0] / "study.json").exists()):
        plot_study(args, paths)
        return
    if not paths:
        raise CliError("plot: give run folders, 'evaluate --json' files, a tune folder, or --study and --storage")
    for path in paths:
        if not path.exists():
            raise CliError(f"{path}: no such run folder or file")
    if all(path.is_dir() for path in paths):
        figure = plot.curves_figure([plot.read_run(path) for path in paths], log_x=args.log_x)
    elif not any(path.is_dir() for path in paths):
        figure = plot.relations_figure([plot.read_relation_table(path) for path in paths], top=args.top)
    else:
        raise CliError("plot: give run folders, or files of 'evaluate --json', not both")
    plot.save_figure(figure, args.out)
    print(f"figure in {args.out}")


def plot_study(args, paths: List[Path]) -> None:
    """The optimisation history and parameter importances of a study of ``tune``."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise CliError("plotting a study needs optuna, which is not installed: pip install 'torch_wge[tune]'") from None
    from torch_wge import plot
    from torch_wge.tune import load_study, read_study_file

    if paths and (args.study is not None or args.storage is not None):
        raise CliError("plot: give a tune folder or --study and --storage, not both")
    if args.study is not None and not args.study.strip():
        raise CliError("--study: empty study name")
    named = read_study_file(paths[0]) if paths else {"study": args.study, "storage": args.storage}
    if not (named["study"] and named["storage"]):
        raise CliError("plot: --study and --storage go together")
    for name, figure in plot.study_figures(load_study(named["study"], named["storage"])).items():
        out = Path(args.out)
        path = out.with_name(f"{out.stem}-{name}{out.suffix}")
        plot.save_figure(figure, path)
        print(f"figure in {path}")


#: The checks of each command's arguments that need no torch, run before it is loaded: a bad
#: value or a missing file is answered at once.
CHECKS: Dict[str, Callable[[argparse.Namespace], object]] = {
    "tune": tune_settings,
    "train": train_settings,
    "evaluate": check_evaluate,
    "predict": lambda args: checkpoint_file(args.checkpoint),
    "export": lambda args: checkpoint_file(args.run),
}

COMMANDS = {
    "tune": run_tune,
    "train": run_train,
    "evaluate": run_evaluate,
    "predict": run_predict,
    "export": run_export,
    "stats": run_stats,
    "plot": run_plot,
}


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_command_line(argv)  # --help ends here, before torch is imported

    def run() -> None:
        CHECKS.get(args.command, lambda args: None)(args)
        from torch_wge.training.threads import set_threads

        set_threads(args.threads)
        COMMANDS[args.command](args)

    with warnings.catch_warnings():  # undone on return: main() may be called from Python
        warnings.showwarning = print_warning
        return run_reporting_errors(f"torch-wge {args.command}", run, args.debug, lambda: continued_by(args))


def print_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Shows a warning as one line, ``torch-wge: warning: <message>``, on stderr (instead of
    Python's two lines naming the source file)."""
    print(f"torch-wge: warning: {one_line(message)}", file=sys.stderr)
