"""One command's target, opened once: interpreter, state folder, the environment's own lock and
journal, installer, the events it emits, and the only environment a child process gets.

Opened by the CLI before anything else runs, and handed to the baseline's head start and then
to the operation, so the interpreter is looked up and queried once per command.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from . import locks, process
from .backend import Backend, backend_for, shell_line
from .environment import Interpreter, find_python, query_interpreter
from .events import Events
from .options import TargetOptions
from .store import Store, own_files, state_dir

if TYPE_CHECKING:
    from .journal import Journal


class Context:
    """The opened target. Read-only once made."""

    __slots__ = (
        "backend",
        "command",
        "cwd",
        "emit",
        "environ",
        "interpreter",
        "lock_timeout",
        "on_progress",
        "own",
        "python",
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
        self.emit = events
        # told how far a long file step is: (step, bytes done, bytes in all)
        self.on_progress: Callable[[str, int, int], None] | None = target.on_progress
        real_prefix = os.path.realpath(interpreter.prefix)
        self.store = Store(state_dir(target.state_dir, interpreter, target.environ), real_prefix)
        self.store.check()  # before anything in it is read
        self.own = own_files(interpreter, target.environ)
        self.backend: Backend = backend_for(
            python, target.environ, self.child_env(), target.on_installer_output
        )

    def child_env(self) -> dict[str, str]:
        """The caller's environment less what would point a child at another environment
        (process.SCRUBBED_VARIABLES), with this environment's scripts first on PATH and, for a
        venv, VIRTUAL_ENV naming it: as if the environment were activated."""
        env = process.scrubbed(self.environ)
        env["PATH"] = self.interpreter.scripts + os.pathsep + env.get("PATH", "")
        if self.interpreter.is_venv:
            env["VIRTUAL_ENV"] = self.interpreter.prefix
        return env

    def journal(self) -> Journal:
        """The environment's journal; the snapshot it names is in this command's state folder."""
        from .journal import Journal  # the operations load it; the head start need not wait

        return Journal(self.own.journal, self.store.root)

    @contextmanager
    def locked(self, on_wait: Callable[[], None] | None = None) -> Iterator[bool]:
        """This environment, then its state folder, to this operation alone (locks.py); yields
        whether it had to wait."""

        def waiting(message: str) -> None:
            if on_wait is not None:
                on_wait()
            self.emit("waiting", message)

        self.own.prepare()
        busy = "another safe-uninstall operation is running on this environment"
        with (
            locks.hold(self.own.lock, self.lock_timeout, busy=busy, on_wait=waiting) as first,
            self.store.locked(self.lock_timeout, on_wait=waiting) as second,
        ):
            yield first or second

    @contextmanager
    def installer_locked(self) -> Iterator[str | None]:
        """uv's own lock on a venv while the tool itself writes into it (locks.installer_lock):
        yields None, or why it goes on without it."""
        venv = self.interpreter.prefix if self.interpreter.is_venv else None
        with locks.installer_lock(
            venv, self.lock_timeout, lambda message: self.emit("waiting", message)
        ) as missing:
            yield missing

    def suggest(self, *args: str) -> str:
        """A safe-uninstall command line for this environment, for the user to run next."""
        return shell_line(["safe-uninstall", "--python", str(self.python), *args])


def open_context(target: TargetOptions, events: Events | None = None) -> Context:
    python = find_python(target.python, cwd=target.cwd, environ=target.environ)
    interpreter = query_interpreter(python, target.environ)
    ctx = Context(target, python, interpreter, events or Events())
    ctx.emit("environment", f"environment: {python}")
    return ctx
