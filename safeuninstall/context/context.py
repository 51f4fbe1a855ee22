"""One command's target, opened once: interpreter, state folder, the environment's own lock and
journal, installer, the events it emits, and the only environment a child process gets.

Opened by the CLI before anything else runs, and handed to the baseline's head start and then
to the operation, so the interpreter is looked up and queried once per command.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from safeuninstall.base import process
from safeuninstall.base.errors import EnvironmentNotFound, InsideGuardedRun, LockBusy, NotRestorable
from safeuninstall.base.events import Events
from safeuninstall.environment.interpreter import (
    Interpreter,
    find_python,
    is_path_request,
    query_interpreter,
    vital_files,
    with_layout,
)
from safeuninstall.environment.uvsettings import pip_target
from safeuninstall.options import TargetOptions
from safeuninstall.state import locks
from safeuninstall.state.journal import Journal
from safeuninstall.state.store import Store, own_files, state_dir

if TYPE_CHECKING:
    from safeuninstall.environment.backend import Backend
    from safeuninstall.environment.installed import InstalledDistribution


class Context:
    """The opened target. Read-only once made."""

    __slots__ = (
        "_backend",
        "break_system_packages",
        "command",
        "cwd",
        "emit",
        "environ",
        "interpreter",
        "lock_timeout",
        "on_installer_output",
        "on_progress",
        "own",
        "python",
        "read_only",
        "state_dir_chosen",
        "store",
    )

    def __init__(
        self, target: TargetOptions, python: Path, interpreter: Interpreter, events: Events
    ) -> None:
        self.python = python
        self.interpreter = interpreter
        self.environ = target.environ
        self.cwd = target.cwd
        self.command = target.command
        self.lock_timeout = target.lock_timeout
        self.read_only = target.read_only
        self.break_system_packages = bool(target.break_system_packages)
        self.emit = events
        # told how far a long file step is: (step, bytes done, bytes in all)
        self.on_progress: Callable[[str, int, int], None] | None = target.on_progress
        real_prefix = os.path.realpath(interpreter.prefix)
        self.store = Store(state_dir(target.state_dir, interpreter, target.environ), real_prefix)
        self.state_dir_chosen = bool(target.state_dir)
        self.store.check()  # before anything in it is read
        self.own = own_files(interpreter, target.environ)
        self.on_installer_output = target.on_installer_output
        self._backend: Backend | None = None

    @property
    def backend(self) -> Backend:
        """The installer, made on first use: a command that only reads the state folder
        (``snapshots``, ``show``) never runs it, nor imports it."""
        if self._backend is None:
            from safeuninstall.environment.backend import backend_for

            self._backend = backend_for(
                self.python,
                self.environ,
                self.child_env(),
                self.on_installer_output,
                extra=_installer_options(self.interpreter, self.break_system_packages),
            )
        return self._backend

    def child_env(self) -> dict[str, str]:
        """The caller's environment less what would point a child at another environment
        (process.SCRUBBED_VARIABLES), with this environment's scripts first on PATH and, for a
        venv, VIRTUAL_ENV naming it: as if the environment were activated."""
        env = process.scrubbed(self.environ)
        env["PATH"] = self.interpreter.scripts + os.pathsep + env.get("PATH", "")
        if self.interpreter.is_venv:
            env["VIRTUAL_ENV"] = self.interpreter.prefix
        if self.interpreter.layout != "environment":  # --target, --prefix: on the path
            env["PYTHONPATH"] = os.pathsep.join(map(str, self.interpreter.site_dirs))
        return env

    @property
    def is_tool_environment(self) -> bool:
        """The tool runs from the target: it is the tool's environment, or one whose site
        folders are on the tool's path (the base of a ``--system-site-packages`` venv the tool
        runs from, a ``--target`` folder on PYTHONPATH): a removal there can take away what the
        tool imports."""
        if os.path.realpath(sys.prefix) == os.path.realpath(self.interpreter.prefix):
            return True
        ours = {os.path.realpath(entry) for entry in sys.path if entry}
        return any(os.path.realpath(folder) in ours for folder in self.interpreter.site_dirs)

    def runs_on(self, installed: Mapping[str, InstalledDistribution]) -> set[str]:
        """Of ``installed`` (the target's), what the running tool needs to start: in the
        environment it runs from, the requirement closure of safe-uninstall, as the target's
        metadata says it and as the tool's own says it (its requirements may come from the
        base of a ``--system-site-packages`` venv the tool runs from, where safe-uninstall
        itself is not installed). Empty for any other target. Removing one would leave no tool
        to undo the removal: no rollback, no recover."""
        if not self.is_tool_environment:
            return set()
        # Imported here: it brings the library model (libraries.index, the ELF reader),
        # which a command that only reads the state folder never needs. A change-making
        # operation has it loaded before its change (tests/test_startup_modules.py).
        from safeuninstall.reports.needs import requirement_closure

        found = requirement_closure("safe-uninstall", installed, self.interpreter.markers)
        found |= _own_closure()
        return {name for name in found if name in installed}

    def refuse_externally_managed(self) -> None:
        """Before any change, as uv refuses: an interpreter its distributor manages (PEP 668)
        is changed only with --break-system-packages."""

        text = self.interpreter.externally_managed()
        if text is None or self.break_system_packages:
            return
        import configparser  # only for an externally managed interpreter

        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text)
            error = parser.get("externally-managed", "Error", fallback="").strip()
        except configparser.Error:
            error = ""
        raise NotRestorable(
            f"the interpreter at {self.interpreter.prefix} is externally managed"
            + (f", and indicates the following: {error}" if error else "")
            + "; uv changes it only with --break-system-packages (nothing was changed). "
            "Consider a virtual environment (uv venv)."
        )

    def refuse_deleting_the_interpreter(self, remove: Iterable[InstalledDistribution]) -> None:
        """Before any change: a RECORD that lists the environment's interpreter, a link to it,
        its pyvenv.cfg, or the tool's own state folder or journal in it (or a folder holding
        one). uv deletes it, and then no rollback, recover or doctor can open the environment,
        or find the snapshot, to give anything back. Refused rather than
        kept in place: a removal that leaves one of the distribution's files behind is not the
        removal uv makes, and a refusal changes nothing at all."""
        from safeuninstall.environment.deletion import vital_line  # a removal's, before it

        vital = vital_files(self.python, self.interpreter)
        for own, what in (
            (self.store.root, "the state folder that holds the snapshot undoing the removal"),
            (self.own.journal, "the journal that recover reads"),
        ):
            vital[os.path.normpath(own)] = what
        for dist in remove:
            try:
                paths = dist.record_paths()
            except OSError:
                continue  # no RECORD to read: the stash says so, before any change
            found = vital_line(paths, str(dist.site_dir), self.interpreter.prefix, vital)
            if found is None:
                continue
            line, path = found
            what = vital.get(path, "a folder that holds what a rollback needs")
            raise NotRestorable(
                f"{dist.name} {dist.version}: its RECORD line {line!r} names {path}, {what}: "
                "uv would delete it, and then nothing could undo the removal (rollback, recover "
                "and doctor need it); nothing was removed. Correct the RECORD "
                f"({dist.dist_info / 'RECORD'}) before removing {dist.name}"
            )

    def journal(self) -> Journal:
        """The environment's journal; the snapshot it names is in this command's state folder."""

        return Journal(self.own.journal, self.store.root, self.suggest)

    @contextmanager
    def locked(
        self, on_wait: Callable[[], None] | None = None, *, timeout: float | None = None
    ) -> Iterator[bool]:
        """This environment, then its state folder, to this operation alone (locks.py); yields
        whether it had to wait (at most ``timeout`` seconds, default the lock timeout). A
        read-only command (a dry run) reads as ``check`` does: it takes no lock, which would
        create the lock files."""
        if self.read_only:
            yield False
            return

        def waiting(message: str) -> None:
            if on_wait is not None:
                on_wait()
            self.emit("waiting", message)

        self._refuse_inside_a_guarded_run()
        self.own.prepare()
        busy = "another safe-uninstall operation is running on this environment"
        wait = self.lock_timeout if timeout is None else timeout
        with (
            locks.hold(self.own.lock, wait, busy=busy, on_wait=waiting) as first,
            self.store.locked(wait, on_wait=waiting) as second,
        ):
            yield first or second

    def refuse_if_unfinished(self) -> None:
        """An earlier operation's journal stops this one: recover first. A read-only command
        (a dry run), which takes no lock, finds the journal of an operation under way too:
        while another process holds the environment's lock, that operation is running, not
        dead, and recover is not the answer."""
        journal = self.journal()
        # Read-only, a journal seen absent is the answer: one an operation begins after this
        # read is that operation's, not a dead one's.
        if self.read_only and journal.read() is None:
            return
        if self.read_only and self.operation_running():
            raise LockBusy(
                "another safe-uninstall operation is running on this environment (its lock "
                f"{self.own.lock} is held): run this after it ends"
            )
        journal.refuse_if_unfinished(self.suggest)

    def operation_running(self) -> bool:
        """Whether another process holds this environment's lock now (locks.held_elsewhere)."""
        return locks.held_elsewhere(self.own.lock)

    def _refuse_inside_a_guarded_run(self) -> None:
        """Started by the command that ``run`` guards on this environment (its processes
        carry process.guard_marker): that run holds the lock until the command ends, so waiting
        for it would end only at the lock timeout."""
        guards = {k for k in self.environ if k.startswith(process.MARKER_PREFIX + "guard_")}
        if not guards:
            return
        for snapshot_id in reversed(self.store.ids()):
            if process.guard_marker(self.interpreter.prefix, snapshot_id) in guards:
                raise InsideGuardedRun(
                    "this safe-uninstall was started by the command that `safe-uninstall run` "
                    f"is guarding on this same environment (snapshot {snapshot_id}), which "
                    "holds its lock until that command ends: run it after the guarded command, "
                    "not inside it"
                )

    @contextmanager
    def installer_locked(self) -> Iterator[str | None]:
        """uv's own lock on a venv while the tool itself writes into it (locks.installer_lock):
        yields None, or why it goes on without it."""
        venv = self.interpreter.prefix if self.interpreter.is_venv else None
        with locks.installer_lock(
            venv, self.lock_timeout, lambda message: self.emit("waiting", message)
        ) as missing:
            yield missing

    @property
    def where(self) -> str:
        """The environment a person knows it by: the folder of a --target or --prefix run,
        else the interpreter."""
        if self.interpreter.layout in ("target", "prefix"):
            return self.interpreter.prefix
        return str(self.python)

    def command_line(self, *args: str, state_dir: str | None = None) -> list[str]:
        """A safe-uninstall command that acts on this same environment (the interpreter, and
        the --target or --prefix folder) and this same state folder (or ``state_dir``), with
        ``args`` after the options. Every command the tool prints for the user to run is
        built here, so that one pasted never acts elsewhere."""
        argv = ["safe-uninstall", "--python", str(self.python)]
        if self.interpreter.layout in ("target", "prefix"):
            argv += [f"--{self.interpreter.layout}", self.interpreter.prefix]
        if self.break_system_packages:
            argv.append("--break-system-packages")
        if state_dir is None and self.state_dir_chosen:
            state_dir = str(self.store.root)
        if state_dir is not None:
            argv += ["--state-dir", state_dir]
        return [*argv, *args]

    def suggest(self, *args: str, state_dir: str | None = None) -> str:
        """``command_line`` as one line to paste (shell-quoted)."""
        return shlex.join(self.command_line(*args, state_dir=state_dir))


