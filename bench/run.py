"""Run every benchmark scenario offline and print one Markdown report.

    python bench/run.py            # full: 7 runs per figure, a 1 GB distribution, 1 s probe
    python bench/run.py --quick    # 3 runs per figure, 200 MB, 0.5 s probe: a rough look

Needs the tool installed in this interpreter's environment (``pip install -e ".[test]"``) and
nothing else: every wheel and environment is built in a temporary folder, no index is used.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Run as a script (python bench/run.py): make the repository importable (bench, tests.wheels).
_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from bench import report, scenarios  # noqa: E402 - needs the path set above
from bench.envs import Workspace, tool_argv  # noqa: E402


def _uv_version(uv: str) -> str:
    done = subprocess.run([uv, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def _commit() -> str:
    """The repository's commit, and whether the tool's sources differ from it."""
    git = ["git", "-C", str(_REPO)]
    head = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    if head.returncode != 0:
        return "unknown (not a git checkout)"
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "safeuninstall"],
        capture_output=True,
        text=True,
        check=False,
    )
    changed = " + uncommitted changes in safeuninstall/" if dirty.stdout else ""
    return head.stdout.strip() + changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, smaller sizes")
    parser.add_argument("--runs", type=int, help="timed runs per figure (default 7, quick 3)")
    parser.add_argument("--workdir", type=Path, help="where to build (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder afterwards")
    parser.add_argument("-o", "--output", type=Path, help="also write the report to this file")
    parser.add_argument(
        "--probe-seconds",
        type=float,
        help="how long the probe sleeps (default 1, quick 0.5); the CUDA torch probe of FACTS.md "
        "took 3.3-4.8 s",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="SCENARIO",
        help="run only this scenario (repeatable): "
        + ", ".join(scenario.__name__ for scenario in scenarios.SCENARIOS),
    )
    parser.add_argument(
        "--stack",
        action="append",
        default=[],
        metavar="STACK",
        help="real_stacks: only this stack (repeatable): torch, ml",
    )
    parser.add_argument(
        "--against",
        metavar="SAFE_UNINSTALL",
        help="real_stacks: another build's safe-uninstall command (e.g. 0.1.0 installed in a venv "
        "of its own): `snapshots` and `doctor` of both timed in turn, the ratio pair by pair",
    )
    args = parser.parse_args(argv)

    cfg = scenarios.QUICK if args.quick else scenarios.FULL
    if args.runs:
        cfg = scenarios.Config(**{**vars(cfg), "runs": args.runs})
    if args.probe_seconds:
        cfg = scenarios.Config(**{**vars(cfg), "probe_sleep": args.probe_seconds})
    if args.stack:
        cfg = scenarios.Config(**{**vars(cfg), "stacks": tuple(args.stack)})
    if args.against:
        cfg = scenarios.Config(**{**vars(cfg), "against": args.against})
    root = Path(tempfile.mkdtemp(prefix="safe-uninstall-bench-", dir=args.workdir))
    try:
        ws = Workspace.create(root)
        header = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
            "python": f"{platform.python_version()} ({sys.executable})",
            "uv": _uv_version(ws.uv),
            "tool": " ".join(tool_argv()),
            "commit": _commit(),
        }
        load_before = os.getloadavg()
        results = scenarios.run_all(
            ws,
            cfg,
            progress=lambda name: print(f"[bench] {name} ...", file=sys.stderr),
            only=args.only,
        )
        load_after = os.getloadavg()
        header["commit at the end"] = _commit()
        # Other work on the machine skews absolute times more than side-by-side ratios.
        header["load average (1 min) before / after"] = (
            f"{load_before[0]:.2f} / {load_after[0]:.2f} on {os.cpu_count()} CPUs"
        )
        text = report.render(results, header)
    finally:
        if args.keep:
            print(f"[bench] kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(text, end="")
    if args.output:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
