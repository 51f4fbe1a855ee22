"""A fast reader of an ELF object's dynamic section (what it needs, where it searches, its
soname), for the loader model (loader.py).

Only what is needed to answer "which DT_NEEDED entry would stop resolving if
these files disappeared?" is read: the ELF header, the program headers, the
PT_DYNAMIC segment and the few strings it references.  Everything is bounded,
so a 500 MB library costs a handful of small ``pread`` calls.

The loader model's simplifications relative to glibc's ``ld.so`` (all deliberate, see
``loader.Loader``):

* Only the object's own DT_RPATH is searched, not the RPATHs of the loading
  chain (the objects that loaded it, up to the executable).
* Only ``$ORIGIN``/``${ORIGIN}`` is expanded.  A search path entry using
  ``$LIB`` or ``$PLATFORM`` is treated as unresolvable and skipped.
* Empty search path entries (which glibc treats as the current directory) are
  dropped; LD_LIBRARY_PATH entries using a DST (relative to the executable,
  unknown here) are skipped.
* glibc-hwcaps and legacy hwcap subdirectories, DF_1_NODEFLIB, secure mode and
  the "already loaded under this soname" shortcut are not modelled.
* In the ld.so.cache step the entries for a soname are tried in cache order
  until one exists and matches; glibc tries only its single best entry whose
  flags match (pass a flags-filtered mapping, see ``ldcache.read_ld_cache``, to get
  the same answer except for duplicate same-arch entries).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final

from msgspec import Struct

from safeuninstall.base.cachefile import FileStamp

__all__ = [
    "EM_386",
    "EM_AARCH64",
    "EM_ARM",
    "EM_LOONGARCH",
    "EM_PPC64",
    "EM_RISCV",
    "EM_S390",
    "EM_X86_64",
    "ElfCache",
    "ElfInfo",
    "is_elf_candidate",
    "read_elf",
]

# e_machine values used by the tables below.
EM_386: Final = 3
EM_ARM: Final = 40
EM_PPC64: Final = 21
EM_S390: Final = 22
EM_X86_64: Final = 62
EM_AARCH64: Final = 183
EM_RISCV: Final = 243
EM_LOONGARCH: Final = 258


class ElfInfo(Struct, frozen=True):
    """Dynamic-linking facts of one ELF file.

    ``path`` is the path the file was read at, exactly as given (not made
    absolute, symlinks not resolved).  Search path entries keep ``$ORIGIN``
    unexpanded; empty entries are dropped.
    """

    path: str
    elf_class: int
    machine: int
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    program: bool = False  # has PT_INTERP: ld.so can start it (an executable)
    # defines PyInit_<file name up to its first dot>: an extension module Python can import
    python_extension: bool = False


# --------------------------------------------------------------------------
# ELF reading

_ELF_MAGIC: Final = b"\x7fELF"
_HEAD_READ: Final = 4096  # ELF header + typical program headers in one read
_MAX_PHDR_BYTES: Final = 1 << 20
_MAX_DYNAMIC_BYTES: Final = 1 << 20  # real dynamic segments are < 4 KiB
_STR_CHUNK: Final = 256  # first guess for one string's length
_STR_GAP: Final = 4096  # merge string reads closer than this into one pread
_STR_GROW: Final = 65536
_PN_XNUM: Final = 0xFFFF

_PT_LOAD: Final = 1
_PT_DYNAMIC: Final = 2
_PT_INTERP: Final = 3

_DT_NULL: Final = 0
_DT_NEEDED: Final = 1
_DT_HASH: Final = 4
_DT_STRTAB: Final = 5
_DT_SYMTAB: Final = 6
_DT_STRSZ: Final = 10
_DT_SYMENT: Final = 11
_DT_SONAME: Final = 14
_DT_RPATH: Final = 15
_DT_RUNPATH: Final = 29
_DT_GNU_HASH: Final = 0x6FFFFEF5


class _Layout(Struct, frozen=True):
    """Struct layouts for one (ELF class, byte order) combination."""

    elf_class: int
    # -> e_machine, e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize
    ehdr: struct.Struct
    # -> p_type, p_offset, p_vaddr, p_filesz
    phdr: struct.Struct
    # -> d_tag, d_val
    dyn: struct.Struct
    # -> sh_info of a section header (extended phnum lives in section 0)
    sh_info: struct.Struct
    # -> st_name, st_shndx of a dynamic symbol
    sym: struct.Struct
    # -> one 32-bit word of a hash table
    word: struct.Struct


def _layout(elf_class: int, order: str) -> _Layout:
    if elf_class == 64:
        return _Layout(
            64,
            struct.Struct(order + "16x2xH4x8xQQ4x2xHHH4x"),
            struct.Struct(order + "I4xQQ8xQ16x"),
            struct.Struct(order + "qQ"),
            struct.Struct(order + "44xI"),
            struct.Struct(order + "I2xH16x"),
            struct.Struct(order + "I"),
        )
    return _Layout(
        32,
        struct.Struct(order + "16x2xH4x4xII4x2xHHH4x"),
        struct.Struct(order + "III4xI12x"),
        struct.Struct(order + "iI"),
        struct.Struct(order + "28xI"),
        struct.Struct(order + "I10xH"),
        struct.Struct(order + "I"),
    )


# Keyed by (EI_CLASS, EI_DATA) byte values.
_LAYOUTS: Final[Mapping[tuple[int, int], _Layout]] = MappingProxyType(
    {
        (1, 1): _layout(32, "<"),
        (1, 2): _layout(32, ">"),
        (2, 1): _layout(64, "<"),
        (2, 2): _layout(64, ">"),
    }
)


class _BadElf(Exception):
    """Internal: the file is not a usable dynamic ELF."""


def read_elf(path: str | os.PathLike[str]) -> ElfInfo | None:
    """Read the dynamic-linking facts of ``path``.

    Returns None for non-ELF files, truncated or corrupt ELF files, ELF files
    without a dynamic segment (object files, static executables) and also for
    files that cannot be opened or read (the OSError is swallowed).  Never
    raises for bad content.
    """
    name = os.fspath(path)
    try:
        # O_NONBLOCK: a FIFO named like a library must not hang the scan.
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return _read_elf_fd(fd, name)
    except (_BadElf, OSError, ValueError, OverflowError, struct.error):
        return None
    finally:
        os.close(fd)


def _pread_exact(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise _BadElf("truncated")
    return data


def _read_elf_fd(fd: int, path: str) -> ElfInfo | None:
    head = os.pread(fd, _HEAD_READ, 0)
    if len(head) < 16 or head[:4] != _ELF_MAGIC:
        return None
    layout = _LAYOUTS.get((head[4], head[5]))
    if layout is None or len(head) < layout.ehdr.size:
        return None
    machine, phoff, shoff, phentsize, phnum, shentsize = layout.ehdr.unpack_from(head)
    if phnum == _PN_XNUM:
        phnum = _extended_phnum(fd, layout, shoff, shentsize)
    if phnum == 0 or phentsize < layout.phdr.size:
        return None
    segments = _scan_phdrs(fd, head, layout, (phoff, phentsize, phnum))
    if segments.dynamic is None:
        return None
    return _read_dynamic(fd, (path, machine), layout, segments)


def _extended_phnum(fd: int, layout: _Layout, shoff: int, shentsize: int) -> int:
    # With >= 0xffff program headers the real count is sh_info of section 0.
    if shoff == 0 or shentsize < layout.sh_info.size:
        raise _BadElf("bad extended phnum")
    count: int = layout.sh_info.unpack(_pread_exact(fd, layout.sh_info.size, shoff))[0]
    return count


_Segment = tuple[int, int, int]  # (p_vaddr, p_offset, p_filesz)


class _Segments(Struct, frozen=True):
    loads: list[_Segment]
    dynamic: tuple[int, int] | None  # (offset, size) of PT_DYNAMIC
    interp: bool  # a PT_INTERP: a program


def _scan_phdrs(fd: int, head: bytes, layout: _Layout, table_at: tuple[int, int, int]) -> _Segments:
    """The PT_LOAD segments, PT_DYNAMIC and whether there is a PT_INTERP; ``table_at`` is the
    header's (e_phoff, e_phentsize, e_phnum)."""
    phoff, phentsize, phnum = table_at
    size = phnum * phentsize
    if size > _MAX_PHDR_BYTES:
        raise _BadElf("too many program headers")
    if phoff + size <= len(head):
        table, base = head, phoff
    else:
        table, base = _pread_exact(fd, size, phoff), 0
    loads: list[_Segment] = []
    dynamic: tuple[int, int] | None = None
    interp = False
    unpack = layout.phdr.unpack_from
    for index in range(phnum):
        p_type, offset, vaddr, filesz = unpack(table, base + index * phentsize)
        if p_type == _PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (offset, filesz)  # glibc: the last one wins
        elif p_type == _PT_INTERP:
            interp = True
    if dynamic is not None and dynamic[1] == 0:
        dynamic = None
    return _Segments(loads, dynamic, interp)


