"""What ld.so itself says about a load, in the shape the loader model can be compared with.

``ldd FILE`` runs the dynamic linker on FILE with LD_TRACE_LOADED_OBJECTS set: it loads FILE as
the program and everything it needs, breadth first, and prints one line per object loaded
(``name => path``, the name it was first asked for) and per name not found
(``name => not found``), without running anything. ``loaded_by_name`` turns a ``LoadMap`` of
the model into the same shape.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from safeuninstall.libraries.loader import LoadMap

LDD = shutil.which("ldd")

_NAMED = re.compile(r"^\t(\S+) => (?:not found|(.+?) \(0x[0-9a-f]+\))$")
# The dynamic linker (always loaded, under its PT_INTERP path) and the vDSO: no "=>".
_UNNAMED = re.compile(r"^\t(\S+) \(0x[0-9a-f]+\)$")


class LddView:
    """``ldd``'s answer: name -> real path (None: not found), and the dynamic linker's path."""

    def __init__(self, resolved: dict[str, str | None], linker: set[str], text: str) -> None:
        self.resolved = resolved
        self.linker = linker
        self.text = text


def ldd(path: str | Path, ld_library_path: str = "") -> LddView:
    assert LDD is not None
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "LD_LIBRARY_PATH": ld_library_path}
    done = subprocess.run([LDD, str(path)], capture_output=True, text=True, env=env)
    resolved: dict[str, str | None] = {}
    linker: set[str] = set()
    for line in done.stdout.splitlines():
        named = _NAMED.match(line)
        if named:
            found = named.group(2)
            resolved.setdefault(named.group(1), os.path.realpath(found) if found else None)
            continue
        unnamed = _UNNAMED.match(line)
        if unnamed and unnamed.group(1).startswith("/"):
            linker.add(os.path.realpath(unnamed.group(1)))
    return LddView(resolved, linker, done.stdout + done.stderr)


def loaded_by_name(load: LoadMap) -> dict[str, str | None]:
    """The model's load as ldd prints it: each object but the root under the first name it
    was asked for (its real path), each name that nothing answered to -> None."""
    root = os.path.realpath(load.root)
    shown: dict[str, str | None] = {}
    seen: set[str] = {root}
    for entry in load.needed:
        if entry.path is None:
            shown.setdefault(entry.soname, None)
            continue
        real = os.path.realpath(entry.path)
        if real not in seen:
            seen.add(real)
            shown.setdefault(entry.soname, real)
    return shown


def disagreement(load: LoadMap, view: LddView) -> dict[str, tuple[str | None, str | None]]:
    """name -> (model, ldd) wherever they differ; the dynamic linker, which ldd prints by its
    path alone (it is loaded before anything is searched), is left out of both."""
    model = {k: v for k, v in loaded_by_name(load).items() if v not in view.linker}
    absent = "(not loaded)"
    return {
        name: (model.get(name, absent), view.resolved.get(name, absent))
        for name in sorted(set(model) | set(view.resolved))
        if model.get(name, absent) != view.resolved.get(name, absent)
    }
