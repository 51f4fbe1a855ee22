"""A metric bisect on a real, timed workload beside a busy loop: a check of the decision on a
loaded machine, not a test (its numbers depend on the machine).

    python -m bench.metric_bisect [--runs 10] [--budget 0.3] [--busy 1] [--clock wall|cpu]

A venv holds part0..part7 at 1.0; snapshot GOOD; all eight move to 2.0, where part4 makes
each step of the workload do 1.5x the work (the seven others change nothing it runs). The
workload counts steps of a pure-Python loop done in ``--budget`` seconds of wall time (or of
its own CPU time, ``--clock cpu``): real timing, so the machine's load is noise. ``--busy``
processes spin beside it the whole time. Then ``--runs``
times ``bisect GOOD --probe-metric WORKLOAD`` with the defaults, each timed whole.

Printed: per bisect its outcome, what it named, its rounds and its runs; then the false
culprits (a harmless part named), the inconclusive ones, and the wall time of a round beyond
its probe runs: the whole bisect less the time the workload's runs took (each run logs its own
start and end), per round; and that less each run's interpreter start-up and imports too
(measured beside), which leaves the switches between states, the snapshot, the return to the
start and the tool's own work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.wheels import build_wheel

from .envs import Workspace, tool_argv

NAMES = [f"part{i}" for i in range(8)]
CULPRIT = "part4"

WORKLOAD = """
import importlib, math, sys, time
clock = time.process_time if sys.argv[3] == "cpu" else time.monotonic
start, began = time.monotonic(), clock()
work = round(10 * math.prod(importlib.import_module(f"part{i}").WORK for i in range(8)))
steps, end = 0, began + float(sys.argv[2])
while clock() < end:
    for _ in range(work):
        sum(range(200))
    steps += 1
with open(sys.argv[1], "a") as log:
    log.write(f"{start} {time.monotonic()}\\n")
print(steps)
"""
BUSY = "while True: pass"


def _venv(ws: Workspace, house: Path) -> tuple[Path, str]:
    """The venv at GOOD (1.0), its snapshot id, then moved to 2.0."""
    for name in NAMES:
        build_wheel(house, name, "1.0", {f"{name}.py": "WORK = 1.0\n"})
        work = "1.5" if name == CULPRIT else "1.0"  # 1.5x the work per step
        build_wheel(house, name, "2.0", {f"{name}.py": f"WORK = {work}\n"})
    venv = ws.make_venv("venv")
    links = ("--no-index", "--find-links", str(house))
    ws.uv_pip(venv, "install", *links, *(f"{n}==1.0" for n in NAMES))
    snap = ws.run([*tool_argv(), "-p", str(venv.python), "snapshot", "-q"])
    ws.uv_pip(venv, "install", *links, *(f"{n}==2.0" for n in NAMES))
    return venv.python, snap.stdout.strip()


def _startup_seconds(python: Path) -> float:
    """What a run costs before the workload's own clock starts: the interpreter's start-up
    and the imports, measured beside (the median of five)."""
    imports = "import importlib, math, sys, time"
    took = []
    for _ in range(5):
        began = time.monotonic()
        subprocess.run([str(python), "-c", imports], check=True)
        took.append(time.monotonic() - began)
    return statistics.median(took)


def _probe_seconds(log: Path) -> float:
    if not log.exists():
        return 0.0
    spans = [line.split() for line in log.read_text().splitlines() if line.strip()]
    return sum(float(end) - float(start) for start, end in spans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--budget", type=float, default=0.3, help="seconds per workload run")
    parser.add_argument("--busy", type=int, default=1, help="busy loops beside it")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="the budget in wall time (as a timed benchmark), or in the process's CPU time",
    )
    parser.add_argument("--root", type=Path, default=None)
    args = parser.parse_args()
    root = args.root or Path(tempfile.mkdtemp(prefix="metric-bisect-"))
    ws = Workspace.create(root)
    python, good = _venv(ws, root / "house")
    script = root / "workload.py"
    script.write_text(WORKLOAD)
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.busy)]
    rows = []
    try:
        for run in range(args.runs):
            log = root / f"runs-{run}.log"
            # "python": the target's, first on PATH in a probe
            metric = f"python {script} {log} {args.budget} {args.clock}"
            argv = [*tool_argv(), "-p", str(python), "--json", "bisect", good]
            began = time.monotonic()
            done = ws.run([*argv, "--probe-metric", metric], check=False)
            wall = time.monotonic() - began
            data = json.loads(done.stdout)
            rows.append(_row(data, wall, _probe_seconds(log), _startup_seconds(python)))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    _summary(rows)


def _row(data: dict[str, object], wall: float, probing: float, startup: float) -> dict[str, object]:
    found = data.get("bisect") or {}
    assert isinstance(found, dict)
    rounds = found.get("rounds", [])
    named = [n for c in found.get("culprits", []) for n in c["names"]]
    runs = sum(
        len(r["metric"]["values"]) + len(r["metric"]["baseline_values"]) + 1
        for r in rounds
        if r.get("metric")
    )
    return {
        "outcome": data.get("outcome"),
        "named": named,
        "not_confirmed": [n for c in found.get("not_confirmed", []) for n in c["names"]],
        "rounds": len(rounds),
        "workload_runs": runs,
        "wall_s": round(wall, 2),
        "probe_s": round(probing, 2),
        "beyond_probe_per_round_s": round((wall - probing) / max(len(rounds), 1), 2),
        "startup_s": round(startup, 3),
        # less each run's start-up: the switches, the snapshot, the return, the tool itself
        "beyond_runs_per_round_s": round(
            (wall - probing - startup * runs) / max(len(rounds), 1), 2
        ),
    }


def _summary(rows: list[dict[str, object]]) -> None:
    def values(key: str) -> list[float]:
        return [float(r[key]) for r in rows]  # type: ignore[arg-type]

    false = sum(any(n != CULPRIT for n in r["named"]) for r in rows)  # type: ignore[attr-defined]
    right = sum(r["named"] == [CULPRIT] for r in rows)
    inconclusive = sum(r["outcome"] == "bisect-inconclusive" for r in rows)
    print(
        f"{len(rows)} bisects: {right} named exactly {CULPRIT}, {false} named a harmless "
        f"change, {inconclusive} inconclusive; rounds median {statistics.median(values('rounds'))}"
        f" ({min(values('rounds')):g}-{max(values('rounds')):g}); workload runs median "
        f"{statistics.median(values('workload_runs'))}; wall median "
        f"{statistics.median(values('wall_s')):.1f} s; a round beyond its probe runs median "
        f"{statistics.median(values('beyond_probe_per_round_s')):.2f} s (less the runs' "
        f"start-up: {statistics.median(values('beyond_runs_per_round_s')):.2f} s)"
    )


if __name__ == "__main__":
    main()
