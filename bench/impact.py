"""The impact report on an environment the size of a real GPU venv, and how it is built.

Builds (offline) a site-packages with N distributions and about M ELF shared objects
(gcc-built, each with DT_NEEDED entries and a RUNPATH, spread over the distributions like torch
and the nvidia wheels spread theirs), then times ``safeuninstall.impact.impact_report`` removing
the four "provider" distributions, median of several runs. Target: under 0.3 s at 200
distributions and ~850 ELF files.

``python bench/run.py`` measures this at several sizes with everything else (the "impact report"
section); this entry point is the same measurement alone, at one size:

    python bench/impact.py [--dists 200] [--elf 850] [--runs 7]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from safeuninstall.environment.installed import installed_distributions
from safeuninstall.environment.interpreter import Interpreter
from safeuninstall.libraries.index import LibraryIndex, ownership
from safeuninstall.reports.impact import impact_report

# The distributions the measured removal takes away: they provide the libraries one in ten of
# the other objects needs, as the nvidia wheels do for torch's.
PROVIDER_LIBS = ("cudnn", "nccl", "cusparselt", "nvshmem")
PROVIDERS = tuple(f"nvidia-{name}-cu13" for name in PROVIDER_LIBS)
TARGET_SECONDS = 0.3


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _gcc(out: Path, source: str, *args: str) -> bytes:
    c_file = out.with_suffix(".c")
    c_file.write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(c_file), *args], check=True)
    return out.read_bytes()


def populate_site(site: Path, work: Path, dists: int, elf_files: int) -> None:
    """Write ``dists`` installed distributions holding about ``elf_files`` ELF objects into
    ``site``; ``work`` is an empty scratch folder for gcc."""
    work.mkdir(parents=True)
    providers = {}
    for index, name in enumerate(PROVIDER_LIBS):
        soname = f"lib{name}.so.{index + 1}"
        providers[name] = (
            soname,
            _gcc(work / soname, f"int f{index}(void){{return 1;}}", f"-Wl,-soname,{soname}"),
        )
    runpath = ":".join(f"$ORIGIN/../../nvidia/{n}/lib" for n in providers)
    needing = [work / soname for soname, _ in providers.values()]
    consumer = _gcc(
        work / "libconsumer.so",
        "int g(void){return 0;}",
        "-Wl,--no-as-needed",
        *map(str, needing),
        f"-Wl,-rpath,{runpath}",
    )
    plain = _gcc(work / "libplain.so", "int h(void){return 0;}", "-lm")
    per_dist = -(-elf_files // (dists - len(providers)))  # ceiling
    made = 0
    for d in range(dists):
        files: dict[str, bytes] = {}
        if d < len(providers):
            name = PROVIDER_LIBS[d]
            soname, data = providers[name]
            dist = f"nvidia-{name}-cu13"
            files[f"nvidia/{name}/lib/{soname}"] = data
        else:
            dist = f"pkg{d:04d}"
            files[f"{dist}/__init__.py"] = b""
            for k in range(per_dist if made < elf_files else 0):
                # one in ten objects needs the providers, like torch's libraries do
                blob = consumer if (made % 10 == 0) else plain
                files[f"{dist}/lib/lib{dist}_{k}.so"] = blob
                made += 1
        info = f"{dist.replace('-', '_')}-1.0.dist-info"
        files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode()
        files[f"{info}/INSTALLER"] = b"uv\n"
        record = [f"{p},{_record_hash(b)},{len(b)}" for p, b in files.items()]
        record.append(f"{info}/RECORD,,")
        for path, data in files.items():
            target = site / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (site / info / "RECORD").write_text("\n".join(record) + "\n")
    # torch-like: consumers live at <site>/pkgNNNN/lib, RUNPATH $ORIGIN/../../nvidia/<n>/lib


def build_site(root: Path, dists: int, elf_files: int) -> Path:
    """A venv-shaped folder ``root`` (no interpreter in it) with a populated site-packages."""
    site = root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    (root / "bin").mkdir()
    populate_site(site, root.parent / "build", dists, elf_files)
    return site


def interpreter_for(root: Path, site: Path) -> Interpreter:
    """What the tool would learn by asking an interpreter of ``root`` (this one's markers)."""
    return Interpreter(
        executable=sys.executable,
        prefix=str(root),
        base_prefix="/usr",
        version=".".join(map(str, sys.version_info[:3])),
        purelib=str(site),
        platlib=str(site),
        scripts=str(root / "bin"),
        markers={
            "python_version": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "sys_platform": sys.platform,
            "platform_system": "Linux",
            "platform_machine": os.uname().machine,
            "implementation_name": "cpython",
            "os_name": "posix",
            "python_full_version": sys.version.split()[0],
            "platform_python_implementation": "CPython",
            "implementation_version": "",
            "platform_release": "",
            "platform_version": "",
        },
    )


@dataclass(frozen=True)
class ImpactRun:
    seconds: float
    distributions: int
    elf_objects: int  # ELF objects the index read
    breaks: int  # library consumers the report finds broken


def report_once(interpreter: Interpreter, environ: Mapping[str, str]) -> ImpactRun:
    """One impact report of removing PROVIDERS, timed as the tool pays for it: read the
    installed set, read the ELF files, build the report."""
    started = time.perf_counter()
    installed = installed_distributions(interpreter)
    index = LibraryIndex(environ)
    owned = ownership(installed)
    report = impact_report(installed, interpreter.markers, list(PROVIDERS), index, owned)
    seconds = time.perf_counter() - started
    objects = len(index.objects(path for files in owned.files.values() for path in files))
    return ImpactRun(seconds, len(installed), objects, len(report.breaks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dists", type=int, default=200)
    parser.add_argument("--elf", type=int, default=850)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="su-bench-impact-") as tmp:
        root = Path(tmp) / "venv"
        site = build_site(root, args.dists, args.elf)
        interpreter = interpreter_for(root, site)
        report_once(interpreter, os.environ)  # the page cache
        runs = [report_once(interpreter, os.environ) for _ in range(args.runs)]
        seconds = statistics.median(r.seconds for r in runs)
        print(f"| environment | {runs[0].distributions} dists, {runs[0].elf_objects} ELF files |")
        print("| --- | --- |")
        print(f"| impact report (median of {args.runs}) | {seconds * 1000:.0f} ms |")
        print(f"| (object, library) links the report finds broken | {runs[0].breaks} |")
        verdict = "PASS" if seconds < TARGET_SECONDS else "FAIL"
        print(f"| target < {TARGET_SECONDS * 1000:.0f} ms | {verdict} |")


if __name__ == "__main__":
    main()
