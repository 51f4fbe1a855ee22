"""The installer that really removes and installs: uv, else the target's own pip."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from safeuninstall.base import process
from safeuninstall.base.errors import BackendError
from safeuninstall.environment.interpreter import find_uv
from safeuninstall.environment.source import Source

_TIMEOUT = 3600.0


class PackageEntry(Protocol):
    """What an install needs of a distribution: its name, version and recorded source (a
    snapshot's entry is one)."""

    @property
    def name(self) -> str: ...

    @property
    def pin(self) -> str: ...

    @property
    def source(self) -> Source: ...


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


class Backend(Protocol):
    """The installer that removes and reinstalls in one environment."""

    name: str
    find_links: list[str]  # folders of wheels an install also looks in, offline too

    def uninstall_argv(self, names: Sequence[str]) -> list[str]: ...

    def install_argv(
        self,
        entries: Sequence[PackageEntry],
        *,
        offline: bool,
        reinstall: bool = False,
        fresh: bool = False,
    ) -> list[str]:
        """``reinstall``: also those installed at that version already (a hollow one).
        ``fresh``: reinstalled from the index or find-links, past the installer's cache (uv
        links files from it: one written in place through such a link is wrong there too)."""

    def check_available(self) -> None:
        """Fail before any change when the installer cannot run."""

    def uninstall(
        self, names: Sequence[str], *, watch: process.Watch = process.UNWATCHED
    ) -> process.Completed:
        """``watch``: who follows the installer's process (its ``echo`` is the backend's)."""

    def install(
        self,
        entries: Sequence[PackageEntry],
        *,
        offline: bool,
        fresh: bool = False,
        watch: process.Watch = process.UNWATCHED,
    ) -> process.Completed: ...

    def check_installable(self, entries: Sequence[PackageEntry], *, offline: bool) -> None:
        """Raise BackendError unless ``install`` would find every one of ``entries``: the
        installer's own dry run, nothing installed."""


class _Runner:
    """What both installers share: run a command line in the child environment, bounded, and
    turn a failure into a BackendError carrying the output."""

    name = ""

    def __init__(
        self,
        python: Path,
        env: Mapping[str, str],
        echo: Callable[[str], None] | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        self.python = python
        self.env = env
        self.echo = echo  # the installer's output, live (-v)
        self.extra = list(extra)  # --target DIR, --prefix DIR, --break-system-packages
        self.find_links: list[str] = []  # folders an install also looks in (--find-links)

    def uninstall_argv(self, names: Sequence[str]) -> list[str]:
        raise NotImplementedError

    def install_argv(
        self,
        entries: Sequence[PackageEntry],
        *,
        offline: bool,
        reinstall: bool = False,
        fresh: bool = False,
    ) -> list[str]:
        raise NotImplementedError

    def uninstall(
        self, names: Sequence[str], *, watch: process.Watch = process.UNWATCHED
    ) -> process.Completed:
        return self._run(self.uninstall_argv(names), watch=watch)

    def install(
        self,
        entries: Sequence[PackageEntry],
        *,
        offline: bool,
        fresh: bool = False,
        watch: process.Watch = process.UNWATCHED,
    ) -> process.Completed:
        return self._run(self.install_argv(entries, offline=offline, fresh=fresh), watch=watch)

    reinstall_flag = ""
    no_cache_flag = ""

    def check_installable(self, entries: Sequence[PackageEntry], *, offline: bool) -> None:
        argv = self.install_argv(entries, offline=offline)
        verb = argv.index("install")
        # As a reinstall: one still installed at that version would pass without being found.
        self._run([*argv[: verb + 1], "--dry-run", self.reinstall_flag, *argv[verb + 1 :]])

    def _run(
        self, argv: list[str], timeout: float = _TIMEOUT, watch: process.Watch = process.UNWATCHED
    ) -> process.Completed:
        try:
            done = process.run(
                argv, timeout=timeout, env=self.env, watch=watch._replace(echo=self.echo)
            )
        except OSError as err:
            raise BackendError(f"cannot run {argv[0]}: {err.strerror}") from err
        if not done.ok:
            raise BackendError(
                f"{self.name} exited with code {done.returncode}: {' '.join(argv)}",
                detail=done.output(),
            )
        return done


def _requirements(entries: Sequence[PackageEntry]) -> list[str]:
    return [arg for entry in entries for arg in requirement_for(entry)]


class UvBackend(_Runner):
    """``uv pip <verb> --python <target>``."""

    name = "uv"
    reinstall_flag = "--reinstall"
    no_cache_flag = "--no-cache"

    def __init__(
        self,
        python: Path,
        uv: str,
        env: Mapping[str, str],
        echo: Callable[[str], None] | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        super().__init__(python, env, echo, extra)
        self.uv = uv

    def uninstall_argv(self, names: Sequence[str]) -> list[str]:
        return [self.uv, "pip", "uninstall", "--python", str(self.python), *self.extra, *names]

    def install_argv(
        self,
        entries: Sequence[PackageEntry],
        *,
        offline: bool,
        reinstall: bool = False,
        fresh: bool = False,
    ) -> list[str]:
        argv = [self.uv, "pip", "install", "--python", str(self.python), *self.extra, "--no-deps"]
        if reinstall or fresh:
            argv.append(self.reinstall_flag)
        if fresh:
            argv.append(self.no_cache_flag)
        if offline:
            argv.append("--offline")
        links = [arg for folder in self.find_links for arg in ("--find-links", folder)]
        return [*argv, *links, *_requirements(entries)]

    def check_available(self) -> None:
        if not os.access(self.uv, os.X_OK):
            raise BackendError(f"uv not found or not executable: {self.uv}")


class PipBackend(_Runner):
    """The target's own pip (``SAFE_UNINSTALL_UV=none``, or no uv to be found)."""

    name = "pip"
    reinstall_flag = "--force-reinstall"
    no_cache_flag = "--no-cache-dir"

    def _base(self, verb: str) -> list[str]:
        return [str(self.python), "-m", "pip", verb, "--disable-pip-version-check"]

    def uninstall_argv(self, names: Sequence[str]) -> list[str]:
        extra = [arg for arg in self.extra if arg == "--break-system-packages"]
        return [*self._base("uninstall"), "--yes", *extra, *names]

    def install_argv(
        self,
        entries: Sequence[PackageEntry],
        *,
        offline: bool,
        reinstall: bool = False,
        fresh: bool = False,
    ) -> list[str]:
        argv = [*self._base("install"), *self.extra, "--no-deps"]
        if reinstall or fresh:
            argv.append(self.reinstall_flag)
        if fresh:
            argv.append(self.no_cache_flag)
        if offline:
            argv.append("--no-index")
        links = [arg for folder in self.find_links for arg in ("--find-links", folder)]
        return [*argv, *links, *_requirements(entries)]

    def check_available(self) -> None:
        if any(arg in ("--target", "--prefix") for arg in self.extra):
            raise BackendError("pip cannot uninstall from a --target or --prefix folder: use uv")
        argv = [str(self.python), "-m", "pip", "--version"]
        try:
            done = process.run(argv, timeout=60, env=self.env)
        except OSError as err:
            raise BackendError(f"cannot run {self.python}: {err.strerror}") from err
        if not done.ok:
            raise BackendError("no uv found and the target environment has no pip")


def backend_for(
    python: Path,
    environ: Mapping[str, str],
    env: Mapping[str, str],
    echo: Callable[[str], None] | None = None,
    *,
    extra: Sequence[str] = (),
) -> Backend:
    """uv when one is found (``SAFE_UNINSTALL_UV`` in ``environ`` steers it), else pip;
    ``env`` is the environment their processes get, ``extra`` what both are told besides the
    interpreter (--target DIR, --prefix DIR, --break-system-packages)."""
    uv = find_uv(environ)
    if uv:
        return UvBackend(python, uv, env, echo, extra)
    return PipBackend(python, env, echo, extra)


def find_links_offer(folders: Sequence[str]) -> set[tuple[str, Version]]:
    """(canonical name, version) of every wheel and sdist in ``folders``, by file name (what
    an install could take from them; a wheel's tags are the installer's to judge)."""
    offered: set[tuple[str, Version]] = set()
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for filename in names:
            try:
                if filename.endswith(".whl"):
                    name, version, *_ = parse_wheel_filename(filename)
                else:
                    name, version = parse_sdist_filename(filename)
            except (InvalidWheelFilename, InvalidSdistFilename):
                continue
            offered.add((str(name), version))
    return offered


def shell_line(argv: Sequence[str]) -> str:
    return shlex.join(argv)
