"""RECORD files (PEP 376 / the wheel spec) and the hashes in them."""

from __future__ import annotations

import base64
import csv
import errno
import hashlib
import io
import os
import stat
from collections.abc import Callable
from pathlib import Path

from msgspec import Struct

from safeuninstall.base.bounded import Unusable, read_bytes

_CHUNK = 1024 * 1024
# The largest RECORDs in the wild (tensorflow, plotly, the CUDA wheels) hold a few MB; one
# over this is not a RECORD, and reading it would only cost memory.
MAX_RECORD_BYTES = 64 * 1024 * 1024
_MAX_SIZE_DIGITS = 19  # 2**63 has 19: a bigger size is no file's (and int() of 5000 digits raises)


class RecordEntry(Struct, frozen=True):
    """One line of a RECORD file."""

    path: str  # as written: relative to the site dir, may start with ../
    sha256: str | None  # hex digest, None when RECORD has no sha256 for it
    size: int | None


def _hex_from_record_hash(value: str) -> str | None:
    algorithm, _, encoded = value.partition("=")
    if algorithm != "sha256" or not encoded:
        return None
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).hex()
    except ValueError:  # binascii.Error (bad padding) is one, and so is a non-ASCII character
        return None


def read_record(path: Path) -> list[RecordEntry]:
    """Entries of a RECORD file.

    Raises OSError when it can't be read, and its subclass bounded.Unusable (the message names
    the file) when it is not a RECORD this tool can trust to list the files: over
    MAX_RECORD_BYTES, not a regular file, not UTF-8, not CSV (a field over csv's 128 KiB
    limit), a path with a NUL byte, which no file can have, or a size that is no number.
    """
    return [
        RecordEntry(
            path=row[0],
            sha256=_hex_from_record_hash(row[1]) if len(row) > 1 and row[1] else None,
            size=int(row[2]) if len(row) > 2 and row[2] else None,
        )
        for row in _rows(path)
    ]


def record_paths(path: Path) -> list[str]:
    """The paths of a RECORD file, as ``read_record`` gives them (and refusing what it
    refuses), without decoding a hash: a torch RECORD lists 12,000 files, and decoding each
    sha256 is half the time of reading it."""
    return [row[0] for row in _rows(path)]


def read_record_bytes(path: Path) -> bytes:
    """The bytes of a RECORD file, as ``read_record`` reads them (raising what it raises)."""
    return read_bytes(path, MAX_RECORD_BYTES)


def paths_of(raw: bytes, path: Path) -> list[str]:
    """``record_paths`` of the RECORD file ``path`` whose bytes are ``raw``."""
    return [row[0] for row in _parsed(raw, path)]


def _rows(path: Path) -> list[list[str]]:
    """The rows of a RECORD that name a file, each checked as ``read_record`` says."""
    return _parsed(read_record_bytes(path), path)


def _parsed(raw: bytes, path: Path) -> list[list[str]]:
    try:
        rows = list(csv.reader(io.StringIO(raw.decode("utf-8"), newline="")))
    except UnicodeDecodeError as err:
        raise Unusable(f"{path}: not UTF-8 text (byte {err.start})") from None
    except csv.Error as err:
        raise Unusable(f"{path}: not a CSV file ({err})") from None
    kept = []
    for number, row in enumerate(rows, start=1):
        if not row or not row[0]:
            continue
        if "\0" in row[0]:
            raise Unusable(f"{path}: row {number}: a path with a NUL byte")
        size_field = row[2] if len(row) > 2 else ""
        if size_field and not _is_size(size_field):  # uv refuses such a RECORD too
            shown = size_field if len(size_field) <= 20 else size_field[:17] + "..."
            raise Unusable(f"{path}: row {number}: {shown!r} is not a size in bytes")
        kept.append(row)
    return kept


def _is_size(field: str) -> bool:
    return field.isascii() and field.isdigit() and len(field) <= _MAX_SIZE_DIGITS


def sha256_file(
    path: Path | str,
    expected: os.stat_result | None = None,
    *,
    stop: Callable[[], bool] | None = None,
) -> str:
    """sha256 of the regular file at ``path``; OSError for anything else (a FIFO is never
    waited on). With ``expected`` (its lstat): a link is not followed, and a file that is no
    longer the one described (another inode, another size or mtime) is refused. ``stop``:
    asked between two chunks; when it says so, OSError (ECANCELED): the stash hasher of a
    --no-probe removal is not waited for through the rest of a 300 MB library."""

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if expected is not None:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags), "rb") as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if expected is not None and not _same(opened, expected):
            raise OSError(errno.ESTALE, "changed while it was being checked", str(path))
        digest = hashlib.sha256()
        while chunk := handle.read(_CHUNK):
            if stop is not None and stop():
                raise OSError(errno.ECANCELED, "hashing stopped", str(path))
            digest.update(chunk)
    return digest.hexdigest()


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return os.path.samestat(a, b) and (a.st_size, a.st_mtime_ns) == (b.st_size, b.st_mtime_ns)
