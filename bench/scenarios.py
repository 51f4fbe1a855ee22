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

from . import inprocess
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

IMPACT_PLACEHOLDER = "not measured: impact report not implemented"


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


FULL = Config(label="full", runs=7)
QUICK = Config(label="quick", runs=3, big_bytes=200 * 10**6, probe_sleep=0.5, importtime_runs=3)
# For the smoke test: every code path once, at a size where time means nothing.
SMOKE = Config(
    label="smoke",
    runs=1,
    snapshot_sizes=(2, 5),
    big_bytes=10**6,
    probe_sleep=0.05,
    importtime_runs=1,
    warmup=False,
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


def _timed_rounds(cfg: Config, steps: Sequence[Callable[[bool], None]]) -> None:
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

    _timed_rounds(cfg, [step(label) for label in commands])
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
        venv.reset_state()
        done = ws.run(argv)
        if f": {size} distributions" not in done.stdout:
            raise BenchError(f"snapshot did not see {size} distributions: {done.stdout!r}")
        if not warmup:
            cli.add_run(done)

    _timed_rounds(cfg, [run_cli])
    ctx = inprocess.open_context(venv)
    read, write, work = Series(), Series(), Series()

    def run_in_process(warmup: bool) -> None:
        venv.reset_state()
        done_work = inprocess.snapshot_work(ctx)
        if done_work.distributions != size:
            raise BenchError(f"in-process snapshot saw {done_work.distributions} of {size}")
        if not warmup:
            read.add(done_work.read_seconds)
            write.add(done_work.write_seconds)
            work.add(done_work.read_seconds + done_work.write_seconds)

    _timed_rounds(cfg, [run_in_process])
    venv.reset_state()
    traced = inprocess.snapshot_traced_peak(ctx)
    venv.reset_state()
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
        "uv": [ws.uv, "pip", "uninstall", "--python", str(venv.python), spec.name],
    }
    has_pip = (venv.python.parent / "pip").exists()
    if has_pip:
        commands["pip"] = [str(venv.python), "-m", "pip", "uninstall", "-y", spec.name]
    series = {name: Series() for name in commands}

    def step(name: str) -> Callable[[bool], None]:
        def run(warmup: bool) -> None:
            pristine.install_into(venv.site)
            venv.reset_state()
            done = ws.run(commands[name])
            if pristine.is_installed_in(venv.site):
                raise BenchError(f"{commands[name]} left {spec.name} installed")
            if not warmup:
                series[name].add_run(done)

        return run

    _timed_rounds(cfg, [step(name) for name in commands])
    venv.reset_state()
    results.add(
        section,
        f"`safe-uninstall --no-probe`, {label}",
        series["tool"],
        key=f"uninstall.{case}.tool",
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


# -- restore: rollback from the stash vs uv warm cache vs cold install -------------------------


def restore_comparison(ws: Workspace, cfg: Config, results: Results) -> None:
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
    rollback, in_restore, in_verify, in_link, warm, cold, cold_binary = (Series() for _ in range(7))

    def remove_with_tool() -> str:
        pristine.install_into(stash_venv.site)
        stash_venv.reset_state()
        done = ws.run([*tool, "--no-probe", "--json", "-p", str(stash_venv.root), spec.name])
        snapshot_id = json.loads(done.stdout)["snapshot"]
        if not isinstance(snapshot_id, str) or pristine.is_installed_in(stash_venv.site):
            raise BenchError(f"the removal before a restore did not happen: {done.stdout}")
        return snapshot_id

    def check_back(venv: Venv, what: str) -> None:
        if not pristine.is_installed_in(venv.site):
            raise BenchError(f"{what} did not bring {spec.name} back")

    def tool_rollback(warmup: bool) -> None:
        snapshot_id = remove_with_tool()
        done = ws.run([*tool, "--no-probe", "-p", str(stash_venv.root), "rollback", snapshot_id])
        check_back(stash_venv, "safe-uninstall rollback")
        if not warmup:
            rollback.add_run(done)

    def in_process(warmup: bool) -> None:
        snapshot_id = remove_with_tool()
        ctx = inprocess.open_context(stash_venv)
        work = inprocess.restore_from_stash(ctx, snapshot_id, [spec.name])
        check_back(stash_venv, "transaction.restore")
        if not warmup:
            in_restore.add(work.restore_seconds)
            in_verify.add(work.verify_seconds)

    def link_only(warmup: bool) -> None:
        snapshot_id = remove_with_tool()
        ctx = inprocess.open_context(stash_venv)
        seconds = inprocess.link_back_only(ctx, snapshot_id, [spec.name])
        check_back(stash_venv, "stash.restore_files")
        if not warmup:
            in_link.add(seconds)

    def uv_warm(warmup: bool) -> None:
        ws.uv_pip(uv_venv, "uninstall", spec.name)
        done = ws.uv_pip(uv_venv, "install", "--offline", *from_links, env=warm_env)
        check_back(uv_venv, "uv pip install (warm cache)")
        if not warmup:
            warm.add_run(done)

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
        cold_install(wheel, cold, warmup)

    def uv_cold_binary(warmup: bool) -> None:
        cold_install(binary_wheel, cold_binary, warmup)

    steps = [tool_rollback, in_process, link_only, uv_warm, uv_cold, uv_cold_binary]
    _timed_rounds(cfg, steps)
    stash_venv.reset_state()
    results.add(
        section,
        f"`safe-uninstall rollback` after `--no-probe`, {label}",
        rollback,
        key="restore.rollback",
    )
    results.add(
        section,
        f"  in-process transaction.restore(), {label}",
        in_restore,
        key="restore.in_process",
        note="sha256 of every stashed byte, then link back",
    )
    results.add(section, f"  in-process transaction.verify(), {label}", in_verify)
    results.add(
        section,
        f"  in-process stash.restore_files() alone, {label}",
        in_link,
        key="restore.link_only",
        note="link back only: no sha256 before, no verify after",
    )
    results.add(
        section,
        f"`uv pip install --offline`, warm uv cache, {label}",
        warm,
        key="restore.uv_warm",
    )
    results.add(
        section,
        f"`uv pip install --offline` of the wheel file, empty uv cache, {label}",
        cold,
        key="restore.uv_cold",
        note="inflates and writes every byte (zeros inflate fast); stash and warm cache link",
    )
    results.add(
        section,
        f"  the same, binary-like payload (deflates to ~50 %), {label}",
        cold_binary,
        key="restore.uv_cold_binary",
        note="closer to a real CUDA wheel's cold install",
    )


# -- probes: a failing and a passing removal in units of one probe run --------------------------


def probe_multiples(ws: Workspace, cfg: Config, results: Results) -> None:
    from tests.wheels import build_wheel

    section = "probe"
    house = ws.root / "probe-wheels"
    build_wheel(house, "probepkg", "1.0", {"probepkg/__init__.py": "VALUE = 1\n"})
    build_wheel(house, "sparepkg", "1.0", {"sparepkg/__init__.py": "VALUE = 2\n"})
    venv = ws.make_venv("probe")
    install = ["--no-index", "--find-links", str(house), "--no-deps"]
    ws.uv_pip(venv, "install", *install, "probepkg==1.0", "sparepkg==1.0")
    code = f"import time; time.sleep({cfg.probe_sleep}); import probepkg"
    tool = [*tool_argv(), "-p", str(venv.root), "--json", "--probe", code]
    one, failing, passing, failing_rest, passing_rest = (Series() for _ in range(5))

    def probe_seconds(done: Timed) -> float:
        probes = json.loads(done.stdout)["probes"]
        phases = ("baseline", "after", "after_restore")
        return float(sum(p["seconds"] for phase in phases for p in probes[phase]))

    def one_probe(warmup: bool) -> None:
        done = ws.run([str(venv.python), "-c", code])
        if not warmup:
            one.add_run(done)

    def failing_removal(warmup: bool) -> None:
        venv.reset_state()
        done = ws.run([*tool, "probepkg"], check=False).check(3)
        if not warmup:
            failing.add_run(done)
            failing_rest.add(done.seconds - probe_seconds(done))

    def passing_removal(warmup: bool) -> None:
        venv.reset_state()
        done = ws.run([*tool, "sparepkg"])
        ws.uv_pip(venv, "install", *install, "sparepkg==1.0")
        if not warmup:
            passing.add_run(done)
            passing_rest.add(done.seconds - probe_seconds(done))

    _timed_rounds(cfg, [one_probe, failing_removal, passing_removal])
    venv.reset_state()
    results.add(
        section, f"one probe run (`python -c`, sleeps {cfg.probe_sleep:g} s)", one, key="probe.one"
    )
    results.add(
        section,
        "failing removal: baseline, remove, probe fails, restore, probe (exit 3)",
        failing,
        key="probe.failing",
    )
    results.add(
        section,
        "  of which not inside a probe (total - probe seconds the tool reports)",
        failing_rest,
    )
    results.add(
        section, "passing removal: baseline, remove, probe (exit 0)", passing, key="probe.passing"
    )
    results.add(
        section,
        "  of which not inside a probe (total - probe seconds the tool reports)",
        passing_rest,
    )


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
    venv.reset_state()
    for _ in range(HISTORY):
        ws.run([*tool, "-p", str(venv.root), "snapshot", "--no-stash"])
    shutil.copytree(venv.state_dir, template)
    venv.reset_state()
    remove, uv_remove, rollback, rollback_history = (Series() for _ in range(4))

    def fresh_state(history: bool) -> None:
        venv.reset_state()
        if history:
            shutil.copytree(template, venv.state_dir)

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

    _timed_rounds(
        cfg,
        [
            tool_remove,
            uv_uninstall,
            tool_rollback(False, rollback),
            tool_rollback(True, rollback_history),
        ],
    )
    venv.reset_state()
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
        note="every snapshot is read to index the stashes",
    )


def impact_placeholder(ws: Workspace, cfg: Config, results: Results) -> None:
    results.not_measured("impact report", "impact report vs environment size", IMPACT_PLACEHOLDER)


SCENARIOS: tuple[Callable[[Workspace, Config, Results], None], ...] = (
    startup,
    snapshot_scaling,
    uninstall_comparison,
    restore_comparison,
    probe_multiples,
    large_environment,
    impact_placeholder,
)


def run_all(
    ws: Workspace, cfg: Config, *, progress: Callable[[str], None] = lambda _: None
) -> Results:
    results = Results(config=cfg)
    for scenario in SCENARIOS:
        progress(scenario.__name__)
        scenario(ws, cfg, results)
    return results
