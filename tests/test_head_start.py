"""The baseline's head start: begun before the core is imported, taken over only when valid.

Each probe appends a character to a file when it starts, so the number of probe runs is exact;
the head start's own run is awaited before the core is called, so a head start that is wrongly
thrown away still shows up as one run too many.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from safeuninstall import config, options
from safeuninstall.context import baseline
from safeuninstall.context.context import Context, open_context
from safeuninstall.operations.endings.uninstall import REMOVED
from safeuninstall.operations.results import RemovalResult
from safeuninstall.operations.uninstall.command import uninstall
from safeuninstall.probe.runner import probes_from
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
    assert result.outcome is REMOVED
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
    assert result.outcome is REMOVED
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
    assert result.outcome is REMOVED
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
    assert result.outcome is REMOVED
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
    assert result.outcome is REMOVED
    assert released == ["probe gone"], (
        "the head start's probe ran on while another operation held on"
    )
