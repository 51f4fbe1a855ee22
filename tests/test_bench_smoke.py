"""The benchmarks (bench/) run end to end at a tiny size: every scenario works and yields numbers.

Nothing about time is asserted here; `python bench/run.py` measures and judges that.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from bench import bisect_rounds, realstacks, report, scenarios
from bench.dists import big_dist, record_hash, small_dist, write_installed, zeros_record_hash
from bench.envs import Workspace, bundled_pip_wheel, tool_argv
from bench.inprocess import open_venv
from safeuninstall.environment.installed import installed_distributions
from safeuninstall.transaction.restore import RestoreReport, verify
from safeuninstall.transaction.transaction import SnapshotSpec, take_snapshot
from tests.conftest import UV, run_tool
from tests.realstack import Stacks

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def test_zeros_hash_is_the_hash_of_zero_bytes() -> None:
    for size in (0, 1, 1024 * 1024 + 7):
        assert zeros_record_hash(size) == record_hash(bytes(size))


def test_directly_written_distributions_verify_against_their_record(tmp_path: Path) -> None:
    """What the benchmarks write into site-packages is what the tool accepts as installed: the
    sparse files hash to their RECORD entries."""
    ws = Workspace.create(tmp_path / "bench")
    venv = ws.make_venv("venv")
    specs = [small_dist("tinydist", files=3), big_dist("cudalike", 3 * 10**6, files=4)]
    for spec in specs:
        write_installed(venv.site, spec)
    ctx = open_venv(venv)
    installed = installed_distributions(ctx.interpreter)
    assert {n: d.version for n, d in installed.items()} == {"tinydist": "1.0", "cudalike": "1.0"}
    snap = take_snapshot(ctx, installed, ctx.store.new_folder(), SnapshotSpec(operation="snapshot"))
    # As if all were reinstalled: every file is hashed against its RECORD.
    verification = verify(snap, ctx.interpreter, RestoreReport(reinstalled_names=sorted(installed)))
    assert verification.ok, verification.describe()
    # the payload files, and each distribution's METADATA, INSTALLER and WHEEL
    assert verification.files_checked == 3 + 4 + 3 * 2


def _stated_verdict(threshold: str, measured: float) -> bool:
    """What a target's threshold, as the report shows it ("<= 0.6", ">= 50", "< 0.5 s"), says
    of ``measured``."""
    operator, limit = threshold.removesuffix(" s").split()
    compare = {
        "<=": measured <= float(limit),
        ">=": measured >= float(limit),
        "<": measured < float(limit),
        ">": measured > float(limit),
    }
    return compare[operator]


def _run(ws: Workspace, names: list[str]) -> scenarios.Results:
    """The scenarios ``names`` at the smoke size, each alone, their results together."""
    results = scenarios.Results(config=scenarios.SMOKE)
    ran: list[str] = []
    for name in names:
        part = scenarios.run_all(ws, scenarios.SMOKE, progress=ran.append, only=[name])
        figures = [row for row in part.rows if row.runs is not None]
        assert figures or part.values, f"{name}: no figure"
        results.rows += part.rows
        results.values.update(part.values)
        results.imports += part.imports
        results.info.update(part.info)
    assert ran == names  # each once, alone
    return results


def _check(
    results: scenarios.Results, expected_gaps: list[tuple[str, str]], targets_of: str = ""
) -> None:
    """Every figure is a number, every target's verdict (of those named ``targets_of``...)
    the one its threshold states, and the report shows them all."""
    smoke = results.config
    for row in results.rows:
        if row.runs is not None:
            # the hasher may have finished before the restore asked: a wait of 0 is a figure too
            assert row.runs == smoke.runs and row.seconds is not None, row
            assert math.isfinite(row.seconds) and row.seconds >= 0, row
    assert [(row.section, row.note) for row in results.rows if row.runs is None] == expected_gaps

    targets = report.evaluate(results)
    assert any(t.judged for t in targets)
    for target in targets:
        if not target.name.startswith(targets_of):
            continue
        if target.measured is None:  # only what the missing pip wheel leaves unmeasured
            assert bundled_pip_wheel() is None and "pip" in target.detail, target
            continue
        assert math.isfinite(target.measured) and target.measured >= 0, target
        # the verdict is the one the threshold shown beside it states
        assert target.passed == _stated_verdict(target.threshold, target.measured), target

    text = report.render(results, {"machine": "test"})
    assert "- machine: test" in text
    for row in results.rows:
        assert row.what.replace("|", "\\|") in text, row
    for target in targets:
        assert target.name in text, target
    verdicts = sum(line.count("| PASS |") + line.count("| FAIL |") for line in text.splitlines())
    assert verdicts == sum(t.passed is not None for t in targets if t.judged)


REAL = (scenarios.real_stacks, scenarios.bisect_torch)
SYNTHETIC = [s.__name__ for s in scenarios.SCENARIOS if s not in REAL]


def test_every_synthetic_scenario_runs_and_yields_numbers(tmp_path: Path) -> None:
    results = _run(Workspace.create(tmp_path / "bench"), SYNTHETIC)
    expected_gaps = []
    if bundled_pip_wheel() is None:
        expected_gaps = [("uninstall", "no bundled pip wheel")] * 2
    _check(results, expected_gaps)
    assert results.imports, "no -X importtime figures were parsed"
    # bisect's rounds: every count of the smoke size, each named beside its bound
    counted = [t for t in report.evaluate(results) if t.name.startswith("bisect rounds")]
    assert len(counted) == len(scenarios.SMOKE.bisect_sizes) * len(bisect_rounds.CULPRITS)
    text = report.render(results, {})
    assert "| 8 | 1 | 8 (every one) |" in text


def test_the_real_stack_scenarios_run_and_yield_numbers(tmp_path: Path, stacks: Stacks) -> None:
    """The torch stack (the test tier's cache has it) once: every real-stack command of the
    bench runs there beside uv and pip; the 62,767-file ML venv is left to `bench/run.py`."""
    assert scenarios.SMOKE.stacks == ("torch",)
    assert scenarios.real_stacks in scenarios.SCENARIOS
    # This build against itself: the paired rows and their ratio targets (bench/run.py --against)
    smoke = dataclasses.replace(scenarios.SMOKE, against=tool_argv()[0])
    results = scenarios.Results(config=smoke)
    # The session's cache, opened before this test's clean environment hid the machine's pip
    # configuration (its local index mirrors, where the torch wheels came from).
    realstacks.run(Workspace.create(tmp_path / "bench"), smoke, results, stacks)
    expected_gaps = []
    if bundled_pip_wheel() is None:
        expected_gaps += [("real: torch", "no bundled pip wheel")]
    if "  audit " not in run_tool("--help").stdout:
        expected_gaps += [("real: torch", "no audit command in this build")]
    _check(results, expected_gaps, targets_of="torch: ")
    assert {key for key in results.values if key.startswith("real.torch.")} >= {
        f"real.torch.{key}"
        for key in (
            "tool",
            "uv",
            "import",
            "probe",
            "failing",
            "failing_again",
            "passing_cached",
            "hand_failing",
            "hand_passing",
            "hand_uninstall_probe",
            "check",
        )
    }
    paired = [t for t in report.evaluate(results) if "--against's build" in t.name]
    assert [t.name.split("`")[1] for t in paired] == ["snapshots"]
    assert all(t.measured is not None and t.measured > 0 for t in paired), paired
    assert results.values["real.torch.doctor_vs_against"] > 0
    # The guard by hand is the probe, the uninstall and the probe: more than its last two steps.
    values = results.values
    assert values["real.torch.hand_passing"] > values["real.torch.hand_uninstall_probe"]
    assert any(t.name.startswith("torch: ") for t in report.evaluate(results))


def test_the_torch_bisect_scenario_runs_and_yields_numbers(tmp_path: Path, stacks: Stacks) -> None:
    """One bisect of the torch stack from a GOOD snapshot with nvidia-nccl-cu13, among the
    smoke size's harmless changes: its whole time, its rounds' probes and what a round costs
    beyond its probe, each a number."""
    smoke = scenarios.SMOKE
    results = scenarios.Results(config=smoke)
    bisect_rounds.torch(Workspace.create(tmp_path / "bench"), smoke, results, stacks)
    _check(results, [], targets_of="torch: bisect")
    assert {key for key in results.values if key.startswith("bisect.torch.")} == {
        f"bisect.torch.{key}"
        for key in ("units", "rounds", "whole", "probe", "passing", "failing", "beyond", "move")
    }
    assert results.values["bisect.torch.units"] == 1 + smoke.bisect_harmless
    # the rounds the command listed are those the in-process count gives (nccl sorts last)
    units = 1 + smoke.bisect_harmless
    assert results.values["bisect.torch.rounds"] == bisect_rounds.count_rounds(units, (units - 1,))
    (rounds,) = [t for t in report.evaluate(results) if t.name.startswith("torch: bisect")]
    assert rounds.passed is not None


def test_the_guarded_install_bench_yields_a_figure_per_command(tmp_path: Path) -> None:
    from bench import guarded

    figures = guarded.measure(tmp_path / "bench", runs=1, population=3)

    assert set(figures.medians) == set(guarded.COMMANDS)
    assert all(seconds > 0 for seconds in figures.medians.values())
    assert figures.files > 3  # what the snapshot links: each distribution has several files
    assert "| run --no-probe |" in figures.table()
