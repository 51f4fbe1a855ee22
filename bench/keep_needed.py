"""Probe runs of ``--keep-needed`` against trying candidates one by one.

    python bench/keep_needed.py            # counts for 16 candidates, then the real command
    python bench/keep_needed.py --counts   # the counts only (a second)

1. Counts: bisection.search on 16 candidates with 1, 2 and 4 needed, every choice of the needed
   ones (16, 120 and 1820 cases), the probe a function: fewest, mean and most runs, the bound
   (bisection.bound), against one by one (16 runs, one per candidate).
2. The real command on a venv of 16 toy wheels, the probe importing the needed ones (which
   nothing else shows as needed, so all 16 are tried): runs and seconds of one
   ``safe-uninstall --keep-needed``, and of 16 one-by-one removals, each judged by the same
   probe (a needed one restored).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from safeuninstall.environment.interpreter import find_uv  # noqa: E402 - needs the path set above
from safeuninstall.plans.bisection import bound, search  # noqa: E402
from tests.wheels import build_wheel  # noqa: E402

N = 16
NEEDED = (1, 2, 4)


def counts(n: int = N, needed: tuple[int, ...] = NEEDED) -> list[dict[str, object]]:
    """Runs of the search over every choice of ``k`` needed among ``n``."""
    names = [f"pkg{i:02d}" for i in range(n)]
    rows = []
    for k in needed:
        runs = []
        for chosen in itertools.combinations(names, k):
            gone = set(chosen)
            found = search(names, lambda removed, gone=gone: not removed & gone)
            assert set(found.needed) == gone and found.final_passed
            runs.append(found.runs)
        rows.append(
            {
                "n": n,
                "k": k,
                "cases": len(runs),
                "fewest": min(runs),
                "mean": round(statistics.mean(runs), 2),
                "most": max(runs),
                "bound": bound(n, k),
                "one_by_one": n,
            }
        )
    return rows


def _tool(venv: Path, *args: str) -> tuple[dict[str, object], float]:
    env = {**os.environ, "UV_OFFLINE": "1"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "safeuninstall", "--python", str(venv), "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    seconds = time.monotonic() - started
    return json.loads(done.stdout), seconds


def real(k: int, work: Path) -> dict[str, object]:
    """One --keep-needed and 16 one-by-one removals on a fresh venv of 16 toy wheels."""
    uv = find_uv()
    assert uv is not None
    house = work / "wheels"
    names = [f"toyleaf{i:02d}" for i in range(N)]
    for name in names:
        build_wheel(house, name, "1.0", {f"{name}.py": "X = 1\n"})
    needed = names[3 :: N // k][:k]  # spread over the 16
    probe = "import " + ", ".join(needed)
    result: dict[str, object] = {"k": k, "needed": needed}
    for how in ("keep-needed", "one-by-one"):
        venv = work / f"venv-{k}-{how}"
        subprocess.run([uv, "venv", "-q", str(venv)], check=True)
        subprocess.run(
            [
                uv,
                "pip",
                "install",
                "-q",
                "--python",
                str(venv),
                "--no-index",
                "--find-links",
                str(house),
                *names,
            ],
            check=True,
        )
        if how == "keep-needed":
            data, seconds = _tool(venv, "--keep-needed", "--probe", probe, "toyleaf*")
            cleanup = data["keep_needed"]
            assert isinstance(cleanup, dict)
            result["keep_needed"] = {"runs": cleanup["probe_runs"], "seconds": round(seconds, 1)}
        else:
            total = 0.0
            for name in names:
                _, seconds = _tool(venv, "--probe", probe, name)
                total += seconds
            result["one_by_one"] = {"runs": N, "seconds": round(total, 1)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", action="store_true", help="the counts only")
    args = parser.parse_args()
    print("| n | k needed | cases | fewest | mean | most | bound | one by one |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in counts():
        print("| " + " | ".join(str(v) for v in row.values()) + " |")
    if args.counts:
        return
    print()
    print("| k needed | --keep-needed runs | seconds | one by one runs | seconds |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="keep-needed-bench-") as tmp:
        for k in NEEDED:
            row = real(k, Path(tmp) / f"k{k}")
            keep, one = row["keep_needed"], row["one_by_one"]
            assert isinstance(keep, dict) and isinstance(one, dict)
            print(
                f"| {k} | {keep['runs']} | {keep['seconds']} | {one['runs']} | {one['seconds']} |"
            )


if __name__ == "__main__":
    main()
