"""Settings files: a JSON (or YAML) object of :class:`~torch_wge.training.TrainConfig`
fields, read by ``torch-wge train --config FILE`` and ``torch-wge tune --config FILE``
and written by ``torch-wge tune`` as its best trial's settings.

A file holds any subset of the fields, for example ``{"recipe": "paper", "lr": 0.001}``;
the fields it leaves out take their defaults (the recipe's for the optimisation
settings), and options given on the command line override it. An unknown key,
a value of the wrong type or outside its range is one line naming the file and
the key (:class:`SettingsFileError`).
"""

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, Optional, Union

from torch_wge.training import validation
from torch_wge.training.config import TrainConfig

PathLike = Union[str, Path]

#: Suffixes read as YAML (when PyYAML is installed); any other file is read as JSON.
YAML_SUFFIXES = (".yaml", ".yml")


class SettingsFileError(ValueError):
    """A settings or search-space file that cannot be used, named with its key."""


def read_mapping(path: PathLike) -> Dict[str, Any]:
    """The JSON object (or YAML mapping, for a ``.yaml`` / ``.yml`` file) in ``path``.

    Raises:
        SettingsFileError: when the file is unreadable, not JSON / YAML, or not an object.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not a text file"
        raise SettingsFileError(f"{path}: cannot be read ({reason})") from None
    if path.suffix.lower() in YAML_SUFFIXES:
        try:
            import yaml
        except ImportError:
            raise SettingsFileError(f"{path}: reading YAML needs PyYAML (pip install pyyaml), or write JSON") from None
        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise SettingsFileError(f"{path}: not valid YAML ({' '.join(str(error).split())[:120]})") from None
    else:
        try:
            values = json.loads(text)
        except ValueError as error:
            raise SettingsFileError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(values, dict):
        raise SettingsFileError(f"{path}: expected an object of settings, found {type(values).__name__}")
    return values


def setting_error(name: str, value: Any) -> Optional[str]:
    """Why ``value`` cannot be the setting ``name`` of a :class:`TrainConfig`
    on its own (an unknown name, the wrong type, or a value its check in
    :meth:`TrainConfig.validate` refuses), or :obj:`None` when it can."""
    fields = {field.name for field in dataclasses.fields(TrainConfig)}
    if name not in fields:
        return "unknown setting (not a field of TrainConfig)"
    try:
        validation.settings({name: value}, "")
    except validation.StoredError as error:
        return str(error).removeprefix(": ")
    return None


def read_settings_file(path: PathLike) -> Dict[str, Any]:
    """The settings in ``path`` as a dict of :class:`TrainConfig` field names
    to values, each checked on its own and then all together.

    Raises:
        SettingsFileError: naming ``path`` and the key at fault.
    """
    values = read_mapping(path)
    for name, value in values.items():
        error = setting_error(str(name), value)
        if error is not None:
            raise SettingsFileError(f"{path}: {name}: {error}")
    try:
        TrainConfig.from_dict(values).validate()
    except ValueError as error:
        raise SettingsFileError(f"{path}: {error}") from None
    return values
