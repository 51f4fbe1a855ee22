"""Tests for safeuninstall.elf against real toolchain output (gcc, readelf, ldconfig, ldd)."""

from __future__ import annotations

import functools
import os
import random
import re
import shutil
import struct
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from safeuninstall.environment.paths import normalise
from safeuninstall.libraries import index as libraries
from safeuninstall.libraries.elf import (
    EM_386,
    EM_AARCH64,
    EM_X86_64,
    ElfCache,
    ElfInfo,
    is_elf_candidate,
    read_elf,
)
from safeuninstall.libraries.index import LibraryIndex
from safeuninstall.libraries.ldcache import (
    LdCacheEntry,
    ld_cache_flags,
    read_ld_cache,
    read_ld_cache_entries,
)
from safeuninstall.libraries.loader import (
    Loader,
    LoadMap,
    Resolved,
    default_library_dirs,
    expand_origin,
    split_ld_library_path,
)
from tests.ldd import disagreement
from tests.ldd import ldd as ldd_view

GCC = shutil.which("gcc")
READELF = shutil.which("readelf")
LDD = shutil.which("ldd")
LDCONFIG = shutil.which(
    "ldconfig", path=os.pathsep.join([os.environ.get("PATH", ""), "/sbin", "/usr/sbin"])
)

needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc not available")
needs_readelf = pytest.mark.skipif(READELF is None, reason="readelf not available")
needs_ldd = pytest.mark.skipif(LDD is None, reason="ldd not available")
needs_ldconfig = pytest.mark.skipif(LDCONFIG is None, reason="ldconfig not available")

RUNPATH = "$ORIGIN/../foo/lib:$ORIGIN/../bar"
X86_64_LIBC6 = 0x0303


# -- helpers: gcc, readelf, synthetic ELF files -------------------------------------------------


def gcc(out: Path, source: str, *args: str) -> Path | None:
    """Compile ``source`` with gcc into ``out``; None if this toolchain can't (e.g. no -m32)."""
    assert GCC is not None
    out.parent.mkdir(parents=True, exist_ok=True)
    c_file = out.parent / (out.name + ".c")
    c_file.write_text(source)
    proc = subprocess.run([GCC, str(c_file), "-o", str(out), *args], capture_output=True, text=True)
    c_file.unlink()
    return out if proc.returncode == 0 else None


def gcc_shared(out: Path, source: str, *args: str) -> Path:
    built = gcc(out, source, "-shared", "-fPIC", *args)
    assert built is not None, f"gcc failed for {out}"
    return built


def readelf_dynamic(
    path: Path,
) -> tuple[tuple[str, ...], str | None, tuple[str, ...], tuple[str, ...]] | None:
    """(needed, soname, rpath, runpath) from ``readelf -d``; None without dynamic section."""
    assert READELF is not None
    env = {**os.environ, "LC_ALL": "C"}
    out = subprocess.run(
        [READELF, "-dW", str(path)], capture_output=True, text=True, env=env
    ).stdout
    if "Dynamic section at offset" not in out:
        return None

    def values(tag: str, label: str) -> list[str]:
        return re.findall(rf"\({tag}\)\s+{label}: \[(.*)\]", out)

    def path_list(tag: str, label: str) -> tuple[str, ...]:
        found = values(tag, label)
        return tuple(e for e in found[-1].split(":") if e) if found else ()

    sonames = values("SONAME", "Library soname")
    return (
        tuple(values("NEEDED", "Shared library")),
        sonames[-1] if sonames else None,
        path_list("RPATH", "Library rpath"),
        path_list("RUNPATH", "Library runpath"),
    )


def facts(
    info: ElfInfo | None,
) -> tuple[tuple[str, ...], str | None, tuple[str, ...], tuple[str, ...]] | None:
    return None if info is None else (info.needed, info.soname, info.rpath, info.runpath)


