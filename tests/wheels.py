"""Build real wheel files for the tests: the zip, METADATA, WHEEL and RECORD written directly
(as pypa/installer's test helper does), so no build backend and no index is involved."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def build_wheel(
    dest: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes | str],
    *,
    requires: Sequence[str] = (),
    top_level: Sequence[str] | None = None,
    entry_points: str | None = None,
    tag: str = "py3-none-any",
) -> Path:
    """Write ``{name}-{version}-{tag}.whl`` into ``dest`` and return its path."""
    dest.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    dist_info = f"{dist}-{version}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    contents: dict[str, bytes] = {
        path: data.encode() if isinstance(data, str) else data for path, data in files.items()
    }
    contents[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    contents[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: safe-uninstall-tests\nRoot-Is-Purelib: "
        f"{'true' if tag.endswith('any') else 'false'}\nTag: {tag}\n"
    ).encode()
    if top_level is not None:
        contents[f"{dist_info}/top_level.txt"] = ("\n".join(top_level) + "\n").encode()
    if entry_points:
        contents[f"{dist_info}/entry_points.txt"] = entry_points.encode()
    record_lines = [f"{path},{_record_hash(data)},{len(data)}" for path, data in contents.items()]
    record_lines.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    wheel = dest / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if path.endswith(".so") or ".so." in path else 0o644) << 16
            archive.writestr(info, data)
    return wheel


def compile_shared_library(
    out: Path,
    source: str,
    *,
    soname: str | None = None,
    link: Sequence[Path] = (),
    rpath: str | None = None,
    old_dtags: bool = False,
) -> Path:
    """gcc -shared -fPIC; ``link`` are libraries to put in DT_NEEDED (by their soname).

    ``rpath`` becomes DT_RUNPATH (Debian's default), or DT_RPATH with ``old_dtags``: RPATH is
    searched before LD_LIBRARY_PATH, RUNPATH after it.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    c_file = out.with_suffix(".c")
    c_file.write_text(source)
    argv = ["gcc", "-shared", "-fPIC", "-o", str(out), str(c_file)]
    if soname:
        argv.append(f"-Wl,-soname,{soname}")
    for library in link:
        argv.append(str(library))  # linked by path: DT_NEEDED gets the library's soname
    if rpath is not None:
        argv.append(f"-Wl,-rpath,{rpath}")
        if old_dtags:
            argv.append("-Wl,--disable-new-dtags")
    subprocess.run(argv, check=True, capture_output=True)
    c_file.unlink()
    return out
