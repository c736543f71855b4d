import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

#: Choices of the settings that take a name: the keys of
#: :data:`torch_wge.nn.models.wge.VIEWS`, :data:`torch_wge.nn.decoders.loss.OBJECTIVES`
#: and :data:`torch_wge.training.precision.PRECISIONS` (a test checks that they
#: agree), named here so that reading settings (and ``torch-wge train --help``)
#: imports neither torch nor PyG.
CHOICES = {
    "views": ("two-view", "entity", "relation", "levi"),
    "conv": ("quaternion", "gcn"),
    "objective": ("bce", "softmax", "kl", "filtered-softmax"),
    "schedule": ("constant", "cosine"),
    "precision": ("auto", "float32", "tf32", "bf16"),
    "encoder": ("sharded", "replicated"),
    "unseen": ("keep", "drop"),
}

_PAPER = dict(
    epochs=3000,
    batch_size=1024,
    lr=5e-4,
    schedule="constant",
    warmup_epochs=0,
    objective="bce",
    candidates=0,
    label_smoothing=0.1,
    dropout=0.5,
    grad_clip=0.5,
    n3=0.0,
    relation_prediction=0.0,
    eval_every=10,
    ema_decay=0.0,
    weight_decay=0.0,
)

#: Training recipes: the optimisation settings a recipe fills in where a
#: :class:`TrainConfig` leaves them ``None``.
#:
#: - ``"paper"``: the WGE research code's setting, with which the paper's
#:   numbers were obtained: Adam at a constant 5e-4 (1e-4 on CoDEx-L), batch
#:   1024, 1-N BCE with label smoothing 0.1, dropout 0.5, clipping 0.5,
#:   3000 epochs, validation every 10.
#: - ``"fast"`` (the default): the same model trained with 1-vs-all softmax
#:   cross-entropy instead of 1-N BCE, a 20x larger peak learning rate
#:   (1e-2), a 5-epoch linear warm-up, a cosine decay to zero over 500
#:   epochs and AdamW's decoupled weight decay 0.1.
#: - ``"large"``: the fast recipe for graphs of CoDEx-M's size and larger,
#:   where an epoch holds 10x more steps: 80 epochs (1 of warm-up),
#:   validation every 2, each batch scored against its answers and 2000
#:   sampled entities instead of all (a sampled softmax, :obj:`candidates`),
#:   and no weight decay (its CoDEx-M rows were trained without).
_FAST = {
    **_PAPER,
    "epochs": 500,
    "lr": 1e-2,
    "schedule": "cosine",
    "warmup_epochs": 5,
    "objective": "softmax",
    "weight_decay": 0.1,
}
RECIPES: Dict[str, Dict[str, Any]] = {
    "paper": _PAPER,
    "fast": _FAST,
    "large": {**_FAST, "epochs": 80, "warmup_epochs": 1, "candidates": 2000, "eval_every": 2, "weight_decay": 0.0},
}


def setting(default: Any, help: str) -> Any:
    """A :class:`TrainConfig` field with its help text, the one the command
    line's option shows (``dataclasses.fields(TrainConfig)[i].metadata["help"]``)."""
    return field(default=default, metadata={"help": help})


#: Learning rate of each recipe on CoDEx-L, where the research code used a smaller one.
CODEX_L_LR = {"paper": 1e-4}