def synth_elf(
    *,
    elf_class: int = 64,
    big_endian: bool = False,
    machine: int = EM_X86_64,
    soname: str | None = None,
    needed: Sequence[str] = (),
    rpath: str | None = None,
    runpath: str | None = None,
    filler: int = 0,
    extended_phnum: bool = False,
) -> bytes:
    """A minimal dynamic ELF (one PT_LOAD over the whole file + PT_DYNAMIC).

    ``filler`` puts that many bytes of string data between consecutive strings, to
    exercise reads of far-apart strings in a big .dynstr.
    """
    order = ">" if big_endian else "<"
    is64 = elf_class == 64
    ehsize, phentsize, shentsize = (64, 56, 64) if is64 else (52, 32, 40)
    vbase = 0x400000
    phoff = ehsize
    strtab_off = phoff + 2 * phentsize
    strtab = bytearray(b"\0")
    tags: list[tuple[int, int]] = []

    def add(tag: int, text: str) -> None:
        if filler:
            strtab.extend(b"f" * filler + b"\0")
        tags.append((tag, len(strtab)))
        strtab.extend(text.encode() + b"\0")

    for name in needed:
        add(1, name)
    for tag, value in ((14, soname), (15, rpath), (29, runpath)):
        if value is not None:
            add(tag, value)
    tags += [(5, vbase + strtab_off), (10, len(strtab)), (0, 0)]
    dyn_off = -(-(strtab_off + len(strtab)) // 8) * 8
    dyn = b"".join(struct.pack(order + ("qQ" if is64 else "iI"), t, v) for t, v in tags)
    shoff = dyn_off + len(dyn) if extended_phnum else 0
    total = shoff + shentsize if extended_phnum else dyn_off + len(dyn)

    ident = b"\x7fELF" + bytes([2 if is64 else 1, 2 if big_endian else 1, 1, 0]) + bytes(8)
    phnum = 0xFFFF if extended_phnum else 2
    shnum = 1 if extended_phnum else 0
    header_fields = (
        3,
        machine,
        1,
        0,
        phoff,
        shoff,
        0,
        ehsize,
        phentsize,
        phnum,
        shentsize,
        shnum,
        0,
    )
    ehdr = ident + struct.pack(
        order + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"), *header_fields
    )

    def phdr(p_type: int, offset: int, size: int, flags: int) -> bytes:
        if is64:
            return struct.pack(
                order + "IIQQQQQQ",
                p_type,
                flags,
                offset,
                vbase + offset,
                vbase + offset,
                size,
                size,
                8,
            )
        return struct.pack(
            order + "IIIIIIII", p_type, offset, vbase + offset, vbase + offset, size, size, flags, 8
        )

    image = bytearray(total)
    image[0 : len(ehdr)] = ehdr
    image[phoff : phoff + 2 * phentsize] = phdr(1, 0, total, 5) + phdr(2, dyn_off, len(dyn), 6)
    image[strtab_off : strtab_off + len(strtab)] = strtab
    image[dyn_off : dyn_off + len(dyn)] = dyn
    if extended_phnum:  # section header 0 carries the real phnum in sh_info
        sh_info_at = shoff + (44 if is64 else 28)
        image[sh_info_at : sh_info_at + 4] = struct.pack(order + "I", 2)
    return bytes(image)


def patch_machine(src: Path, dst: Path, machine: int) -> Path:
    """Copy of a little-endian ELF with another e_machine (what glibc must skip)."""
    data = bytearray(src.read_bytes())
    data[18:20] = struct.pack("<H", machine)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(bytes(data))
    return dst


# -- the libraries under test, built once --------------------------------------------------------


@dataclass(frozen=True)
class Built:
    root: Path
    libfoo: Path  # foo/lib/libfoo.so.1
    libbar: Path  # bar/libbar.so.2
    consumer: Path  # consumer/libconsumer.so, DT_RUNPATH
    consumer_rpath: Path  # consumer_rpath/libconsumer.so, DT_RPATH
    drift_foo: Path  # drift/libfoo.so.1, a second copy
    object_file: Path  # obj/foo.o, no dynamic section
    foo_i386: Path | None  # i386/libfoo.so.1 (gcc -m32), if the toolchain can
    foo_x32: Path | None  # x32/libfoo.so.1 (gcc -mx32): ELFCLASS32 + EM_X86_64


FOO_C = "int foo_version(void) { return 1; }\n"
DRIFT_FOO_C = "int foo_version(void) { return 2; }\n"
BAR_C = "int bar_version(void) { return 2; }\n"
CONSUMER_C = """
int foo_version(void); int bar_version(void);
int consumer_check(void) { return foo_version() * 10 + bar_version(); }
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    if GCC is None:
        pytest.skip("gcc not available")
    root = tmp_path_factory.mktemp("elf")
    libfoo = gcc_shared(root / "foo/lib/libfoo.so.1", FOO_C, "-Wl,-soname,libfoo.so.1")
    libbar = gcc_shared(root / "bar/libbar.so.2", BAR_C, "-Wl,-soname,libbar.so.2")
    link = [f"-L{libfoo.parent}", "-l:libfoo.so.1", f"-L{libbar.parent}", "-l:libbar.so.2"]
    consumer = gcc_shared(
        root / "consumer/libconsumer.so",
        CONSUMER_C,
        *link,
        "-Wl,--enable-new-dtags",
        f"-Wl,-rpath,{RUNPATH}",
    )
    consumer_rpath = gcc_shared(
        root / "consumer_rpath/libconsumer.so",
        CONSUMER_C,
        *link,
        "-Wl,--disable-new-dtags",
        f"-Wl,-rpath,{RUNPATH}",
    )
    drift_foo = gcc_shared(root / "drift/libfoo.so.1", DRIFT_FOO_C, "-Wl,-soname,libfoo.so.1")
    object_file = root / "obj/foo.o"
    assert gcc(object_file, FOO_C, "-c") is not None
    no_libc = ("-shared", "-fPIC", "-nostdlib", "-Wl,-soname,libfoo.so.1")
    foo_i386 = gcc(root / "i386/libfoo.so.1", FOO_C, "-m32", *no_libc)
    foo_x32 = gcc(root / "x32/libfoo.so.1", FOO_C, "-mx32", *no_libc)
    return Built(
        root, libfoo, libbar, consumer, consumer_rpath, drift_foo, object_file, foo_i386, foo_x32
    )


def isolated_loader(
    ld_library_path: Sequence[str] = (),
    ld_cache: dict[str, list[str]] | None = None,
    *,
    missing: Sequence[Path] = (),
    reader: Callable[[str], ElfInfo | None] = read_elf,
) -> Loader:
    """A Loader that sees no system directories and pretends ``missing`` files are gone."""
    gone = {os.path.realpath(p) for p in missing}

    def exists(path: str) -> bool:
        return os.path.isfile(path) and os.path.realpath(path) not in gone

    return Loader(ld_library_path, ld_cache or {}, default_dirs=(), exists=exists, reader=reader)


def same_file(found: str | None, expected: Path) -> bool:
    return found is not None and os.path.samefile(found, expected)


# -- read_elf -------------------------------------------------------------------------------------


def test_read_elf_provider_soname(built: Built) -> None:
    info = read_elf(built.libfoo)
    assert info is not None
    assert info.path == str(built.libfoo)
    assert (info.elf_class, info.machine) == (64, EM_X86_64)
    assert info.soname == "libfoo.so.1"
    assert info.rpath == info.runpath == ()


def test_read_elf_consumer_runpath(built: Built) -> None:
    info = read_elf(built.consumer)
    assert info is not None
    assert info.needed[:2] == ("libfoo.so.1", "libbar.so.2")
    assert set(info.needed) <= {"libfoo.so.1", "libbar.so.2", "libc.so.6"}
    assert info.soname is None
    assert info.runpath == ("$ORIGIN/../foo/lib", "$ORIGIN/../bar")
    assert info.rpath == ()


def test_read_elf_consumer_rpath(built: Built) -> None:
    info = read_elf(built.consumer_rpath)
    assert info is not None
    assert info.needed[:2] == ("libfoo.so.1", "libbar.so.2")
    assert info.rpath == ("$ORIGIN/../foo/lib", "$ORIGIN/../bar")
    assert info.runpath == ()


@needs_readelf
def test_read_elf_matches_readelf_on_built_files(built: Built) -> None:
    paths = [built.libfoo, built.libbar, built.consumer, built.consumer_rpath, built.object_file]
    paths += [p for p in (built.foo_i386, built.foo_x32) if p is not None]
    for path in paths:
        assert facts(read_elf(path)) == readelf_dynamic(path), path


def system_libraries(limit: int) -> list[Path]:
    directory = Path("/usr/lib/x86_64-linux-gnu")
    if not directory.is_dir():
        return []
    found = sorted(
        p
        for p in directory.iterdir()
        if is_elf_candidate(p.name) and p.is_file() and not p.is_symlink()
    )
    return found[:: max(1, len(found) // limit)][:limit]


@needs_readelf
def test_read_elf_matches_readelf_on_system_libraries() -> None:
    libraries = system_libraries(60)
    if not libraries:
        pytest.skip("no system libraries to compare with")
    for path in libraries:
        assert facts(read_elf(path)) == readelf_dynamic(path), path


@needs_readelf
@pytest.mark.parametrize("elf_class", [32, 64])
@pytest.mark.parametrize("big_endian", [False, True])
def test_read_elf_synthetic_class_and_byte_order(
    tmp_path: Path, elf_class: int, big_endian: bool
) -> None:
    path = tmp_path / "libsynth.so.3"
    path.write_bytes(
        synth_elf(
            elf_class=elf_class,
            big_endian=big_endian,
            machine=EM_AARCH64,
            soname="libsynth.so.3",
            needed=("liba.so.1", "libb.so.2"),
            rpath="/opt/r1::${ORIGIN}/r2",
            runpath="$ORIGIN/lib",
        )
    )
    info = read_elf(path)
    assert info is not None
    assert (info.elf_class, info.machine) == (elf_class, EM_AARCH64)
    assert info == ElfInfo(
        path=str(path),
        elf_class=elf_class,
        machine=EM_AARCH64,
        soname="libsynth.so.3",
        needed=("liba.so.1", "libb.so.2"),
        rpath=("/opt/r1", "${ORIGIN}/r2"),
        runpath=("$ORIGIN/lib",),
    )
    assert facts(info) == readelf_dynamic(path)  # the synthetic file is one readelf agrees with


def test_read_elf_far_apart_and_long_strings(tmp_path: Path) -> None:
    long_runpath = ":".join(f"/very/long/dir{i:04d}" for i in range(5000))  # ~100 KB string
    path = tmp_path / "libfar.so"
    needed = tuple(f"lib{i}.so" for i in range(20))
    path.write_bytes(synth_elf(needed=needed, runpath=long_runpath, filler=30000))
    info = read_elf(path)
    assert info is not None
    assert info.needed == needed
    assert len(info.runpath) == 5000 and info.runpath[-1] == "/very/long/dir4999"


def test_read_elf_extended_program_header_count(tmp_path: Path) -> None:
    path = tmp_path / "libxnum.so"
    path.write_bytes(synth_elf(needed=("libc.so.6",), extended_phnum=True))
    info = read_elf(path)
    assert info is not None and info.needed == ("libc.so.6",)


def test_read_elf_no_strings_needed(tmp_path: Path) -> None:
    path = tmp_path / "libempty.so"
    path.write_bytes(synth_elf())
    assert read_elf(path) == ElfInfo(str(path), 64, EM_X86_64, None, (), (), ())


def test_read_elf_object_file_has_no_dynamic_section(built: Built) -> None:
    assert read_elf(built.object_file) is None


def test_read_elf_non_elf_inputs(tmp_path: Path) -> None:
    text = tmp_path / "libc.so"
    text.write_text("/* GNU ld script */\nGROUP ( /lib/x86_64-linux-gnu/libc.so.6 )\n")
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    magic_only = tmp_path / "magic.so"
    magic_only.write_bytes(b"\x7fELF")
    fifo = tmp_path / "fifo.so"
    os.mkfifo(fifo)
    for path in (text, empty, magic_only, tmp_path, tmp_path / "missing.so", fifo):
        assert read_elf(path) is None, path


def test_read_elf_truncated_first_100_bytes(built: Built, tmp_path: Path) -> None:
    truncated = tmp_path / "libfoo.so.1"
    truncated.write_bytes(built.libfoo.read_bytes()[:100])
    assert read_elf(truncated) is None


def test_read_elf_never_raises_on_any_truncation(built: Built, tmp_path: Path) -> None:
    data = built.consumer.read_bytes()
    path = tmp_path / "cut.so"
    for length in [*range(0, 200, 7), *range(200, len(data), 211)]:
        path.write_bytes(data[:length])
        info = read_elf(path)
        assert info is None or info.needed[:2] == ("libfoo.so.1", "libbar.so.2")


def test_read_elf_never_raises_on_corruption(built: Built, tmp_path: Path) -> None:
    data = built.consumer.read_bytes()
    rng = random.Random(1234)
    path = tmp_path / "corrupt.so"
    for _ in range(400):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            # Mostly hit the headers and the dynamic segment, where parsing decisions are made.
            where = rng.randrange(0, 1024) if rng.random() < 0.7 else rng.randrange(len(data))
            mutated[where] = rng.randrange(256)
        path.write_bytes(bytes(mutated))
        result = read_elf(path)
        assert result is None or isinstance(result, ElfInfo)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("libfoo.so", True),
        ("libfoo.so.1", True),
        ("libfoo.so.1.2.3", True),
        ("_ext.cpython-311-x86_64-linux-gnu.so", True),
        ("/venv/lib/python3.11/site-packages/pkg/_ext.abi3.so", True),
        ("libfoo.a", False),
        ("module.py", False),
        ("libfoo.sop", False),
        ("python3", False),
        ("/dir.so/README", False),
    ],
)
def test_is_elf_candidate(name: str, expected: bool) -> None:
    assert is_elf_candidate(name) is expected


# -- resolution -----------------------------------------------------------------------------------


def test_runpath_origin_finds_provider(built: Built) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    found = isolated_loader().resolve(consumer, "libfoo.so.1")
    # Spelled as ld.so spells it: $ORIGIN = the consumer's directory, no '..' folding.
    assert found == f"{built.consumer.parent}/../foo/lib/libfoo.so.1"
    assert same_file(found, built.libfoo)


def test_resolve_every_needed_library(built: Built) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    loader = isolated_loader()
    resolved = {soname: loader.resolve(consumer, soname) for soname in consumer.needed}
    assert same_file(resolved["libfoo.so.1"], built.libfoo)
    assert same_file(resolved["libbar.so.2"], built.libbar)
    if "libc.so.6" in resolved:
        assert resolved["libc.so.6"] is None  # no system dirs in the isolated loader


def test_removed_provider_drifts_to_ld_library_path_copy(built: Built) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    drift_dir = str(built.drift_foo.parent)
    assert isolated_loader(missing=[built.libfoo]).resolve(consumer, "libfoo.so.1") is None
    found = isolated_loader([drift_dir], missing=[built.libfoo]).resolve(consumer, "libfoo.so.1")
    assert found == str(built.drift_foo)


def test_ld_library_path_beats_runpath(built: Built) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    found = isolated_loader([str(built.drift_foo.parent)]).resolve(consumer, "libfoo.so.1")
    assert found == str(built.drift_foo)


def test_rpath_beats_ld_library_path(built: Built) -> None:
    consumer = read_elf(built.consumer_rpath)
    assert consumer is not None
    found = isolated_loader([str(built.drift_foo.parent)]).resolve(consumer, "libfoo.so.1")
    assert same_file(found, built.libfoo)
    assert found is not None and "/../foo/lib/" in found


def test_rpath_ignored_when_runpath_present(built: Built) -> None:
    both = ElfInfo(
        path=str(built.consumer),
        elf_class=64,
        machine=EM_X86_64,
        soname=None,
        needed=("libfoo.so.1",),
        rpath=(str(built.drift_foo.parent),),
        runpath=("$ORIGIN/../foo/lib",),
    )
    assert same_file(isolated_loader().resolve(both, "libfoo.so.1"), built.libfoo)
    without_runpath = ElfInfo(both.path, 64, EM_X86_64, None, both.needed, both.rpath, ())
    assert isolated_loader().resolve(without_runpath, "libfoo.so.1") == str(built.drift_foo)


def test_ld_cache_after_runpath_and_first_existing_entry(built: Built) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    cache = {"libfoo.so.1": [str(built.root / "nowhere/libfoo.so.1"), str(built.drift_foo)]}
    assert same_file(isolated_loader(ld_cache=cache).resolve(consumer, "libfoo.so.1"), built.libfoo)
    found = isolated_loader(ld_cache=cache, missing=[built.libfoo]).resolve(consumer, "libfoo.so.1")
    assert found == str(built.drift_foo)


def test_default_dirs_are_last(built: Built) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    loader = Loader([], {}, default_dirs=[str(built.drift_foo.parent)])
    assert same_file(loader.resolve(consumer, "libfoo.so.1"), built.libfoo)
    gone = os.path.realpath(built.libfoo)
    loader = Loader(
        [],
        {},
        default_dirs=[str(built.drift_foo.parent)],
        exists=lambda p: os.path.isfile(p) and os.path.realpath(p) != gone,
    )
    assert loader.resolve(consumer, "libfoo.so.1") == str(built.drift_foo)


def test_other_machine_candidate_is_skipped(built: Built, tmp_path: Path) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    arm = patch_machine(built.libfoo, tmp_path / "arm/libfoo.so.1", EM_AARCH64)
    arm_info = read_elf(arm)
    assert arm_info is not None and arm_info.machine == EM_AARCH64
    dirs = [str(arm.parent), str(built.drift_foo.parent)]
    assert isolated_loader(dirs).resolve(consumer, "libfoo.so.1") == str(built.drift_foo)


def test_other_class_candidates_are_skipped(built: Built) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    others = [p for p in (built.foo_i386, built.foo_x32) if p is not None]
    if not others:
        pytest.skip("gcc cannot build -m32 or -mx32 objects here")
    if built.foo_x32 is not None:
        x32 = read_elf(built.foo_x32)
        assert x32 is not None and (x32.elf_class, x32.machine) == (32, EM_X86_64)
    if built.foo_i386 is not None:
        i386 = read_elf(built.foo_i386)
        assert i386 is not None and (i386.elf_class, i386.machine) == (32, EM_386)
    dirs = [str(p.parent) for p in others] + [str(built.drift_foo.parent)]
    assert isolated_loader(dirs).resolve(consumer, "libfoo.so.1") == str(built.drift_foo)


def test_non_elf_candidate_stops_the_search(built: Built, tmp_path: Path) -> None:
    # ld.so reports "invalid ELF header"/"file too short" instead of searching on.
    consumer = read_elf(built.consumer)
    assert consumer is not None
    junk = tmp_path / "junk/libfoo.so.1"
    junk.parent.mkdir()
    junk.write_text("not a library\n")
    dirs = [str(junk.parent), str(built.drift_foo.parent)]
    assert isolated_loader(dirs).resolve(consumer, "libfoo.so.1") is None


def test_soname_with_slash_is_a_path(built: Built) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    loader = isolated_loader()
    assert loader.resolve(consumer, str(built.drift_foo)) == str(built.drift_foo)
    assert same_file(loader.resolve(consumer, "$ORIGIN/../foo/lib/libfoo.so.1"), built.libfoo)
    assert loader.resolve(consumer, str(built.root / "nowhere/libfoo.so.1")) is None


def test_origin_is_the_directory_of_the_found_path_not_realpath(
    built: Built, tmp_path: Path
) -> None:
    # Matches glibc: l_origin of a shared object is dirname of the path it was found at.
    (tmp_path / "consumer").mkdir()
    link = tmp_path / "consumer/libconsumer.so"
    link.symlink_to(built.consumer)
    other = tmp_path / "foo/lib/libfoo.so.1"
    other.parent.mkdir(parents=True)
    shutil.copy(built.drift_foo, other)
    consumer = read_elf(link)
    assert consumer is not None
    assert same_file(isolated_loader().resolve(consumer, "libfoo.so.1"), other)


def test_unsupported_dst_entries_are_skipped(built: Built) -> None:
    obj = ElfInfo(
        path=str(built.consumer),
        elf_class=64,
        machine=EM_X86_64,
        soname=None,
        needed=("libfoo.so.1",),
        rpath=(),
        runpath=("$LIB/foo", "${PLATFORM}", "$ORIGIN/../foo/lib"),
    )
    assert same_file(isolated_loader().resolve(obj, "libfoo.so.1"), built.libfoo)


def test_reader_is_used_for_candidates(built: Built) -> None:
    consumer = read_elf(built.consumer)
    assert consumer is not None
    seen: list[str] = []

    def reader(path: str) -> ElfInfo | None:
        seen.append(path)
        return read_elf(path)

    cache = ElfCache(reader)
    loader = isolated_loader(reader=cache.get)
    first = loader.resolve(consumer, "libfoo.so.1")
    assert loader.resolve(consumer, "libfoo.so.1") == first
    assert seen == [first]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("$ORIGIN/../lib", "/o/../lib"),
        ("${ORIGIN}/lib", "/o/lib"),
        ("$ORIGIN", "/o"),
        ("/abs/$ORIGINAL", "/abs/$ORIGINAL"),  # not a DST: identifier continues
        ("/plain", "/plain"),
        ("$LIB/x", None),
        ("${PLATFORM}/x", None),
        ("$ORIGIN/$LIB", None),
    ],
)
def test_expand_origin(entry: str, expected: str | None) -> None:
    assert expand_origin(entry, "/o") == expected


def test_split_ld_library_path() -> None:
    assert split_ld_library_path("/a::/b;/c:") == ("/a", "/b", "/c")
    assert split_ld_library_path(None) == ()
    assert split_ld_library_path("") == ()


def test_default_library_dirs() -> None:
    assert default_library_dirs(64, EM_X86_64, multiarch=True) == (
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib",
        "/usr/lib",
    )
    assert default_library_dirs(64, EM_X86_64, multiarch=False) == ("/lib64", "/usr/lib64")
    assert default_library_dirs(32, EM_386, multiarch=False) == ("/lib", "/usr/lib")


def parse_ldd(output: str) -> dict[str, str | None]:
    resolved: dict[str, str | None] = {}
    for match in re.finditer(
        r"^\s*(\S+) => (?:not found|(\S+) \(0x[0-9a-f]+\))$", output, re.MULTILINE
    ):
        resolved[match.group(1)] = match.group(2)
    return resolved


def ldd(path: Path | str, ld_library_path: str = "") -> dict[str, str | None]:
    assert LDD is not None
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "LD_LIBRARY_PATH": ld_library_path}
    proc = subprocess.run([LDD, str(path)], capture_output=True, text=True, env=env)
    return parse_ldd(proc.stdout)


def assert_matches_ldd(path: Path | str, ld_library_path: str = "") -> int:
    """Compare every DT_NEEDED resolution with ldd; return how many were compared."""
    info = read_elf(path)
    assert info is not None
    loader = LibraryIndex({"LD_LIBRARY_PATH": ld_library_path}).loader()
    expected = ldd(path, ld_library_path)
    compared = 0
    for soname in info.needed:
        if soname in expected:  # ld-linux*.so is matched to the running ld.so, not searched
            assert loader.resolve(info, soname) == expected[soname], (path, soname)
            compared += 1
    return compared


@needs_ldd
def test_resolution_matches_ldd_for_built_libraries(built: Built, tmp_path: Path) -> None:
    assert assert_matches_ldd(built.consumer) >= 2
    assert assert_matches_ldd(built.consumer_rpath) >= 2
    assert assert_matches_ldd(built.consumer, str(built.drift_foo.parent)) >= 2
    assert assert_matches_ldd(built.consumer_rpath, str(built.drift_foo.parent)) >= 2
    # Really remove the provider from a copy of the tree: ld.so drifts to the other copy.
    tree = tmp_path / "tree"
    shutil.copytree(built.root, tree, symlinks=True)
    (tree / "foo/lib/libfoo.so.1").unlink()
    consumer = tree / "consumer/libconsumer.so"
    assert ldd(consumer, str(tree / "drift"))["libfoo.so.1"] == str(tree / "drift/libfoo.so.1")
    assert ldd(consumer)["libfoo.so.1"] is None
    assert assert_matches_ldd(consumer, str(tree / "drift")) >= 2
    assert assert_matches_ldd(consumer) >= 2


@needs_ldd
def test_resolution_matches_ldd_for_system_libraries() -> None:
    libraries = system_libraries(25)
    if not libraries:
        pytest.skip("no system libraries to compare with")
    assert sum(assert_matches_ldd(path) for path in libraries) >= len(libraries)


# -- whole loads: the loading chain, names already loaded (glibc's rules, checked with ldd) --------

LEAF_C = "int leaf(void) { return 1; }\n"


def needs(*names: str, runpath: str = "", rpath: str = "") -> list[str]:
    """gcc arguments: link against ``names`` (paths to built libraries), with a search path
    (kept though no symbol of theirs is used: ``--no-as-needed``)."""
    args = ["-Wl,--no-as-needed"]
    for name in names:
        args += [f"-L{Path(name).parent}", f"-l:{Path(name).name}"]
    if runpath:
        args += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    if rpath:
        args += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
    return args


def library(path: Path, *args: str) -> Path:
    return gcc_shared(path, LEAF_C.replace("leaf", path.name.split(".")[0]), *args)


def model_load(path: Path) -> LoadMap:
    info = read_elf(path)
    assert info is not None
    return LibraryIndex({}).loader().load(info)


def resolved_for(load: LoadMap, consumer: Path, soname: str) -> Resolved:
    (entry,) = [
        e for e in load.needed if e.soname == soname and Path(e.consumer).name == consumer.name
    ]
    return entry


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """leaf/libleaf.so.1; mid/libmid.so needs it and has no search path of its own;
    rpath/libroot.so and runpath/libroot.so need libmid.so and name both folders, one in a
    DT_RPATH, the other in a DT_RUNPATH; through/libroot.so reaches libmid.so through
    runq/libq.so, which has a DT_RUNPATH."""
    if GCC is None:
        pytest.skip("gcc not available")
    root = tmp_path_factory.mktemp("chains")
    leaf = library(root / "leaf/libleaf.so.1", "-Wl,-soname,libleaf.so.1")
    mid = library(root / "mid/libmid.so", *needs(str(leaf)))
    both = "$ORIGIN/../mid:$ORIGIN/../leaf"
    library(root / "rpath/libroot.so", *needs(str(mid), rpath=both))
    library(root / "runpath/libroot.so", *needs(str(mid), runpath=both))
    q = library(root / "runq/libq.so", *needs(str(mid), runpath="$ORIGIN/../mid"))
    library(root / "through/libroot.so", *needs(str(q), rpath="$ORIGIN/../runq:$ORIGIN/../leaf"))
    return root


@needs_ldd
def test_rpath_of_the_loading_chain_is_searched(chains: Path) -> None:
    """libmid.so has no search path: libleaf.so.1 is found through the DT_RPATH of libroot.so,
    which loaded it. Alone, libmid.so finds nothing."""
    load = model_load(chains / "rpath/libroot.so")
    found = resolved_for(load, chains / "mid/libmid.so", "libleaf.so.1")
    assert found.path is not None and os.path.samefile(found.path, chains / "leaf/libleaf.so.1")
    assert disagreement(load, ldd_view(chains / "rpath/libroot.so")) == {}
    mid = read_elf(chains / "mid/libmid.so")
    assert mid is not None
    assert isolated_loader().resolve(mid, "libleaf.so.1") is None


@needs_ldd
def test_runpath_is_not_inherited(chains: Path) -> None:
    """The same chain with a DT_RUNPATH: it serves libroot.so's own needs only."""
    load = model_load(chains / "runpath/libroot.so")
    assert resolved_for(load, chains / "mid/libmid.so", "libleaf.so.1").path is None
    view = ldd_view(chains / "runpath/libroot.so")
    assert view.resolved["libleaf.so.1"] is None
    assert disagreement(load, view) == {}


@needs_ldd
def test_an_object_with_runpath_passes_the_rpath_of_its_loaders_on(chains: Path) -> None:
    """libroot.so (DT_RPATH) -> libq.so (DT_RUNPATH) -> libmid.so (nothing): libmid.so still
    searches libroot.so's DT_RPATH; libq.so's DT_RUNPATH adds nothing for it."""
    load = model_load(chains / "through/libroot.so")
    found = resolved_for(load, chains / "mid/libmid.so", "libleaf.so.1")
    assert found.path is not None and os.path.samefile(found.path, chains / "leaf/libleaf.so.1")
    assert disagreement(load, ldd_view(chains / "through/libroot.so")) == {}


@needs_ldd
def test_a_name_already_loaded_satisfies_a_later_need(tmp_path: Path) -> None:
    """libsecond.so needs libx.so.1 and can't find it; it gets it when libfirst.so (whose
    DT_RUNPATH finds it) was processed first, breadth first, and only then."""
    if GCC is None:
        pytest.skip("gcc not available")
    x = library(tmp_path / "x/libx.so.1", "-Wl,-soname,libx.so.1")
    first = library(tmp_path / "first/libfirst.so", *needs(str(x), runpath="$ORIGIN/../x"))
    second = library(tmp_path / "second/libsecond.so", *needs(str(x)))
    folders = "$ORIGIN/../first:$ORIGIN/../second"
    good = library(tmp_path / "good/libroot.so", *needs(str(first), str(second), runpath=folders))
    bad = library(tmp_path / "bad/libroot.so", *needs(str(second), str(first), runpath=folders))

    load = model_load(good)
    entry = resolved_for(load, second, "libx.so.1")
    assert entry.loaded and entry.path is not None and os.path.samefile(entry.path, x)
    assert disagreement(load, ldd_view(good)) == {}

    load = model_load(bad)
    assert resolved_for(load, second, "libx.so.1").path is None
    assert [e.soname for e in load.missing] == ["libx.so.1"]
    view = ldd_view(bad)
    assert view.resolved["libx.so.1"] is None, view.text
    assert disagreement(load, view) == {}


def test_names_loaded_before_are_not_searched(chains: Path) -> None:
    """``loaded``: what the process has already (the interpreter's libraries, an earlier
    import); ``chain``: the DT_RPATH of the objects that load the root (the interpreter)."""
    mid = read_elf(chains / "mid/libmid.so")
    assert mid is not None
    leaf = str(chains / "leaf/libleaf.so.1")
    loader = isolated_loader()
    load = loader.load(mid, loaded={"libleaf.so.1": leaf})
    assert resolved_for(load, chains / "mid/libmid.so", "libleaf.so.1") == Resolved(
        mid.path, "libleaf.so.1", leaf, loaded=True
    )
    program = ElfInfo("/p/bin/python", 64, EM_X86_64, None, (), (str(chains / "leaf"),), ())
    load = loader.load(mid, chain=[program])
    assert resolved_for(load, chains / "mid/libmid.so", "libleaf.so.1").path == leaf
    assert load.names["libleaf.so.1"] == leaf
    with_runpath = msgspec.structs.replace(program, runpath=("/nowhere",))
    assert isolated_loader().load(mid, chain=[with_runpath]).missing  # its DT_RPATH is dropped


# -- what an ELF file is: a program, a Python extension module ----------------------------------


def many_functions(count: int) -> str:
    return "".join(f"int function_{i}(void) {{ return {i}; }}\n" for i in range(count))


PYINIT = "void *PyInit_{name}(void) {{ return 0; }}\n"


@pytest.mark.parametrize("hash_style", ["gnu", "sysv"])
def test_an_extension_module_is_told_by_its_pyinit_symbol(tmp_path: Path, hash_style: str) -> None:
    """Python imports ``x.so`` by calling ``PyInit_x``: a file that defines it is a module,
    whatever its name (triton's ``libtriton.so``), and a file that doesn't is not (a plugin
    named ``libMLIRDialectPlugin.so``, or one that only calls it)."""
    if GCC is None:
        pytest.skip("gcc not available")
    style = f"-Wl,--hash-style={hash_style}"
    body = many_functions(300)  # long hash chains
    tagged = "_mod.cpython-311-x86_64-linux-gnu.so"
    cases = {
        tagged: (body + PYINIT.format(name="_mod"), True),
        "libtriton.so": (body + PYINIT.format(name="libtriton"), True),
        "libplugin.so": (body + PYINIT.format(name="other"), False),
        "_nomod.cpython-311-x86_64-linux-gnu.so": (body, False),
        "caller.so": (
            "void *PyInit_caller(void); void *f(void) { return PyInit_caller(); }\n",
            False,
        ),
        "libfoo.so.1": (body + PYINIT.format(name="libfoo"), False),  # not importable: *.so.1
    }
    for name, (source, expected) in cases.items():
        info = read_elf(gcc_shared(tmp_path / name, source, style))
        assert info is not None, name
        assert (info.python_extension, info.program) == (expected, False), name


def test_a_program_has_an_interpreter(tmp_path: Path) -> None:
    if GCC is None:
        pytest.skip("gcc not available")
    program = gcc(tmp_path / "bin/tool", "int main(void) { return 0; }\n")
    assert program is not None
    info = read_elf(program)
    assert info is not None and info.program and not info.python_extension
    index = LibraryIndex({})
    library_file = gcc_shared(tmp_path / "lib/libx.so", LEAF_C)
    text = tmp_path / "README"
    text.write_text("not ELF\n")
    record = tmp_path / "pkg-1.0.dist-info/RECORD"
    record.parent.mkdir()
    record.write_text("pkg/__init__.py,,\n")
    paths = [str(program), str(library_file), str(text), str(record)]
    libraries, programs = index.scan(paths)
    assert [i.path for i in libraries] == [str(library_file)]
    assert [i.path for i in programs] == [str(program)]
    assert len(index.cache) == 3  # README opened (no dot), the RECORD not (metadata)
    assert index.objects(paths) == libraries


def test_read_elf_never_raises_on_a_corrupt_symbol_table(tmp_path: Path) -> None:
    if GCC is None:
        pytest.skip("gcc not available")
    module = gcc_shared(tmp_path / "m.so", many_functions(200) + PYINIT.format(name="m"))
    data = module.read_bytes()
    rng = random.Random(99)
    path = tmp_path / "corrupt.so"
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 16)):
            where = rng.randrange(0, min(len(data), 16384))  # headers, hash tables, symbols
            mutated[where] = rng.randrange(256)
        path.write_bytes(bytes(mutated))
        result = read_elf(path)
        assert result is None or isinstance(result, ElfInfo)


