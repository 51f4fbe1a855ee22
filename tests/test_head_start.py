"""The baseline's head start: begun before the core is imported, taken over only when valid.

Each probe appends a character to a file when it starts, so the number of probe runs is exact;
the head start's own run is awaited before the core is called, so a head start that is wrongly
thrown away still shows up as one run too many.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from safeuninstall import config, options
from safeuninstall.base.outcome import Outcome
from safeuninstall.judgement import probe
from safeuninstall.judgement.kinds import CandidateKind, ProbeKind
from safeuninstall.judgement.probe import probes_from
from safeuninstall.operations.results import RemovalResult
from safeuninstall.operations.uninstall import uninstall
from safeuninstall.session import baseline
from safeuninstall.session.context import Context, open_context
from tests.conftest import MakeVenv, Venv, running, tagged_processes, wait_for


class _Command:
    """One command's context, opened once and handed to the head start and the operation,
    as the CLI does."""

    def __init__(self, target: options.TargetOptions, probes: tuple[str, ...]) -> None:
        self.target = target
        self.ctx: Context = open_context(target)
        settings = config.resolve(target.cwd, target.environ, {"probe": probes})
        self.probes = probes_from(settings, disabled=False, cwd=target.cwd)  # as --probe

    def head_start(self, wanted: options.UninstallOptions) -> baseline.HeadStart | None:
        return baseline.head_start(self.ctx, self.probes, wanted)

    def uninstall(
        self, wanted: options.UninstallOptions, early: baseline.HeadStart | None
    ) -> RemovalResult:
        return uninstall(self.ctx, self.probes, wanted, early)


def _call(venv: Venv, tmp_path: Path) -> tuple[_Command, tuple[str, ...], Path]:
    runs = tmp_path / "probe-runs.txt"
    environ = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    target = options.TargetOptions(python=str(venv.root), cwd=tmp_path, environ=environ)
    probe = f"open({str(runs)!r}, 'a').write('x'); import requests"
    probes = (probe,)
    return _Command(target, probes), probes, runs


def _started(target: _Command, probes: tuple[str, ...]) -> baseline.HeadStart:
    early = target.head_start(options.UninstallOptions(names=("leftpad",)))
    assert early is not None
    assert early.baseline.running is not None  # no cached pass yet: the probe runs
    assert all(r.passed for r in early.baseline.results())  # waits for it
    return early


@contextlib.contextmanager
def _lock_held(venv: Venv, *, seconds: float) -> Iterator[None]:
    """Another operation holds the environment's lock for ``seconds`` from now, in a thread."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with venv.state.locked(5.0):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    threading.Timer(seconds, release.set).start()
    try:
        yield
    finally:
        release.set()
        holder.join()


@contextlib.contextmanager
def _lock_held_until(venv: Venv, done: Callable[[], bool]) -> Iterator[list[str]]:
    """Another operation holds the environment's lock until ``done()``, in a thread; yields
    what released it: "probe gone", or "timeout" after 30 s (within the 60 s lock timeout)."""
    held, released = threading.Event(), []

    def hold() -> None:
        with venv.state.locked(5.0):
            held.set()
            deadline = time.monotonic() + 30
            while not done():
                if time.monotonic() > deadline:
                    released.append("timeout")
                    return
                time.sleep(0.02)
            released.append("probe gone")

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        yield released
    finally:
        holder.join()


