"""Settings files: a JSON (or YAML) object of :class:`~torch_wge.training.TrainConfig`
fields, read by ``torch-wge train --config FILE`` and ``torch-wge tune --config FILE``
and written by ``torch-wge tune`` as its best trial's settings; and the checks of
stored settings (a run's ``config.json``, a checkpoint's ``config``).

A file holds any subset of the fields, for example ``{"recipe": "paper", "lr": 0.001}``;
the fields it leaves out take their defaults (the recipe's for the optimisation
settings), and options given on the command line override it. An unknown key,
a value of the wrong type or outside its range is one line naming the file and
the key (:class:`SettingsFileError`). Files are read by :func:`torch_wge.io.read_document`
(a regular file, bounded in size and nesting, YAML without aliases). Nothing here
imports torch: the command line checks settings before it loads it.
"""

import dataclasses
import typing
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from torch_wge import io
from torch_wge.training.config import TrainConfig

PathLike = Union[str, Path]


class SettingsFileError(ValueError):
    """A settings or search-space file that cannot be used, named with its key."""


class StoredError(ValueError):
    """A stored setting or checkpoint field of the wrong type, shape or value, or missing."""


def read_mapping(path: PathLike) -> Dict[str, Any]:
    """The JSON object (or YAML mapping, for a ``.yaml`` / ``.yml`` file) in ``path``.

    Raises:
        SettingsFileError: when the file is unreadable, not JSON / YAML, or not an object.
    """
    try:
        values = io.read_document(path)
    except io.UnreadableFileError as error:
        raise SettingsFileError(str(error)) from None
    except OSError as error:
        raise SettingsFileError(f"{path}: cannot be read ({error.strerror})") from None
    if not isinstance(values, dict):
        raise SettingsFileError(f"{path}: expected an object of settings, found {type(values).__name__}")
    return values


def _kinds() -> Dict[str, Tuple[type, bool]]:
    # field name -> (its type, whether None is allowed)
    hints = typing.get_type_hints(TrainConfig)
    kinds = {}
    for field in dataclasses.fields(TrainConfig):
        args = [arg for arg in typing.get_args(hints[field.name]) if arg is not type(None)]
        kinds[field.name] = (args[0] if args else hints[field.name], bool(args))
    return kinds


def is_of_kind(value: Any, kind: type) -> bool:
    """Whether ``value`` (as read from JSON or a checkpoint) is of ``kind``:
    ``bool`` is no number, an integer is a float but a float no integer."""
    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def kind_name(kind: type) -> str:
    """``int`` as "an integer", ``float`` as "a number", ... (for error messages)."""
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false", dict: "a dict"}.get(
        kind, kind.__name__
    )


def settings(values: Any, path: PathLike, where: str = "") -> TrainConfig:
    """The :class:`TrainConfig` of stored ``values`` (a ``config.json``, or
    the ``config`` of a checkpoint, then ``where="config: "``).

    Every field present must have its type (``"hidden_channels": "abc"``, ``8.0``
    or ``true`` is refused for the integer ``hidden_channels``; an integer is
    accepted where a float is expected); ``dataset`` must be present, other
    fields absent take their defaults, unknown ones are refused; then :meth:`TrainConfig.validate` checks the
    values.

    Raises:
        StoredError: naming ``path`` and the field.
    """
    if not isinstance(values, Mapping):
        raise StoredError(f"{path}: {where}expected a JSON object of settings, found {type(values).__name__}")
    if "dataset" not in values:  # never a default: that would read (or download) another dataset
        raise StoredError(f"{path}: {where}no 'dataset' setting: which dataset the run trained on is unknown")
    for name, (kind, optional) in _kinds().items():
        if name not in values or (optional and values[name] is None):
            continue
        if not is_of_kind(values[name], kind):
            raise StoredError(
                f"{path}: {where}setting {name!r} must be {kind_name(kind)}, found {io.short_repr(values[name])}"
            )
    try:
        config = TrainConfig.from_dict(dict(values))
        config.validate()
    except ValueError as error:
        raise StoredError(f"{path}: {where}{one_line(error)}") from None
    return config


def read_stored_settings(path: PathLike) -> TrainConfig:
    """The settings of a run folder's ``config.json``, checked (:func:`settings`).

    Raises:
        StoredError: naming ``path`` (unreadable, no object of settings, a field at fault).
    """
    try:
        values = io.read_document(path, "json")
    except (io.UnreadableFileError, OSError) as error:
        reason = f"{error.filename}: {error.strerror}" if isinstance(error, OSError) else str(error)
        raise StoredError(f"unreadable run settings ({reason})") from None
    return settings(values, path)


def one_line(error: BaseException, limit: int = 300) -> str:
    """The first line of ``error``'s message, at most ``limit`` characters."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def setting_error(name: str, value: Any) -> Optional[str]:
    """Why ``value`` cannot be the setting ``name`` of a :class:`TrainConfig`
    on its own (an unknown name, the wrong type, or a value its check in
    :meth:`TrainConfig.validate` refuses), or :obj:`None` when it can."""
    fields = {field.name for field in dataclasses.fields(TrainConfig)}
    if name not in fields:
        return "unknown setting (not a field of TrainConfig)"
    try:
        settings({"dataset": TrainConfig.dataset, name: value}, "")  # stored settings name a dataset
    except StoredError as error:
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
            raise SettingsFileError(f"{path}: {str(name)[:60]}: {error}")
    try:
        TrainConfig.from_dict(values).validate()
    except ValueError as error:
        raise SettingsFileError(f"{path}: {one_line(error)}") from None
    return values
