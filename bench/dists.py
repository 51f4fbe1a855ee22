"""Synthetic distributions, written straight into site-packages or into a wheel.

An installed distribution is what safe-uninstall, uv and pip read: the files, and a
``*.dist-info`` folder with METADATA, INSTALLER, WHEEL and a RECORD whose sha256 entries are
right. Writing that directly is how a 3000-distribution environment is built in about a second,
and how a 1 GB distribution is installed in no time and no disk space: its files are sparse files
of zeros (made with truncate), and a RECORD hash of N zero bytes is computed once per size.

A real wheel cannot hold a sparse file, so ``write_wheel`` streams zeros through deflate (a 1 GB
wheel of zeros is about 1 MB). The small in-memory wheels of tests/wheels.py are reused where a
wheel is installed by uv (the probe scenario).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

_ZEROS = bytes(1024 * 1024)


@dataclass(frozen=True)
class DistSpec:
    """One distribution: ``files`` maps a path relative to site-packages to its bytes, or to a
    size for a file of that many zero bytes (sparse when installed directly)."""

    name: str
    version: str
    files: Mapping[str, bytes | int]
    requires: tuple[str, ...] = ()
    installer: str = "uv"
    summary: str = "A synthetic distribution for the safe-uninstall benchmarks."
    extra_metadata: str = field(default="", repr=False)

    @property
    def dist_info(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}.dist-info"

    @property
    def payload_bytes(self) -> int:
        return sum(v if isinstance(v, int) else len(v) for v in self.files.values())

    def metadata(self) -> bytes:
        lines = [
            "Metadata-Version: 2.1",
            f"Name: {self.name}",
            f"Version: {self.version}",
            f"Summary: {self.summary}",
            *(f"Requires-Dist: {r}" for r in self.requires),
        ]
        return ("\n".join(lines) + "\n\n" + self.extra_metadata).encode()

    def dist_info_files(self) -> dict[str, bytes]:
        """Every dist-info file except RECORD."""
        info = self.dist_info
        return {
            f"{info}/METADATA": self.metadata(),
            f"{info}/INSTALLER": f"{self.installer}\n".encode(),
            f"{info}/WHEEL": (
                b"Wheel-Version: 1.0\nGenerator: safe-uninstall-bench\n"
                b"Root-Is-Purelib: true\nTag: py3-none-any\n"
            ),
        }


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


@functools.cache
def zeros_record_hash(size: int) -> str:
    """The RECORD hash of ``size`` zero bytes, computed once per size."""
    digest = hashlib.sha256()
    left = size
    while left > 0:
        digest.update(_ZEROS[: min(left, len(_ZEROS))])
        left -= len(_ZEROS)
    encoded = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=")
    return f"sha256={encoded.decode()}"


def _record_line(path: str, content: bytes | int) -> str:
    if isinstance(content, int):
        return f"{path},{zeros_record_hash(content)},{content}"
    return f"{path},{record_hash(content)},{len(content)}"


def record_text(spec: DistSpec) -> bytes:
    entries: dict[str, bytes | int] = {**spec.files, **spec.dist_info_files()}
    lines = [_record_line(path, content) for path, content in entries.items()]
    lines.append(f"{spec.dist_info}/RECORD,,")
    return ("\n".join(lines) + "\n").encode()


def write_installed(site: Path, spec: DistSpec) -> list[str]:
    """Install ``spec`` into ``site`` by writing its files; returns every path written."""
    contents: dict[str, bytes | int] = {
        **spec.files,
        **spec.dist_info_files(),
        f"{spec.dist_info}/RECORD": record_text(spec),
    }
    made: set[Path] = set()
    for rel, content in contents.items():
        path = site / rel
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        if isinstance(content, int):
            with open(path, "wb") as handle:
                handle.truncate(content)  # sparse: no blocks on disk, reads as zeros
        else:
            path.write_bytes(content)
    return list(contents)


def write_wheel(dest: Path, spec: DistSpec) -> Path:
    """A deflate-compressed wheel of ``spec``, zeros streamed so no large buffer is held."""
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{spec.name.replace('-', '_')}-{spec.version}-py3-none-any.whl"
    contents: dict[str, bytes | int] = {
        **spec.files,
        **spec.dist_info_files(),
        f"{spec.dist_info}/RECORD": record_text(spec),
    }
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for rel, content in contents.items():
            info = zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with archive.open(info, "w", force_zip64=True) as out:
                for chunk in _chunks(content):
                    out.write(chunk)
    return wheel


def _chunks(content: bytes | int) -> Iterator[bytes]:
    if isinstance(content, bytes):
        yield content
        return
    left = content
    while left > 0:
        yield _ZEROS[: min(left, len(_ZEROS))]
        left -= len(_ZEROS)


@dataclass(frozen=True)
class Pristine:
    """A distribution written once outside any environment, put back by hard links.

    Reinstalling between runs is then one link per file, whatever the size, and every run starts
    from byte-identical files.
    """

    root: Path
    paths: tuple[str, ...]
    spec: DistSpec

    @classmethod
    def create(cls, root: Path, spec: DistSpec) -> Pristine:
        return cls(root=root, paths=tuple(write_installed(root, spec)), spec=spec)

    def install_into(self, site: Path) -> None:
        for rel in self.paths:
            dest = site / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(self.root / rel, dest)
            except FileExistsError:
                dest.unlink()
                os.link(self.root / rel, dest)

    def is_installed_in(self, site: Path) -> bool:
        return (site / self.spec.dist_info / "RECORD").is_file()


def small_dist(name: str, version: str = "1.0", *, files: int = 10) -> DistSpec:
    """A pure-Python distribution of ``files`` package files (plus its 4 dist-info files)."""
    package = name.replace("-", "_")
    contents: dict[str, bytes | int] = {
        f"{package}/__init__.py": f"NAME = {name!r}\n".encode(),
    }
    for index in range(1, files):
        contents[f"{package}/mod{index:02d}.py"] = (
            f"def f{index}(x):\n    return x + {index}\n" * 20
        ).encode()
    return DistSpec(name=name, version=version, files=contents)


def big_dist(
    name: str,
    total_bytes: int,
    *,
    files: int = 150,
    version: str = "1.0",
    binary_like: bool = False,
) -> DistSpec:
    """``files`` files adding up to ``total_bytes`` (a CUDA-wheel-sized payload): zeros, or
    with ``binary_like`` the same bytes as ``binary_like_bytes`` in every file."""
    package = name.replace("-", "_")
    size, extra = divmod(total_bytes, files)
    block = binary_like_bytes(size + 1) if binary_like else b""
    contents: dict[str, bytes | int] = {}
    for index in range(files):
        length = size + (1 if index < extra else 0)
        path = f"{package}/lib/libpart{index:03d}.so"
        contents[path] = block[:length] if binary_like else length
    return DistSpec(name=name, version=version, files=contents)


def binary_like_bytes(size: int, *, seed: int = 5) -> bytes:
    """Bytes that deflate about as well as shared libraries do (to ~50 %) and inflate about
    as fast: 1 KiB random, 1 KiB of a repeating pattern, in turn. Zeros inflate far faster than
    any real payload, which would flatter a cold install."""
    import random

    noise = random.Random(seed).randbytes(size // 2 + 1024)
    pattern = bytes(range(256)) * 4
    out = bytearray()
    offset = 0
    while len(out) < size:
        out += noise[offset : offset + 1024]
        out += pattern
        offset += 1024
    return bytes(out[:size])


_BODY = (
    "A synthetic distribution. The body of METADATA is the long description, which the tool "
    "never needs to read; real ones are often several kilobytes.\n"
) * 8


def synthetic_population(count: int) -> list[DistSpec]:
    """``count`` small distributions, each requiring up to two earlier ones (one behind a
    marker), like a real environment's dependency graph."""
    specs = []
    for index in range(count):
        name = f"synth-{index:04d}"
        package = f"synth_{index:04d}"
        requires: list[str] = []
        if index >= 1:
            requires.append(f"synth-{index - 1:04d}>=1.0")
        if index >= 7:
            requires.append(f'synth-{index - 7:04d}; python_version >= "3.8"')
        specs.append(
            DistSpec(
                name=name,
                version=f"1.{index % 50}.{index}",
                files={
                    f"{package}/__init__.py": f"from .core import VALUE  # {index}\n".encode(),
                    f"{package}/core.py": f"VALUE = {index}\n".encode(),
                },
                requires=tuple(requires),
                extra_metadata=_BODY,
            )
        )
    return specs