# -- ld.so.cache ----------------------------------------------------------------------------------

FLAG_NAMES = {"libc6,x86-64": 0x0303, "libc6,x32": 0x0803, "libc6": 0x0003, "ELF": 0x0001}


def ldconfig_print(*args: str) -> list[tuple[str, str, str]]:
    """(soname, flags description, path) in the order ``ldconfig -p`` prints them."""
    assert LDCONFIG is not None
    proc = subprocess.run([LDCONFIG, *args, "-p"], capture_output=True, text=True, check=True)
    return re.findall(r"^\t(\S+) \((.*)\) => (.*)$", proc.stdout, re.MULTILINE)


@needs_ldconfig
def test_read_ld_cache_matches_ldconfig_p() -> None:
    if not os.path.isfile("/etc/ld.so.cache"):
        pytest.skip("no /etc/ld.so.cache")
    printed = ldconfig_print()
    entries = read_ld_cache_entries()
    assert [(e.soname, e.path) for e in entries] == [(s, p) for s, _, p in printed]
    for entry, (_, description, _) in zip(entries, printed, strict=True):
        if description in FLAG_NAMES:
            assert entry.flags == FLAG_NAMES[description], entry
    x86_64 = read_ld_cache(flags=ld_cache_flags(64, EM_X86_64))
    for soname, description, path in printed:
        if description.startswith("libc6,x86-64"):
            assert path in x86_64[soname]
    assert read_ld_cache() == read_ld_cache("/etc/ld.so.cache")


