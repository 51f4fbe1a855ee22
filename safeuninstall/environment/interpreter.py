"""The target interpreter: which one (found as uv finds it), what it says about itself (asked
once, and cached for a venv), and where a --target or --prefix aims it.

Opening a target needs only this module of the two: listing snapshots opens one and reads no
distribution, so it does not import the distribution model (environment.py: packaging's
name rules, RECORD and legacy layouts).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

import msgspec
from msgspec import Struct
from uv import find_uv_bin

from safeuninstall.base import process, trust
from safeuninstall.base.bounded import read_bytes
from safeuninstall.base.cachefile import CacheFile, FileStamp
from safeuninstall.base.errors import EnvironmentNotFound

_BIN = "Scripts" if sys.platform == "win32" else "bin"

# Asked of the target interpreter once per run; -I keeps the user's site and env out.
_QUERY = r"""
import json, os, platform, sys, sysconfig
paths = sysconfig.get_paths()
impl = sys.implementation.name
markers = {
    "implementation_name": impl,
    "implementation_version": "{0.major}.{0.minor}.{0.micro}".format(sys.implementation.version),
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}
print(json.dumps({
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "version": platform.python_version(),
    "purelib": paths["purelib"],
    "platlib": paths["platlib"],
    "scripts": paths["scripts"],
    "stdlib": paths["stdlib"],
    "markers": markers,
}))
"""


class Interpreter(Struct, frozen=True):
    """What the target interpreter said about itself."""

    executable: str
    prefix: str
    base_prefix: str
    version: str
    purelib: str
    platlib: str
    scripts: str
    markers: Mapping[str, str]
    stdlib: str = ""
    # "environment": the interpreter's own; "target" or "prefix": a folder given with
    # --target or --prefix, whose packages this interpreter runs (see with_layout)
    layout: str = "environment"
    # With --target or --prefix: the interpreter's own site folders, which its imports search
    # too (after the folder's, put first on PYTHONPATH)
    own_site_dirs: tuple[str, ...] = ()

    @property
    def is_venv(self) -> bool:
        return self.layout == "environment" and self.prefix != self.base_prefix

    def externally_managed(self) -> str | None:
        """The EXTERNALLY-MANAGED file's text (PEP 668) where it applies, as uv reads it: never
        for a venv, a --target or a --prefix folder."""
        if self.is_venv or self.layout != "environment" or not self.stdlib:
            return None
        try:
            return read_bytes(Path(self.stdlib) / "EXTERNALLY-MANAGED", 64 * 1024).decode(
                "utf-8", errors="replace"
            )
        except OSError:
            return None

    @property
    def site_dirs(self) -> tuple[Path, ...]:
        dirs = [Path(self.purelib)]
        if self.platlib != self.purelib:
            dirs.append(Path(self.platlib))
        return tuple(dirs)


# What uv reads as a version or an implementation before it looks for a path
# (uv-python PythonRequest::parse): 3.11, 311, python3.11, cpython@3.12, pypy, any ...
# Compiled on first use (re caches it): 3 M instructions, for the rare -p that needs it.
_VERSION_REQUEST = (
    r"(any|default|(python|cpython|cp|pypy|pp|graalpy|gp|pyodide)?@?[0-9][0-9.]*[a-z0-9+.-]*"
    r"|(cpython|cp|pypy|pp|graalpy|gp|pyodide)(@.*)?)"
)


def is_path_request(python: str) -> bool:
    """-p names a path (not a version, an executable name or an implementation): it has a
    separator, or is an existing file or folder that uv would not read as a version."""
    if os.sep in python or python.startswith("~"):
        return True
    return Path(python).exists() and not re.fullmatch(_VERSION_REQUEST, python, re.IGNORECASE)


def find_python(
    python: str | None, *, cwd: Path, environ: Mapping[str, str], system: bool = False
) -> Path:
    """Resolve the target interpreter the way ``uv pip`` does: the request (-p, UV_PYTHON or
    uv's configuration: see uvsettings.py), else $VIRTUAL_ENV, else an active conda environment
    ($CONDA_PREFIX, not conda's base), else the virtual environment the current folder is in,
    or a .venv in it or a parent, else conda's base environment or the first Python on PATH
    where it is a virtual environment's (uv changes a system interpreter only when asked). A
    request that is no path (``3.11``, ``python3``, ``pypy``), and --system, are resolved by
    asking uv itself (``uv python find``): one implementation of uv's rules."""
    if (python and not is_path_request(python)) or system:
        return ask_uv(python, system=system, cwd=cwd, environ=environ)
    if python:
        candidate = Path(python).expanduser()
        if candidate.is_dir():
            return _venv_python(candidate, origin=f"--python {python}")
        if candidate.is_file():
            return candidate.absolute()
        raise EnvironmentNotFound(
            f"--python {python}: no such interpreter or environment directory"
        )
    virtual_env = environ.get("VIRTUAL_ENV")
    if virtual_env:
        return _venv_python(Path(virtual_env), origin=f"VIRTUAL_ENV={virtual_env}")
    conda = _conda_environment(environ)
    if conda is not None:
        return _venv_python(conda, origin=f"CONDA_PREFIX={conda}")
    for folder in (cwd, *cwd.parents):
        if (folder / "pyvenv.cfg").is_file():  # inside a virtual environment
            return _venv_python(folder, origin=str(folder))
        venv = folder / ".venv"
        if (venv / "pyvenv.cfg").is_file():
            return _venv_python(venv, origin=str(venv))
    base = environ.get("CONDA_PREFIX")
    if base and (Path(base) / "pyvenv.cfg").is_file():  # uv takes a base that is a venv
        return _venv_python(Path(base), origin=f"CONDA_PREFIX={base}")
    on_path = _first_on_path(environ)
    if on_path is not None and (on_path.parent.parent / "pyvenv.cfg").is_file():
        return on_path.absolute()  # a venv's bin on PATH, not activated (a container's)
    raise EnvironmentNotFound(
        "no target environment: pass --python, activate a virtualenv, "
        "or run inside a folder that has a .venv"
        + (
            f" (CONDA_PREFIX={base} is conda's base environment, a system interpreter, "
            "which uv pip changes only when asked: --system, or its path with --python)"
            if base
            else ""
        )
    )


def _first_on_path(environ: Mapping[str, str]) -> Path | None:
    """The first Python on PATH (``python3``, else ``python``, in the first folder that has
    one): uv's last resort, taken when it is a virtual environment's."""
    for folder in (environ.get("PATH") or "").split(os.pathsep):
        for name in ("python3", "python"):
            found = Path(folder or ".", name)
            if found.is_file() and os.access(found, os.X_OK):
                return found
    return None


def _conda_environment(environ: Mapping[str, str]) -> Path | None:
    """The conda environment $CONDA_PREFIX names, unless it is conda's base environment, which
    uv counts as a system interpreter (uv-python's CondaEnvironmentKind::from_prefix_path)."""
    prefix = environ.get("CONDA_PREFIX")
    if not prefix:
        return None
    path = Path(prefix)
    if (path / "conda-meta" / "pixi").is_file():
        return path  # pixi makes no base environment
    if environ.get("_CONDA_ROOT") == prefix:
        return None
    active = environ.get("CONDA_DEFAULT_ENV")
    if active is None or active == prefix or path.name == active:
        return path
    return None  # named otherwise than its folder: the base environment


def find_uv(environ: Mapping[str, str] | None = None) -> str | None:
    """``SAFE_UNINSTALL_UV`` (a path, or ``none`` to use pip), else the uv the package ships,
    else the first on PATH."""
    chosen = (environ if environ is not None else os.environ).get("SAFE_UNINSTALL_UV")
    if chosen:
        return None if chosen == "none" else chosen
    try:
        return str(find_uv_bin())
    except FileNotFoundError:
        return shutil.which("uv")


def ask_uv(request: str | None, *, system: bool, cwd: Path, environ: Mapping[str, str]) -> Path:
    """``uv python find [--system] [REQUEST]``: the interpreter uv's own discovery picks (an
    active or a .venv environment first; with --system, the first on PATH)."""
    what = " ".join(
        filter(None, ["--system" if system else "", f"-p {request}" if request else ""])
    )
    uv = find_uv(environ)
    if uv is None:
        raise EnvironmentNotFound(
            f"{what}: finding an interpreter by version or name is uv's discovery, and no uv "
            "was found; pass the interpreter's path (-p /path/to/python)"
        )
    argv = [uv, "python", "find", "--no-project", *(["--system"] if system else [])]
    env = {**process.scrubbed(environ), "UV_PYTHON_DOWNLOADS": "never"}
    if "VIRTUAL_ENV" in environ:
        env["VIRTUAL_ENV"] = environ["VIRTUAL_ENV"]  # uv looks at the active one first
    try:
        done = process.run([*argv, *([request] if request else [])], timeout=60, env=env, cwd=cwd)
    except OSError as err:
        raise EnvironmentNotFound(f"{what}: cannot run {uv}: {err.strerror}") from err
    found = done.stdout.strip().splitlines()
    if not done.ok or not found:
        raise EnvironmentNotFound(f"{what}: uv found no such interpreter", detail=done.output())
    return Path(found[-1]).absolute()


def with_layout(interpreter: Interpreter, *, target: str | None, prefix: str | None) -> Interpreter:
    """The interpreter, aimed at a --target or --prefix folder as uv aims it: --target DIR
    holds the packages itself (scripts in DIR/bin), --prefix DIR is laid out like a venv
    (lib/pythonX.Y/site-packages, bin)."""
    folder = target or prefix
    if folder is None:
        return interpreter
    root = os.path.abspath(os.path.expanduser(folder))
    # A folder that does not exist holds no packages: nothing to remove there, as for uv.
    if os.path.lexists(root) and not os.path.isdir(root):
        option = "--target" if target else "--prefix"
        raise EnvironmentNotFound(f"{option} {folder}: not a folder")
    if target:
        site = root
    else:
        version = ".".join(interpreter.version.split(".")[:2])
        site = os.path.join(root, "lib", f"python{version}", "site-packages")
    return msgspec.structs.replace(
        interpreter,
        prefix=root,
        purelib=site,
        platlib=site,
        scripts=os.path.join(root, _BIN),
        layout="target" if target else "prefix",
        own_site_dirs=tuple(dict.fromkeys((interpreter.purelib, interpreter.platlib))),
    )


def _venv_python(venv: Path, *, origin: str) -> Path:
    for name in ("python", "python3", "python.exe"):
        exe = venv / _BIN / name
        if exe.is_file():
            return exe.absolute()
    link = venv / _BIN / "python"
    if link.is_symlink():
        raise EnvironmentNotFound(
            f"{origin}: {link} is a link to {os.readlink(link)}, which does not exist: the "
            "interpreter this environment was made from is gone (recreate the environment)"
        )
    raise EnvironmentNotFound(f"{origin}: {venv} is not a Python environment (no {_BIN}/python)")


def query_interpreter(
    python: Path, environ: Mapping[str, str], *, write_cache: bool = True
) -> Interpreter:
    """Ask the interpreter about itself, or reuse its last answer.

    For a venv the answer is cached in ``<venv>/.safe-uninstall/interpreter.json``, used while
    the interpreter file and pyvenv.cfg are the files it was asked with (device, inode, size,
    mtime, ctime), and only where it describes this venv (``_describes``): it saves one
    interpreter start per command. ``write_cache=False`` (a dry run) writes no answer.
    The query runs with -B: importing what a .pth file names would write bytecode into the
    environment.
    """
    cache, stamp = _interpreter_cache(python)
    if cache is not None:
        cached = cache.read()
        if cached is not None and cached.stamp == stamp and _describes(cached.interpreter, python):
            return cached.interpreter
    try:
        done = process.run(
            [str(python), "-I", "-B", "-c", _QUERY], timeout=60, env=process.scrubbed(environ)
        )
    except OSError as err:
        raise EnvironmentNotFound(f"{python}: cannot run it: {err.strerror}") from err
    if not done.ok:
        raise _not_an_interpreter(python, environ, done.output())
    try:
        interpreter = msgspec.json.decode(done.stdout, type=Interpreter)
    except (msgspec.DecodeError, UnicodeEncodeError) as err:
        raise EnvironmentNotFound(f"{python}: unexpected answer to the interpreter query") from err
    if write_cache and cache is not None and stamp is not None:
        cache.write(_Cached(stamp, interpreter))
    return interpreter


# Understood by any Python, 2 or 3: which one it is, when the query failed.
_VERSION_ONLY = "import sys; sys.stdout.write('%d.%d' % sys.version_info[:2])"


def _not_an_interpreter(python: Path, environ: Mapping[str, str], output: str) -> Exception:
    """Why the query failed, said plainly: a Python 2 (which has no -I and prints its usage),
    or no Python at all (whose error would quote the whole query script back)."""
    try:
        done = process.run(
            [str(python), "-c", _VERSION_ONLY], timeout=60, env=process.scrubbed(environ)
        )
        version = done.stdout.strip() if done.ok else ""
    except OSError:
        version = ""
    if re.fullmatch(r"[0-9]+\.[0-9]+", version):
        if int(version.split(".")[0]) < 3:
            return EnvironmentNotFound(
                f"{python} is Python {version}, which is not supported: uv and safe-uninstall "
                "work on Python 3 environments"
            )
        return EnvironmentNotFound(
            f"{python} (Python {version}) did not answer the interpreter query",
            detail=output.replace(_QUERY, "<the interpreter query>"),
        )
    # Its output answers a question it did not understand (the query script, quoted back).
    return EnvironmentNotFound(
        f"{python} is not a working Python interpreter: it could not run a line of Python"
    )


class _Stamp(Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """The files an interpreter's answer was asked with."""

    python: str
    executable: FileStamp
    pyvenv_cfg: FileStamp


class _Cached(Struct, frozen=True, forbid_unknown_fields=True):
    """interpreter.json: the answer, and the files it was asked with."""

    stamp: _Stamp
    interpreter: Interpreter


def _interpreter_cache(python: Path) -> tuple[CacheFile[_Cached] | None, _Stamp | None]:
    """The venv's interpreter.json, where its state folder is one of this user's own, and
    the stamp of the files an answer is asked with now (None: they can't be stat'ed)."""
    venv = python.parent.parent
    try:
        stamp = _Stamp(str(python), FileStamp.at(python), FileStamp.at(venv / "pyvenv.cfg"))
    except OSError:
        return None, None
    folder = venv / ".safe-uninstall"
    if trust.problem(folder, "state folder", link_allowed=True) is not None:
        return None, stamp  # missing, or another user could have written the answer: ask
    # An answer is about 1 KB.
    cache: CacheFile[_Cached] = CacheFile(
        folder / "interpreter.json",
        _Cached,
        format="safeuninstall-interpreter",
        version=3,
        max_bytes=64 * 1024,
    )
    return cache, stamp


def _describes(found: Interpreter, python: Path) -> bool:
    """Whether a cached answer is one that ``python``, the interpreter of a venv, could give:
    the venv's own prefix, executable and folders, the version its pyvenv.cfg names, and the
    markers of this machine. A cache can save the question; it never chooses the environment
    acted on, nor the markers a requirement is judged by."""
    venv = os.path.realpath(python.parent.parent)
    if found.layout != "environment" or os.path.realpath(found.prefix) != venv:
        return False
    if os.path.realpath(found.base_prefix) == venv:  # a venv's base is another folder
        return False
    if os.path.realpath(found.executable) != os.path.realpath(python):
        return False
    inside = venv + os.sep
    if not all(os.path.realpath(p).startswith(inside) for p in (found.purelib, found.platlib)):
        return False
    if not os.path.realpath(found.scripts).startswith(inside):
        return False
    cfg = _pyvenv_cfg(python.parent.parent / "pyvenv.cfg")
    version = cfg.get("version_info") or cfg.get("version")
    # uv names the implementation; python -m venv does not, and PyPy's is not python*
    named = cfg.get("implementation")
    if named is None and os.path.basename(os.path.realpath(python)).startswith("python"):
        named = "CPython"
    if version != found.version or (named or "").lower() != "cpython":
        return False
    machine = os.uname()
    expected = {
        "implementation_name": "cpython",
        "implementation_version": found.version,
        "os_name": os.name,
        "platform_machine": machine.machine,
        "platform_release": machine.release,
        "platform_system": machine.sysname,
        "platform_version": machine.version,
        "python_full_version": found.version,
        "platform_python_implementation": "CPython",
        "python_version": ".".join(found.version.split(".")[:2]),
        "sys_platform": sys.platform,
    }
    return dict(found.markers) == expected


def _pyvenv_cfg(path: Path) -> dict[str, str]:
    try:
        text = read_bytes(path, 64 * 1024).decode("utf-8", errors="replace")
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key.strip().lower()] = value.strip()
    return found


def vital_files(python: Path, interpreter: Interpreter) -> dict[str, str]:
    """What the environment cannot be opened without, by normalised path, each with what it
    is: its pyvenv.cfg (a venv), each name on the way from ``python`` to the interpreter's
    file (a venv's bin/python is a link to its base interpreter), and each link of its scripts
    folder that leads to that same file (bin/python3, bin/python3.12). Deleting one of them
    leaves no interpreter to run a rollback, a recover or a doctor with."""
    found: dict[str, str] = {}
    if interpreter.is_venv:
        cfg = os.path.normpath(os.path.join(interpreter.prefix, "pyvenv.cfg"))
        found[cfg] = "the environment's pyvenv.cfg"
    path = os.path.normpath(os.path.abspath(python))
    for _ in range(40):  # the kernel's own bound on links followed
        found[path] = "the environment's interpreter"
        try:
            link = os.readlink(path)
        except OSError:  # not a link (or gone): the end of the way
            break
        path = os.path.normpath(os.path.join(os.path.dirname(path), link))
    real = os.path.realpath(python)
    with contextlib.suppress(OSError), os.scandir(interpreter.scripts) as entries:
        for entry in entries:
            if entry.is_symlink() and os.path.realpath(entry.path) == real:
                found.setdefault(
                    os.path.normpath(entry.path), "a link to the environment's interpreter"
                )
    return found
