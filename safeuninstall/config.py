"""Settings, from four places; the strongest that sets a key wins:

1. the command line (the CLI passes what was typed),
2. ``SAFE_UNINSTALL_*`` environment variables,
3. ``[tool.safe-uninstall]`` in the nearest pyproject.toml from the current folder up,
4. the user's ``$XDG_CONFIG_HOME/safe-uninstall/config.toml`` (default ``~/.config/...``),

then the built-in defaults. Each file is validated whole when it is read: an unknown key or a
value of the wrong type is a UsageError naming the key and the file (or the variable).

``probe`` and ``probe-cmd`` are one setting in two halves: they are taken together from the
strongest place that sets either, so a project's ``probe-cmd`` never adds to a ``--probe``
typed on the command line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

from msgspec import Struct

from safeuninstall.base import tomlfile
from safeuninstall.base.errors import UsageError

# One typed value of a setting.
Value: TypeAlias = str | int | float | bool | tuple[str, ...] | None

ENV_PREFIX = "SAFE_UNINSTALL_"
COMMAND_LINE = "command line"
DEFAULT = "default"
COLOR_CHOICES = ("auto", "always", "never")
_PROBE_PAIR = ("probe", "probe-cmd")


class Key(Struct, frozen=True):
    """One configuration key: its name in files, its type, its default and what it does."""

    name: str
    kind: str  # "strings", "seconds", "seconds-or-zero", "path", "bool", "choice", "count",
    # "size"
    default: Value
    help: str
    choices: tuple[str, ...] = ()
    command_line: str | None = None  # where the command line differs from ``--<name>``

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper().replace("-", "_")

    @property
    def option(self) -> str:
        return self.command_line or f"--{self.name}"

    @property
    def type_text(self) -> str:
        return {
            "strings": "string or array of strings",
            "seconds": "number of seconds, > 0",
            "seconds-or-zero": "number of seconds, >= 0",
            "path": "path",
            "bool": "true or false",
            "choice": " | ".join(f'"{c}"' for c in self.choices),
            "count": "whole number, >= 0 (0: no bound)",
            "size": 'size in bytes, or a string like "500M", "2G" (0: no bound)',
        }[self.kind]


KEYS: tuple[Key, ...] = (
    Key(
        "probe",
        "strings",
        (),
        "Python code the target interpreter runs to check the environment still works. "
        "Unset: derived from the impact report: an import of every distribution the removal "
        "affects, plus torch's CUDA, cuDNN and NCCL initialisation when torch is installed.",
    ),
    Key(
        "probe-cmd",
        "strings",
        (),
        "A command (split like a shell would, run without one) with the environment's `bin` "
        "first on PATH; it passes when it exits 0. Taken together with `probe`.",
    ),
    Key(
        "probe-timeout",
        "seconds",
        300.0,
        "A probe still running after this long fails; its whole process group is killed.",
    ),
    Key(
        "state-dir",
        "path",
        None,
        "The folder of one environment's snapshots and stashes. Unset: `<venv>/.safe-uninstall` "
        "(or `$XDG_STATE_HOME/safe-uninstall/<hash>` for a non-virtual interpreter). "
        "A relative path in a file is relative to that file's folder. Not for the user file: "
        "every environment would share one folder.",
    ),
    Key(
        "lock-timeout",
        "seconds-or-zero",
        60.0,
        "How long to wait for another safe-uninstall operation on the same environment; "
        "0 fails at once.",
    ),
    Key(
        "offline",
        "bool",
        False,
        "A reinstall, when the stash cannot give a distribution back, uses no network "
        "(`uv pip install --offline`).",
    ),
    Key(
        "keep",
        "count",
        10,
        "Retention: after each operation, the stashes of the snapshots older than the newest "
        "`keep` are dropped (their snapshot.toml stays: a rollback to one reinstalls its pins "
        "from the index, and says so). The latest snapshot's stash always stays, and so does "
        "one that holds the only copy of a distribution whose name is not installed now (a "
        "removal still in effect; an upgrade's old version is none), which is not counted among "
        "the newest `keep`. A bisect's own snapshots are not counted among them either: the "
        "newest `keep` of those are kept apart. Beyond `keep`, the stashes of snapshots whose "
        "change was undone (put back and verified) are dropped first, then the oldest of the "
        "others.",
        command_line="none (`prune --keep N` deletes whole snapshots once)",
    ),
    Key(
        "max-size",
        "size",
        2 * 1024**3,
        "Retention: after each operation, the oldest stashes are dropped until the others, "
        "the latest's excepted, hold at most this many bytes (files still installed cost "
        "nothing: a stash is hard links). The default keeps a 6 GB ML venv from growing by "
        "more than 2 GiB plus its latest removal. A stash that holds the only copy of a "
        "distribution whose name is not installed now is counted but never dropped: when such "
        "stashes keep the rest above this bound, the output says so.",
        command_line="none (`prune --max-size SIZE` deletes whole snapshots once)",
    ),
    Key(
        "color",
        "choice",
        "auto",
        "Colour in text output: `auto` colours a terminal unless `NO_COLOR` is set; "
        "`--json` output is never coloured.",
        choices=COLOR_CHOICES,
    ),
)

KEY_NAMES = tuple(key.name for key in KEYS)
_BY_NAME = {key.name: key for key in KEYS}
_BY_ENV = {key.env: key for key in KEYS}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


# -- reading one value ------------------------------------------------------------------------


def _from_toml(key: Key, raw: Any, where: str, folder: Path) -> Value:
    """A value read from a TOML file, checked against its key's type."""
    if key.kind == "strings":
        if isinstance(raw, str):
            return (raw,)
        if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
            return tuple(raw)
    elif key.kind in ("seconds", "seconds-or-zero"):
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return _seconds(key, float(raw), where)
    elif key.kind == "path":
        if isinstance(raw, str) and raw:
            path = Path(raw).expanduser()
            return str(path if path.is_absolute() else folder / path)
    elif key.kind == "bool":
        if isinstance(raw, bool):
            return raw
    elif key.kind in ("count", "size"):
        if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
            return raw
        if key.kind == "size" and isinstance(raw, str) and (size := parse_size(raw)) is not None:
            return size
    elif isinstance(raw, str) and raw in key.choices:
        return raw
    raise UsageError(f"{where}: {key.name} must be a {key.type_text}, not {raw!r}")


