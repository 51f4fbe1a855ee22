"""The scenarios. Each builds what it needs in the workspace, runs the commands it compares
round-robin (one of each per round, so drift hits them all alike), and adds medians to Results.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from safeuninstall.state.store import Store

from . import impact, inprocess
from .dists import (
    DistSpec,
    Pristine,
    big_dist,
    small_dist,
    synthetic_population,
    write_installed,
    write_wheel,
)
from .envs import Venv, Workspace, bundled_pip_wheel, tool_argv
from .measure import BenchError, Series, Timed

TIMED_CLI = Path(__file__).with_name("timed_cli.py")


@dataclass(frozen=True)
class Config:
    label: str
    runs: int  # timed runs per figure; the figure is their median
    snapshot_sizes: tuple[int, ...] = (100, 1000, 3000)
    small_files: int = 10
    big_bytes: int = 10**9
    big_files: int = 150
    probe_sleep: float = 1.0
    importtime_runs: int = 5
    warmup: bool = True  # one untimed run of every step first (page cache, .pyc files)
    # (distributions, ELF files) of the impact-report environments; the target is judged at
    # impact_target, which must be one of them
    impact_sizes: tuple[tuple[int, int], ...] = ((50, 200), (200, 850), (800, 3200))
    impact_target: tuple[int, int] = (200, 850)
    # the real stacks (tests/stacks/), and how many snapshots `snapshots` lists there
    stacks: tuple[str, ...] = ("torch", "ml")
    stack_snapshots: int = 50
    # another build's `safe-uninstall` (0.1.0 in a venv of its own, say): `snapshots` and
    # `doctor` of both are timed in turn on the real stacks, each in a venv and history of its own
    against: str | None = None
    # bisect: the units its search is counted over, how many culprit sets at most for each,
    # and the harmless changes beside nvidia-nccl-cu13 in the torch bisect
    bisect_sizes: tuple[int, ...] = (8, 32, 128)
    bisect_sets: int = 10000
    bisect_harmless: int = 5


FULL = Config(label="full", runs=7)
QUICK = Config(
    label="quick",
    runs=3,
    big_bytes=200 * 10**6,
    probe_sleep=0.5,
    importtime_runs=3,
    impact_sizes=((50, 200), (200, 850)),
    bisect_sets=200,
)
# For the smoke test: every code path once, at a size where time means nothing.
SMOKE = Config(
    label="smoke",
    runs=1,
    snapshot_sizes=(2, 5),
    big_bytes=10**6,
    probe_sleep=0.05,
    importtime_runs=1,
    warmup=False,
    impact_sizes=((12, 16),),
    impact_target=(12, 16),
    # the torch stack only: the test tier has it cached; the ML venv costs a minute to build
    stacks=("torch",),
    stack_snapshots=2,
    bisect_sizes=(8,),
    bisect_sets=10,
    bisect_harmless=1,
)


@dataclass(frozen=True)
class Row:
    section: str
    what: str
    runs: int | None  # None: not measured
    seconds: float | None
    peak: str = ""
    note: str = ""


@dataclass(frozen=True)
class ImportCost:
    name: str
    depth: int  # 0: imported by the entry point itself
    self_us: float
    cumulative_us: float


@dataclass
class Results:
    config: Config
    rows: list[Row] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)  # medians the targets read
    imports: list[ImportCost] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)

    def add(
        self,
        section: str,
        what: str,
        series: Series,
        *,
        key: str | None = None,
        peak: str | None = None,
        note: str = "",
    ) -> None:
        if peak is None:
            peak = f"{series.peak_mib:.0f} MiB RSS" if series.peak_mib is not None else ""
        self.rows.append(Row(section, what, series.runs, series.median, peak, note))
        if key:
            self.values[key] = series.median

    def not_measured(self, section: str, what: str, why: str) -> None:
        self.rows.append(Row(section, what, None, None, note=why))


def _mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size / 1024:.0f} KiB"


def _size(size: int) -> str:
    return f"{size / 10**9:g} GB" if size >= 10**9 else f"{size / 10**6:g} MB"


def timed_rounds(cfg: Config, steps: Sequence[Callable[[bool], None]]) -> None:
    """``cfg.runs`` rounds of every step in turn, after one warm-up round if ``cfg.warmup``.

    Each step is told whether its run is the warm-up, which it must not record.
    """
    if cfg.warmup:
        for step in steps:
            step(True)
    for _ in range(cfg.runs):
        for step in steps:
            step(False)


# -- start-up ---------------------------------------------------------------------------------

IMPORT_BASELINE = "import click, packaging, filelock, tomli_w"


def startup(ws: Workspace, cfg: Config, results: Results) -> None:
    tool = tool_argv()
    commands = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        f'python -c "{IMPORT_BASELINE}"': ([sys.executable, "-c", IMPORT_BASELINE], "import"),
        "safe-uninstall --help": ([*tool, "--help"], "help"),
        "safe-uninstall --version": ([*tool, "--version"], None),
    }
    series = {label: Series() for label in commands}

    def step(label: str) -> Callable[[bool], None]:
        argv = commands[label][0]

        def run(warmup: bool) -> None:
            done = ws.run(argv)
            if not warmup:
                series[label].add_run(done)

        return run

    timed_rounds(cfg, [step(label) for label in commands])
    for label, (_, key) in commands.items():
        results.add("start-up", label, series[label], key=f"startup.{key}" if key else None)
    results.imports = import_costs(ws, cfg.importtime_runs)


def import_costs(ws: Workspace, runs: int) -> list[ImportCost]:
    """``python -X importtime -m safeuninstall --help``: per-module medians over ``runs``."""
    per_module: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(runs):
        done = ws.run([sys.executable, "-X", "importtime", "-m", "safeuninstall", "--help"])
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "[us]" in line:
                continue
            self_us, cumulative_us, raw_name = line[len("import time:") :].split("|", 2)
            try:
                self_value, cumulative_value = float(self_us), float(cumulative_us)
            except ValueError:
                continue
            name = raw_name.strip()
            depth = (len(raw_name) - len(raw_name.lstrip()) - 1) // 2
            per_module.setdefault((name, depth), []).append((self_value, cumulative_value))
    return [
        ImportCost(
            name,
            depth,
            statistics.median(s for s, _ in samples),
            statistics.median(c for _, c in samples),
        )
        for (name, depth), samples in per_module.items()
    ]


# -- snapshot scaling -------------------------------------------------------------------------


def snapshot_scaling(ws: Workspace, cfg: Config, results: Results) -> None:
    for size in cfg.snapshot_sizes:
        _snapshot_one_size(ws, cfg, results, size)


def population_venv(ws: Workspace, results: Results, size: int) -> Venv:
    """The venv of ``size`` synthetic distributions, built on first use."""
    venv = Venv(ws.root / f"population-{size}")
    if venv.root.exists():
        return venv
    venv = ws.make_venv(venv.root.name)
    started = time.perf_counter()
    for spec in synthetic_population(size):
        write_installed(venv.site, spec)
    results.info[f"building the {size}-distribution venv"] = (
        f"{time.perf_counter() - started:.2f} s"
    )
    return venv


def _snapshot_one_size(ws: Workspace, cfg: Config, results: Results, size: int) -> None:
    venv = population_venv(ws, results, size)
    argv = [*tool_argv(), "-p", str(venv.root), "snapshot", "--no-stash"]
    cli = Series()

    def run_cli(warmup: bool) -> None:
        venv.clear_history()
        done = ws.run(argv)
        if f": {size} distributions" not in done.stdout:
            raise BenchError(f"snapshot did not see {size} distributions: {done.stdout!r}")
        if not warmup:
            cli.add_run(done)

    timed_rounds(cfg, [run_cli])
    ctx = inprocess.open_venv(venv)
    read, write, work = Series(), Series(), Series()

    def run_in_process(warmup: bool) -> None:
        venv.clear_history()
        done_work = inprocess.snapshot_work(ctx)
        if done_work.distributions != size:
            raise BenchError(f"in-process snapshot saw {done_work.distributions} of {size}")
        if not warmup:
            read.add(done_work.read_seconds)
            write.add(done_work.write_seconds)
            work.add(done_work.read_seconds + done_work.write_seconds)

    timed_rounds(cfg, [run_in_process])
    venv.clear_history()
    traced = inprocess.snapshot_traced_peak(ctx)
    venv.clear_history()
    section = "snapshot"
    results.add(
        section,
        f"`snapshot --no-stash`, {size} dists (subprocess, end to end)",
        cli,
        key=f"snapshot.cli.{size}",
    )
    results.add(section, f"  in-process installed_distributions(), {size} dists", read)
    results.add(section, f"  in-process take_snapshot(stash=()), {size} dists", write)
    results.add(
        section,
        f"  in-process work (the two above), {size} dists",
        work,
        key=f"snapshot.work.{size}",
        peak=f"{_mib(traced)} traced",
        note=f"{work.median / size * 1e6:.0f} µs per dist",
    )


# -- uninstall: safe-uninstall --no-probe vs uv vs pip ------------------------------------------


def uninstall_comparison(ws: Workspace, cfg: Config, results: Results) -> None:
    has_pip = bundled_pip_wheel() is not None
    venv = ws.make_venv("uninstall", with_pip=has_pip)
    small = small_dist("tinydist", files=cfg.small_files)
    _uninstall_one(ws, cfg, results, venv, "small", small, f"{len(small.files)} files")
    big = big_dist("cudalike", cfg.big_bytes, files=cfg.big_files)
    _uninstall_one(ws, cfg, results, venv, "big", big, f"{payload_label(big)} (sparse)")


def _uninstall_one(
    ws: Workspace,
    cfg: Config,
    results: Results,
    venv: Venv,
    case: str,
    spec: DistSpec,
    label: str,
) -> None:
    section = "uninstall"
    pristine = Pristine.create(ws.root / "pristine" / spec.name, spec)
    commands = {
        "tool": [*tool_argv(), "--no-probe", "-p", str(venv.root), spec.name],
        "tool_first": [*tool_argv(), "--no-probe", "-p", str(venv.root), spec.name],
        "uv": [ws.uv, "pip", "uninstall", "--python", str(venv.python), spec.name],
    }
    has_pip = (venv.python.parent / "pip").exists()
    if has_pip:
        commands["pip"] = [str(venv.python), "-m", "pip", "uninstall", "-y", spec.name]
    series = {name: Series() for name in commands}

    def step(name: str) -> Callable[[bool], None]:
        def run(warmup: bool) -> None:
            pristine.install_into(venv.site)
            venv.clear_history()
            # A user's next command keeps the caches the first one built (the interpreter
            # query, the record cache); "tool_first" is the first command in this venv, with none.
            if name == "tool_first":
                with venv.first_command():
                    done = ws.run(commands[name])
            else:
                done = ws.run(commands[name])
            if pristine.is_installed_in(venv.site):
                raise BenchError(f"{commands[name]} left {spec.name} installed")
            if not warmup:
                series[name].add_run(done)

        return run

    timed_rounds(cfg, [step(name) for name in commands])
    venv.clear_history()
    results.add(
        section,
        f"`safe-uninstall --no-probe`, {label}",
        series["tool"],
        key=f"uninstall.{case}.tool",
    )
    results.add(
        section,
        "  the same, first command in the venv (no interpreter or record cache yet)",
        series["tool_first"],
        key=f"uninstall.{case}.tool_first",
    )
    results.add(section, f"`uv pip uninstall`, {label}", series["uv"], key=f"uninstall.{case}.uv")
    if has_pip:
        results.add(
            section, f"`pip uninstall -y`, {label}", series["pip"], key=f"uninstall.{case}.pip"
        )
    else:
        results.not_measured(section, f"`pip uninstall -y`, {label}", "no bundled pip wheel")


def payload_label(spec: DistSpec) -> str:
    return f"{_size(spec.payload_bytes)} in {len(spec.files)} files"


# -- restore: from the stash vs uv warm cache vs cold install ---------------------------------


def restore_comparison(ws: Workspace, cfg: Config, results: Results) -> None:
    """The 1 GB distribution brought back three ways by the tool, and by uv.

    (a) ``rollback`` after a ``--no-probe`` removal: that process exits before its stash hasher
        finishes, so the rollback hashes every byte itself;
    (b) the restore step of a failing removal: the hasher ran while the probes did, so the
        restore re-reads nothing; timed inside the real command (bench/timed_cli.py);
    (c) transaction.restore() in this process, stash-verified.json complete: the mechanism alone.
    """
    section = "restore"
    spec = big_dist("cudalike", cfg.big_bytes, files=cfg.big_files)
    label = payload_label(spec)
    pristine = Pristine.create(ws.root / "pristine-restore" / spec.name, spec)
    started = time.perf_counter()
    wheel = write_wheel(ws.root / "wheels", spec)
    results.info[f"building the {label} wheel (deflate)"] = (
        f"{time.perf_counter() - started:.2f} s, {_mib(wheel.stat().st_size)} on disk"
    )
    binary_spec = big_dist("cudalike", cfg.big_bytes, files=cfg.big_files, binary_like=True)
    started = time.perf_counter()
    binary_wheel = write_wheel(ws.root / "wheels-binary-like", binary_spec)
    results.info[f"building the binary-like {label} wheel (deflate)"] = (
        f"{time.perf_counter() - started:.2f} s, {_mib(binary_wheel.stat().st_size)} on disk"
    )
    tool = tool_argv()
    stash_venv = ws.make_venv("restore-stash")
    uv_venv = ws.make_venv("restore-uv")
    warm_env = {**ws.env, "UV_CACHE_DIR": str(ws.root / "uv-cache-warm")}
    pin = f"{spec.name}=={spec.version}"
    from_links = ["--no-index", "--find-links", str(wheel.parent), "--no-deps", pin]
    first = ws.uv_pip(uv_venv, "install", *from_links, env=warm_env)
    results.info["first `uv pip install` of that wheel (fills the warm cache)"] = (
        f"{first.seconds:.2f} s"
    )
    # The probe of the failing removal: passes before, fails after the removal, each time
    # after sleeping, like an import that takes a while and then misses a library.
    failing_probe = (
        f"import importlib.metadata as m, time; time.sleep({cfg.probe_sleep}); "
        f"m.version({spec.name!r})"
    )
    timings_file = ws.root / "restore-timings.json"
    figures: dict[str, Series] = {
        key: Series()
        for key in (
            "rollback",
            "rollback_proven",
            "failing_total",
            "in_removal",
            "in_removal_wait",
            "in_removal_restore",
            "in_removal_verify",
            "in_process",
            "in_process_verify",
            "in_process_hashing",
            "link_only",
            "uv_warm",
            "uv_cold",
            "uv_cold_binary",
        )
    }
    finished_hashers = 0  # --no-probe removals whose hasher finished before the process exited

    def remove_with_tool() -> str:
        pristine.install_into(stash_venv.site)
        stash_venv.clear_history()
        done = ws.run([*tool, "--no-probe", "--json", "-p", str(stash_venv.root), spec.name])
        snapshot_id = json.loads(done.stdout)["snapshot"]
        if not isinstance(snapshot_id, str) or pristine.is_installed_in(stash_venv.site):
            raise BenchError(f"the removal before a restore did not happen: {done.stdout}")
        return snapshot_id

    def check_back(venv: Venv, what: str) -> None:
        if not pristine.is_installed_in(venv.site):
            raise BenchError(f"{what} did not bring {spec.name} back")

    def rollback_cli(snapshot_id: str) -> Timed:
        done = ws.run([*tool, "--no-probe", "-p", str(stash_venv.root), "rollback", snapshot_id])
        check_back(stash_venv, "safe-uninstall rollback")
        return done

    def tool_rollback(warmup: bool) -> None:
        nonlocal finished_hashers
        snapshot_id = remove_with_tool()
        if inprocess.forget_proof(inprocess.open_venv(stash_venv), snapshot_id):
            finished_hashers += 1
        done = rollback_cli(snapshot_id)
        if not warmup:
            figures["rollback"].add_run(done)

    def tool_rollback_proven(warmup: bool) -> None:
        snapshot_id = remove_with_tool()
        inprocess.prove_stash(inprocess.open_venv(stash_venv), snapshot_id)
        done = rollback_cli(snapshot_id)
        if not warmup:
            figures["rollback_proven"].add_run(done)

    def failing_removal(warmup: bool) -> None:
        pristine.install_into(stash_venv.site)
        stash_venv.clear_history()
        timings_file.unlink(missing_ok=True)
        argv = [sys.executable, str(TIMED_CLI), str(timings_file)]
        argv += ["-p", str(stash_venv.root), "--json", "--fresh-baseline"]
        argv += ["--probe", failing_probe, spec.name]
        done = ws.run(argv, check=False).check(3)
        outcome = json.loads(done.stdout)
        if outcome["outcome"] != "probe-failed-restored" or outcome["restore"]["reinstalled"]:
            raise BenchError(f"the failing removal did not restore from the stash: {done.stdout}")
        check_back(stash_venv, "the restore of a failing removal")
        clocks = json.loads(timings_file.read_text())
        if not warmup:
            figures["failing_total"].add_run(done)
            figures["in_removal"].add(clocks["restore_step"])
            figures["in_removal_wait"].add(clocks["hasher_wait"])
            figures["in_removal_restore"].add(clocks["restore"])
            figures["in_removal_verify"].add(clocks["verify"])

    def in_process(proven: bool) -> Callable[[bool], None]:
        def run(warmup: bool) -> None:
            snapshot_id = remove_with_tool()
            ctx = inprocess.open_venv(stash_venv)
            if proven:
                inprocess.prove_stash(ctx, snapshot_id)
            else:
                inprocess.forget_proof(ctx, snapshot_id)
            work = inprocess.restore_from_stash(ctx, snapshot_id, [spec.name])
            check_back(stash_venv, "transaction.restore")
            if warmup:
                return
            if proven:
                figures["in_process"].add(work.restore_seconds)
                figures["in_process_verify"].add(work.verify_seconds)
            else:
                figures["in_process_hashing"].add(work.restore_seconds)

        return run

    def link_only(warmup: bool) -> None:
        snapshot_id = remove_with_tool()
        ctx = inprocess.open_venv(stash_venv)
        seconds = inprocess.link_back_only(ctx, snapshot_id, [spec.name])
        check_back(stash_venv, "stash.restore_files")
        if not warmup:
            figures["link_only"].add(seconds)

    def uv_warm(warmup: bool) -> None:
        ws.uv_pip(uv_venv, "uninstall", spec.name)
        done = ws.uv_pip(uv_venv, "install", "--offline", *from_links, env=warm_env)
        check_back(uv_venv, "uv pip install (warm cache)")
        if not warmup:
            figures["uv_warm"].add_run(done)

    def cold_install(wheel_file: Path, series: Series, warmup: bool) -> None:
        ws.uv_pip(uv_venv, "uninstall", spec.name)
        cache = ws.root / "uv-cache-cold"
        shutil.rmtree(cache, ignore_errors=True)
        cold_env = {**ws.env, "UV_CACHE_DIR": str(cache)}
        done = ws.uv_pip(
            uv_venv, "install", "--offline", "--no-deps", str(wheel_file), env=cold_env
        )
        check_back(uv_venv, "uv pip install (cold)")
        shutil.rmtree(cache, ignore_errors=True)
        if not warmup:
            series.add_run(done)

    def uv_cold(warmup: bool) -> None:
        cold_install(wheel, figures["uv_cold"], warmup)

    def uv_cold_binary(warmup: bool) -> None:
        cold_install(binary_wheel, figures["uv_cold_binary"], warmup)

    steps = [
        tool_rollback,
        tool_rollback_proven,
        failing_removal,
        in_process(proven=True),
        in_process(proven=False),
        link_only,
        uv_warm,
        uv_cold,
        uv_cold_binary,
    ]
    timed_rounds(cfg, steps)
    stash_venv.clear_history()
    results.info["`--no-probe` removals whose stash hasher finished before the process exited"] = (
        f"{finished_hashers} of {cfg.runs + cfg.warmup} (their stash-verified.json was deleted "
        "before the `rollback` row, so that it always hashes)"
    )

    def add(what: str, key: str, note: str = "") -> None:
        results.add(section, what, figures[key], key=f"restore.{key}", note=note)

    add(
        f"(a) `safe-uninstall rollback` after `--no-probe`, {label}",
        "rollback",
        "end to end; the stash was never hash-checked: sha256 of every stashed byte",
    )
    add(
        "  `rollback` of a stash already hash-checked (stash-verified.json complete)",
        "rollback_proven",
        "end to end; as after a removal whose probe outlasted the hasher",
    )
    add(
        f"failing removal of it: baseline, remove, probe fails after {cfg.probe_sleep:g} s, "
        "restore (exit 3)",
        "failing_total",
        "end to end, `--fresh-baseline`; the baseline overlaps the snapshot and the stash",
    )
    add(
        "  (b) its restore step, timed inside the command",
        "in_removal",
        "the uninstall's restore step: hasher wait, restore, verify, outcome; no third probe run",
    )
    add("    of which waiting for the stash hasher", "in_removal_wait")
    add("    of which transaction.restore()", "in_removal_restore")
    add("    of which transaction.verify()", "in_removal_verify")
    add(
        "(c) in-process transaction.restore(), stash-verified.json complete",
        "in_process",
        "lstat of every stashed file, link back",
    )
    add("  in-process transaction.verify() after it", "in_process_verify")
    add(
        "  in-process transaction.restore(), no stash-verified.json",
        "in_process_hashing",
        "sha256 of every stashed byte, then link back",
    )
    add(
        "  in-process stash.restore_files() alone",
        "link_only",
        "link back only: no check before, no verify after",
    )
    add(f"`uv pip install --offline`, warm uv cache, {label}", "uv_warm")
    add(
        f"`uv pip install --offline` of the wheel file, empty uv cache, {label}",
        "uv_cold",
        "inflates and writes every byte (zeros inflate fast); stash and warm cache link",
    )
    add(
        "  the same, binary-like payload (deflates to ~50 %)",
        "uv_cold_binary",
        "closer to a real CUDA wheel's cold install",
    )


# -- probes: removals in units of one probe run ---------------------------------------------


def probe_multiples(ws: Workspace, cfg: Config, results: Results) -> None:
    """Failing and passing removals, with a fresh and with a cached baseline.

    The probe sleeps, then imports probepkg: it fails once probepkg is removed and passes when
    a spare package is. Each round runs, in this order (the cached cases rely on the one
    before them):

    - a failing removal with ``--fresh-baseline``: baseline (concurrent with the snapshot and
      stash), removal, failing probe, restore proven byte-identical, so no third run; its
      passing baseline is then cached for the restored environment;
    - the same failing removal again, without the flag: the baseline comes from that cache,
      and since no baseline ran in this call, the probe runs again after the restore;
    - the failing removal with ``--fresh-baseline --probe-after-restore``: three probe runs;
    - a passing removal of sparepkg with ``--fresh-baseline``: its passing probe is cached as
      the baseline of the environment it leaves;
    - a passing removal of sparepkg2 in that unchanged environment: cached baseline.
    """
    from tests.wheels import build_wheel

    section = "probe"
    house = ws.root / "probe-wheels"
    spares = ("sparepkg", "sparepkg2")
    build_wheel(house, "probepkg", "1.0", {"probepkg/__init__.py": "VALUE = 1\n"})
    for spare in spares:
        build_wheel(house, spare, "1.0", {f"{spare}/__init__.py": "VALUE = 2\n"})
    venv = ws.make_venv("probe")
    install = ["--no-index", "--find-links", str(house), "--no-deps"]
    ws.uv_pip(venv, "install", *install, "probepkg==1.0", *(f"{p}==1.0" for p in spares))
    code = f"import time; time.sleep({cfg.probe_sleep}); import probepkg"
    tool = [*tool_argv(), "-p", str(venv.root), "--json", "--probe", code]
    one = Series()

    def one_probe(warmup: bool) -> None:
        done = ws.run([str(venv.python), "-c", code])
        if not warmup:
            one.add_run(done)

    @dataclass(frozen=True)
    class Case:
        key: str
        what: str
        flags: tuple[str, ...]
        package: str
        exit_code: int
        cached: bool  # the baseline must come from the cache
        runs: int  # probe processes it must start
        series: Series = field(default_factory=Series)

    fresh = "--fresh-baseline"
    cases = [
        Case(
            "failing",
            "failing removal, fresh baseline: baseline, remove, probe fails, restore (exit 3)",
            (fresh,),
            "probepkg",
            3,
            cached=False,
            runs=2,
        ),
        Case(
            "failing_cached",
            "failing removal, cached baseline (the same removal again): the probe runs after "
            "the restore too, since no baseline ran in this call",
            (),
            "probepkg",
            3,
            cached=True,
            runs=2,
        ),
        Case(
            "failing_probe_after_restore",
            "failing removal, fresh baseline, `--probe-after-restore`",
            (fresh, "--probe-after-restore"),
            "probepkg",
            3,
            cached=False,
            runs=3,
        ),
        Case(
            "passing",
            "passing removal, fresh baseline: baseline, remove, probe passes (exit 0)",
            (fresh,),
            spares[0],
            0,
            cached=False,
            runs=2,
        ),
        Case(
            "passing_cached",
            "passing removal, cached baseline (a second removal in the unchanged environment)",
            (),
            spares[1],
            0,
            cached=True,
            runs=1,
        ),
    ]

    def removal(case: Case) -> Callable[[bool], None]:
        def run(warmup: bool) -> None:
            venv.clear_history()
            done = ws.run([*tool, *case.flags, case.package], check=False).check(case.exit_code)
            probes = json.loads(done.stdout)["probes"]
            baseline = probes["baseline"]
            started = sum(not p["cached"] for p in baseline)
            started += len(probes["after"]) + len(probes["after_restore"])
            if any(p["cached"] for p in baseline) != case.cached or started != case.runs:
                raise BenchError(f"{case.key}: not the probe runs this case measures: {probes}")
            if case.package in spares and case.package == spares[-1]:
                ws.uv_pip(venv, "install", *install, *(f"{p}==1.0" for p in spares))
            if not warmup:
                case.series.add_run(done)

        return run

    timed_rounds(cfg, [one_probe, *(removal(case) for case in cases)])
    venv.clear_history()
    results.add(
        section, f"one probe run (`python -c`, sleeps {cfg.probe_sleep:g} s)", one, key="probe.one"
    )
    for case in cases:
        multiple = case.series.median / one.median
        beyond = case.series.median - case.runs * one.median
        results.add(
            section,
            case.what,
            case.series,
            key=f"probe.{case.key}",
            note=f"{multiple:.2f} probe runs; {case.runs} run, {signed_ms(beyond)} beyond them",
        )


def signed_ms(seconds: float) -> str:
    return f"{seconds * 1000:+.0f} ms"


# -- a large environment: removal and rollback where the tool reads every distribution ------


HISTORY = 5  # earlier snapshots of the whole environment, for the rollback-with-history row


def large_environment(ws: Workspace, cfg: Config, results: Results) -> None:
    section = "large env"
    size = max(cfg.snapshot_sizes)
    venv = population_venv(ws, results, size)
    spec = small_dist("tinydist", files=cfg.small_files)
    pristine = Pristine.create(ws.root / "pristine-large" / spec.name, spec)
    tool = tool_argv()
    # The history is made once and copied in before each run that wants it.
    template = ws.root / f"history-{size}"
    venv.clear_history()
    for _ in range(HISTORY):
        ws.run([*tool, "-p", str(venv.root), "snapshot", "--no-stash"])
    shutil.copytree(Store(venv.state_dir).snapshots_dir, template)
    venv.clear_history()
    remove, uv_remove, rollback, rollback_history = (Series() for _ in range(4))

    def fresh_state(history: bool) -> None:
        venv.clear_history()
        if history:
            shutil.copytree(template, Store(venv.state_dir).snapshots_dir)

    def tool_remove(warmup: bool) -> None:
        pristine.install_into(venv.site)
        fresh_state(history=False)
        done = ws.run([*tool, "--no-probe", "-p", str(venv.root), spec.name])
        if not warmup:
            remove.add_run(done)

    def uv_uninstall(warmup: bool) -> None:
        pristine.install_into(venv.site)
        done = ws.uv_pip(venv, "uninstall", spec.name)
        if not warmup:
            uv_remove.add_run(done)

    def tool_rollback(history: bool, series: Series) -> Callable[[bool], None]:
        def run(warmup: bool) -> None:
            pristine.install_into(venv.site)
            fresh_state(history)
            removal = ws.run([*tool, "--no-probe", "--json", "-p", str(venv.root), spec.name])
            snapshot_id = json.loads(removal.stdout)["snapshot"]
            done = ws.run([*tool, "--no-probe", "-p", str(venv.root), "rollback", snapshot_id])
            if not pristine.is_installed_in(venv.site):
                raise BenchError("rollback in the large environment did not restore")
            if not warmup:
                series.add_run(done)

        return run

    timed_rounds(
        cfg,
        [
            tool_remove,
            uv_uninstall,
            tool_rollback(False, rollback),
            tool_rollback(True, rollback_history),
        ],
    )
    venv.clear_history()
    pristine.install_into(venv.site)
    label = f"{len(spec.files)}-file dist in a {size + 1}-dist env"
    results.add(section, f"`safe-uninstall --no-probe`, {label}", remove)
    results.add(
        section,
        f"`uv pip uninstall`, {label}",
        uv_remove,
        note=f"tool / uv = {remove.median / uv_remove.median:.1f}",
    )
    results.add(section, "`safe-uninstall rollback` of it, no earlier snapshots", rollback)
    results.add(
        section,
        f"`safe-uninstall rollback` of it, {HISTORY} earlier {size}-dist snapshots",
        rollback_history,
        note="only snapshots whose stash holds the distribution are read",
    )


# -- the impact report: metadata and ELF analysis before a removal ----------------------------


def impact_scaling(ws: Workspace, cfg: Config, results: Results) -> None:
    """The impact report of removing the four provider distributions (bench/impact.py builds
    the environments: ~4 gcc-built ELF objects per distribution, one in ten needing the
    providers' libraries through a torch-like RUNPATH), in this process at every size; and
    ``safe-uninstall check`` end to end at the target size."""
    if cfg.impact_target not in cfg.impact_sizes:
        raise BenchError(f"impact_target {cfg.impact_target} is not one of {cfg.impact_sizes}")
    for dists, elf_files in cfg.impact_sizes:
        venv = ws.make_venv(f"impact-{dists}")
        started = time.perf_counter()
        impact.populate_site(venv.site, ws.root / f"impact-build-{dists}", dists, elf_files)
        results.info[f"building the {dists}-distribution impact venv"] = (
            f"{time.perf_counter() - started:.2f} s"
        )
        _impact_one_size(ws, cfg, results, venv, dists)
        if (dists, elf_files) == cfg.impact_target:
            _impact_check_command(ws, cfg, results, venv, dists)


def _impact_one_size(ws: Workspace, cfg: Config, results: Results, venv: Venv, dists: int) -> None:
    ctx = inprocess.open_venv(venv)
    series = Series()
    seen: list[impact.ImpactRun] = []

    def once(warmup: bool) -> None:
        done = impact.report_once(ctx.interpreter, ws.env)
        if done.breaks == 0:
            raise BenchError(f"the impact report found no broken library at {dists} dists")
        seen.append(done)
        if not warmup:
            series.add(done.seconds)

    timed_rounds(cfg, [once])
    shape = f"{seen[0].distributions} dists, {seen[0].elf_objects} ELF files"
    results.add(
        "impact report",
        f"in-process impact report, {shape}",
        series,
        key=f"impact.{dists}",
        note=f"{seen[0].breaks} broken (object, library) links found",
    )


def _impact_check_command(
    ws: Workspace, cfg: Config, results: Results, venv: Venv, dists: int
) -> None:
    argv = [*tool_argv(), "-p", str(venv.root), "check", "--json", *impact.PROVIDERS]
    series = Series()

    def once(warmup: bool) -> None:
        done = ws.run(argv)
        if not json.loads(done.stdout)["impact"]["breaks"]:
            raise BenchError(f"`check` found no broken library: {done.stdout[:2000]}")
        if not warmup:
            series.add_run(done)

    timed_rounds(cfg, [once])
    results.add(
        "impact report",
        f"`safe-uninstall check` of the four, {dists} dists (end to end)",
        series,
        key="impact.check",
    )


def real_stacks(ws: Workspace, cfg: Config, results: Results) -> None:
    """The CUDA torch venv and a large ML venv (bench/realstacks.py)."""
    from . import realstacks  # it imports this module

    realstacks.run(ws, cfg, results)


def bisect_rounds(ws: Workspace, cfg: Config, results: Results) -> None:
    """The probe rounds of bisect's search against the bound (bench/bisect_rounds.py)."""
    from . import bisect_rounds  # it imports this module

    bisect_rounds.rounds(cfg, results)


def bisect_torch(ws: Workspace, cfg: Config, results: Results) -> None:
    """A bisect of the CUDA torch venv: a round's cost beyond its probe (bench/bisect_rounds.py)."""
    from . import bisect_rounds

    bisect_rounds.torch(ws, cfg, results)


SCENARIOS: tuple[Callable[[Workspace, Config, Results], None], ...] = (
    startup,
    snapshot_scaling,
    uninstall_comparison,
    restore_comparison,
    probe_multiples,
    large_environment,
    impact_scaling,
    real_stacks,
    bisect_rounds,
    bisect_torch,
)


def run_all(
    ws: Workspace,
    cfg: Config,
    *,
    progress: Callable[[str], None] = lambda _: None,
    only: Sequence[str] = (),
) -> Results:
    """Every scenario in turn, or those named in ``only``."""
    known = [scenario.__name__ for scenario in SCENARIOS]
    unknown = [name for name in only if name not in known]
    if unknown:
        raise BenchError(f"no scenario {', '.join(unknown)}; there are {', '.join(known)}")
    results = Results(config=cfg)
    for scenario in SCENARIOS:
        if only and scenario.__name__ not in only:
            continue
        progress(scenario.__name__)
        scenario(ws, cfg, results)
    return results
