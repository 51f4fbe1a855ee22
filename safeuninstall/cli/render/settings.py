"""``config``: every setting's effective value and where it came from."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from safeuninstall.config import Settings


def _toml_value(value: object) -> str:
    # JSON's strings, numbers, booleans and arrays are valid TOML values too.
    return json.dumps(list(value) if isinstance(value, tuple) else value)


_UNSET = {
    "probe": "(unset: the default probe)",
    "probe-cmd": "(unset)",
    "state-dir": "(unset: <venv>/.safe-uninstall)",
}


def settings(config: Settings, *, verbose: bool, quiet: bool) -> str:
    """``key = value  # origin`` per key; quiet: the effective values as TOML, unset keys out."""
    lines = []
    for name, setting in config.by_key.items():
        unset = setting.value is None or setting.value == ()
        if quiet:
            if not unset:
                lines.append(f"{name} = {_toml_value(setting.value)}")
            continue
        shown = _UNSET.get(name, "(unset)") if unset else _toml_value(setting.value)
        lines.append(f"{name:<13} = {shown:<34} # {setting.origin}")
    if quiet:
        return "\n".join(lines)
    lines += [f"ignored: {var} is not a safe-uninstall setting" for var in config.ignored_variables]
    if verbose:
        project = config.project_file or "none found from the current folder up"
        state = "" if config.user_file_exists else " (no such file)"
        lines += [f"project file: {project}", f"user file: {config.user_file}{state}"]
    return "\n".join(lines)