def _from_text(key: Key, text: str, where: str) -> Value:
    """A value read from an environment variable (or any other string)."""
    if key.kind == "strings":
        return (text,)
    if key.kind in ("seconds", "seconds-or-zero"):
        try:
            seconds = float(text)
        except ValueError:
            raise UsageError(f"{where} must be a number of seconds, not {text!r}") from None
        return _seconds(key, seconds, where)
    if key.kind == "path":
        return text
    if key.kind == "count":
        if text.isascii() and text.isdigit():
            return int(text)
        raise UsageError(f"{where} must be a whole number >= 0, not {text!r}")
    if key.kind == "size":
        size = parse_size(text)
        if size is None:
            raise UsageError(f"{where} must be a size like 500M or 2G, not {text!r}")
        return size
    if key.kind == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise UsageError(f"{where} must be one of {', '.join(_TRUE + _FALSE)}, not {text!r}")
    if text in key.choices:
        return text
    raise UsageError(f"{where} must be one of {', '.join(key.choices)}, not {text!r}")


_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(value: str) -> int | None:
    """``500M``, ``2G``, ``1.5GiB`` or a number of bytes (units are powers of 1024); None when
    the text is not a size (negative, not finite, or not a number)."""
    text = value.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1:] if text[-1:] in _SIZE_UNITS else ""
    try:
        size = float(text[: len(text) - len(unit)]) * _SIZE_UNITS[unit]
    except ValueError:
        return None
    if not math.isfinite(size) or size < 0:  # nan, inf, 1e999G: float() takes them
        return None
    return int(size)


def _seconds(key: Key, seconds: float, where: str) -> float:
    if not math.isfinite(seconds):
        raise UsageError(f"{where}: {key.name} must be a finite number of seconds")
    if seconds < 0 or (seconds == 0 and key.kind == "seconds"):
        bound = "positive" if key.kind == "seconds" else "zero or positive"
        raise UsageError(f"{where}: {key.name} must be a {bound} number of seconds")
    return seconds


# -- the places ---------------------------------------------------------------------------------


class Layer(Struct, frozen=True):
    """What one place sets. ``origins`` says, per key, where exactly (file or variable)."""

    name: str  # "command line", "environment", "project", "user"
    values: Mapping[str, Value]
    origins: Mapping[str, str]