@dataclass
class TrainConfig:
    r"""Every setting of a training run.

    Model settings default to the paper's best on CoDEx-S (:math:`K = 2`,
    64 quaternions per embedding, i.e. 256 real numbers, :math:`\alpha_0 = 0.9`,
    :math:`\beta = 0.2`). :obj:`hidden_channels` counts quaternions, as the
    models (:class:`~torch_wge.nn.WGE`) and PyG's KGE models count their
    units. The
    optimisation settings not given (or given as ``None``) are filled in from :obj:`recipe`
    (``"fast"`` unless named; see :data:`RECIPES`); a value given explicitly always wins, so
    ``TrainConfig(recipe="paper", epochs=300)`` is the paper's recipe cut to
    300 epochs.

    :obj:`relation_edges` defaults to :obj:`False`, as in
    :class:`~torch_wge.transforms.RelationFocusedTransform`: the published
    research code, whose runs gave the paper's numbers, never adds the
    :math:`r_s - r_o` edges of the relation-focused view.

    The learning rate of epoch :math:`e` (counted from 0) is :meth:`learning_rate`:
    a linear warm-up over :obj:`warmup_epochs`, then constant
    (:obj:`schedule="constant"`) or a cosine decay to zero at :obj:`epochs`
    (:obj:`schedule="cosine"`).
    :obj:`time_limit` (minutes) ends training after the epoch during which the
    run's training and validation time passed it.

    With :obj:`ema_decay` :math:`d > 0`, validation, the best checkpoint and
    test use an exponential moving average of the weights over the optimiser
    steps, :math:`\bar\theta_t = d\,\bar\theta_{t-1} + (1 - d)\,\theta_t`
    (see :class:`~torch_wge.training.ema.WeightAverage`); the trained weights
    are validated beside it and logged. :obj:`0` (every recipe): the trained
    weights themselves.

    :obj:`unseen` says what happens to validation and test triples with an
    entity or relation that no training triple has: :obj:`"keep"` ranks them
    with embeddings training never updated, as the benchmark convention and
    published numbers do; :obj:`"drop"` leaves them out of validation and
    test (see :class:`~torch_wge.datasets.KnowledgeGraphDataset`).

    :obj:`weight_decay` :math:`\lambda` is AdamW's decoupled decay: every
    step multiplies each parameter by :math:`1 - \eta_e \lambda` before the
    Adam update (:math:`\eta_e` the step's learning rate): 0.1 in the fast
    recipe, :obj:`0` (plain Adam) in the others.
    """

    dataset: str = setting(
        "codex-s",
        "dataset name (codex-s, codex-m, codex-l, litwd1k, litwd19k, litwd48k, fb15k-237) or a folder of "
        "train/valid/test.txt",
    )
    root: str = setting("data", "folder where datasets are downloaded and cached")
    unseen: str = setting(
        "keep",
        "valid and test triples with an entity or relation no training triple has: keep (ranked with untrained "
        "embeddings, the benchmark convention of published numbers) or drop (left out of validation and test)",
    )
    recipe: str = setting(
        "fast",
        "training recipe: 'fast' (larger learning rate, warm-up, cosine decay, weight decay, 500 epochs), "
        "'paper' (the paper's setting: 3000 epochs) or 'large' (the fast recipe for graphs of CoDEx-M's size:"
        " 80 epochs, sampled softmax); explicit options override it",
    )
    epochs: int = setting(None, "number of training epochs")
    batch_size: int = setting(
        None,
        "(head, relation) queries per batch, at least 2 (a lone last query joins the batch before it)",
    )
    lr: float = setting(None, "Adam learning rate (the peak of the schedule)")
    schedule: str = setting(
        None,
        "learning-rate schedule: constant, or cosine (linear warm-up, then cosine decay to 0 at the last epoch)",
    )
    warmup_epochs: int = setting(None, "epochs of linear warm-up of the cosine schedule")
    objective: str = setting(
        None,
        "training loss: bce (1-N binary cross-entropy, the paper's), softmax (1-vs-all cross-entropy, one "
        "example per answer), kl (the same, one example per query) or filtered-softmax (one example per "
        "answer, the query's other answers left out of its candidates)",
    )
    candidates: int = setting(
        None,
        "with --objective softmax: score each batch against its answers and this many entities drawn for it "
        "(a sampled softmax, for large graphs) instead of all entities, 0 for all; evaluation ranks all",
    )
    label_smoothing: float = setting(None, "label smoothing epsilon of the 1-N targets")
    dropout: float = setting(None, "dropout on each decoder's query")
    grad_clip: float = setting(None, "gradient-norm clipping threshold (0: off)")
    n3: float = setting(
        None,
        "weight of the N3 regulariser on the embeddings of each batch's triples (0: off)",
    )
    relation_prediction: float = setting(
        None,
        "weight of relation prediction as an auxiliary objective (0: off)",
    )
    eval_every: int = setting(None, "validate every this many epochs")
    ema_decay: float = setting(
        None,
        "decay of an exponential moving average of the weights per optimiser step, used for validation, the "
        "best checkpoint and test (0: off, the trained weights)",
    )
    weight_decay: float = setting(
        None,
        "AdamW's decoupled weight decay: each step shrinks every parameter by lr * this before the Adam "
        "update (0: off, plain Adam)",
    )
    hidden_channels: int = setting(64, "size of every embedding in quaternions (4 real numbers each)")
    num_layers: int = setting(2, "encoder layers K (0: plain QuatE)")
    alpha0: float = setting(0.9, "weight of layer 0 in the score; the others get (1 - alpha0) / K")
    beta: float = setting(0.2, "fraction of (r_s, r_o) relation pairs whose RF constraints are kept, in [0, 1]")
    predicate_entities: bool = setting(True, "use predicate entities in the relation-focused view (off: ablation 1)")
    relation_edges: bool = setting(
        False,
        "add r_s - r_o edges to the relation-focused view (the published code does not)",
    )
    views: str = setting("two-view", "two-view (WGE) or an ablation: entity, relation, levi")
    conv: str = setting("quaternion", "quaternion (QGNN) or gcn (ablation 2)")
    eval_batch_size: int = setting(1024, "queries scored at once during evaluation")
    patience: Optional[int] = setting(None, "stop after this many validations without improvement (default: never)")
    time_limit: Optional[float] = setting(
        None,
        "stop training after the step in which the run's training and validation, all its sessions "
        "together, have taken this many minutes, then evaluate the best checkpoint (a stopped run resumes "
        "at its next step with --resume and a larger limit or none) (default: no limit)",
    )
    precision: str = setting(
        "auto",
        "auto (bf16 where the device multiplies bfloat16 natively: a CPU with AVX-512 BF16 or AMX, a CUDA GPU "
        "from Ampere on; float32 elsewhere); float32; tf32 (TensorFloat-32 matmuls on CUDA, training and "
        "evaluation); bf16 (bfloat16 operands for the training loss's scoring matmuls, the bulk of an epoch; "
        "slower on CPUs without bf16 instructions)",
    )
    encoder: str = setting(
        "sharded",
        "with several processes: sharded (each process computes its share of the encoder's node rows, the "
        "layers' rows gathered) or replicated (every process runs the whole encoder); one process ignores it",
    )
    seed: int = setting(0, "random seed")
    device: Optional[str] = setting(None, "cpu, cuda, cuda:1, ... (default: cuda when available)")

    def __post_init__(self):
        if self.recipe not in RECIPES:
            raise ValueError(f"recipe must be one of {sorted(RECIPES)}, got {self.recipe!r}")
        defaults = dict(RECIPES[self.recipe])
        if self.dataset.lower() == "codex-l" and self.recipe in CODEX_L_LR:
            defaults["lr"] = CODEX_L_LR[self.recipe]
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)

    def validate(self) -> None:
        """Raises :class:`ValueError` with a one-line message on a bad setting."""
        integers = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)]
        checks = [
            (abs(value) < 2**63, f"{name} must be a 64-bit integer (below 2**63), got {value}")
            for name, value in integers
            if isinstance(value, int) and not isinstance(value, bool)
        ]
        checks += [
            (self.hidden_channels > 0, f"hidden channels must be positive, got {self.hidden_channels}"),
            (0.0 <= self.beta <= 1.0, f"beta must be in [0, 1], got {self.beta}"),
            (self.epochs > 0, f"epochs must be positive, got {self.epochs}"),
            (
                self.batch_size >= 2,
                f"batch size must be >= 2 (the decoders' batch norm needs two queries a batch), got {self.batch_size}",
            ),
            (self.eval_batch_size > 0, f"evaluation batch size must be positive, got {self.eval_batch_size}"),
            (0 < self.lr <= 1, f"lr must be in (0, 1], got {self.lr}"),
            (self.warmup_epochs >= 0, f"warmup epochs must be >= 0, got {self.warmup_epochs}"),
            (0 <= self.seed < 2**63, f"seed must be in [0, 2**63), got {self.seed}"),
            (self.num_layers >= 0, f"num_layers must be >= 0, got {self.num_layers}"),
            (0.0 <= self.alpha0 <= 1.0, f"alpha0 must be in [0, 1], got {self.alpha0}"),
            (0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), got {self.dropout}"),
            (0.0 <= self.label_smoothing < 1.0, f"label smoothing must be in [0, 1), got {self.label_smoothing}"),
            (0.0 <= self.n3 < math.inf, f"n3 must be >= 0 and finite, got {self.n3}"),
            (
                0.0 <= self.relation_prediction < math.inf,
                f"relation prediction weight must be >= 0 and finite, got {self.relation_prediction}",
            ),
            (0.0 <= self.grad_clip < math.inf, f"grad_clip must be finite and >= 0 (0: off), got {self.grad_clip}"),
            (0.0 <= self.ema_decay < 1.0, f"ema_decay must be in [0, 1) (0: off), got {self.ema_decay}"),
            (0.0 <= self.weight_decay < math.inf, f"weight decay must be >= 0 and finite, got {self.weight_decay}"),
            (self.eval_every > 0, f"eval_every must be positive, got {self.eval_every}"),
            (
                self.candidates == 0 or (self.candidates > 0 and self.objective == "softmax"),
                f"candidates needs --objective softmax and a count >= 0 (0: all entities), got {self.candidates} "
                f"with objective {self.objective}",
            ),
            (self.patience is None or self.patience > 0, f"patience must be positive, got {self.patience}"),
            (
                self.time_limit is None or self.time_limit > 0,
                f"time limit must be positive (minutes), got {self.time_limit}",
            ),
        ]
        checks += [
            (getattr(self, name) in choices, f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
            for name, choices in CHOICES.items()
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def learning_rate(self, epoch: int) -> float:
        r"""Learning rate of epoch ``epoch`` (0-based):

        .. math::
            \eta_e = \eta \cdot \begin{cases}
            (e + 1) / W & e < W \\
            \frac{1}{2}\left(1 + \cos\left(\pi \frac{e - W}{E - W}\right)\right) & \text{otherwise}
            \end{cases}

        for :obj:`schedule="cosine"` (:math:`W` warm-up epochs, :math:`E`
        epochs); for :obj:`schedule="constant"` the same warm-up, then
        :math:`\eta`."""
        if epoch < self.warmup_epochs:
            return self.lr * (epoch + 1) / self.warmup_epochs
        if self.schedule == "constant":
            return self.lr
        decay_epochs = max(self.epochs - self.warmup_epochs, 1)
        progress = min((epoch - self.warmup_epochs) / decay_epochs, 1.0)
        return self.lr * 0.5 * (1.0 + math.cos(math.pi * progress))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """The settings ``values`` names (the others take their defaults).

        Raises:
            ValueError: naming the keys that are no setting.
        """
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(map(repr, unknown))}")
        return cls(**values)

    #: Settings that change the model's parameters or graph; a checkpoint made
    #: under other values of these cannot be resumed or evaluated here.
    MODEL_KEYS = (
        "dataset",
        "unseen",
        "hidden_channels",
        "num_layers",
        "alpha0",
        "views",
        "conv",
        "beta",
        "predicate_entities",
        "relation_edges",
    )


def setting_help(name: str) -> str:
    """The help text of the :class:`TrainConfig` setting ``name``.

    Example:
        >>> setting_help("hidden_channels")
        'size of every embedding in quaternions (4 real numbers each)'
    """
    return TrainConfig.__dataclass_fields__[name].metadata["help"]
