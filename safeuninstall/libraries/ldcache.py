"""The glibc ld.so.cache: which file the dynamic loader finds for a soname outside the
environment (parsed only when the loader model looks there)."""

from __future__ import annotations

import os
import struct
from collections.abc import Container, Mapping
from types import MappingProxyType
from typing import Final

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
)

DEFAULT_LD_CACHE: Final = "/etc/ld.so.cache"

# --------------------------------------------------------------------------
# ld.so.cache

_OLD_MAGIC: Final = b"ld.so-1.7.0"
_NEW_MAGIC: Final = b"glibc-ld.so.cache"
_NEW_VERSION: Final = b"1.1"
_OLD_HEADER_SIZE: Final = 16  # magic[11], pad, uint32 nlibs
_OLD_ENTRY: Final = struct.Struct("=iII")  # flags, key, value
_NEW_HEADER_SIZE: Final = 48
_MAX_LD_CACHE_BYTES: Final = 64 << 20

# Flag values glibc's _dl_cache_check_flags accepts, by (ELF class, e_machine).
_LD_CACHE_FLAGS: Final[Mapping[tuple[int, int], frozenset[int]]] = MappingProxyType(
    {
        (64, EM_X86_64): frozenset({0x0303}),
        (32, EM_X86_64): frozenset({0x0803}),  # x32
        (32, EM_386): frozenset({0x0001, 0x0003}),
        (64, EM_AARCH64): frozenset({0x0A03}),
        (32, EM_ARM): frozenset({0x0001, 0x0003, 0x0903, 0x0B03}),
        (64, EM_PPC64): frozenset({0x0503}),
        (64, EM_S390): frozenset({0x0403}),
        (64, EM_RISCV): frozenset({0x0F03, 0x1003}),
        (64, EM_LOONGARCH): frozenset({0x1103, 0x1203}),
    }
)


class LdCacheEntry(Struct, frozen=True):
    """One ld.so.cache record; ``flags`` e.g. 0x0303 = ``(libc6,x86-64)``."""

    soname: str
    path: str
    flags: int
    hwcap: int


def ld_cache_flags(elf_class: int, machine: int) -> frozenset[int] | None:
    """Cache flags glibc accepts for objects of this kind; None if unknown."""
    return _LD_CACHE_FLAGS.get((elf_class, machine))


def read_ld_cache_entries(path: str | os.PathLike[str] = DEFAULT_LD_CACHE) -> list[LdCacheEntry]:
    """All entries of an ld.so.cache in file order; [] if missing or corrupt.

    Reads the new format (``glibc-ld.so.cache1.1``), also when it follows an
    old ``ld.so-1.7.0`` section (glibc < 2.32 "compat" files), and old-only
    files.
    """
    try:
        with open(path, "rb") as stream:
            data = stream.read(_MAX_LD_CACHE_BYTES + 1)
    except OSError:
        return []
    if len(data) > _MAX_LD_CACHE_BYTES:
        return []
    try:
        return _parse_ld_cache(data)
    except (ValueError, struct.error):
        return []


def read_ld_cache(
    path: str | os.PathLike[str] = DEFAULT_LD_CACHE,
    *,
    flags: Container[int] | None = None,
) -> dict[str, list[str]]:
    """Map soname -> paths in cache order; {} if the file is missing or corrupt.

    ``flags`` keeps only entries with those flag values, e.g.
    ``ld_cache_flags(64, EM_X86_64)``; None keeps every entry.
    """
    result: dict[str, list[str]] = {}
    for entry in read_ld_cache_entries(path):
        if flags is None or entry.flags in flags:
            result.setdefault(entry.soname, []).append(entry.path)
    return result


def _parse_ld_cache(data: bytes) -> list[LdCacheEntry]:
    if data.startswith(_NEW_MAGIC):
        return _parse_new_cache(data, 0)
    if not data.startswith(_OLD_MAGIC):
        raise ValueError("not an ld.so.cache")
    (nlibs,) = struct.unpack_from("=I", data, 12)
    old_end = _OLD_HEADER_SIZE + nlibs * _OLD_ENTRY.size
    if old_end > len(data):
        raise ValueError("truncated old cache")
    # The new section is aligned to alignof(struct cache_file_new): 8, or 4 on
    # ABIs where uint64_t is 4-aligned (i386).
    for align in (8, 4):
        start = -(-old_end // align) * align
        if data.startswith(_NEW_MAGIC, start):
            return _parse_new_cache(data, start)
    return _parse_old_cache(data, old_end)


def _parse_new_cache(data: bytes, base: int) -> list[LdCacheEntry]:
    if len(data) < base + _NEW_HEADER_SIZE:
        raise ValueError("truncated header")
    if data[base + 17 : base + 20] != _NEW_VERSION:
        raise ValueError("unsupported cache version")
    order = {0: "=", 2: "<", 3: ">"}.get(data[base + 28] & 3)
    if order is None:
        raise ValueError("invalid endianness flag")
    (nlibs,) = struct.unpack_from(order + "I", data, base + 20)
    record = struct.Struct(order + "iIIIQ")  # flags, key, value, osversion, hwcap
    first = base + _NEW_HEADER_SIZE
    if first + nlibs * record.size > len(data):
        raise ValueError("truncated entries")
    entries = []
    for flags, key, value, _osversion, hwcap in record.iter_unpack(
        data[first : first + nlibs * record.size]
    ):
        # String offsets are relative to the start of the new-format header.
        entries.append(
            LdCacheEntry(_cstring(data, base + key), _cstring(data, base + value), flags, hwcap)
        )
    return entries


def _parse_old_cache(data: bytes, strings: int) -> list[LdCacheEntry]:
    entries = []
    for flags, key, value in _OLD_ENTRY.iter_unpack(data[_OLD_HEADER_SIZE:strings]):
        # Old-format offsets are relative to the end of the entry array.
        entries.append(
            LdCacheEntry(_cstring(data, strings + key), _cstring(data, strings + value), flags, 0)
        )
    return entries


def _cstring(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    if offset >= len(data) or end == -1:
        raise ValueError("bad string offset")
    return os.fsdecode(data[offset:end])
