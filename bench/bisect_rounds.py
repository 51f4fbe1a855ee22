"""``bisect``: its probe rounds against the bound, and what a round costs beyond its probe.

1. Rounds (``bisect_rounds``): the search ``bisect`` runs (culprits.find, the probe a
   function) over ``n`` units for each of ``cfg.bisect_sizes``, with 1, 2 and 3 culprits: every
   position of one culprit, and every set of 2 or 3 where there are at most ``cfg.bisect_sets``
   of them, else that many drawn with a fixed seed. A round is one call of the probe, as
   ``bisect --json`` lists them: the first is the environment as it is. Fewest, mean and most,
   beside the bound ``1 + k * (ceil(log2 n) + 1)``.
2. Torch (``bisect_torch``): the CUDA torch venv of the real-stack cache (bench/realstacks.py),
   snapshot GOOD taken with nvidia-nccl-cu13, then ``cfg.bisect_harmless`` toy wheels installed
   and nccl removed; ``bisect GOOD --probe PROBE`` timed whole. Each round's probe is timed by
   the command's own ``--json`` events (from "probe running" to its verdict); the rest of the
   whole, per round, is what a round costs beyond its probe: moving the environment to the
   state probed and proving it, the start's snapshot and the return to the start.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from collections.abc import Iterator
from typing import TYPE_CHECKING

from safeuninstall.plans import bisection
from safeuninstall.plans.culprits import find
from tests.wheels import build_wheel

from .envs import Venv, Workspace, tool_argv
from .measure import BenchError, Series
from .scenarios import Config, Results, timed_rounds

if TYPE_CHECKING:  # the real-stack cache is opened only by the torch scenario
    from tests.realstack import Stacks

CULPRITS = (1, 2, 3)
NCCL = "nvidia-nccl-cu13"
PROBE = "import torch; torch.cuda.device_count()"
STACK = "torch"


def bound(n: int, k: int) -> int:
    """The probe rounds bisect is held to for ``k`` culprits among ``n`` units: its first
    round, and the search's (bisection.bound)."""
    return 1 + bisection.bound(n, k, failing=True)


def rounds_key(n: int, k: int, stat: str) -> str:
    return f"bisect.rounds.{n}.{k}.{stat}"


# -- the rounds of the search ---------------------------------------------------------------


def _culprit_sets(n: int, k: int, most: int) -> Iterator[tuple[int, ...]]:
    """Every set of ``k`` positions among ``n`` if there are at most ``most``, else ``most``
    of them drawn with a seed of their own (the same sets every run)."""
    if math.comb(n, k) <= most:
        yield from itertools.combinations(range(n), k)
        return
    rng = random.Random(f"bisect-{n}-{k}")
    drawn: set[tuple[int, ...]] = set()
    while len(drawn) < most:
        drawn.add(tuple(sorted(rng.sample(range(n), k))))
    yield from sorted(drawn)


def count_rounds(n: int, culprits: tuple[int, ...]) -> int:
    """The probe rounds the search takes over ``n`` units with the culprits at ``culprits``
    (each breaks the probe alone); the culprits it names must be those."""
    order = [f"u{i:03d}" for i in range(n)]
    wanted = frozenset(order[i] for i in culprits)
    calls = 0

    def passes(bad: frozenset[str]) -> bool:
        nonlocal calls
        calls += 1
        return not bad & wanted

    found = find(order, passes)
    if set(found.culprits) != wanted:
        raise BenchError(f"the search named {found.culprits} among {n}, not {sorted(wanted)}")
    return calls - found.alone_runs  # the search's; a culprit tried alone after it is not


def rounds(cfg: Config, results: Results) -> None:
    for n in cfg.bisect_sizes:
        for k in CULPRITS:
            counts = [count_rounds(n, c) for c in _culprit_sets(n, k, cfg.bisect_sets)]
            results.values[rounds_key(n, k, "fewest")] = min(counts)
            results.values[rounds_key(n, k, "mean")] = statistics.mean(counts)
            results.values[rounds_key(n, k, "most")] = max(counts)
            results.values[rounds_key(n, k, "sets")] = len(counts)