@pytest.fixture(scope="module")
def ldconfig_root(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root with our libraries and caches in the new, old and compat formats built by ldconfig.

    ``-r`` keeps ldconfig inside the root (also its aux cache), so nothing on the system changes.
    """
    if LDCONFIG is None:
        pytest.skip("ldconfig not available")
    root = tmp_path_factory.mktemp("ldroot")
    libs = root / "libs"
    libs.mkdir()
    shutil.copy(built.libfoo, libs / "libfoo.so.1")
    shutil.copy(built.libbar, libs / "libbar.so.2")
    # Same soname, other architectures: ldconfig keeps one per directory, so separate ones.
    conf = ["/libs"]
    for name, other in (("libs32", built.foo_i386), ("libx32", built.foo_x32)):
        if other is not None:
            (root / name).mkdir()
            shutil.copy(other, root / name / "libfoo.so.1")
            conf.append("/" + name)
    (root / "etc").mkdir()
    (root / "etc/ld.so.conf").write_text("\n".join(conf) + "\n")
    for fmt in ("new", "old", "compat"):
        subprocess.run(
            [
                LDCONFIG,
                "-r",
                str(root),
                "-X",
                "-c",
                fmt,
                "-C",
                f"/etc/{fmt}.cache",
                "-f",
                "/etc/ld.so.conf",
            ],
            capture_output=True,
            check=True,
        )
    return root


@needs_ldconfig
@pytest.mark.parametrize("fmt", ["new", "old", "compat"])
def test_read_ld_cache_formats_written_by_ldconfig(ldconfig_root: Path, fmt: str) -> None:
    cache = ldconfig_root / f"etc/{fmt}.cache"
    magic = cache.read_bytes()[:17]
    assert magic.startswith(b"glibc-ld.so.cache" if fmt == "new" else b"ld.so-1.7.0")
    printed = ldconfig_print("-r", str(ldconfig_root), "-C", f"/etc/{fmt}.cache")
    entries = read_ld_cache_entries(cache)
    assert [(e.soname, e.path, e.flags) for e in entries] == [
        (s, p, FLAG_NAMES[d]) for s, d, p in printed
    ]
    assert "/libs/libfoo.so.1" in read_ld_cache(cache)["libfoo.so.1"]
    x86_64 = read_ld_cache(cache, flags=ld_cache_flags(64, EM_X86_64))
    assert x86_64 == {"libfoo.so.1": ["/libs/libfoo.so.1"], "libbar.so.2": ["/libs/libbar.so.2"]}
    if (ldconfig_root / "libs32").is_dir():
        i386 = read_ld_cache(cache, flags=ld_cache_flags(32, EM_386))
        assert i386 == {"libfoo.so.1": ["/libs32/libfoo.so.1"]}
    if (ldconfig_root / "libx32").is_dir():
        x32 = read_ld_cache(cache, flags=ld_cache_flags(32, EM_X86_64))
        assert x32 == {"libfoo.so.1": ["/libx32/libfoo.so.1"]}


def synth_new_cache(entries: Sequence[LdCacheEntry], *, big_endian: bool) -> bytes:
    order = ">" if big_endian else "<"
    strings = bytearray()
    header_size, record_size = 48, 24
    base = header_size + record_size * len(entries)
    records = bytearray()
    for entry in entries:
        key = base + len(strings)
        strings += entry.soname.encode() + b"\0"
        value = base + len(strings)
        strings += entry.path.encode() + b"\0"
        records += struct.pack(order + "iIIIQ", entry.flags, key, value, 0, entry.hwcap)
    header = b"glibc-ld.so.cache1.1" + struct.pack(
        order + "IIB3xI12x", len(entries), len(strings), 3 if big_endian else 2, 0
    )
    return header + bytes(records) + bytes(strings)


@pytest.mark.parametrize("big_endian", [False, True])
def test_read_ld_cache_byte_order(tmp_path: Path, big_endian: bool) -> None:
    entries = [
        LdCacheEntry("libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", 0x0303, 0),
        LdCacheEntry("libz.so.1", "/usr/lib/i386-linux-gnu/libz.so.1", 0x0003, 0),
        LdCacheEntry("liba.so", "/lib/liba.so", 0x0303, 1 << 62),
    ]
    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(synth_new_cache(entries, big_endian=big_endian))
    assert read_ld_cache_entries(cache) == entries
    assert read_ld_cache(cache) == {
        "libz.so.1": ["/usr/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/i386-linux-gnu/libz.so.1"],
        "liba.so": ["/lib/liba.so"],
    }
    assert read_ld_cache(cache, flags=ld_cache_flags(32, EM_386))["libz.so.1"] == [
        "/usr/lib/i386-linux-gnu/libz.so.1"
    ]


def test_read_ld_cache_missing_or_corrupt(tmp_path: Path) -> None:
    good = synth_new_cache(
        [LdCacheEntry("liba.so.1", "/lib/liba.so.1", 0x0303, 0)], big_endian=False
    )
    assert read_ld_cache(tmp_path / "missing") == {}
    candidates = {
        "garbage": b"definitely not a cache" * 10,
        "empty": b"",
        "header_only": good[:48],
        "cut_in_strings": good[: len(good) - 4],
        "bad_version": good[:17] + b"9.9" + good[20:],
        "bad_endian_flag": good[:28] + b"\x01" + good[29:],
        "old_magic_only": b"ld.so-1.7.0\0" + struct.pack("=I", 1000),
    }
    for name, data in candidates.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert read_ld_cache(path) == {}, name
        assert read_ld_cache_entries(path) == [], name


def test_loader_of_an_environment_uses_its_variables_then_the_host_cache(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LibraryIndex.loader, the loader of every impact report: LD_LIBRARY_PATH from the
    environment it is given, in order, then ld.so.cache entries of the host's architecture."""
    folders = [tmp_path / name for name in ("llp1", "llp2", "cached", "other-arch")]
    for folder in folders:
        folder.mkdir()
        shutil.copy(built.libfoo, folder / "libq.so.1")
    llp1, llp2, cached, other_arch = (str(folder / "libq.so.1") for folder in folders)
    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(
        synth_new_cache(
            [
                LdCacheEntry("libq.so.1", other_arch, 0x0003, 0),  # i386 flags: not this host's
                LdCacheEntry("libq.so.1", cached, X86_64_LIBC6, 0),
            ],
            big_endian=False,
        )
    )
    monkeypatch.setattr(libraries, "read_ld_cache", functools.partial(read_ld_cache, cache))
    obj = ElfInfo(str(tmp_path / "libobj.so"), 64, EM_X86_64, None, ("libq.so.1",), (), ())
    index = LibraryIndex({"LD_LIBRARY_PATH": f"{folders[0]}:{folders[1]}"})
    gone: set[str] = set()
    for expected in (llp1, llp2, cached, None):  # None: no default directory has it
        assert index.loader(gone).resolve(obj, "libq.so.1") == expected
        gone.add(normalise(str(expected)))


# -- ElfCache -------------------------------------------------------------------------------------


class CountingReader:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, path: str) -> ElfInfo | None:
        self.calls.append(path)
        return read_elf(path)


