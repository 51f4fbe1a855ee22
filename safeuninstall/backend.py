"""The installer that really removes and installs: uv, else the target's own pip."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from msgspec import Struct

from . import process
from .errors import BackendError
from .snapshot import PackageEntry

_TIMEOUT = 3600.0


def find_uv(environ: Mapping[str, str] | None = None) -> str | None:
    """``SAFE_UNINSTALL_UV`` (a path, or ``none`` to use pip), else the uv the package ships."""
    chosen = (environ if environ is not None else os.environ).get("SAFE_UNINSTALL_UV")
    if chosen:
        return None if chosen == "none" else chosen
    # In a virtual environment (pipx, uv tool, a venv), the first place uv's find_uv_bin looks:
    # the environment's bin folder, checked here in 0.04 ms; find_uv_bin takes 3.0-4.2 ms of
    # every command. Outside one, sysconfig's scripts folder may be elsewhere (/usr/local/bin).
    beside = os.path.join(sys.prefix, "bin", "uv")
    if os.name == "posix" and sys.prefix != sys.base_prefix and os.path.isfile(beside):
        return beside
    try:
        from uv import find_uv_bin  # 0.7 ms of import, paid only where the shortcut misses
    except ImportError:
        return shutil.which("uv")
    try:
        return str(find_uv_bin())
    except FileNotFoundError:
        return shutil.which("uv")


def requirement_for(entry: PackageEntry) -> list[str]:
    """The install arguments that bring back exactly this distribution from its recorded source."""
    source = entry.source
    if source.kind == "editable" and source.url:
        return ["-e", source.url]
    if source.kind == "vcs" and source.url and source.vcs and source.commit:
        url = f"{source.vcs}+{source.url}@{source.commit}"
        if source.subdirectory:
            url += f"#subdirectory={source.subdirectory}"
        return [f"{entry.name} @ {url}"]
    if source.kind in ("url", "file", "directory") and source.url:
        url = source.url
        if source.subdirectory:
            url += f"#subdirectory={source.subdirectory}"
        return [f"{entry.name} @ {url}"]
    return [entry.pin]


class Backend(Struct, frozen=True):
    """The installer that removes and reinstalls in one environment: uv, else its own pip."""

    python: Path
    uv: str | None
    echo: Callable[[str], None] | None = None  # the installer's output, live (-v)

    @classmethod
    def for_python(
        cls,
        python: Path,
        environ: Mapping[str, str] | None = None,
        echo: Callable[[str], None] | None = None,
    ) -> Backend:
        return cls(python=python, uv=find_uv(environ), echo=echo)

    @property
    def name(self) -> str:
        return "uv" if self.uv else "pip"

    def _base(self, verb: str) -> list[str]:
        if self.uv:
            return [self.uv, "pip", verb, "--python", str(self.python)]
        return [str(self.python), "-m", "pip", verb, "--disable-pip-version-check"]

    def uninstall_argv(self, names: Sequence[str]) -> list[str]:
        argv = self._base("uninstall")
        if not self.uv:
            argv.append("--yes")
        return [*argv, *names]

    def install_argv(self, entries: Sequence[PackageEntry], *, offline: bool) -> list[str]:
        argv = [*self._base("install"), "--no-deps"]
        if offline:
            argv.append("--offline" if self.uv else "--no-index")
        for entry in entries:
            argv.extend(requirement_for(entry))
        return argv

    def uninstall(self, names: Sequence[str]) -> process.Completed:
        return self._run(self.uninstall_argv(names))

    def install(self, entries: Sequence[PackageEntry], *, offline: bool) -> process.Completed:
        return self._run(self.install_argv(entries, offline=offline))

    def _run(self, argv: list[str]) -> process.Completed:
        try:
            done = process.run(argv, timeout=_TIMEOUT, echo=self.echo)
        except OSError as err:
            raise BackendError(f"cannot run {argv[0]}: {err.strerror}") from err
        if not done.ok:
            raise BackendError(
                f"{self.name} exited with code {done.returncode}: {' '.join(argv)}",
                detail=done.output(),
            )
        return done

    def check_available(self) -> None:
        """Fail before any change when neither uv nor the target's pip can run."""
        if self.uv:
            if not os.access(self.uv, os.X_OK):
                raise BackendError(f"uv not found or not executable: {self.uv}")
            return
        try:
            done = process.run([str(self.python), "-m", "pip", "--version"], timeout=60)
        except OSError as err:
            raise BackendError(f"cannot run {self.python}: {err.strerror}") from err
        if not done.ok:
            raise BackendError("no uv found and the target environment has no pip")


def shell_line(argv: Sequence[str]) -> str:
    return shlex.join(argv)
