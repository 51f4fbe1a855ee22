"""A glibc-style resolver of shared libraries: which file each DT_NEEDED entry of an ELF object
loads, and which would stop resolving if some files disappeared (see ``Loader`` for what
it models of ld.so and what it leaves out)."""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Final, Literal

from msgspec import Struct

from safeuninstall.libraries.elf import (
    EM_386,
    EM_AARCH64,
    EM_ARM,
    EM_LOONGARCH,
    EM_PPC64,
    EM_RISCV,
    EM_S390,
    EM_X86_64,
    ElfInfo,
    read_elf,
)

# --------------------------------------------------------------------------
# Resolution

# (ELF class, e_machine) -> (Debian multiarch triplet, non-multiarch lib dir name)
_LIBDIR_LAYOUT: Final[Mapping[tuple[int, int], tuple[str, str]]] = MappingProxyType(
    {
        (64, EM_X86_64): ("x86_64-linux-gnu", "lib64"),
        (32, EM_X86_64): ("x86_64-linux-gnux32", "libx32"),
        (32, EM_386): ("i386-linux-gnu", "lib"),
        (64, EM_AARCH64): ("aarch64-linux-gnu", "lib64"),
        (32, EM_ARM): ("arm-linux-gnueabihf", "lib"),
        (64, EM_PPC64): ("powerpc64le-linux-gnu", "lib64"),
        (64, EM_S390): ("s390x-linux-gnu", "lib64"),
        (64, EM_RISCV): ("riscv64-linux-gnu", "lib64"),
        (64, EM_LOONGARCH): ("loongarch64-linux-gnu", "lib64"),
    }
)