def test_elf_cache_reads_each_file_once_a_command(built: Built, tmp_path: Path) -> None:
    lib = tmp_path / "libfoo.so.1"
    shutil.copy(built.consumer, lib)
    script = tmp_path / "libc.so"
    script.write_text("GROUP ( libc.so.6 )\n")
    reader = CountingReader()
    cache = ElfCache(reader)
    info = cache.get(str(lib))
    assert info == read_elf(lib)
    assert cache.get(str(script)) is None
    assert (cache.get(str(lib)), cache.get(str(script))) == (info, None)
    assert reader.calls == [str(lib), str(script)]


def test_elf_cache_invalidates_on_mtime_and_size(built: Built, tmp_path: Path) -> None:
    lib = tmp_path / "libfoo.so.1"
    shutil.copy(built.libfoo, lib)
    reader = CountingReader()
    cache = ElfCache(reader)
    cache.get(str(lib))
    cache.get(str(lib))
    assert len(reader.calls) == 1
    stat = lib.stat()
    os.utime(lib, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    cache.get(str(lib))
    assert len(reader.calls) == 2
    shutil.copy(built.consumer, lib)  # new content and size
    os.utime(lib, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    info = cache.get(str(lib))
    assert len(reader.calls) == 3
    assert info is not None and info.runpath == ("$ORIGIN/../foo/lib", "$ORIGIN/../bar")


def test_elf_cache_reads_again_a_file_written_in_place_with_its_mtime_set_back(
    built: Built, tmp_path: Path
) -> None:
    lib = tmp_path / "libfoo.so.1"
    shutil.copy(built.libfoo, lib)
    reader = CountingReader()
    cache = ElfCache(reader)
    cache.get(str(lib))
    before = lib.stat()
    with open(lib, "r+b") as stream:  # the same inode and size, another byte
        stream.seek(before.st_size - 1)
        stream.write(b"\x01")
    os.utime(lib, ns=(before.st_atime_ns, before.st_mtime_ns))
    cache.get(str(lib))
    assert len(reader.calls) == 2


def test_elf_cache_accepts_a_stat_result(built: Built) -> None:
    reader = CountingReader()
    cache = ElfCache(reader)
    stat = built.libfoo.stat()
    assert cache.get(str(built.libfoo), stat) == read_elf(built.libfoo)
    assert cache.get(str(built.libfoo), stat) == read_elf(built.libfoo)
    assert len(reader.calls) == 1


def test_elf_cache_missing_file(tmp_path: Path) -> None:
    cache = ElfCache()
    assert cache.get(str(tmp_path / "gone.so")) is None
    assert len(cache) == 0