def rounds_table(cfg: Config, values: dict[str, float]) -> str:
    """The counts as a Markdown table ("" when none was measured)."""
    lines = [
        "| units | culprits | culprit sets | fewest | mean | most | bound |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for n in cfg.bisect_sizes:
        for k in CULPRITS:
            if rounds_key(n, k, "most") not in values:
                continue
            sets = int(values[rounds_key(n, k, "sets")])
            which = "every one" if sets == math.comb(n, k) else "drawn, fixed seed"
            fewest, mean, most = (values[rounds_key(n, k, s)] for s in ("fewest", "mean", "most"))
            lines.append(
                f"| {n} | {k} | {sets} ({which}) | {fewest:.0f} | {mean:.2f} | {most:.0f} "
                f"| {bound(n, k)} |"
            )
    return "\n".join(lines) if len(lines) > 2 else ""


# -- a round's cost on the torch stack ------------------------------------------------------


def _probe_spans(events: list[dict[str, object]]) -> list[tuple[float, float, bool]]:
    """Each round's probe from the bisect's events: (began, ended, passed), in seconds since
    the operation began."""
    spans = []
    began: float | None = None
    for event in events:
        text, at = str(event["text"]), float(str(event["seconds"]))
        if event["step"] != "probe":
            continue
        if text.startswith("probe running"):
            began = at
        elif text.startswith("probe with") and began is not None:
            spans.append((began, at, text.lower().endswith("passed")))
            began = None
    return spans


def torch(ws: Workspace, cfg: Config, results: Results, stacks: Stacks | None = None) -> None:
    """One bisect of the torch stack, timed whole ``cfg.runs`` times (see the module)."""
    from tests.realstack import Stacks, cache_root

    stacks = Stacks(cache_root()) if stacks is None else stacks
    venv = Venv(ws.root / "bisect-torch")
    stacks.install(STACK, venv.root)
    tool = [*tool_argv(), "-p", str(venv.root)]
    good = ws.run([*tool, "snapshot", "-q"]).stdout.strip()
    house = ws.root / "bisect-wheels"
    harmless = [f"harmless{i}" for i in range(cfg.bisect_harmless)]
    for name in harmless:
        build_wheel(house, name, "1.0", {f"{name}.py": ""})
    ws.uv_pip(venv, "install", "--no-index", "--find-links", str(house), *harmless)
    ws.uv_pip(venv, "uninstall", NCCL)
    argv = [*tool, "--json", "bisect", good, "--probe", PROBE]
    start = _installed(venv)
    series = {key: Series() for key in _FIGURES}
    shape: dict[str, float] = {}

    def one(warmup: bool) -> None:
        done = ws.run(argv, check=False).check(0)
        data = json.loads(done.stdout)
        found = data["bisect"]
        if [c["names"] for c in found["culprits"]] != [[NCCL]]:
            raise BenchError(f"bisect did not name {NCCL} alone: {found['culprits']}")
        if _installed(venv) != start:
            raise BenchError(f"bisect did not end where it started: {_installed(venv)}")
        figures = _figures(done.seconds, data["events"], len(found["rounds"]))
        shape["units"] = len(found["units"])
        # The search's rounds, held to the bound; a culprit tried on its own after it is not.
        searched = sum(1 for r in found["rounds"] if not r["confirms"])
        shape["rounds"] = max(shape.get("rounds", 0), searched)
        if not warmup:
            for key in _FIGURES:
                series[key].add(figures[key])  # no peak RSS: the tool's would be the probe's

    timed_rounds(cfg, [one])
    _add_torch_rows(results, series, shape)


def _installed(venv: Venv) -> list[str]:
    return sorted(path.name for path in venv.site.glob("*.dist-info"))


_FIGURES = ("whole", "probe", "passing", "failing", "beyond", "move", "most_move", "start", "end")


def _figures(seconds: float, events: list[dict[str, object]], rounds: int) -> dict[str, float]:
    """One bisect's figures: its whole time, its rounds' probes (all, passing, failing:
    medians), what each round costs beyond its probe, the moves between two rounds (median,
    most), the start before the first round and the end after the last (to the last event)."""
    spans = _probe_spans(events)
    if len(spans) != rounds:
        raise BenchError(f"{len(spans)} probes in the events, {rounds} rounds")
    probes = [end - began for began, end, _ in spans]
    passing = [end - began for began, end, passed in spans if passed]
    failing = [end - began for began, end, passed in spans if not passed]
    if not passing or not failing:
        raise BenchError(f"a torch bisect has rounds that pass and rounds that fail: {spans}")
    moves = [b - a for (_, a, _), (b, _, _) in itertools.pairwise(spans)] or [0.0]
    return {
        "rounds": rounds,
        "whole": seconds,
        "probe": statistics.median(probes),
        "passing": statistics.median(passing),
        "failing": statistics.median(failing),
        "beyond": (seconds - sum(probes)) / rounds,
        "move": statistics.median(moves),
        "most_move": max(moves),
        "start": spans[0][0],
        "end": float(str(events[-1]["seconds"])) - spans[-1][1],
    }


def _add_torch_rows(results: Results, series: dict[str, Series], shape: dict[str, float]) -> None:
    section = f"bisect: {STACK}"
    units, most = int(shape["units"]), int(shape["rounds"])
    results.values["bisect.torch.units"] = units
    results.values["bisect.torch.rounds"] = most
    passing = series["passing"].median

    def add(what: str, key: str, note: str = "") -> None:
        results.add(section, what, series[key], key=f"bisect.torch.{key}", note=note)

    add(
        f"`bisect GOOD --probe {PROBE!r}`: {NCCL} gone among {units - 1} harmless changes "
        "since GOOD (whole, end to end)",
        "whole",
        f"{most} rounds at most (bound {bound(units, 1)}); names {NCCL}",
    )
    add("  a round's probe, median over the rounds (timed by its --json events)", "probe")
    add("  a passing round's probe", "passing")
    add("  a failing round's probe (torch's import stops at libnccl.so.2)", "failing")
    add(
        "  a round beyond its probe: (whole - every probe) / rounds",
        "beyond",
        f"{series['beyond'].median / passing:.2f} passing probes; with the start-up, the "
        f"start's snapshot ({series['start'].median:.2f} s to the first probe) and the "
        f"return to it ({series['end'].median:.2f} s after the last)",
    )
    add(
        "  the state switch between two rounds, median (by the --json events)",
        "move",
        f"{series['move'].median / passing:.2f} passing probes; the longest "
        f"{series['most_move'].median:.2f} s",
    )
