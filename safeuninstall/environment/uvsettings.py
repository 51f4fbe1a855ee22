"""What uv reads besides its command line to choose the environment of a ``uv pip`` command,
read the same way, so that the tool acts where ``uv pip uninstall`` would.

In uv's order (crates/uv-cli, crates/uv-settings): an option on the command line, else its
variable (``UV_PYTHON``, ``UV_SYSTEM_PYTHON``, ``UV_BREAK_SYSTEM_PACKAGES``), else the ``[pip]``
table of uv's configuration: ``--config-file``/``UV_CONFIG_FILE`` alone when given; none with
``--no-config``/``UV_NO_CONFIG``; else the project's (the first ``uv.toml``, or
``pyproject.toml`` with a ``[tool.uv]`` table, from the project folder upwards), then the
user's (``$XDG_CONFIG_HOME/uv/uv.toml``), then the system's (``uv/uv.toml`` in
``$XDG_CONFIG_DIRS``, else ``/etc/uv/uv.toml``), the first that sets a key winning.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct

from safeuninstall.base import tomlfile
from safeuninstall.base.bounded import read_bytes
from safeuninstall.base.errors import InvalidInput

# uv's boolish values (clap's BoolishValueParser)
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})
_MAX_CONFIG_BYTES = 1024 * 1024


class PipTarget(Struct, frozen=True):
    """How uv would choose the environment: a request (a path, a version, a name), whether
    it looks only at system interpreters, and whether it may change an externally managed
    one."""

    python: str | None
    system: bool
    break_system_packages: bool
    # where ``python`` came from, when not from -p: "UV_PYTHON", or the configuration file
    python_from: str | None = None


def pip_target(
    python: str | None,
    system: bool | None,
    break_system_packages: bool | None,
    *,
    cwd: Path,
    environ: Mapping[str, str],
) -> PipTarget:
    """Each of the three as uv settles it: the option given (None: not given), else its
    variable, else the configuration. The configuration is read only when needed."""
    read: dict[str, tuple[Any, Path]] | None = None

    def configured(key: str) -> Any:
        nonlocal read
        if read is None:
            read = _pip_configuration(cwd, environ)
        return read.get(key, (None, None))[0]

    python_from = None
    if python is None and environ.get("UV_PYTHON"):
        python, python_from = environ["UV_PYTHON"], "UV_PYTHON"
    if python is None:
        python = _typed(configured("python"), str, "python")
        if python is not None and read is not None:
            python_from = f"[pip] python of {read['python'][1]}"
    if system is None:
        system = _boolish(environ, "UV_SYSTEM_PYTHON")
    if system is None:
        system = _typed(configured("system"), bool, "system")
    if break_system_packages is None:
        break_system_packages = _boolish(environ, "UV_BREAK_SYSTEM_PACKAGES")
    if break_system_packages is None:
        value = configured("break-system-packages")
        break_system_packages = _typed(value, bool, "break-system-packages")
    return PipTarget(python, bool(system), bool(break_system_packages), python_from)


def _boolish(environ: Mapping[str, str], name: str) -> bool | None:
    value = environ.get(name)
    if not value:
        return None
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise InvalidInput(
        f"{name}={value}: not a value uv accepts (true, false, 1, 0, yes, no, on, off)"
    )


def _typed(value: Any, kind: type, key: str) -> Any:
    if value is None or isinstance(value, kind):
        return value
    raise InvalidInput(f"uv's configuration: [pip] {key} = {value!r} is not a {kind.__name__}")


def _pip_configuration(cwd: Path, environ: Mapping[str, str]) -> dict[str, tuple[Any, Path]]:
    """The ``[pip]`` keys of uv's configuration, each with the file that set it, the first
    file that sets one winning."""
    chosen = environ.get("UV_CONFIG_FILE")
    if chosen:
        files = [(cwd / Path(chosen).expanduser(), False)]
    elif (environ.get("UV_NO_CONFIG") or "").lower() in _TRUE:
        files = []
    else:
        files = list(_configuration_files(cwd, environ))
    found: dict[str, tuple[Any, Path]] = {}
    for path, pyproject in files:
        for key, value in (_pip_table(path, pyproject=pyproject) or {}).items():
            found.setdefault(key, (value, path))
    return found


def _configuration_files(cwd: Path, environ: Mapping[str, str]) -> Iterator[tuple[Path, bool]]:
    """The project's file, the user's, the system's (each that exists), as uv finds them."""
    project = cwd / os.path.expanduser(environ.get("UV_PROJECT") or ".")
    for folder in (project, *project.parents):
        if (folder / "uv.toml").is_file():
            yield folder / "uv.toml", False
            break
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and _pip_table(pyproject, pyproject=True) is not None:
            yield pyproject, True
            break
    home = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    user = Path(home, "uv", "uv.toml")
    if user.is_file():
        yield user, False
    if (environ.get("UV_NO_SYSTEM_CONFIG") or "").lower() in _TRUE:
        return
    dirs = [d for d in (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":") if d]
    for system in [*dirs, "/etc"]:
        if Path(system, "uv", "uv.toml").is_file():
            yield Path(system, "uv", "uv.toml"), False
            return


def _pip_table(path: Path, *, pyproject: bool) -> dict[str, Any] | None:
    """The ``[pip]`` table of a uv.toml (``[tool.uv.pip]`` of a pyproject.toml): {} when the
    file has none, None when a pyproject.toml has no ``[tool.uv]`` at all (uv passes over it)."""
    try:
        text = read_bytes(path, _MAX_CONFIG_BYTES).decode("utf-8")
        data = tomlfile.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        if pyproject:
            return None  # uv warns and goes on upwards
        raise InvalidInput(f"{path}: uv's configuration cannot be read: {err}") from err
    if pyproject:
        tool = data.get("tool")
        uv = tool.get("uv") if isinstance(tool, dict) else None
        if not isinstance(uv, dict):
            return None
        data = uv
    table = data.get("pip")
    return table if isinstance(table, dict) else {}