class _DynamicTags(Struct):
    """The dynamic-section entries the loader model needs, as string-table offsets."""

    needed: list[int]
    soname: int | None = None
    rpath: int | None = None
    runpath: int | None = None
    strtab: int | None = None
    strsz: int | None = None
    symtab: int | None = None
    syment: int | None = None
    hash: int | None = None
    gnu_hash: int | None = None

    def string_offsets(self) -> list[int]:
        singles = (self.soname, self.rpath, self.runpath)
        return self.needed + [off for off in singles if off is not None]


# Single-valued tags, by the _DynamicTags field each sets.
_SINGLE_TAGS: Final = {
    _DT_SONAME: "soname",
    _DT_RPATH: "rpath",
    _DT_RUNPATH: "runpath",
    _DT_STRTAB: "strtab",
    _DT_STRSZ: "strsz",
    _DT_SYMTAB: "symtab",
    _DT_SYMENT: "syment",
    _DT_HASH: "hash",
    _DT_GNU_HASH: "gnu_hash",
}


def _parse_dynamic(data: bytes, layout: _Layout) -> _DynamicTags:
    tags = _DynamicTags(needed=[])
    usable = len(data) - len(data) % layout.dyn.size
    # Single-valued tags: the last entry wins, as in glibc's l_info[] table.
    for tag, value in layout.dyn.iter_unpack(data[:usable]):
        if tag == _DT_NULL:
            break
        if tag == _DT_NEEDED:
            tags.needed.append(value)
        elif (field := _SINGLE_TAGS.get(tag)) is not None:
            setattr(tags, field, value)
    return tags


