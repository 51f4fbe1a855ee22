"""How long stashing one installed distribution takes, as for a removal (hard links) and as for a
distribution that stays installed (reflinks, else copies of small files):

    python bench/stash_modes.py /path/to/venv torch --runs 5

In process (stash_distribution alone: no snapshot file, no uv), into a scratch folder inside
the venv (the state folder's filesystem), removed again after each run; the first round is not
timed. The figures of docs/performance.md, "The stash: links, copies and reflinks", came from
this loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

from safeuninstall.environment import read_distribution
from safeuninstall.stash import stash_distribution


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path)
    parser.add_argument("dist", help="the dist-info folder's name up to the version")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    (site,) = args.venv.glob("lib/python3*/site-packages")
    (dist_info,) = site.glob(f"{args.dist}-*.dist-info")
    dist = read_distribution(dist_info)
    assert dist is not None, dist_info
    scratch = args.venv / ".stash-modes"
    times: dict[bool, list[float]] = {True: [], False: []}
    for round_ in range(args.runs + 1):
        for removed in (True, False):
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir()
            os.sync()  # the previous round's writes are not this one's cost
            started = time.perf_counter()
            kept = stash_distribution(
                dist, env_root=args.venv, snapshot_dir=scratch, removed=removed
            )
            if round_:
                times[removed].append(time.perf_counter() - started)
    shutil.rmtree(scratch, ignore_errors=True)
    size = sum(f.size for f in kept.files)
    print(f"{dist.name} {dist.version}: {len(kept.files)} files, {size / 1e6:.0f} MB")
    for removed, label in ((True, "removed (links)"), (False, "stays installed (kept apart)")):
        runs = times[removed]
        print(
            f"  {label:30} median {statistics.median(runs) * 1000:7.0f} ms"
            f"  (min {min(runs) * 1000:.0f}, max {max(runs) * 1000:.0f}, {len(runs)} runs)"
        )


if __name__ == "__main__":
    main()
