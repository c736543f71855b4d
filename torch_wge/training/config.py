import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Dict, Optional

#: Choices of the settings that take a name: the keys of
#: :data:`torch_wge.nn.models.wge.VIEWS`, :data:`torch_wge.nn.kge.loss.OBJECTIVES`
#: and :data:`torch_wge.training.precision.PRECISIONS` (a test checks that they
#: agree), named here so that reading settings (and ``torch-wge train --help``)
#: imports neither torch nor PyG.
CHOICES = {
    "views": ("two-view", "entity", "relation", "levi"),
    "conv": ("quaternion", "gcn"),
    "objective": ("bce", "softmax", "kl", "filtered-softmax"),
    "schedule": ("constant", "cosine"),
    "precision": ("float32", "tf32", "bf16"),
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

#: Settings added to a recipe after runs were saved, each with the value every
#: run saved before it trained with: a saved run's settings without one (an
#: older ``config.json`` or checkpoint) take this value, not the recipe's.
ADDED_SETTINGS: Dict[str, Any] = {"weight_decay": 0.0}

#: Learning rate of each recipe on CoDEx-L, where the research code used a smaller one.
CODEX_L_LR = {"paper": 1e-4}


@dataclass
class TrainConfig:
    r"""Every setting of a training run.

    Model settings default to the paper's best on CoDEx-S (:math:`K = 2`,
    256 real channels, :math:`\alpha_0 = 0.9`, :math:`\beta = 0.2`). The
    optimisation settings left ``None`` are filled in from :obj:`recipe`
    (``"fast"`` unless named; see :data:`RECIPES`); a value given explicitly always wins, so
    ``TrainConfig(recipe="paper", epochs=300)`` is the paper's recipe cut to
    300 epochs.

    :obj:`relation_edges` defaults to :obj:`False`, as in
    :class:`~torch_wge.transforms.RelationFocusedTransform`: the published
    research code, whose runs gave the paper's numbers, never adds the
    :math:`r_s - r_o` edges of the relation-focused view.

    The learning rate of epoch :math:`e` (counted from 0) is :meth:`learning_rate`:
    constant, or with :obj:`schedule="cosine"` a linear warm-up over
    :obj:`warmup_epochs` followed by a cosine decay to zero at :obj:`epochs`.
    :obj:`time_limit` (minutes) ends training after the epoch during which the
    run's training and validation time passed it.

    With :obj:`ema_decay` :math:`d > 0`, validation, the best checkpoint and
    test use an exponential moving average of the weights over the optimiser
    steps, :math:`\bar\theta_t = d\,\bar\theta_{t-1} + (1 - d)\,\theta_t`
    (see :class:`~torch_wge.training.ema.WeightAverage`); the trained weights
    are validated beside it and logged. :obj:`0` (every recipe): the trained
    weights themselves.

    :obj:`weight_decay` :math:`\lambda` is AdamW's decoupled decay: every
    step multiplies each parameter by :math:`1 - \eta_e \lambda` before the
    Adam update (:math:`\eta_e` the step's learning rate): 0.1 in the fast
    recipe, :obj:`0` (plain Adam) in the others.
    """

    dataset: str = "codex-s"
    root: str = "data"
    recipe: str = "fast"
    epochs: Optional[int] = None
    batch_size: Optional[int] = None
    lr: Optional[float] = None
    schedule: Optional[str] = None
    warmup_epochs: Optional[int] = None
    objective: Optional[str] = None
    candidates: Optional[int] = None
    label_smoothing: Optional[float] = None
    dropout: Optional[float] = None
    grad_clip: Optional[float] = None
    n3: Optional[float] = None
    relation_prediction: Optional[float] = None
    eval_every: Optional[int] = None
    ema_decay: Optional[float] = None
    weight_decay: Optional[float] = None
    channels: int = 256
    num_layers: int = 2
    alpha0: float = 0.9
    beta: float = 0.2
    predicate_entities: bool = True
    relation_edges: bool = False
    views: str = "two-view"
    conv: str = "quaternion"
    eval_batch_size: int = 1024
    patience: Optional[int] = None
    time_limit: Optional[float] = None
    precision: str = "float32"
    seed: int = 0
    device: Optional[str] = None

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
        checks = [
            (
                self.channels > 0 and self.channels % 4 == 0,
                f"channels must be a positive multiple of 4, got {self.channels}",
            ),
            (0.0 <= self.beta <= 1.0, f"beta must be in [0, 1], got {self.beta}"),
            (self.epochs >= 0, f"epochs must be >= 0, got {self.epochs}"),
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
        epochs), and :math:`\eta` for :obj:`schedule="constant"`."""
        if self.schedule == "constant":
            return self.lr
        if epoch < self.warmup_epochs:
            return self.lr * (epoch + 1) / self.warmup_epochs
        decay_epochs = max(self.epochs - self.warmup_epochs, 1)
        progress = min((epoch - self.warmup_epochs) / decay_epochs, 1.0)
        return self.lr * 0.5 * (1.0 + math.cos(math.pi * progress))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

    @classmethod
    def from_saved(cls, values: dict) -> "TrainConfig":
        """The settings of a saved run (its ``config.json`` or a checkpoint's):
        :meth:`from_dict`, with each of :data:`ADDED_SETTINGS` the saved values
        lack set to the value the run trained with."""
        return cls.from_dict({**ADDED_SETTINGS, **values})

    #: Settings that change the model's parameters or graph; a checkpoint made
    #: under other values of these cannot be resumed or evaluated here.
    MODEL_KEYS = (
        "dataset",
        "channels",
        "num_layers",
        "alpha0",
        "views",
        "conv",
        "beta",
        "predicate_entities",
        "relation_edges",
    )
