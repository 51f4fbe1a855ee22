"""Probe configuration from ``[tool.safe-uninstall]`` in the nearest pyproject.toml and from
``SAFE_UNINSTALL_*`` environment variables. The command line wins over both, the environment
over the project file."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_KEYS = ("probe", "probe-cmd", "probe-timeout")


@dataclass(frozen=True)
class ProbeConfig:
    """Probe settings from one place; None/empty means that place does not set it."""

    origin: str
    probes: tuple[str, ...] = ()
    probe_cmds: tuple[str, ...] = ()
    timeout: float | None = None


def find_pyproject(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _strings(value: Any, key: str, origin: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise UsageError(f"{origin}: {key} must be a string or an array of strings")


def _timeout(value: Any, key: str, origin: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise UsageError(f"{origin}: {key} must be a positive number of seconds")
    return float(value)


def from_pyproject(path: Path) -> ProbeConfig:
    origin = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise UsageError(f"{origin}: cannot read it: {err}") from None
    table = data.get("tool", {}).get("safe-uninstall", {})
    if not isinstance(table, dict):
        raise UsageError(f"{origin}: [tool.safe-uninstall] must be a table")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise UsageError(
            f"{origin}: unknown key {unknown[0]!r} in [tool.safe-uninstall] "
            f"(known: {', '.join(_KEYS)})"
        )
    return ProbeConfig(
        origin=f"{origin} [tool.safe-uninstall]",
        probes=_strings(table["probe"], "probe", origin) if "probe" in table else (),
        probe_cmds=_strings(table["probe-cmd"], "probe-cmd", origin)
        if "probe-cmd" in table
        else (),
        timeout=_timeout(table["probe-timeout"], "probe-timeout", origin)
        if "probe-timeout" in table
        else None,
    )


def from_environ(environ: Mapping[str, str]) -> ProbeConfig:
    timeout = None
    raw_timeout = environ.get("SAFE_UNINSTALL_PROBE_TIMEOUT")
    if raw_timeout:
        try:
            timeout = _timeout(float(raw_timeout), "SAFE_UNINSTALL_PROBE_TIMEOUT", "environment")
        except ValueError:
            raise UsageError("SAFE_UNINSTALL_PROBE_TIMEOUT must be a number of seconds") from None
    probe = environ.get("SAFE_UNINSTALL_PROBE")
    probe_cmd = environ.get("SAFE_UNINSTALL_PROBE_CMD")
    return ProbeConfig(
        origin="environment",
        probes=(probe,) if probe else (),
        probe_cmds=(probe_cmd,) if probe_cmd else (),
        timeout=timeout,
    )


def load_layers(cwd: Path, environ: Mapping[str, str]) -> list[ProbeConfig]:
    """Configuration layers, strongest first (the CLI layer is added by the caller)."""
    layers = [from_environ(environ)]
    pyproject = find_pyproject(cwd)
    if pyproject is not None:
        layers.append(from_pyproject(pyproject))
    return layers