def test_a_valid_head_start_is_taken_over(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("requests", "leftpad")
    target, probes, runs = _call(venv, tmp_path)
    early = _started(target, probes)
    result = target.uninstall(options.UninstallOptions(names=("leftpad",)), early)
    assert result.outcome is Outcome.REMOVED
    assert runs.read_text() == "xx"  # the head start's baseline and the probe after: no third
    assert [r.cached for r in result.probes.baseline] == [False]


def test_a_head_start_in_a_changed_environment_is_thrown_away(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv("requests", "leftpad", "toolpkg")
    target, probes, runs = _call(venv, tmp_path)
    early = _started(target, probes)
    venv.uv("pip", "uninstall", "--python", str(venv.python), "toolpkg")  # in between
    result = target.uninstall(options.UninstallOptions(names=("leftpad",)), early)
    assert result.outcome is Outcome.REMOVED
    assert runs.read_text() == "xxx"  # the baseline ran again in the environment it judges


def test_a_head_start_is_thrown_away_when_the_lock_was_busy(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Another operation held the environment: it may have changed it and put it back."""
    venv = make_venv("requests", "leftpad")
    target, probes, runs = _call(venv, tmp_path)
    early = _started(target, probes)
    with _lock_held(venv, seconds=0.3):
        result = target.uninstall(options.UninstallOptions(names=("leftpad",)), early)
    assert result.outcome is Outcome.REMOVED
    assert runs.read_text() == "xxx"


def test_no_probe_outlives_the_command(make_venv: MakeVenv, process_tag: dict[str, str]) -> None:
    """The head start begins before the core knows there is nothing to remove; it is stopped."""
    venv = make_venv("requests")
    probe = "import time; time.sleep(600)"
    run = venv.tool("--probe", probe, "leftpad", **process_tag)  # not installed: nothing to do
    assert run.returncode == 0, run.stderr
    assert "nothing to do" in run.stdout
    assert tagged_processes(process_tag) == [], "the head start's probe outlived the command"


def test_a_head_start_is_thrown_away_after_another_operation_came_and_went(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """A snapshot taken in between leaves the installed set as it was (same fingerprint) and the
    lock free by the time the removal asks for it; the newer snapshot still shows it."""
    venv = make_venv("requests", "leftpad")
    target, probes, runs = _call(venv, tmp_path)
    early = _started(target, probes)
    assert venv.tool("snapshot").returncode == 0
    result = target.uninstall(options.UninstallOptions(names=("leftpad",)), early)
    assert result.outcome is Outcome.REMOVED
    assert runs.read_text() == "xxx"


def test_a_variable_that_is_not_utf8_does_not_stop_a_removal(make_venv: MakeVenv) -> None:
    """It reaches Python as surrogate escapes; the fingerprint hashes it as the bytes it is."""
    venv = make_venv("requests", "leftpad")
    run = venv.tool("--probe", "import requests", "leftpad", NOT_UTF8="caf\udce9")
    assert run.returncode == 0, run.stderr
    assert "leftpad" not in venv.installed()


def test_a_head_start_is_stopped_as_soon_as_the_removal_waits_for_the_lock(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Another operation holds the environment: the head start's probe must not go on running
    in an environment that operation is changing."""
    venv = make_venv("requests", "leftpad")
    target, _, _ = _call(venv, tmp_path)
    slow, started = tmp_path / "slow", tmp_path / "started"
    probe = (
        "import os, pathlib, time\n"
        f"if pathlib.Path({str(slow)!r}).exists():\n"
        f"    pathlib.Path({str(started)!r} + '.tmp').write_text(str(os.getpid()))\n"
        f"    os.replace({str(started)!r} + '.tmp', {str(started)!r})\n"
        "    time.sleep(600)\n"
        "import requests\n"
    )
    probes = (probe,)
    wanted = options.UninstallOptions(names=("leftpad",))
    slow.touch()
    command = _Command(target.target, probes)
    early = command.head_start(wanted)
    assert early is not None
    wait_for(started)
    pid = int(started.read_text())
    slow.unlink()  # the probes the removal runs itself are quick
    with _lock_held_until(venv, lambda: not running(pid)) as released:
        result = command.uninstall(wanted, early)
    assert result.outcome is Outcome.REMOVED
    assert released == ["probe gone"], (
        "the head start's probe ran on while another operation held on"
    )


# -- the derived probe's head start: a plan of the same removal derived before ------------


def _steps(run_json: dict[str, object]) -> list[str]:
    events = run_json["events"]
    assert isinstance(events, list)
    return [e["step"] for e in events]


def _derived_venv(make_venv: MakeVenv, tmp_path: Path) -> tuple[Venv, Path]:
    """firstuser and seconduser need basepkg; seconduser notes each import in the marker."""
    from tests.test_derived_probe import stop_wheels

    house, marker = tmp_path / "house", tmp_path / "imports"
    stop_wheels(house, marker)
    venv = make_venv()
    venv.install("firstuser", "seconduser", find_links=house)
    marker.unlink(missing_ok=True)
    return venv, marker


def test_a_removal_asked_again_begins_its_derived_baseline_before_the_impact_report(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The failing removal's critical path: the derived probe is known from the impact report,
    so its baseline began only after it; asked again in the same installed set (here: after
    the restore), the plan of the first derivation begins it at once, and it is taken over."""
    venv, marker = _derived_venv(make_venv, tmp_path)
    before = venv.file_hashes()
    first = venv.tool("--json", "--allow-unmet", "basepkg")
    assert first.returncode == 3, first.stdout + first.stderr
    steps = _steps(first.json())
    assert steps.index("impact") < steps.index("baseline")  # nothing to begin from before
    assert marker.read_text() == "x"  # the baseline's import; after the removal: skipped
    again = venv.tool("--json", "--allow-unmet", "--fresh-baseline", "basepkg")
    assert again.returncode == 3, again.stdout + again.stderr
    steps = _steps(again.json())
    assert steps.index("baseline") < steps.index("impact")
    assert marker.read_text() == "xx", "the head start's baseline was begun again"
    probes = again.json()["probes"]
    assert isinstance(probes, dict)
    assert [r["cached"] for r in probes["baseline"]] == [False]
    assert probes["planned"] == first.json()["probes"]["planned"]  # type: ignore[index]
    assert venv.file_hashes() == before


def _plan(venv: Venv, tmp_path: Path, *candidates: probe.Candidate) -> None:
    """A plan for ``--allow-unmet basepkg`` in the venv as it is, written as the tool would."""
    ctx = open_context(options.TargetOptions(python=str(venv.root), cwd=tmp_path, environ={}))
    derived = probe.Probe(
        kind=ProbeKind.DERIVED,
        code=probe.derived_code(candidates),
        origin="derived",
        candidates=candidates,
    )
    baseline.DerivedPlans(ctx.store.root).put(
        options.UninstallOptions(names=("basepkg",)),
        ctx.interpreter,
        probe.ProbeSettings(probes=(derived,)),
    )


def _plans(venv: Venv) -> dict[str, Any]:
    """derived-plans.json: what was asked, in which installed set -> its plan."""
    plans = json.loads((venv.root / ".safe-uninstall" / baseline.PLANS_FILE).read_text())
    assert isinstance(plans, dict)
    return plans


def _replaced_by_the_derivation(venv: Venv, written: dict[str, object]) -> None:
    """The removal looked the written plan up (it wrote its own derivation's in its place, under
    the same key, not beside it): a plan it never found would be refused by no check at all."""
    plans = _plans(venv)
    assert plans.keys() == written.keys(), "the removal never looked the written plan up"
    (plan,) = plans.values()
    (derived,) = plan["probes"]
    assert [(c["kind"], c["target"]) for c in derived["candidates"]] == [
        ("module", "firstuser"),
        ("module", "seconduser"),
    ]


def test_a_plan_the_derivation_could_not_have_made_is_never_run(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The plan is run before the removal derives its probe again: read from the state
    folder, it is untrusted, and only imports of dotted names and torch's check are run.
    Self-contained: the removal is shown to have looked this very plan up (it is replaced by
    the derivation's), so the plan is refused, not missed."""
    venv, _ = _derived_venv(make_venv, tmp_path)
    ran = tmp_path / "ran"
    _plan(
        venv,
        tmp_path,
        probe.Candidate(CandidateKind.CODE, f"open({str(ran)!r}, 'w')", "firstuser"),
        probe.Candidate(CandidateKind.MODULE, "seconduser", "seconduser"),
    )
    written = _plans(venv)
    assert len(written) == 1
    run = venv.tool("--json", "--allow-unmet", "basepkg")
    assert run.returncode == 3, run.stdout + run.stderr
    steps = _steps(run.json())
    # the plan was not begun (whether its code got to run before it was cancelled or not)
    assert steps.index("impact") < steps.index("baseline")
    assert not ran.exists(), "code read from the state folder was run"
    _replaced_by_the_derivation(venv, written)


@pytest.mark.parametrize("module", ["seconduser.__main__", "seconduser.tests"])
def test_a_plan_naming_a_module_the_derivation_never_names_is_never_run(
    make_venv: MakeVenv, tmp_path: Path, module: str
) -> None:
    """A dotted name is not enough: importing a ``__main__`` runs a program, and the
    derivation never names one (nor tests, docs...). Such a plan is thrown away unrun."""
    venv, _ = _derived_venv(make_venv, tmp_path)
    ran = tmp_path / "ran"
    folder = venv.site_packages / module.replace(".", "/")
    folder.mkdir()
    (folder / "__init__.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    (venv.site_packages / "seconduser" / "__main__.py").write_text(
        f"open({str(ran)!r}, 'w').close()\n"
    )
    _plan(venv, tmp_path, probe.Candidate(CandidateKind.MODULE, module, "seconduser"))
    written = _plans(venv)
    run = venv.tool("--json", "--allow-unmet", "basepkg")
    assert run.returncode == 3, run.stdout + run.stderr
    assert not ran.exists(), f"{module}, read from the state folder, was imported"
    steps = _steps(run.json())
    assert steps.index("impact") < steps.index("baseline")
    _replaced_by_the_derivation(venv, written)


def test_a_plan_naming_a_module_no_installed_distribution_lists_is_never_run(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """``antigravity`` opens a web browser, ``this`` prints: dotted, public, not tests, yet
    modules the derivation never names in this environment, as no installed distribution's
    RECORD lists them. Such a plan is thrown away unrun; the probe is derived again."""
    venv, _ = _derived_venv(make_venv, tmp_path)
    opened = tmp_path / "browser-opened"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$1" > {str(opened)!r}\n')
    browser.chmod(0o755)
    _plan(
        venv,
        tmp_path,
        probe.Candidate(CandidateKind.MODULE, "antigravity", "seconduser"),
        probe.Candidate(CandidateKind.MODULE, "this", "firstuser"),
    )
    written = _plans(venv)
    run = venv.tool("--json", "--allow-unmet", "basepkg", BROWSER=f"{browser} %s")
    assert run.returncode == 3, run.stdout + run.stderr
    steps = _steps(run.json())
    assert steps.index("impact") < steps.index("baseline"), "the plan was begun"
    assert not opened.exists(), "antigravity, read from the state folder, was imported"
    _replaced_by_the_derivation(venv, written)


def test_a_plan_that_is_not_the_derived_probe_is_thrown_away(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """A plausible plan that the derivation no longer gives (another version of a user, say):
    begun, then cancelled; the baseline that judges is the derived probe's."""
    venv, _ = _derived_venv(make_venv, tmp_path)
    _plan(venv, tmp_path, probe.Candidate(CandidateKind.MODULE, "seconduser", "seconduser"))
    run = venv.tool("--json", "--allow-unmet", "basepkg")
    assert run.returncode == 3, run.stdout + run.stderr
    data = run.json()
    steps = _steps(data)
    assert steps.index("baseline") < steps.index("impact")  # the plan was begun
    probes = data["probes"]
    assert isinstance(probes, dict)
    (baseline_run,) = probes["baseline"]
    assert [c["target"] for c in baseline_run["candidates"]] == ["firstuser", "seconduser"]
    assert probes["planned"][0]["candidates"] == [  # type: ignore[index]
        {k: v for k, v in c.items() if k not in ("label", "status", "judged", "output")}
        for c in baseline_run["candidates"]
    ]
