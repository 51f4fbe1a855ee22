"""What the files of the site folders weigh: one walk with one lstat per file, then each file
counted once, by inode, for whoever lists it (audit.py says what the figures mean).

The walk is the largest step of ``audit`` (an ML venv holds some 60,000 files) and
needs nothing but the site folders, so ``Weighing`` runs it in a child process beside the rest
of the command: the reading of RECORDs, the requirements and the library model hold the GIL, so
a thread would starve. Once the ownership is known it is sent to the child, which counts there
too and answers with the counts alone (a few hundred numbers). Where the child can't be started
or fails in any way, the same functions run in the command's own process: the figures are the
same either way, never a guess. Nothing is cached: a file written in place changes no folder's
stamp, so only its own lstat gives its size.

The child runs this file as a script (``python -I -S sizes.py SITE...``): it imports the
standard library only, and reads nothing from its environment. It is started here, not through
process.py, whose runs are programs with bounded text output collected at their end: this one
is the tool's own code, takes megabytes on stdin while the command goes on, starts nothing of
its own, and is killed and reaped by ``Weighing`` itself.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
import subprocess
import sys
import threading

TYPE_CHECKING = False  # typing is not imported by the child: a large part of its start
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from types import TracebackType
    from typing import Any

# A file as the walk saw it: (device << 64 | inode number, size, link count). One int for the
# inode: a tuple key cost twice as much over an ML venv's 63,000 files.
Stat = tuple[int, int, int]

_TOP_UNOWNED = 5  # folders of unowned files named in the report
_FORMAT = 1  # of what the child writes; a child of another version is not believed


# (own: dist -> (bytes, files, linked elsewhere bytes), shared: dist -> (bytes, with whom),
#  missing: dist -> count, outside: dist -> count, shared bytes, unowned bytes, unowned files,
#  the largest folders of unowned files as (folder, bytes, files)): plain data, as the child
# writes it (audit.py gives it names)
Counted = tuple[
    dict[str, tuple[int, int, int]],
    dict[str, tuple[int, tuple[str, ...]]],
    dict[str, int],
    dict[str, int],
    int,
    int,
    int,
    tuple[tuple[str, int, int], ...],
]


def walk(roots: Sequence[str]) -> dict[str, Stat]:
    """Every file under the roots (real paths; links not followed, so every path found is
    normalised), in the order met; a folder that can't be listed is skipped."""
    stats: dict[str, Stat] = {}
    for root in roots:
        for path, entry in entries_under(root):
            if path not in stats:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                stats[path] = (info.st_dev << 64 | info.st_ino, info.st_size, info.st_nlink)
    return stats


