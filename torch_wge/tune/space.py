"""The search space of ``torch-wge tune``: a dict of
:class:`~torch_wge.training.TrainConfig` field names to distribution specs.

A spec is a JSON object of one of three types:

- ``{"type": "categorical", "choices": [1, 2, 3]}``: one of the listed values;
- ``{"type": "int", "low": 100, "high": 500, "step": 100}``: an integer in
  :math:`[low, high]` on the grid of ``step`` (default 1); ``"log": true``
  draws it uniformly in :math:`\\log` (``step`` 1 only);
- ``{"type": "float", "low": 1e-4, "high": 2e-2, "log": true}``: a real number
  in :math:`[low, high]`, uniformly or in :math:`\\log`, or on the grid of ``step``.

:func:`check_space` refuses a spec naming no :class:`TrainConfig` field, of a type
the field does not take, or with a bound or choice the field's own check in
:meth:`TrainConfig.validate` refuses.
"""

import dataclasses
import typing
from typing import Any, Dict, Mapping

from torch_wge.io import short_repr
from torch_wge.training.config import TrainConfig
from torch_wge.training.settings_file import SettingsFileError, setting_error

#: The default search space: the paper's grid (:math:`K`, the learning rate, the
#: batch size, the embedding size, :math:`\alpha_0`, :math:`\beta`), its learning
#: rates widened to the fast recipe's 1e-2, and the fast recipe's other settings
#: (dropout, label smoothing, weight decay, epochs of the cosine schedule).
DEFAULT_SPACE: Dict[str, Dict[str, Any]] = {
    "num_layers": {"type": "categorical", "choices": [1, 2, 3]},
    "lr": {"type": "float", "low": 1e-4, "high": 2e-2, "log": True},
    "batch_size": {"type": "categorical", "choices": [256, 512, 1024, 2048, 4096]},
    "hidden_channels": {"type": "categorical", "choices": [8, 16, 32, 64, 128, 256]},
    "alpha0": {"type": "categorical", "choices": [0.3, 0.6, 0.9]},
    "beta": {"type": "categorical", "choices": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]},
    "dropout": {"type": "float", "low": 0.0, "high": 0.6},
    "label_smoothing": {"type": "float", "low": 0.0, "high": 0.3},
    "weight_decay": {"type": "float", "low": 0.0, "high": 0.3},
    "epochs": {"type": "int", "low": 100, "high": 500, "step": 100},
}

#: Settings that say where a run reads and computes, not how it trains: given on the command line, never searched.
NOT_SEARCHED = ("dataset", "root", "device")

#: The keys each spec type takes, the required ones first.
SPEC_KEYS = {
    "categorical": (("choices",), ()),
    "int": (("low", "high"), ("step", "log")),
    "float": (("low", "high"), ("step", "log")),
}


def _field_kind(name: str) -> type:
    hint = typing.get_type_hints(TrainConfig)[name]
    return next((arg for arg in typing.get_args(hint) if arg is not type(None)), hint)


