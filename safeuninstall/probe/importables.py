"""What a distribution makes importable, read from its files: its modules, namespace-aware, and
the entry points it declares. The derived probe (probe.py) tries each of them on its own.

A module is named at the first level that is not a namespace: ``google-cloud-storage`` gives
``google.cloud.storage``, never ``google``, which imports whatever is removed. A folder is a
namespace when the distribution's RECORD lists no ``__init__`` in it (PEP 420), when its
``__init__.py`` only extends ``__path__`` (pkgutil or pkg_resources style), or when that
``__init__.py`` is empty (comments, a docstring) and the folder holds only subpackages.

Everything here is read from an environment: RECORD paths, ``__init__.py`` and source files,
``entry_points.txt`` may be anything. Files are read through ``bounded``, names that are not
dotted identifiers are dropped (they become data passed to a probe process, never code).
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from msgspec import Struct

from safeuninstall.base.bounded import read_bytes
from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.environment.legacy import EGG_LINK

# Names that wheels ship by mistake or that are not for importing: importing them proves
# nothing (tests, docs) or runs something (setup.py, a __main__).
NOT_MODULES = frozenset(
    {"tests", "test", "testing", "docs", "examples", "benchmarks", "scripts", "setup", "conftest"}
)
# Entry point groups that only a build tool loads, inside a build: never at run time.
_BUILD_TIME_GROUPS = ("distutils.", "setuptools.", "egg_info.")

_MAX_INIT_BYTES = 64 * 1024  # an __init__.py read to tell a namespace apart
_MAX_SOURCE_BYTES = 2 * 1024 * 1024  # a source file searched for imports
_MAX_ENTRY_POINTS_BYTES = 1024 * 1024
_MAX_NAME = 200  # characters of a module path, an entry point's name or group
MAX_ENTRY_POINTS = 64  # per distribution; beyond, the rest are left out (and said)

# importlib.metadata's pattern for an entry point's value: module[:attr][ [extras]]
_ENTRY_POINT_VALUE = re.compile(
    r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?"
)
_EXTENSION_SUFFIXES = (".so", ".pyd")
_MODULE_SUFFIXES = (".py", *_EXTENSION_SUFFIXES)


class EntryPoint(Struct, frozen=True):
    """One line of ``entry_points.txt``: ``name = module:attr`` in ``[group]``."""

    group: str
    name: str
    module: str
    attr: str = ""  # dotted, may be empty (the module itself)

    @property
    def value(self) -> str:
        return f"{self.module}:{self.attr}" if self.attr else self.module


def is_dotted_name(text: str) -> bool:
    """``a.b.c``: identifiers that are not keywords, of a sane length."""
    return (
        0 < len(text) <= _MAX_NAME
        and text.isprintable()
        and all(part.isidentifier() and not keyword.iskeyword(part) for part in text.split("."))
    )


def is_public(module: str) -> bool:
    """A module worth importing on its own: no private part, nothing test- or docs-like."""
    return not any(part.startswith("_") or part in NOT_MODULES for part in module.split("."))


# -- modules -------------------------------------------------------------------------------


class _ModuleFile(Struct, frozen=True):
    """A Python file of a distribution: ``parts`` is its package path, ``name`` the module's
    last part (``__init__`` for a package's own file)."""

    parts: tuple[str, ...]
    name: str
    path: Path
    source: bool  # a .py file (not an extension module)

    @property
    def module(self) -> tuple[str, ...]:
        return self.parts if self.name == "__init__" else (*self.parts, self.name)


def _module_file(site_dir: Path, relative: str) -> _ModuleFile | None:
    """The module a RECORD path is, if it is one inside the site folder."""
    if not relative.endswith(_MODULE_SUFFIXES):
        return None  # most of a RECORD (torch: 9,400 headers of 12,000 files), decided first
    parts = relative.replace("\\", "/").split("/")
    if relative.startswith("/") or any(p in ("", ".", "..", "__pycache__") for p in parts):
        return None
    if parts[0].endswith((".dist-info", ".data")):
        return None
    *folders, filename = parts
    if filename.endswith(".py"):
        stem, source = filename[:-3], True
    elif filename.endswith(_EXTENSION_SUFFIXES):
        stem, source = filename.split(".", 1)[0], False
        if filename == f"{stem}.so" and stem.startswith("lib"):
            # ``libcheckpoint.so``: a shared library named for the linker (-lcheckpoint), not
            # an extension module; importing it would only load it (and fail on PyInit_)
            return None
    else:
        return None
    if not all(p.isidentifier() for p in (*folders, stem)):
        return None  # not importable: ``jsonpointer-stubs/``, ``foo.bar.py``
    return _ModuleFile(tuple(folders), stem, site_dir / relative, source)


def _module_files(dist: InstalledDistribution) -> list[_ModuleFile] | None:
    """The distribution's modules by its RECORD; None when it cannot be read. (Of a legacy
    install, the files uv would delete: its top_level.txt folders and modules.)"""
    try:
        paths = dist.record_paths()
    except OSError:
        return None
    site_dir = dist.site_dir
    return [f for path in paths if (f := _module_file(site_dir, path)) is not None]


def _read_text(path: Path, limit: int) -> str | None:
    try:
        return read_bytes(path, limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def declares_namespace(source: str) -> bool:
    """An ``__init__.py`` that makes its folder a namespace the old ways:
    ``__path__ = __import__('pkgutil').extend_path(__path__, __name__)`` or
    ``__import__('pkg_resources').declare_namespace(__name__)``. (A regular package that also
    extends its path is then searched below too: more candidates, never a wrong one.)"""
    return "extend_path(" in source or "declare_namespace(" in source


def is_empty_module(source: str) -> bool:
    """Nothing but comments, blank lines, a docstring or ``pass``: importing it proves
    nothing."""

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return all(
        isinstance(node, ast.Pass)
        or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        for node in tree.body
    )


def _namespaces(files: Sequence[_ModuleFile]) -> set[tuple[str, ...]]:
    """The package folders (those with an ``__init__``) that are namespaces all the same."""
    inits = {f.parts: f for f in files if f.name == "__init__"}
    has_modules = {f.parts for f in files if f.name != "__init__"}
    found = set()
    for folder, init in inits.items():
        if not init.source:
            continue  # an extension module's __init__: a real package
        text = _read_text(init.path, _MAX_INIT_BYTES)
        if text is None:
            continue  # unreadable: a regular package, as Python would find it
        if declares_namespace(text) or (folder not in has_modules and is_empty_module(text)):
            found.add(folder)
    return found


def _first_real(files: Sequence[_ModuleFile]) -> Iterator[_ModuleFile]:
    """For each file, the file of its first package level that is not a namespace: the
    package whose ``__init__`` it is under, else the module itself."""
    inits = {f.parts: f for f in files if f.name == "__init__"}
    namespaces = _namespaces(files)
    for f in files:
        module = f.module
        for depth in range(1, len(module) + 1):
            prefix = module[:depth]
            if prefix in inits and prefix not in namespaces:
                yield inits[prefix]
                break
        else:
            if f.name != "__init__":  # a module of namespaces only
                yield f


def top_modules(dist: InstalledDistribution, *, public: bool = True) -> list[str]:
    """The distribution's modules at their first level that is not a namespace, sorted:
    ``google.cloud.storage`` for google-cloud-storage, ``rich`` for rich.

    ``public``: leave out private (``_cffi_backend``) and test-like names. When the RECORD
    cannot be read, the names of ``top_level.txt`` that are a package or a module on disk.
    """
    files = None if dist.legacy else _module_files(dist)
    if files is None:
        names = _from_top_level(dist)
    else:
        names = sorted({".".join(f.module) for f in _first_real(files)})
    return [n for n in names if is_dotted_name(n) and (not public or is_public(n))]


def _from_top_level(dist: InstalledDistribution) -> list[str]:
    """The names of ``top_level.txt`` that are a package (not a namespace) or a module where
    they are imported from: the site folder, or a legacy editable's project folder."""
    folder = dist.metadata_dir
    if folder is None:
        return []
    text = _read_text(folder / "top_level.txt", _MAX_INIT_BYTES) or ""
    base = folder.parent if dist.layout == EGG_LINK else dist.site_dir
    found = []
    for name in sorted({line.strip() for line in text.splitlines()}):
        if not name.isidentifier():
            continue
        init = _read_text(base / name / "__init__.py", _MAX_INIT_BYTES)
        package = init is not None and not declares_namespace(init) and not is_empty_module(init)
        if package or (base / f"{name}.py").is_file():
            found.append(name)
    return found


def top_level_modules(dist: InstalledDistribution) -> list[str]:
    """The top-level names a distribution provides, as ``top_level.txt`` lists them (else its
    RECORD): a namespace root (``google``) included. What a metadata-only distribution stands
    for is looked up by these (impact.py); a probe uses ``top_modules``."""
    folder = dist.metadata_dir
    try:
        text = (folder / "top_level.txt").read_text() if folder is not None else ""
        names = [line.strip() for line in text.splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError):
        names = []
    if not names:
        names = _modules_from_record(dist)
    return sorted(
        {n for n in names if n.isidentifier() and not n.startswith("_") and n not in NOT_MODULES}
    )


def _modules_from_record(dist: InstalledDistribution) -> list[str]:
    try:
        entries = dist.record()
    except OSError:
        return []
    names = set()
    for entry in entries:
        first, _, rest = entry.path.partition("/")
        if first.startswith("..") or first.endswith((".dist-info", ".data")):
            continue
        if rest.startswith("__init__.") and rest.endswith((".py", ".so")):
            names.add(first)
        elif not rest and first.endswith(".py"):
            names.add(first[:-3])
        elif not rest and (".so" in first or first.endswith(".pyd")):
            names.add(first.split(".", 1)[0])
    return sorted(names)


# -- modules that import a given one -------------------------------------------------------


def importers(
    dist: InstalledDistribution, imported: Collection[str], *, limit: int
) -> list[tuple[str, str]]:
    """Public modules of ``dist`` whose source imports one of ``imported`` (dotted names) at
    module level, so that importing them fails without it: ``("rich.markdown",
    "markdown_it")``. The shallowest ``limit`` of them, sorted.

    Only unindented ``import``/``from`` lines count: an import inside a function or a ``try``
    is lazy or optional, and proves nothing at import time.
    """
    files = _module_files(dist)
    if not files or not imported:
        return []
    needles = [name.encode() for name in imported]
    found: dict[str, str] = {}
    for f in files:
        module = ".".join(f.module)
        if not f.source or not is_public(module) or not is_dotted_name(module):
            continue
        try:
            data = read_bytes(f.path, _MAX_SOURCE_BYTES)
        except OSError:
            continue
        if not any(needle in data for needle in needles):
            continue  # the common case, decided without decoding a line
        hit = _imports_one_of(data.decode("utf-8", errors="replace"), imported)
        if hit is not None:
            found[module] = hit
    shallowest = sorted(found, key=lambda m: (m.count("."), m))[:limit]
    return [(m, found[m]) for m in shallowest]


def _imports_one_of(source: str, imported: Collection[str]) -> str | None:
    for line in source.splitlines():
        if line.startswith("import "):
            names = [n.split(" as ")[0].strip() for n in line[7:].split("#")[0].split(",")]
        elif line.startswith("from "):
            names = [line[5:].split()[0]] if line[5:].split() else []
        else:
            continue
        for name in names:
            for wanted in imported:
                if name == wanted or name.startswith(wanted + "."):
                    return wanted
    return None


# -- entry points --------------------------------------------------------------------------


def parse_entry_points(text: str) -> list[EntryPoint]:
    """The entry points of an ``entry_points.txt`` (INI-like, as importlib.metadata reads it:
    ``=`` separates, ``#`` and ``;`` start comments). Lines that are not a valid entry point,
    or outside a group, are skipped; names are dotted identifiers or the line is dropped."""
    found = []
    group: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            name = line[1:-1].strip() if line.endswith("]") else ""
            group = name if 0 < len(name) <= _MAX_NAME and name.isprintable() else None
            continue
        if group is None:
            continue
        name, equals, value = line.partition("=")
        name = name.strip()
        match = _ENTRY_POINT_VALUE.fullmatch(value.strip())
        if not equals or not name or len(name) > _MAX_NAME or not name.isprintable():
            continue
        if match is None or not is_dotted_name(match["module"]):
            continue
        attr = match["attr"] or ""
        if attr and not is_dotted_name(attr):
            continue
        found.append(EntryPoint(group, name, match["module"], attr))
    return found


def entry_points(dist: InstalledDistribution) -> list[EntryPoint]:
    """What ``dist`` declares in ``entry_points.txt`` that a program loads at run time: every
    group but the build tools' (distutils, setuptools), and nothing that points into a test
    folder or a ``__main__``."""
    folder = dist.metadata_dir
    text = _read_text(folder / "entry_points.txt", _MAX_ENTRY_POINTS_BYTES) if folder else None
    if text is None:
        return []
    return [
        ep
        for ep in parse_entry_points(text)
        if not ep.group.startswith(_BUILD_TIME_GROUPS)
        and not any(p in NOT_MODULES or p == "__main__" for p in ep.module.split("."))
    ]
