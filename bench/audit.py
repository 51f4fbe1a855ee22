"""How long ``safe-uninstall audit`` takes on the real stacks (the target: under 1 s on torch).

    python bench/audit.py                       # torch and jupyterlab, 7 runs each
    python bench/audit.py --stack torchdup --runs 3

Each stack is installed from the real-stack cache of the test suite (tests/realstack.py: the
wheels are downloaded once per machine, then a venv is about a second, offline). Two figures per
stack, the median of the runs, wall and CPU (user + system) of the whole command:

- first: the venv as installed, no state folder (no cache of ELF readings or RECORDs: audit
  writes none, it reads only);
- warm: after ``safe-uninstall doctor`` wrote the state folder's caches, as any other command
  of the tool does.

On a machine shared with other work the wall figure is the noisy one; the CPU one is not.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from bench.envs import tool_argv  # noqa: E402 - needs the path set above
from tests.realstack import Stacks, cache_root  # noqa: E402

STATE_DIR_NAME = ".safe-uninstall"
# What would make the command differ from a user's: another target, another state folder, and
# PYTHONDONTWRITEBYTECODE, with which an editable install compiles the tool on every run.
_ENV = {
    key: value
    for key, value in os.environ.items()
    if not key.startswith(("UV_", "SAFE_UNINSTALL_"))
    and key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")
}


def _timed(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=_ENV)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _median(runs: list[tuple[float, float, str]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def bench(stack: str, runs: int, workdir: Path) -> str:
    venv = Stacks(cache_root()).venv(stack, workdir / stack).root
    tool = [*tool_argv(), "--python", str(venv)]
    shutil.rmtree(venv / STATE_DIR_NAME, ignore_errors=True)
    _timed([*tool_argv(), "--version"])  # its bytecode written once, as after an install
    first = [_timed([*tool, "audit", "--json"]) for _ in range(runs)]
    assert not (venv / STATE_DIR_NAME).exists(), "audit wrote a state folder"
    _timed([*tool, "doctor", "--json"])
    warm = [_timed([*tool, "audit", "--json"]) for _ in range(runs)]
    data = json.loads(first[0][2])
    files = sum(d["files"] for d in data["distributions"])
    (first_wall, first_cpu), (warm_wall, warm_cpu) = _median(first), _median(warm)
    return (
        f"| {stack} | {len(data['distributions'])} | {files} | "
        f"{data['total_bytes'] / 2**30:.2f} GiB | {first_wall:.2f} / {first_cpu:.2f} | "
        f"{warm_wall:.2f} / {warm_cpu:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stack", action="append", help="a stack of tests/stacks/ (repeatable)")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    stacks = args.stack or ["torch", "jupyterlab"]
    print(f"`safe-uninstall audit --json`, median of {args.runs} runs, seconds (wall / CPU)\n")
    print("| stack | distributions | files | size | first | warm |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as folder:
        for stack in stacks:
            print(bench(stack, args.runs, Path(folder)), flush=True)
    load = os.getloadavg()[0]
    print(f"\n(load average at the end: {load:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
