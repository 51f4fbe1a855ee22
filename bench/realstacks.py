"""The environments people have: the CUDA torch venv and a large ML venv, from the package index.

The venvs come from the real-stack cache of the tests (tests/realstack.py: built once per
machine outside the repository, then installed offline by hard links in about a second). Each
stack gets one venv; what a step removes is put back from that cache between two steps. The
commands compared run round-robin, one of each per round, as everywhere in bench/.

- torch: torch 2.14.1 (CUDA build) with its nvidia-*-cu13 wheels, 29 distributions, 16,136
  files; tests/stacks/torch.txt.
- ml: torch, jupyterlab, pandas, scipy, scikit-learn, matplotlib, transformers, spacy...:
  235 distributions, 62,767 files; tests/stacks/ml.txt.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from safeuninstall.state.store import Store
from tests.realstack import Stacks, cache_root

from . import inprocess
from .envs import Venv, Workspace, bundled_pip_wheel, tool_argv
from .measure import BenchError, Series, Timed
from .scenarios import Config, Results, signed_ms, timed_rounds

NCCL = "nvidia-nccl-cu13"
# The four wheels of FACTS.md: torch's import fails on each in turn.
CU13 = ("nvidia-cudnn-cu13", "nvidia-cusparselt-cu13", "nvidia-nccl-cu13", "nvidia-nvshmem-cu13")
# Two that torch requires and its import does not load: removals that the probe
# PASSING_PROBE passes (a derived probe would import their other dependents in the ML venv).
SPARES = ("networkx", "jinja2")
PASSING_PROBE = "import torch"
IMPORT_BASELINE = "import click, packaging, filelock, tomli_w"
_TOOL_ONLY = ("tool", "check", "doctor", "audit", "snapshots")


def run(ws: Workspace, cfg: Config, results: Results, stacks: Stacks | None = None) -> None:
    """Every stack of ``cfg.stacks``, each scenario side by side with uv and pip. ``stacks``:
    the cache, as the tests' fixture opened it (with the machine's pip configuration)."""
    stacks = Stacks(cache_root()) if stacks is None else stacks
    for stack in cfg.stacks:
        _one_stack(ws, cfg, results, stacks, stack)


def _one_stack(ws: Workspace, cfg: Config, results: Results, stacks: Stacks, stack: str) -> None:
    venv = Venv(ws.root / f"stack-{stack}")
    shutil.rmtree(venv.root, ignore_errors=True)
    stacks.install(stack, venv.root)
    wheel = bundled_pip_wheel()
    if wheel is not None:
        ws.uv_pip(venv, "install", "--no-index", str(wheel))
    section = f"real: {stack}"
    tool = [*tool_argv(), "-p", str(venv.root)]

    def put_back(*names: str) -> None:
        stacks.reinstall(stack, venv.root, names)

    def installed(name: str) -> bool:
        return any(venv.site.glob(f"{name.replace('-', '_')}-*.dist-info"))

    series = {
        key: Series()
        for key in (
            "tool",
            "uv",
            "pip",
            "import",
            "probe",
            "probe_passing",
            "failing",
            "failing_again",
            "passing_cached",
            "hand_failing",
            "hand_passing",
            "hand_uninstall_probe",
            "check",
            "doctor",
            "audit",
            "snapshots",
        )
    }

    def timed(key: str, warmup: bool, done: Timed) -> None:
        if not warmup:
            series[key].add_run(done)

    def tool_nccl(warmup: bool) -> None:
        venv.clear_history()
        done = ws.run([*tool, "--no-probe", "--allow-unmet", NCCL])
        if installed(NCCL):
            raise BenchError(f"safe-uninstall --no-probe did not remove {NCCL}")
        timed("tool", warmup, done)
        put_back(NCCL)

    def uv_nccl(warmup: bool) -> None:
        timed("uv", warmup, ws.uv_pip(venv, "uninstall", NCCL))
        put_back(NCCL)

    def pip_nccl(warmup: bool) -> None:
        done = ws.run([str(venv.python), "-m", "pip", "uninstall", "-y", NCCL])
        if installed(NCCL):
            raise BenchError(f"pip uninstall -y did not remove {NCCL}")
        timed("pip", warmup, done)
        put_back(NCCL)

    def start_up(warmup: bool) -> None:
        timed("import", warmup, ws.run([sys.executable, "-c", IMPORT_BASELINE]))

    dry = ws.run([*tool, "--json", "--dry-run", "--allow-unmet", *CU13], check=False).check(0)
    planned = json.loads(dry.stdout)["probes"]["planned"]
    if not planned:
        raise BenchError(f"no probe derived for the four cu13 wheels in {stack}")
    probe_argvs = [
        inprocess.probe_argv(str(venv.python), p, ws.root / f"probe-{stack}-{i}")
        for i, p in enumerate(planned)
    ]

    def one_probe(warmup: bool) -> None:
        # Each planned probe once, as the baseline runs it (the driver, every candidate in
        # its one process): their times add up.
        runs = [ws.run(argv) for argv in probe_argvs]
        if not warmup:
            peaks = [r.maxrss_kib for r in runs if r.maxrss_kib is not None]
            series["probe"].add(sum(r.seconds for r in runs), max(peaks) if peaks else None)

    passing_argv = inprocess.probe_argv(
        str(venv.python), {"kind": "python", "code": PASSING_PROBE}, ws.root / f"probe-{stack}"
    )

    def one_passing_probe(warmup: bool) -> None:
        timed("probe_passing", warmup, ws.run(passing_argv))

    def failing_removal() -> Timed:
        argv = [*tool, "--json", "--fresh-baseline", "--allow-unmet", *CU13]
        done = ws.run(argv, check=False).check(3)
        if json.loads(done.stdout)["outcome"] != "probe-failed-restored":
            raise BenchError(f"the four cu13 wheels' removal did not fail: {done.stdout[:2000]}")
        if not all(installed(name) for name in CU13):
            raise BenchError("the failing removal did not restore the four cu13 wheels")
        return done

    def failing(warmup: bool) -> None:
        # The first time this removal is asked: no snapshot made before.
        venv.clear_history()
        timed("failing", warmup, failing_removal())
        # Asked again in the installed set it restored (a nightly job's retry).
        timed("failing_again", warmup, failing_removal())

    def passing_cached(warmup: bool) -> None:
        venv.clear_history()
        # The first removal's passing probe is cached as the baseline of what it leaves; the
        # second removal, in that unchanged environment, takes it from the cache.
        probe = ["--json", "--allow-unmet", "--probe", PASSING_PROBE]
        ws.run([*tool, *probe, "--fresh-baseline", SPARES[0]], check=False).check(0)
        done = ws.run([*tool, *probe, SPARES[1]], check=False).check(0)
        probes = json.loads(done.stdout)["probes"]
        started = sum(not p["cached"] for p in probes["baseline"]) + len(probes["after"])
        if not probes["baseline"] or not all(p["cached"] for p in probes["baseline"]):
            raise BenchError(f"{stack}: the second removal's baseline was not cached: {probes}")
        timed("passing_cached", warmup, done)
        if started != 1:
            raise BenchError(f"{stack}: {started} probe runs, not one: {probes}")
        put_back(*SPARES)

    # The same guard done by hand with uv, as a careful user would without the tool: no
    # snapshot, no stash, nothing verified; what is put back comes from uv's cache, online
    # or not (an air-gapped node without that cache has no way back at all). The floor of a
    # guarded removal on this machine, beside the tool's.
    restore_env = {**ws.env, **stacks.offline_env()}
    pins = stacks.pinned(stack, CU13)

    def hand_failing(warmup: bool) -> None:
        baseline = [ws.run(argv) for argv in probe_argvs]
        removed = ws.uv_pip(venv, "uninstall", *CU13)
        after = [ws.run(argv, check=False) for argv in probe_argvs]
        if all(r.returncode == 0 for r in after):
            raise BenchError(f"{stack}: the probe passed without the four cu13 wheels")
        back = ws.uv_pip(
            venv, "install", "--no-deps", "--link-mode", "hardlink", *pins, env=restore_env
        )
        if not all(installed(name) for name in CU13):
            raise BenchError(f"{stack}: uv did not put the four cu13 wheels back")
        if not warmup:
            steps = [*baseline, removed, *after, back]
            series["hand_failing"].add(sum(s.seconds for s in steps), None)

    def hand_passing(warmup: bool) -> None:
        # The guard: the probe, `uv pip uninstall`, the probe again. Its last two steps are
        # also kept apart: the guard without its baseline, which a cached baseline competes with.
        baseline = ws.run(passing_argv)
        removed = ws.uv_pip(venv, "uninstall", SPARES[1])
        after = ws.run(passing_argv)
        if not warmup:
            series["hand_passing"].add(baseline.seconds + removed.seconds + after.seconds, None)
            series["hand_uninstall_probe"].add(removed.seconds + after.seconds, None)
        put_back(SPARES[1])

    def check(warmup: bool) -> None:
        timed("check", warmup, ws.run([*tool, "check", "--json", *CU13], check=False).check(0))

    def doctor(warmup: bool) -> None:
        timed("doctor", warmup, ws.run([*tool, "doctor", "--json"], check=False).check(0, 1))

    listed = ws.run([*tool_argv(), "--help"]).stdout
    has_audit = re.search(r"^  audit\s", listed, re.MULTILINE) is not None

    def audit(warmup: bool) -> None:
        timed("audit", warmup, ws.run([*tool, "audit", "--json"], check=False))

    steps: list[Callable[[bool], None]] = [
        tool_nccl,
        uv_nccl,
        *([pip_nccl] if wheel is not None else []),
        start_up,
        one_probe,
        one_passing_probe,
        failing,
        hand_failing,
        passing_cached,
        hand_passing,
        check,
        doctor,
        *([audit] if has_audit else []),
    ]
    timed_rounds(cfg, steps)

    history = _history(ws, venv, tool, put_back, cfg.stack_snapshots)

    def snapshots(warmup: bool) -> None:
        done = ws.run([*tool, "snapshots", "--json"])
        if len(json.loads(done.stdout)["snapshots"]) != history:
            raise BenchError(f"`snapshots` did not list the {history} snapshots")
        timed("snapshots", warmup, done)

    timed_rounds(cfg, [snapshots])
    if cfg.against is not None:
        _against(ws, cfg, results, stacks, stack, cfg.against, tool)
    venv.clear_history()
    results.info[f"the {stack} venv"] = _shape(venv)

    def add(what: str, key: str, note: str = "") -> None:
        results.add(section, what, series[key], key=f"real.{stack}.{key}", note=note)
        peak = series[key].peak_mib
        if key in _TOOL_ONLY and peak is not None:  # no probe process in its peak
            results.values[f"real.{stack}.{key}.peak_mib"] = peak

    tool_s, uv_s, start = (series[k].median for k in ("tool", "uv", "import"))
    versus_pip = f"tool / pip = {tool_s / series['pip'].median:.2f}; " if series["pip"].runs else ""
    add(
        f"`safe-uninstall --no-probe --allow-unmet {NCCL}`",
        "tool",
        f"{versus_pip}(tool - uv) = {(tool_s - uv_s) / start:.1f} start-ups",
    )
    add(f"`uv pip uninstall {NCCL}`", "uv")
    if wheel is not None:
        add(f"`pip uninstall -y {NCCL}`", "pip")
    else:
        results.not_measured(section, f"`pip uninstall -y {NCCL}`", "no bundled pip wheel")
    add(f'`python -c "{IMPORT_BASELINE}"` (one start-up)', "import")
    add("one run of the probe derived for the four (its driver, as the tool runs it)", "probe")
    probe = series["probe"].median
    add(
        "failing removal of the four cu13 wheels, default probe, `--allow-unmet`, fresh "
        "baseline (exit 3, restored)",
        "failing",
        f"{series['failing'].median / probe:.2f} probe runs; "
        f"{signed_ms(series['failing'].median - probe)} beyond one",
    )
    add(
        "the same removal asked again in the environment it restored",
        "failing_again",
        f"{series['failing_again'].median / probe:.2f} probe runs; "
        f"{signed_ms(series['failing_again'].median - probe)} beyond one",
    )
    add(
        "the same guard by hand with uv: the probe, `uv pip uninstall` of the four, the probe "
        "(fails), `uv pip install --offline` of the four from uv's cache (nothing stashed or "
        "verified)",
        "hand_failing",
        f"{series['hand_failing'].median / probe:.2f} probe runs; "
        f"{signed_ms(series['hand_failing'].median - probe)} beyond one",
    )
    add(
        f"one run of `--probe {PASSING_PROBE!r}` (its driver, as the tool runs it)", "probe_passing"
    )
    passing = series["probe_passing"].median
    add(
        f"passing removal of {SPARES[1]}, `--probe {PASSING_PROBE!r}`, cached baseline (after "
        f"one of {SPARES[0]})",
        "passing_cached",
        f"{series['passing_cached'].median / passing:.2f} probe runs; "
        f"{signed_ms(series['passing_cached'].median - passing)} beyond one",
    )
    add(
        f"the same guard by hand with uv: the probe, `uv pip uninstall {SPARES[1]}`, the probe "
        "(no snapshot, no stash, no impact report)",
        "hand_passing",
        f"{series['hand_passing'].median / passing:.2f} probe runs; "
        f"{signed_ms(series['hand_passing'].median - passing)} beyond one",
    )
    add(
        f"the uninstall and one probe: `uv pip uninstall {SPARES[1]}`, then the probe (the "
        "guard by hand without its first probe)",
        "hand_uninstall_probe",
        f"{series['hand_uninstall_probe'].median / passing:.2f} probe runs; "
        f"{signed_ms(series['hand_uninstall_probe'].median - passing)} beyond one",
    )
    add("`check` of the four cu13 wheels", "check")
    add("`doctor`", "doctor")
    if has_audit:
        add("`audit`", "audit")
    else:
        results.not_measured(section, "`audit`", "no audit command in this build")
    add(f"`snapshots` with {history} snapshots", "snapshots")


def _against(
    ws: Workspace,
    cfg: Config,
    results: Results,
    stacks: Stacks,
    stack: str,
    other: str,
    tool: list[str],
) -> None:
    """``snapshots`` and ``doctor`` of this build and of ``other`` in turn, each in its own venv
    of the stack with a history it made itself (the builds' caches differ): the ratio of each
    pair, this build's time over the other's, so that a drift of the machine's speed cancels."""
    venv = Venv(ws.root / f"stack-{stack}-against")
    shutil.rmtree(venv.root, ignore_errors=True)
    stacks.install(stack, venv.root)
    theirs = [other, "-p", str(venv.root)]
    count = _history(
        ws, venv, theirs, lambda *n: stacks.reinstall(stack, venv.root, n), cfg.stack_snapshots
    )
    commands = ("snapshots", "doctor")
    mine = {command: Series() for command in commands}
    other_runs = {command: Series() for command in commands}
    ratios: dict[str, list[float]] = {command: [] for command in commands}

    def pair(command: str, warmup: bool) -> None:
        ours = ws.run([*tool, command, "--json"], check=False)
        other_run = ws.run([*theirs, command, "--json"], check=False)
        if not warmup:
            mine[command].add_run(ours)
            other_runs[command].add_run(other_run)
            ratios[command].append(ours.seconds / other_run.seconds)

    timed_rounds(cfg, [lambda w: pair("snapshots", w), lambda w: pair("doctor", w)])
    shutil.rmtree(venv.root, ignore_errors=True)
    for command in commands:
        paired = sorted(ratios[command])
        median = statistics.median(paired)
        results.values[f"real.{stack}.{command}_vs_against"] = median
        section = f"real: {stack}"
        results.add(
            section,
            f"`{command}` ({count} snapshots), this build, paired with the next row",
            mine[command],
            note=f"this / the other, pair by pair: median {median:.2f}, "
            f"{paired[0]:.2f} to {paired[-1]:.2f} over {len(paired)} pairs",
        )
        results.add(section, f"the same by `{other}`", other_runs[command])


def _history(
    ws: Workspace,
    venv: Venv,
    tool: list[str],
    put_back: Callable[..., None],
    count: int,
) -> int:
    """``count`` snapshots of removals: one real removal of nccl (its stash), copied to the
    next ids (hard links; only the id differs), as many removals in a row would leave."""
    venv.clear_history()
    ws.run([*tool, "--no-probe", "--allow-unmet", NCCL])
    put_back(NCCL)
    store = Store(venv.state_dir)
    first = store.folder("0001")
    text = first.snapshot_file.read_text()
    for number in range(2, count + 1):
        copy = store.folder(f"{number:04d}")
        shutil.copytree(first.path, copy.path, copy_function=_link)
        copy.snapshot_file.unlink()
        copy.snapshot_file.write_text(text.replace('id = "0001"', f'id = "{number:04d}"', 1))
    return count


def _link(source: str, dest: str) -> None:
    Path(dest).hardlink_to(source)


def _shape(venv: Venv) -> str:
    records = list(venv.site.glob("*.dist-info/RECORD"))
    lines = sum(len(r.read_text().splitlines()) for r in records)
    return f"{len(records)} distributions, {lines} RECORD lines"