def entries_under(top: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every entry under ``top`` that is not a folder (a link to one is an entry: links are
    not followed), with its path; a folder that can't be listed is skipped.

    Each folder is opened once (never through a link) and listed through its descriptor, so
    that an entry's lstat (``entry.stat(follow_symlinks=False)``, taken while it is yielded)
    is relative to it: the kernel looks up one name, not the whole path again."""
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            fd = os.open(folder, _FOLDER)
        except OSError:
            continue
        inside = folder if folder.endswith("/") else folder + "/"
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    path = inside + entry.name
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(path)
                            continue
                    except OSError:
                        continue
                    yield path, entry
        except OSError:
            continue
        finally:
            os.close(fd)


# a folder to list: never a link to one, never left open in a child process
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def lstat(path: str) -> Stat | None:
    """The path's lstat; None when it is missing or a folder (a folder holds no bytes of its
    own here: its files are counted where they are listed)."""
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(info.st_mode):
        return None
    return (info.st_dev << 64 | info.st_ino, info.st_size, info.st_nlink)


def count(
    walked: dict[str, Stat],
    owners: Mapping[str, Sequence[str]],
    dists: Sequence[str],
    root: str,
    site_dirs: Sequence[str],
) -> Counted:
    """Each file once: a listed path's bytes are its distribution's own (one lister) or shared
    (two or more); a walked path no RECORD lists is unowned; a second path to a counted inode
    (a hard link) adds nothing. ``owners``: normalised path -> who lists it; ``root``: the
    environment's real prefix (a listed path outside it is not counted). ``walked`` is taken
    apart: the listed paths are removed from it."""
    inodes, missing, outside = _listed(walked, owners, root)
    unowned_total, unowned_files, unowned_by = _unowned(walked, inodes, site_dirs)
    own: dict[str, list[int]] = {dist: [0, 0, 0] for dist in dists}
    shared: dict[str, tuple[int, set[str]]] = {}
    shared_total = 0
    for listers, size, links, seen in inodes.values():
        if not listers:
            continue  # unowned
        holders = set(listers) if len(listers) > 1 else listers
        if len(holders) == 1:
            counts = own[listers[0]]
            counts[0] += size
            counts[1] += 1
            if links > seen:
                counts[2] += size
            continue
        shared_total += size
        for dist in holders:
            held, others = shared.get(dist, (0, set()))
            shared[dist] = (held + size, others | (set(holders) - {dist}))
    top = sorted(unowned_by.items(), key=lambda item: (-item[1][0], item[0]))[:_TOP_UNOWNED]
    return (
        {d: (c[0], c[1], c[2]) for d, c in own.items()},
        {d: (held, tuple(sorted(others))) for d, (held, others) in shared.items()},
        missing,
        outside,
        shared_total,
        unowned_total,
        unowned_files,
        tuple((group, c[0], c[1]) for group, c in top),
    )


def _listed(
    walked: dict[str, Stat], owners: Mapping[str, Sequence[str]], root: str
) -> tuple[dict[int, list[Any]], dict[str, int], dict[str, int]]:
    """The inodes of the listed paths inside the environment, each as [who lists it (repeats
    allowed), size, st_nlink, how many of the environment's paths lead to it]; per distribution,
    its paths missing and its paths out of the environment. Each listed path once, with all who
    list it: one pass, not one per distribution. What is left of ``walked`` is what no RECORD
    lists inside the environment."""
    inside = root.rstrip(os.sep) + os.sep
    inodes: dict[int, list[Any]] = {}
    missing: dict[str, int] = {}
    outside: dict[str, int] = {}
    take = walked.pop
    for path, listed_by in owners.items():
        if not path.startswith(inside):
            for dist in set(listed_by):
                outside[dist] = outside.get(dist, 0) + 1
            continue
        info = take(path, None) or lstat(path)
        if info is None:
            if not path.endswith(".pyc") and not os.path.isdir(path):
                for dist in set(listed_by):
                    missing[dist] = missing.get(dist, 0) + 1
            continue
        inode, size, links = info
        entry = inodes.get(inode)
        if entry is None:
            inodes[inode] = [listed_by, size, links, 1]
        else:
            entry[0] = (*entry[0], *listed_by)
            entry[3] += 1
    return inodes, missing, outside


def _unowned(
    walked: dict[str, Stat], inodes: dict[int, list[Any]], site_dirs: Sequence[str]
) -> tuple[int, int, dict[str, list[int]]]:
    """What no RECORD lists (``walked``, the listed paths taken out): the bytes and files of
    the inodes not counted yet, in all and [bytes, files] per top folder. Each goes into
    ``inodes`` as no one's; a path to an inode there adds one to its paths."""
    unowned_by: dict[str, list[int]] = {}
    unowned_total = unowned_files = 0
    for path, (inode, size, links) in walked.items():
        entry = inodes.get(inode)
        if entry is not None:
            entry[3] += 1  # an owned file's other link, or an unowned one met already
            continue
        inodes[inode] = [(), size, links, 1]
        unowned_total += size
        unowned_files += 1
        counts = unowned_by.setdefault(_first_folder(path, site_dirs), [0, 0])
        counts[0] += size
        counts[1] += 1
    return unowned_total, unowned_files, unowned_by


def _first_folder(path: str, site_dirs: Sequence[str]) -> str:
    for site in site_dirs:
        if path.startswith(site.rstrip(os.sep) + os.sep):
            rest = path[len(site.rstrip(os.sep)) + 1 :]
            head, sep, _ = rest.partition(os.sep)
            return os.path.join(site, head) + (os.sep if sep else "")
    return path


# -- the child process -------------------------------------------------------------------------


class ChildFailed(Exception):
    """The child's answer is missing or not what this module writes."""


def _checked(data: bytes) -> Counted:
    """The child's answer, or ChildFailed: a truncated or foreign answer is never used."""
    try:
        version, found = marshal.loads(data)
        own, shared, missing, outside, shared_total, unowned_total, unowned_files, top = found
    except (EOFError, ValueError, TypeError) as err:
        raise ChildFailed(f"unreadable answer: {err}") from None
    if (
        version != _FORMAT
        or not _is_ints((shared_total, unowned_total, unowned_files), 3)
        or not all(isinstance(f, dict) for f in (own, shared, missing, outside))
        or not isinstance(top, tuple)
        or not all(_is_ints(v, 3) for v in own.values())
        or not all(isinstance(v, int) for v in (*missing.values(), *outside.values()))
        or not all(
            isinstance(v, tuple)
            and len(v) == 2
            and isinstance(v[0], int)
            and isinstance(v[1], tuple)
            and all(isinstance(name, str) for name in v[1])
            for v in shared.values()
        )
        or not all(
            isinstance(u, tuple) and len(u) == 3 and isinstance(u[0], str) and _is_ints(u[1:], 2)
            for u in top
        )
    ):
        raise ChildFailed("an answer of another shape")
    return (own, shared, missing, outside, shared_total, unowned_total, unowned_files, top)


def _is_ints(value: object, length: int) -> bool:
    return (
        isinstance(value, tuple) and len(value) == length and all(isinstance(n, int) for n in value)
    )


class Weighing:
    """``walk`` and ``count`` in a child process, started on entering (the walk begins at once)
    and killed on leaving, whatever happened in between. ``send`` gives it the ownership (it
    then counts while this process goes on); ``result`` waits for the counts, or computes
    them here when the child could not give them."""

    def __init__(self, site_dirs: Sequence[str]) -> None:
        self.roots = tuple(os.path.realpath(s) for s in site_dirs)
        self._child: subprocess.Popen[bytes] | None = None
        self._writer: threading.Thread | None = None
        self._sent: tuple[Mapping[str, Sequence[str]], Sequence[str], str] | None = None
        self.failure: str | None = None  # why the counts were made here instead (tests read it)

    def __enter__(self) -> Weighing:
        from safeuninstall.base import interrupts  # here: the child, a script, has no package

        script = os.path.abspath(__file__)
        if not sys.executable or not os.path.isfile(script):
            self.failure = "no interpreter or script to start the child with"
            return self
        # An interrupt while the child starts is held until it is recorded, then raised here,
        # where ``__exit__`` will not run: the child is stopped before it goes on.
        try:
            with interrupts.deferred():
                try:
                    self._child = subprocess.Popen(
                        [sys.executable, "-I", "-S", script, *self.roots],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                    )
                except (OSError, ValueError) as err:
                    self.failure = f"the child could not start: {err}"
        except BaseException:
            self._stop()
            raise
        return self

    def send(self, owners: Mapping[str, Sequence[str]], dists: Sequence[str], root: str) -> None:
        """The ownership and the environment's real prefix: the child counts from here on."""
        self._sent = (owners, dists, root)
        child = self._child
        if child is None or child.stdin is None:
            return
        try:
            payload = marshal.dumps(
                (dict(owners) if type(owners) is not dict else owners, list(dists), root)
            )
        except ValueError as err:  # something marshal can't write: counted here instead
            self.failure = f"the ownership could not be sent: {err}"
            self._stop()
            return

        def write() -> None:
            # One blocking write (the GIL released throughout), then EOF; a child that died
            # meanwhile is found by ``result``.
            try:
                with child.stdin:  # type: ignore[union-attr]
                    child.stdin.write(payload)  # type: ignore[union-attr]
            except (OSError, ValueError):
                pass

        self._writer = threading.Thread(target=write, name="sizes-writer", daemon=True)
        self._writer.start()

    def result(self) -> Counted:
        """The counts: the child's, or, where it failed, counted here (the same figures)."""
        if self._sent is None:
            raise RuntimeError("Weighing.result before send")
        owners, dists, root = self._sent
        child = self._child
        if child is not None:
            try:
                return self._answer(child)
            except ChildFailed as err:
                self.failure = str(err)
            finally:
                self._stop()
        return count(walk(self.roots), owners, dists, root, self.roots)

    def _answer(self, child: subprocess.Popen[bytes]) -> Counted:
        assert child.stdout is not None
        try:
            data = child.stdout.read()
        except OSError as err:
            raise ChildFailed(f"its answer could not be read: {err}") from None
        if child.wait() != 0:
            raise ChildFailed(f"the child exited with {child.returncode}")
        return _checked(data)

    def _stop(self) -> None:
        from safeuninstall.base import interrupts  # here: the child, a script, has no package

        # Held until the child is reaped: an interrupt here must not leave it running.
        with interrupts.deferred():
            child, self._child = self._child, None
            if child is None:
                return
            if child.poll() is None:
                child.kill()
            child.wait()
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            if self._writer is not None:
                self._writer.join()  # ends once the child is gone: its pipe is broken

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop()


def _child(roots: list[str]) -> int:
    # Ctrl-C at a terminal reaches the whole process group: this child ends on it (its
    # traceback goes nowhere: stderr is /dev/null), the command says what happened.
    walked = walk(roots)
    try:
        owners, dists, root = marshal.loads(sys.stdin.buffer.read())
    except (EOFError, ValueError, TypeError):
        return 1  # the command ended, or sent nothing: nothing to count
    counted = count(walked, owners, dists, root, roots)
    sys.stdout.buffer.write(marshal.dumps((_FORMAT, counted)))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))


def count_text(number: int, noun: str) -> str:
    """``1 distribution``, ``2 distributions``: a count for a person (nouns whose plural adds
    an s)."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def size_text(count: int) -> str:
    """``1.5 MiB``: a size for a person."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"