def open_context(target: TargetOptions, events: Events | None = None) -> Context:
    chosen = pip_target(
        target.python,
        target.system,
        target.break_system_packages,
        cwd=target.cwd,
        environ=target.environ,
    )
    target = msgspec.structs.replace(
        target,
        python=chosen.python,
        system=chosen.system,
        break_system_packages=chosen.break_system_packages,
    )
    try:
        python = find_python(
            target.python, cwd=target.cwd, environ=target.environ, system=chosen.system
        )
    except EnvironmentNotFound as err:
        if chosen.python_from is None:
            raise
        raise EnvironmentNotFound(
            f"{err.message} (the interpreter named by {chosen.python_from})", detail=err.detail
        ) from None
    interpreter = query_interpreter(python, target.environ, write_cache=not target.read_only)
    _refuse_system_unless_asked(target, python, interpreter)
    interpreter = with_layout(interpreter, target=target.target, prefix=target.prefix)
    ctx = Context(target, python, interpreter, events or Events())
    ctx.emit("environment", f"environment: {ctx.where}")
    return ctx


def _refuse_system_unless_asked(target: TargetOptions, python: Path, found: Interpreter) -> None:
    """uv picks a system interpreter for ``uv pip`` only when asked for it: by its path, or
    with --system (-p 3.11 finds a virtual environment of 3.11, or nothing)."""
    request = target.python
    if target.system or not request or is_path_request(request) or found.is_venv:
        return
    raise EnvironmentNotFound(
        f"-p {request}: no virtual environment found; uv found the system interpreter "
        f"{python}, which uv pip changes only with --system (or when given its path)"
    )


def _installer_options(interpreter: Interpreter, break_system_packages: bool) -> list[str]:
    """What uv is told besides --python: the folder of a --target or --prefix, and
    --break-system-packages."""
    extra = []
    if interpreter.layout in ("target", "prefix"):
        extra += [f"--{interpreter.layout}", interpreter.prefix]
    if break_system_packages:
        extra.append("--break-system-packages")
    return extra


def _own_closure() -> set[str]:
    """The running tool's requirement closure by its own installed metadata (canonical names,
    markers of this interpreter, no extras); empty when it runs from no installed
    distribution (a source tree on PYTHONPATH)."""
    # Deferred: only a target that is the tool's own environment asks (docs/performance.md).
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    found: set[str] = set()
    frontier = ["safe-uninstall"]
    while frontier:
        name = frontier.pop()
        if name in found:
            continue
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        found.add(name)
        for line in requires:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                frontier.append(canonicalize_name(requirement.name))
    return found