def default_library_dirs(
    elf_class: int, machine: int, *, multiarch: bool | None = None
) -> tuple[str, ...]:
    """glibc's built-in trusted directories for objects of this kind.

    Debian/Ubuntu (multiarch, detected by ``/usr/lib/<triplet>`` existing when
    ``multiarch`` is None) search ``/lib/<triplet>``, ``/usr/lib/<triplet>``,
    ``/lib``, ``/usr/lib`` (as ``ld.so --help`` reports; no ``/lib64``).
    Otherwise upstream glibc's ``/lib64``+``/usr/lib64`` (or ``/lib``+``/usr/lib``
    for 32-bit) are used.
    """
    triplet, libdir = _LIBDIR_LAYOUT.get(
        (elf_class, machine), ("", "lib64" if elf_class == 64 else "lib")
    )
    if multiarch is None:
        multiarch = bool(triplet) and os.path.isdir("/usr/lib/" + triplet)
    if multiarch and triplet:
        return (f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib")
    return (f"/{libdir}", f"/usr/{libdir}")


def split_ld_library_path(value: str | None) -> tuple[str, ...]:
    """Split LD_LIBRARY_PATH like glibc (':' and ';'), dropping empty entries."""
    if not value:
        return ()
    return tuple(entry for entry in re.split("[:;]", value) if entry)


# Same rules as glibc's is_dst(): "$NAME" must not be followed by [A-Za-z0-9_].
_DST_RE: Final = re.compile(
    r"\$(?:\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM)(?![A-Za-z0-9_]))"
)


def expand_origin(entry: str, origin: str) -> str | None:
    """Expand ``$ORIGIN``/``${ORIGIN}``; None if ``$LIB``/``$PLATFORM`` is used."""
    if "$" not in entry:
        return entry
    for match in _DST_RE.finditer(entry):
        if (match.group(1) or match.group(2)) != "ORIGIN":
            return None
    return _DST_RE.sub(lambda _match: origin, entry)


def _origin_of(path: str) -> str:
    # glibc's l_origin for a shared object: the directory part of the path it
    # was found at, made absolute with the cwd; no symlink resolution, no
    # '..' folding (checked against ld.so of glibc 2.36).
    if not path.startswith("/"):
        path = os.getcwd().rstrip("/") + "/" + path
    directory = path.rpartition("/")[0]
    return directory or "/"


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


_FOUND: Final = "found"
_SKIP: Final = "skip"
_FATAL: Final = "fatal"


class Resolved(Struct, frozen=True):
    """One DT_NEEDED entry as one load met it: ``consumer`` needs ``soname``, and gets the
    object at ``path`` (spelled as ld.so spells it), or nothing."""

    consumer: str
    soname: str
    path: str | None
    loaded: bool = False  # an object already in the process answered to the name: no search


class LoadMap(Struct, frozen=True):
    """What loading ``root`` into a process brings in, as ld.so does it (breadth first)."""

    root: str
    objects: tuple[ElfInfo, ...]  # the objects this load added, root first, in load order
    needed: tuple[Resolved, ...]  # every DT_NEEDED entry met, in the order ld.so meets them
    names: Mapping[str, str]  # every name an object of the process answers to -> its path

    @property
    def missing(self) -> tuple[Resolved, ...]:
        return tuple(entry for entry in self.needed if entry.path is None)


class _Object(Struct, frozen=True):
    """A loaded object, with the DT_RPATH directories of the objects that loaded it (glibc's
    ``l_loader`` chain), nearest first, already expanded."""

    info: ElfInfo
    inherited: tuple[str, ...]

    def own_rpath(self) -> tuple[str, ...]:
        # glibc drops DT_RPATH when DT_RUNPATH is there, for the object and for the chain.
        if self.info.runpath:
            return ()
        return tuple(_expand_all(self.info.rpath, _origin_of(self.info.path)))


class Loader:
    """Resolve DT_NEEDED sonames in glibc ``ld.so`` search order.

    For a soname without '/': the DT_RPATH of the object and of the objects that loaded it, up
    to the program (only if the object has no DT_RUNPATH; an object of the chain that has a
    DT_RUNPATH adds nothing), LD_LIBRARY_PATH, the object's own DT_RUNPATH, the ld.so.cache,
    then the default directories. ``load`` walks a whole load breadth first, where a name
    that an object already loaded answers to (its DT_SONAME, the name it was loaded by, its
    path) is satisfied without a search.

    ``exists`` and ``reader`` are injectable so a removal can be simulated:
    ``exists`` says whether a candidate file is present, ``reader`` (e.g.
    ``ElfCache.get``) gives its ElfInfo.  As in glibc, a candidate of another
    ELF class or machine is skipped, while a candidate that exists but is not a
    readable dynamic ELF ends the search (ld.so fails with "invalid ELF
    header"/"file too short"). Both are asked once per path: a Loader is for one state of
    the files.

    Returned paths are spelled the way ld.so would spell them, e.g.
    ``/x/lib/../foo/libfoo.so.1``; normalise them before comparing.
    See the module docstring for the simplifications.
    """

    def __init__(
        self,
        ld_library_path: Sequence[str],
        ld_cache: Mapping[str, Sequence[str]],
        default_dirs: Sequence[str] | None = None,
        *,
        exists: Callable[[str], bool] = os.path.isfile,
        reader: Callable[[str], ElfInfo | None] = read_elf,
    ) -> None:
        self._ld_library_path = tuple(entry for entry in ld_library_path if entry)
        self._ld_cache = ld_cache
        self._default_dirs = None if default_dirs is None else tuple(default_dirs)
        self._exists = exists
        self._reader = reader
        self._default_dirs_by_kind: dict[tuple[int, int], tuple[str, ...]] = {}
        self._files: dict[str, ElfInfo | Literal[False] | None] = {}  # see _look
        self._searches: dict[tuple[object, ...], str | None] = {}
        self._identities: dict[str, tuple[int, int] | str] = {}

    def resolve(self, obj: ElfInfo, soname: str, inherited: Sequence[str] = ()) -> str | None:
        """Path ld.so would load for ``soname`` needed by ``obj``, or None. ``inherited``:
        the expanded DT_RPATH directories of the objects that loaded ``obj``, nearest first."""
        if "/" in soname:
            path = expand_origin(soname, _origin_of(obj.path))
            return path if path is not None and self._check(obj, path) == _FOUND else None
        origin = _origin_of(obj.path)
        rpath: tuple[str, ...] = ()
        if not obj.runpath:
            rpath = (*_expand_all(obj.rpath, origin), *inherited)
        runpath = tuple(_expand_all(obj.runpath, origin))
        key = (obj.elf_class, obj.machine, soname, rpath, runpath)
        if key in self._searches:
            return self._searches[key]
        found = None
        for candidate in self._candidates(obj, soname, rpath, runpath):
            verdict = self._check(obj, candidate)
            if verdict == _FOUND:
                found = candidate
                break
            if verdict == _FATAL:
                break
        self._searches[key] = found
        return found

    def load(
        self,
        root: ElfInfo,
        *,
        loaded: Mapping[str, str] | None = None,
        chain: Sequence[ElfInfo] = (),
    ) -> LoadMap:
        """Load ``root`` and everything it needs, breadth first, as ld.so does.

        ``loaded``: the names the objects already in the process answer to (``LoadMap.names``
        of an earlier load), each -> its path: such a name is satisfied without a search.
        ``chain``: the objects that load ``root``, nearest first, up to the program (for a
        Python extension module: the interpreter); their DT_RPATH is searched after the
        root's. Without either, this is what ``ldd root`` prints.
        """
        names = dict(loaded or {})
        files = {self._identity(path): path for path in set(names.values())}
        inherited = tuple(d for link in chain for d in _Object(link, ()).own_rpath())
        queue = deque([_Object(root, inherited)])
        objects = [root]
        needed: list[Resolved] = []
        self._answer_to(names, root, root.path)
        files.setdefault(self._identity(root.path), root.path)
        while queue:
            obj = queue.popleft()
            below = (*obj.own_rpath(), *obj.inherited)
            for soname in obj.info.needed:
                present = names.get(soname)
                if present is not None:
                    needed.append(Resolved(obj.info.path, soname, present, loaded=True))
                    continue
                path = self.resolve(obj.info, soname, obj.inherited)
                if path is not None:
                    same = files.get(self._identity(path))
                    if same is not None:  # the same file under another name: not loaded twice
                        names[soname] = path = same
                    else:
                        info = self._look(path)
                        assert info  # resolve() found it: a dynamic ELF
                        files[self._identity(path)] = path
                        names[soname] = path
                        self._answer_to(names, info, path)
                        objects.append(info)
                        queue.append(_Object(info, below))
                needed.append(Resolved(obj.info.path, soname, path))
        return LoadMap(root.path, tuple(objects), tuple(needed), names)

    def _identity(self, path: str) -> tuple[int, int] | str:
        """Which file a path is: its (device, inode), as ld.so compares them."""
        found = self._identities.get(path)
        if found is None:
            try:
                stat = os.stat(path)
                found = (stat.st_dev, stat.st_ino)
            except OSError:  # a file the simulation keeps (``exists``) but the disk lost
                found = path
            self._identities[path] = found
        return found

    @staticmethod
    def _answer_to(names: dict[str, str], info: ElfInfo, path: str) -> None:
        names.setdefault(path, path)
        if info.soname:
            names.setdefault(info.soname, path)

    def _candidates(
        self, obj: ElfInfo, soname: str, rpath: Sequence[str], runpath: Sequence[str]
    ) -> Iterator[str]:
        yield from self._in_dirs(rpath, soname)
        # $ORIGIN in LD_LIBRARY_PATH refers to the executable, unknown here.
        yield from self._in_dirs((d for d in self._ld_library_path if "$" not in d), soname)
        yield from self._in_dirs(runpath, soname)
        yield from self._ld_cache.get(soname, ())
        yield from self._in_dirs(self._defaults_for(obj), soname)

    @staticmethod
    def _in_dirs(directories: Iterable[str], soname: str) -> Iterator[str]:
        return (_join(directory, soname) for directory in directories)

    def _defaults_for(self, obj: ElfInfo) -> tuple[str, ...]:
        if self._default_dirs is not None:
            return self._default_dirs
        kind = (obj.elf_class, obj.machine)
        dirs = self._default_dirs_by_kind.get(kind)
        if dirs is None:
            dirs = self._default_dirs_by_kind[kind] = default_library_dirs(*kind)
        return dirs

    def _look(self, path: str) -> ElfInfo | Literal[False] | None:
        """The file at ``path``: its ElfInfo, None if it is not a dynamic ELF, False if it is
        not there."""
        try:
            return self._files[path]
        except KeyError:
            found = self._files[path] = self._reader(path) if self._exists(path) else False
            return found

    def _check(self, obj: ElfInfo, path: str) -> str:
        found = self._look(path)
        if found is False:
            return _SKIP
        if found is None:
            return _FATAL
        if found.elf_class != obj.elf_class or found.machine != obj.machine:
            return _SKIP
        return _FOUND


def _expand_all(entries: Sequence[str], origin: str) -> Iterator[str]:
    for entry in entries:
        expanded = expand_origin(entry, origin)
        if expanded is not None:
            yield expanded