def _is_number(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind is int else isinstance(value, (int, float))


def _spec_error(name: str, spec: Any) -> str | None:
    """Why ``spec`` cannot be searched for the setting ``name``, or :obj:`None`."""
    if name not in {field.name for field in dataclasses.fields(TrainConfig)}:
        return "unknown setting (not a field of TrainConfig)"
    if name in NOT_SEARCHED:
        return f"not searched: give --{name} on the command line"
    if not isinstance(spec, Mapping) or spec.get("type") not in SPEC_KEYS:
        return f'expected an object with "type" one of {", ".join(SPEC_KEYS)}, found {short_repr(spec, 100)}'
    required, optional = SPEC_KEYS[spec["type"]]
    unknown = set(spec) - {"type", *required, *optional}
    missing = [key for key in required if key not in spec]
    if unknown or missing:
        return f"a {spec['type']} spec takes {', '.join(required + optional)}; " + (
            f"unknown {', '.join(sorted(unknown))}" if unknown else f"missing {', '.join(missing)}"
        )
    kind = _field_kind(name)
    if spec["type"] == "categorical":
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            return "choices must be a non-empty list"
        values = choices
    else:
        if kind is not {"int": int, "float": float}[spec["type"]]:
            return f"a spec of type {spec['type']} for a setting of type {kind.__name__}; use " + (
                "categorical" if kind in (bool, str) else "int" if kind is int else "float"
            )
        low, high, step, log = spec["low"], spec["high"], spec.get("step"), spec.get("log", False)
        if not (_is_number(low, kind) and _is_number(high, kind) and low <= high):
            return f"low and high must be {kind.__name__}s with low <= high, found {short_repr(low)} and {short_repr(high)}"
        if not isinstance(log, bool):
            return f"log must be true or false, found {short_repr(log)}"
        if step is not None and not (_is_number(step, kind) and step > 0):
            return f"step must be a positive {kind.__name__}, found {short_repr(step)}"
        if log and (low <= 0 or (step is not None and step != 1)):
            return "a log spec needs low > 0 and no step"
        values = [low, high]
    for value in values:
        error = setting_error(name, value)
        if error is not None:
            return error
    return None


def check_space(space: Any, source: str) -> Dict[str, Dict[str, Any]]:
    """Returns ``space`` checked (see the module's description).

    Args:
        space (dict): Field name -> distribution spec.
        source (str): The file it was read from, named in an error.

    Raises:
        SettingsFileError: one line naming ``source`` and the key at fault.
    """
    if not isinstance(space, Mapping) or not space:
        raise SettingsFileError(f"{source}: expected a non-empty object of settings to search")
    for name, spec in space.items():
        error = _spec_error(str(name), spec)
        if error is not None:
            raise SettingsFileError(f"{source}: {name}: {error}")
    return dict(space)


def suggest(trial, space: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """The settings ``trial`` (an :class:`optuna.trial.Trial`) draws from ``space``."""
    values = {}
    for name, spec in space.items():
        if spec["type"] == "categorical":
            values[name] = trial.suggest_categorical(name, spec["choices"])
        elif spec["type"] == "int":
            values[name] = trial.suggest_int(
                name, spec["low"], spec["high"], step=spec.get("step", 1), log=spec.get("log", False)
            )
        else:
            values[name] = trial.suggest_float(
                name, spec["low"], spec["high"], step=spec.get("step"), log=spec.get("log", False)
            )
    return values


def _outside_spec(value: Any, spec: Mapping[str, Any]) -> str | None:
    """Why ``value`` is not one ``spec`` can draw, or :obj:`None`."""
    if spec["type"] == "categorical":
        return (
            None
            if value in spec["choices"]
            else f"{short_repr(value)} is not one of the choices {short_repr(spec['choices'], 200)}"
        )
    kind = int if spec["type"] == "int" else float
    if not _is_number(value, kind):
        return f"expected {'an int' if kind is int else 'a float'}, found {short_repr(value)}"
    low, high, step = spec["low"], spec["high"], spec.get("step")
    if not low <= value <= high:
        return f"{short_repr(value)} is outside the space's [{low}, {high}]"
    if step is not None and abs((value - low) / step - round((value - low) / step)) > 1e-9:
        return f"{short_repr(value)} is not on the space's grid {low}, {low + step}, ... (step {step})"
    return None


def fixed_params(settings: Mapping[str, Any], space: Mapping[str, Mapping[str, Any]], source: str) -> Dict[str, Any]:
    """The values ``settings`` (a settings file's, such as a study's ``best.json``) gives the
    settings ``space`` searches, each checked to be one the space can draw: a trial to queue with
    :meth:`optuna.Study.enqueue_trial`. Settings the space does not search are left out (a trial
    takes them from its study's base settings); searched settings the file does not name are drawn.

    Example:
        >>> fixed_params({"lr": 0.01, "dataset": "codex-s"}, {"lr": {"type": "float", "low": 1e-4, "high": 2e-2}}, "f")
        {'lr': 0.01}

    Raises:
        SettingsFileError: naming ``source`` and the setting, when it lies outside the space or the
            file names none of the searched settings.
    """
    params = {name: settings[name] for name in space if name in settings}
    if not params:
        raise SettingsFileError(f"{source}: names none of the searched settings ({', '.join(space)})")
    for name, value in params.items():
        error = _outside_spec(value, space[name])
        if error is not None:
            raise SettingsFileError(f"{source}: {name}: {error}")
    return params
