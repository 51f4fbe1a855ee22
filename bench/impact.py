"""Benchmark: the impact report on an environment the size of a real GPU venv.

Builds (offline, in a temp folder) a venv-shaped site-packages with N distributions and about
M ELF shared objects (gcc-built, each with DT_NEEDED entries and a RUNPATH, spread over the
distributions like torch + nvidia wheels spread theirs), then times
``safeuninstall.impact.impact_report`` removing four "provider" distributions, cold (no ELF cache)
and warm (cache file present), median of several runs. Target (issue 3): under 0.3 s.

    python bench/impact.py [--dists 200] [--elf 850] [--runs 7]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from safeuninstall.environment import Interpreter, installed_distributions
from safeuninstall.impact import impact_report
from safeuninstall.libraries import ELF_CACHE_FILE, LibraryIndex, ownership


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _gcc(out: Path, source: str, *args: str) -> bytes:
    c_file = out.with_suffix(".c")
    c_file.write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(c_file), *args], check=True)
    return out.read_bytes()


def build_site(root: Path, dists: int, elf_files: int) -> Path:
    site = root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    (root / "bin").mkdir()
    work = root.parent / "build"
    work.mkdir()
    providers = {}
    for index, name in enumerate(("cudnn", "nccl", "cusparselt", "nvshmem")):
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
            name = list(providers)[d]
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
    return site


def interpreter_for(root: Path, site: Path) -> Interpreter:
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
        removed = [
            "nvidia-cudnn-cu13",
            "nvidia-nccl-cu13",
            "nvidia-cusparselt-cu13",
            "nvidia-nvshmem-cu13",
        ]
        cache = Path(tmp) / ELF_CACHE_FILE

        def once(cold: bool) -> tuple[float, int, int]:
            if cold and cache.exists():
                cache.unlink()
            started = time.perf_counter()
            installed = installed_distributions(interpreter)
            index = LibraryIndex(os.environ, cache_file=cache)
            report = impact_report(
                installed, interpreter.markers, removed, index, ownership(installed)
            )
            index.save()
            return time.perf_counter() - started, len(installed), len(report.breaks)

        once(cold=True)  # warm the page cache, not ours
        cold = [once(cold=True) for _ in range(args.runs)]
        warm = [once(cold=False) for _ in range(args.runs)]
        elf_count = sum(1 for p in site.rglob("*.so*"))
        n_dists, breaks = cold[0][1], cold[0][2]
        cold_s = statistics.median(t for t, _, _ in cold)
        warm_s = statistics.median(t for t, _, _ in warm)
        print(f"| environment | {n_dists} distributions, {elf_count} ELF files |")
        print("| --- | --- |")
        print(f"| impact report, no ELF cache (median of {args.runs}) | {cold_s * 1000:.0f} ms |")
        print(f"| impact report, ELF cache warm (median of {args.runs}) | {warm_s * 1000:.0f} ms |")
        print(f"| library consumers found broken | {breaks} |")
        verdict = "PASS" if max(cold_s, warm_s) < 0.3 else "FAIL"
        print(f"| target < 300 ms | {verdict} |")
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
