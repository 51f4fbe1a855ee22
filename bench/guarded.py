"""What guarding a change costs: ``safe-uninstall run -- uv pip install X`` against the bare
``uv pip install X``.

X is a small distribution (10 files) installed offline from a local wheel into a venv of N small
distributions (default 50, each requiring up to two others, as bench/dists.py writes them).
Three commands run round-robin, one of each per round, each from the same state (X not
installed, no snapshot; the reset is not timed):

- ``uv``: the bare ``uv pip install --no-index --find-links DIR X``;
- ``run --no-probe``: the same under ``safe-uninstall run``: snapshot (a hard link per installed
  file), the command, the comparison, the unmet-requirement check;
- ``run``: with the derived probe: its baseline (every installed distribution's modules) is
  cached after the warm-up round, as on a user's next run; the probe after the change imports
  X and what the change affects.

    python bench/guarded.py [--runs 7] [--population 50]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: bench/ is a package of the repository
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dists import small_dist, synthetic_population, write_installed, write_wheel
from bench.envs import Venv, Workspace, tool_argv
from bench.measure import Series

COMMANDS = ("uv", "run --no-probe", "run")


@dataclass(frozen=True)
class Figures:
    population: int
    files: int  # files installed in the venv before the install (what the snapshot links)
    medians: dict[str, float]
    runs: int

    def overhead(self, command: str) -> float:
        return self.medians[command] - self.medians["uv"]

    def table(self) -> str:
        lines = [
            f"`run -- uv pip install` of a 10-file distribution, venv of {self.population} "
            f"distributions ({self.files} files), median of {self.runs} runs:",
            "",
            "| command | median | over bare uv |",
            "| --- | --- | --- |",
        ]
        for command in COMMANDS:
            over = "" if command == "uv" else f"+{self.overhead(command) * 1000:.0f} ms"
            lines.append(f"| {command} | {self.medians[command] * 1000:.0f} ms | {over} |")
        return "\n".join(lines)


def measure(root: Path, *, runs: int, population: int) -> Figures:
    ws = Workspace.create(root)
    venv = ws.make_venv("venv")
    for spec in synthetic_population(population):
        write_installed(venv.site, spec)
    house = root / "wheels"
    write_wheel(house, small_dist("guarded-pkg", files=10))
    install = [ws.uv, "pip", "install", "--no-index", "--find-links", str(house), "guarded-pkg"]
    argv = {
        "uv": [*install[:3], "--python", str(venv.python), *install[3:]],
        "run --no-probe": [*tool_argv(), "-p", str(venv.root), "run", "--no-probe", "--", *install],
        "run": [*tool_argv(), "-p", str(venv.root), "run", "--", *install],
    }
    env = {**ws.env, "VIRTUAL_ENV": str(venv.root)}
    files = sum(1 for path in venv.site.rglob("*") if path.is_file())
    series = {command: Series() for command in COMMANDS}
    for round_ in range(runs + 1):  # the first round warms the caches, untimed
        for command in COMMANDS:
            _reset(ws, venv)
            timed = ws.run(argv[command], env=env)
            if round_:
                series[command].add_run(timed)
    _reset(ws, venv)
    return Figures(population, files, {c: s.median for c, s in series.items()}, runs)


def _reset(ws: Workspace, venv: Venv) -> None:
    """X not installed, no snapshot (the tool's caches kept: a user's next command)."""
    ws.uv_pip(venv, "uninstall", "guarded-pkg")
    venv.clear_history()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--population", type=int, default=50)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-guarded-"))
    try:
        print(measure(root, runs=args.runs, population=args.population).table())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
