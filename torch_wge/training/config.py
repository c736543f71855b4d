import dataclasses
import math
from dataclasses import dataclass
from typing import Optional


@dataclass
class TrainConfig:
    r"""Every setting of a training run. Defaults are the WGE research code's
    CoDEx-S setting (the paper's best: :math:`K = 2`, 256 real channels,
    :math:`\alpha_0 = 0.9`, :math:`\beta = 0.2`, Adam with lr 5e-4, batch 1024,
    label smoothing 0.1, gradient clipping 0.5, dropout 0.5, up to 3000
    epochs, validation MRR every 10 epochs).

    :obj:`relation_edges` defaults to :obj:`False` because the published research
    code, whose runs gave the paper's numbers, never adds the
    :math:`r_s - r_o` edges of the relation-focused view.
    """

    dataset: str = "codex-s"
    root: str = "data"
    epochs: int = 3000
    batch_size: int = 1024
    lr: float = 5e-4
    channels: int = 256
    num_layers: int = 2
    alpha0: float = 0.9
    dropout: float = 0.5
    label_smoothing: float = 0.1
    grad_clip: float = 0.5
    beta: float = 0.2
    predicate_entities: bool = True
    relation_edges: bool = False
    views: str = "two-view"
    conv: str = "quaternion"
    eval_every: int = 10
    eval_batch_size: int = 1024
    patience: Optional[int] = None
    seed: int = 0
    device: Optional[str] = None

    def validate(self) -> None:
        """Raises :class:`ValueError` with a one-line message on a bad setting."""
        checks = [
            (self.channels > 0 and self.channels % 4 == 0, f"channels must be a positive multiple of 4, got {self.channels}"),
            (0.0 <= self.beta <= 1.0, f"beta must be in [0, 1], got {self.beta}"),
            (self.epochs >= 0, f"epochs must be >= 0, got {self.epochs}"),
            (self.batch_size > 0, f"batch size must be positive, got {self.batch_size}"),
            (self.eval_batch_size > 0, f"evaluation batch size must be positive, got {self.eval_batch_size}"),
            (0 < self.lr <= 1, f"lr must be in (0, 1], got {self.lr}"),
            (0 <= self.grad_clip < math.inf, f"grad_clip must be finite and >= 0 (0: off), got {self.grad_clip}"),
            (0 <= self.seed < 2**63, f"seed must be in [0, 2**63), got {self.seed}"),
            (self.num_layers >= 0, f"num_layers must be >= 0, got {self.num_layers}"),
            (0.0 <= self.alpha0 <= 1.0, f"alpha0 must be in [0, 1], got {self.alpha0}"),
            (0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), got {self.dropout}"),
            (0.0 <= self.label_smoothing < 1.0, f"label smoothing must be in [0, 1), got {self.label_smoothing}"),
            (self.eval_every > 0, f"eval_every must be positive, got {self.eval_every}"),
            (self.patience is None or self.patience > 0, f"patience must be positive, got {self.patience}"),
            (self.views in ("two-view", "entity", "relation", "levi"), f"unknown views {self.views!r}"),
            (self.conv in ("quaternion", "gcn"), f"unknown conv {self.conv!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

    #: Settings that change the model's parameters or graph; a checkpoint made
    #: under other values of these cannot be resumed or evaluated here.
    MODEL_KEYS = (
        "dataset", "channels", "num_layers", "alpha0", "views", "conv",
        "beta", "predicate_entities", "relation_edges",
    )