def find_pyproject(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def user_config_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/safe-uninstall/config.toml``; a relative XDG_CONFIG_HOME is ignored,
    as the XDG base directory specification says."""
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg):
        base = Path(xdg)
    else:
        home = environ.get("HOME")
        base = (Path(home) if home else Path.home()) / ".config"
    return base / "safe-uninstall" / "config.toml"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomlfile.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UsageError(f"{path}: cannot read it: {err}") from None


def _layer_from_table(
    name: str, table: Mapping[str, Any], origin: str, folder: Path, where_unknown: str
) -> Layer:
    unknown = sorted(set(table) - set(KEY_NAMES))
    if unknown:
        raise UsageError(
            f"{origin}: unknown key {unknown[0]!r}{where_unknown} (known: {', '.join(KEY_NAMES)})"
        )
    values = {key: _from_toml(_BY_NAME[key], raw, origin, folder) for key, raw in table.items()}
    return Layer(name=name, values=values, origins={key: origin for key in values})


def read_project(path: Path) -> Layer | None:
    """``[tool.safe-uninstall]`` of ``path``; None when the file has no such table."""
    data = _read_toml(path)
    tool = data.get("tool", {})
    if not isinstance(tool, dict) or "safe-uninstall" not in tool:
        return None
    table = tool["safe-uninstall"]
    origin = f"{path} [tool.safe-uninstall]"
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.safe-uninstall] must be a table")
    return _layer_from_table("project", table, origin, path.parent, " in [tool.safe-uninstall]")


def read_user(path: Path) -> Layer | None:
    """The user's config.toml (top-level keys); None when there is no such file."""
    if not path.is_file():
        return None
    return _layer_from_table("user", _read_toml(path), str(path), path.parent, "")


def read_environ(environ: Mapping[str, str]) -> Layer:
    """``SAFE_UNINSTALL_<KEY>`` variables; an empty one counts as unset."""
    values: dict[str, Value] = {}
    origins: dict[str, str] = {}
    for key in KEYS:
        text = environ.get(key.env)
        if text:
            values[key.name] = _from_text(key, text, key.env)
            origins[key.name] = key.env
    return Layer(name="environment", values=values, origins=origins)


def unknown_variables(environ: Mapping[str, str]) -> tuple[str, ...]:
    """``SAFE_UNINSTALL_*`` variables that are not settings (a typo, most likely)."""
    return tuple(sorted(v for v in environ if v.startswith(ENV_PREFIX) and v not in _BY_ENV))


def command_line(values: Mapping[str, Value]) -> Layer:
    """What was typed: None (or an empty tuple) means the option was not given."""
    given: dict[str, Value] = {}
    for name, value in values.items():
        if name not in _BY_NAME:
            raise ValueError(f"not a configuration key: {name}")
        if value is not None and value != ():
            given[name] = value
    return Layer(name="command line", values=given, origins={k: COMMAND_LINE for k in given})


def read_layers(cwd: Path, environ: Mapping[str, str]) -> list[Layer]:
    """Environment, project and user layers, strongest first (the caller adds the CLI's)."""
    layers = [read_environ(environ)]
    pyproject = find_pyproject(cwd)
    if pyproject is not None and (project := read_project(pyproject)) is not None:
        layers.append(project)
    user = read_user(user_config_path(environ))
    if user is not None:
        layers.append(user)
    return layers


# -- resolving -------------------------------------------------------------------------------


class Setting(Struct, frozen=True):
    """One configured value and where it came from."""

    key: Key
    value: Value
    origin: str  # "command line", a variable name, a file, or "default"

    @property
    def env(self) -> str:
        return self.key.env


class Settings(Struct, frozen=True):
    """Every key's effective value and where it came from, plus which files were consulted."""

    by_key: Mapping[str, Setting]
    project_file: Path | None  # the nearest pyproject.toml, whether or not it has the table
    user_file: Path
    user_file_exists: bool
    ignored_variables: tuple[str, ...]

    def value(self, name: str) -> Value:
        return self.by_key[name].value

    def seconds(self, name: str) -> float:
        value = self.value(name)
        assert isinstance(value, float), name
        return value

    def flag(self, name: str) -> bool:
        value = self.value(name)
        assert isinstance(value, bool), name
        return value

    def bound(self, name: str) -> int | None:
        """A count or a size; None for 0, which means no bound."""
        value = self.value(name)
        assert isinstance(value, int) and not isinstance(value, bool), name
        return value or None

    def text(self, name: str) -> str | None:
        value = self.value(name)
        assert value is None or isinstance(value, str), name
        return value

    def strings(self, name: str) -> tuple[str, ...]:
        value = self.value(name)
        assert isinstance(value, tuple), name
        return value


def resolve(
    cwd: Path, environ: Mapping[str, str], cli: Mapping[str, Value] | None = None
) -> Settings:
    layers = [command_line(cli or {}), *read_layers(cwd, environ)]
    by_key: dict[str, Setting] = {}
    for key in KEYS:
        if key.name in _PROBE_PAIR:
            continue
        layer = next((lay for lay in layers if key.name in lay.values), None)
        if layer is None:
            by_key[key.name] = Setting(key, key.default, DEFAULT)
        else:
            by_key[key.name] = Setting(key, layer.values[key.name], layer.origins[key.name])
    probe_layer = next((lay for lay in layers if set(_PROBE_PAIR) & set(lay.values)), None)
    for name in _PROBE_PAIR:
        key = _BY_NAME[name]
        if probe_layer is None:
            by_key[name] = Setting(key, key.default, DEFAULT)
        else:
            origin = probe_layer.origins.get(name) or next(iter(probe_layer.origins.values()))
            by_key[name] = Setting(key, probe_layer.values.get(name, ()), origin)
    user_file = user_config_path(environ)
    return Settings(
        by_key={key.name: by_key[key.name] for key in KEYS},
        project_file=find_pyproject(cwd),
        user_file=user_file,
        user_file_exists=user_file.is_file(),
        ignored_variables=unknown_variables(environ),
    )
