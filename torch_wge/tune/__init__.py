"""Hyperparameter search of WGE runs on Optuna (the ``tune`` extra): ``torch-wge tune``.

Importing this package imports Optuna; the command line imports it only for ``tune``
and for plots of a study.
"""

from torch_wge.tune.space import DEFAULT_SPACE, check_space, fixed_params, suggest
from torch_wge.tune.study import PRUNERS, best_checkpoint, load_study, read_study_file, run_folder, tune, write_best

__all__ = [
    "DEFAULT_SPACE",
    "check_space",
    "fixed_params",
    "suggest",
    "PRUNERS",
    "best_checkpoint",
    "load_study",
    "read_study_file",
    "run_folder",
    "tune",
    "write_best",
]
