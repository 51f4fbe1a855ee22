"""RECORD files (PEP 376 / the wheel spec) and the hashes in them."""

from __future__ import annotations

import base64
import csv
from pathlib import Path

from msgspec import Struct

_CHUNK = 1024 * 1024


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
    """Entries of a RECORD file; raises OSError when it can't be read."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    entries = []
    for row in rows:
        if not row or not row[0]:
            continue
        hash_field = row[1] if len(row) > 1 else ""
        size_field = row[2] if len(row) > 2 else ""
        entries.append(
            RecordEntry(
                path=row[0],
                sha256=_hex_from_record_hash(hash_field) if hash_field else None,
                size=int(size_field) if size_field.isdigit() else None,
            )
        )
    return entries


def sha256_file(path: Path) -> str:
    import hashlib  # on first use: OpenSSL, 3.9 ms of import that check/show/snapshots never need

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