def _read_dynamic(fd: int, file: tuple[str, int], layout: _Layout, segments: _Segments) -> ElfInfo:
    """``file``: (path, e_machine)."""
    path, machine = file
    assert segments.dynamic is not None
    offset, filesz = segments.dynamic
    size = min(filesz, _MAX_DYNAMIC_BYTES)
    tags = _parse_dynamic(_pread_exact(fd, size, offset), layout)
    strings = _read_dynstr(fd, segments.loads, tags)

    def text(off: int | None) -> str | None:
        return None if off is None else os.fsdecode(strings[off])

    return ElfInfo(
        path=path,
        elf_class=layout.elf_class,
        machine=machine,
        soname=text(tags.soname),
        needed=tuple(os.fsdecode(strings[off]) for off in tags.needed),
        rpath=_split_path_list(text(tags.rpath)),
        runpath=_split_path_list(text(tags.runpath)),
        program=segments.interp,
        python_extension=_is_python_extension(fd, file, layout, segments.loads, tags),
    )


def _split_path_list(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(entry for entry in value.split(":") if entry)


def _read_dynstr(fd: int, loads: list[_Segment], tags: _DynamicTags) -> dict[int, bytes]:
    offsets = tags.string_offsets()
    if not offsets:
        return {}
    if tags.strtab is None:
        raise _BadElf("strings referenced without DT_STRTAB")
    base, limit = _strtab_extent(loads, tags.strtab, tags.strsz)
    if max(offsets) >= limit:
        raise _BadElf("string offset outside DT_STRSZ")
    return _read_strings(fd, base, limit, offsets)


def _strtab_extent(loads: list[_Segment], address: int, strsz: int | None) -> tuple[int, int]:
    """Map DT_STRTAB (a virtual address) to (file offset, readable size)."""
    offset, in_segment = _extent(loads, address)
    return offset, in_segment if strsz is None else min(strsz, in_segment)


def _extent(loads: list[_Segment], address: int) -> tuple[int, int]:
    """Map a virtual address to (file offset, bytes of its PT_LOAD segment from there)."""
    for vaddr, offset, filesz in loads:
        if vaddr <= address < vaddr + filesz:
            return offset + address - vaddr, vaddr + filesz - address
    raise _BadElf("address not inside a PT_LOAD segment")


def _read_strings(fd: int, base: int, limit: int, offsets: list[int]) -> dict[int, bytes]:
    """Read NUL-terminated strings at ``offsets`` with few, small preads.

    Nearby offsets are merged into one read; the whole table (which can be
    megabytes for big C++ libraries) is never read.
    """
    pending = sorted(set(offsets))
    found: dict[int, bytes] = {}
    first = 0
    while first < len(pending):
        start = pending[first]
        end = min(start + _STR_CHUNK, limit)
        last = first + 1
        while last < len(pending) and pending[last] <= end + _STR_GAP:
            end = min(max(end, pending[last] + _STR_CHUNK), limit)
            last += 1
        block = _pread_exact(fd, end - start, base + start)
        for off in pending[first:last]:
            found[off] = _string_in_block((fd, base, limit), block, start, off)
        first = last
    return found


def _string_in_block(table: tuple[int, int, int], block: bytes, start: int, off: int) -> bytes:
    """The string at ``off`` of the table (fd, file offset, readable size), whose bytes from
    ``start`` are in ``block``."""
    fd, base, limit = table
    nul = block.find(b"\0", off - start)
    if nul != -1:
        return block[off - start : nul]
    # Longer than the block: keep reading, still bounded by DT_STRSZ.
    parts = [block[off - start :]]
    pos = start + len(block)
    while pos < limit:
        chunk = _pread_exact(fd, min(_STR_GROW, limit - pos), base + pos)
        nul = chunk.find(b"\0")
        if nul != -1:
            parts.append(chunk[:nul])
            return b"".join(parts)
        parts.append(chunk)
        pos += len(chunk)
    raise _BadElf("unterminated string")


# -- extension modules: does the file define PyInit_<name>? ------------------------------------

_TAGGED_SUFFIX: Final = re.compile(r"\.(?:cpython-[^./]+|abi3)\.so$")
_MAX_CHAIN: Final = 1 << 16  # real hash chains are a few entries long; a longer one is corrupt
_CHAIN_READ: Final = 64  # GNU hash chain words per pread
_SHN_UNDEF: Final = 0


def _is_python_extension(
    fd: int, file: tuple[str, int], layout: _Layout, loads: list[_Segment], tags: _DynamicTags
) -> bool:
    """Whether the file defines ``PyInit_<name>``, the function Python calls to import it.

    Only a file named ``*.so`` can be imported. Where the symbol table can't be searched the
    name decides: ``*.cpython-*.so`` and ``*.abi3.so`` are extension modules, a plain ``*.so``
    is not (plugins and libraries are named so too: ``triton/plugins/libMLIRDialectPlugin.so``
    is not a module, ``triton/_C/libtriton.so`` is). ``file``: (path, e_machine).
    """
    path, machine = file
    base = path.rpartition("/")[2]
    if not base.endswith(".so"):
        return False
    tagged = _TAGGED_SUFFIX.search(base) is not None
    stem = base.partition(".")[0]
    if not (stem.isascii() and stem.isidentifier()):  # PyInitU_<punycode>: not looked up
        return tagged
    try:
        found = _defines(fd, (layout, machine), loads, tags, b"PyInit_" + stem.encode())
    except (_BadElf, OSError, ValueError, OverflowError, struct.error):
        found = None
    return tagged if found is None else found


def _defines(
    fd: int, kind: tuple[_Layout, int], loads: list[_Segment], tags: _DynamicTags, name: bytes
) -> bool | None:
    """Whether the dynamic symbol table defines ``name``, found through DT_GNU_HASH (else
    DT_HASH) as ld.so finds it: a handful of small reads. None: no table to search.
    ``kind``: (layout, e_machine)."""
    layout, machine = kind
    if tags.symtab is None or tags.strtab is None:
        return None
    syment = tags.syment or layout.sym.size
    if syment < layout.sym.size:
        raise _BadElf("DT_SYMENT too small")
    strings, limit = _strtab_extent(loads, tags.strtab, tags.strsz)
    symtab = _extent(loads, tags.symtab)[0]
    wanted = name + b"\0"

    def defined_here(index: int) -> bool:
        entry = _pread_exact(fd, layout.sym.size, symtab + index * syment)
        st_name, shndx = layout.sym.unpack(entry)
        if shndx == _SHN_UNDEF or st_name + len(wanted) > limit:
            return False
        return os.pread(fd, len(wanted), strings + st_name) == wanted

    if tags.gnu_hash is not None:
        return _gnu_hash_lookup(fd, layout, _extent(loads, tags.gnu_hash)[0], name, defined_here)
    # 64-bit s390x has 8-byte DT_HASH words: not read (its objects have DT_GNU_HASH anyway).
    if tags.hash is not None and (layout.elf_class, machine) != (64, EM_S390):
        return _sysv_hash_lookup(fd, layout, _extent(loads, tags.hash)[0], name, defined_here)
    return None


def _gnu_hash(name: bytes) -> int:
    value = 5381
    for byte in name:
        value = (value * 33 + byte) & 0xFFFFFFFF
    return value


def _sysv_hash(name: bytes) -> int:
    value = 0
    for byte in name:
        value = ((value << 4) + byte) & 0xFFFFFFFF
        value ^= (value & 0xF0000000) >> 24
        value &= 0x0FFFFFFF
    return value


def _gnu_hash_lookup(
    fd: int, layout: _Layout, table: int, name: bytes, defined_here: Callable[[int], bool]
) -> bool:
    order = layout.word.format[0]
    nbuckets, symoffset, bloom_size, _shift = struct.unpack(
        order + "4I", _pread_exact(fd, 16, table)
    )
    if nbuckets == 0:
        return False
    wanted = _gnu_hash(name)
    buckets = table + 16 + bloom_size * (layout.elf_class // 8)
    (index,) = layout.word.unpack(_pread_exact(fd, 4, buckets + (wanted % nbuckets) * 4))
    if index < symoffset:  # 0: an empty bucket
        return False
    chain = buckets + nbuckets * 4
    for _ in range(_MAX_CHAIN // _CHAIN_READ):
        block = os.pread(fd, 4 * _CHAIN_READ, chain + (index - symoffset) * 4)
        words = struct.unpack(f"{order}{len(block) // 4}I", block[: len(block) // 4 * 4])
        if not words:
            raise _BadElf("hash chain runs past the end of the file")
        for value in words:
            # The low bit marks the chain's last entry; the others are the name's hash.
            if (value | 1) == (wanted | 1) and defined_here(index):
                return True
            if value & 1:
                return False
            index += 1
    raise _BadElf("endless hash chain")


def _sysv_hash_lookup(
    fd: int, layout: _Layout, table: int, name: bytes, defined_here: Callable[[int], bool]
) -> bool:
    order = layout.word.format[0]
    nbucket, nchain = struct.unpack(order + "2I", _pread_exact(fd, 8, table))
    if nbucket == 0:
        return False
    (index,) = layout.word.unpack(_pread_exact(fd, 4, table + 8 + (_sysv_hash(name) % nbucket) * 4))
    chains = table + 8 + nbucket * 4
    for _ in range(min(nchain, _MAX_CHAIN)):
        if index == 0:  # STN_UNDEF ends the chain
            return False
        if index >= nchain:
            raise _BadElf("hash chain outside the table")
        if defined_here(index):
            return True
        (index,) = layout.word.unpack(_pread_exact(fd, 4, chains + index * 4))
    raise _BadElf("endless hash chain")


def is_elf_candidate(name: str) -> bool:
    """Cheap filename filter: ``*.so`` and ``*.so.*`` (a path is accepted too)."""
    base = name.rpartition("/")[2]
    return base.endswith(".so") or ".so." in base


# --------------------------------------------------------------------------
# read_elf results within one command


class ElfCache:
    """``read_elf`` results of one command, by path, while the file's stamp is the one it was
    read with: a loader asks about the same library once for each object that needs it.

    Nothing is kept between commands: what a file needs decides a verdict, and a stored answer
    could only be trusted by reading the file again, which is what it would save. ``get`` is a
    drop-in ``reader`` for ``Loader``. Results of None (non-ELF files) are kept too."""

    def __init__(self, reader: Callable[[str], ElfInfo | None] = read_elf) -> None:
        self._reader = reader
        self._entries: dict[str, tuple[FileStamp, ElfInfo | None]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, path: str, stat: os.stat_result | None = None) -> ElfInfo | None:
        """``read_elf(path)``, answered from what was read of the file as it is.

        Pass ``stat`` (e.g. from ``os.DirEntry.stat()``) to save a syscall.
        Returns None without keeping it if the file cannot be stat'ed.
        """
        if stat is None:
            try:
                stat = os.stat(path)
            except OSError:
                return None
        stamp = FileStamp.of(stat)
        entry = self._entries.get(path)
        if entry is not None and entry[0] == stamp:
            return entry[1]
        info = self._reader(path)
        self._entries[path] = (stamp, info)
        return info
