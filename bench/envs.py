"""The benchmark's workspace: a temporary folder, its own uv cache, venvs made offline."""

from __future__ import annotations

import glob
import os
import shutil
import sys
import sysconfig
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from safeuninstall.environment.interpreter import find_uv
from safeuninstall.state.store import VENV_JOURNAL, Store

from .measure import BenchError, Timed, build_launcher, run_timed

STATE_DIR_NAME = ".safe-uninstall"  # the tool's default state folder inside a venv

# Variables of the developer's shell that would change what uv, pip or the tool do.
# PYTHONDONTWRITEBYTECODE too: where nothing was compiled at install time (an editable
# install, uv without --compile-bytecode) it makes every command compile the tool's modules
# again, about 40 ms here, which no user pays after the first run.
_DROPPED_PREFIXES = ("UV_", "PIP_", "SAFE_UNINSTALL_")
_DROPPED = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "CONDA_PREFIX",
    "PYTHONSTARTUP",
    "PYTHONDONTWRITEBYTECODE",
)


def tool_argv() -> list[str]:
    """The command a user runs: the console script next to this interpreter, else -m."""
    script = Path(sysconfig.get_path("scripts")) / "safe-uninstall"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "safeuninstall"]


def bundled_pip_wheel() -> Path | None:
    """pip's wheel as shipped with this Python (ensurepip, or Debian's python-wheels)."""
    import ensurepip

    candidates = [Path(ensurepip.__file__).parent / "_bundled", Path("/usr/share/python-wheels")]
    for folder in candidates:
        found = sorted(glob.glob(str(folder / "pip-*.whl")))
        if found:
            return Path(found[-1])
    return None


@dataclass(frozen=True)
class Venv:
    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def site(self) -> Path:
        (site,) = (self.root / "lib").glob("python3*/site-packages")
        return site

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR_NAME

    @contextmanager
    def first_command(self) -> Iterator[None]:
        """The tool's state moved aside while the block runs, then put back: the command run
        inside is the first in this venv, and the caches of the others are kept."""
        aside = self.root / f"{STATE_DIR_NAME}.aside"
        shutil.rmtree(aside, ignore_errors=True)
        if self.state_dir.exists():
            self.state_dir.rename(aside)
        try:
            yield
        finally:
            shutil.rmtree(self.state_dir, ignore_errors=True)
            if aside.exists():
                aside.rename(self.state_dir)

    def clear_history(self) -> None:
        """Forget every snapshot, stash and journal, but keep the caches the tool builds on its
        first run (interpreter.json, record-cache.json, baseline-cache.json): the run after this
        is a user's next command, with an empty history."""
        shutil.rmtree(Store(self.state_dir).snapshots_dir, ignore_errors=True)
        (self.root / VENV_JOURNAL).unlink(missing_ok=True)


@dataclass(frozen=True)
class Workspace:
    root: Path
    uv: str
    env: Mapping[str, str]
    launcher: Path | None  # measures each command's own peak RSS; None without gcc

    @classmethod
    def create(cls, root: Path) -> Workspace:
        uv = find_uv()
        if uv is None:
            raise BenchError("uv not found: it is a dependency of safe-uninstall")
        root.mkdir(parents=True, exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(_DROPPED_PREFIXES) and k not in _DROPPED
        }
        env.update(
            UV_CACHE_DIR=str(root / "uv-cache"),
            UV_OFFLINE="1",
            UV_NO_PROGRESS="1",
            UV_PYTHON_DOWNLOADS="never",
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            PIP_NO_INDEX="1",
        )
        return cls(root=root, uv=uv, env=env, launcher=build_launcher(root / "launcher"))

    def run(
        self, argv: list[str], *, env: Mapping[str, str] | None = None, check: bool = True
    ) -> Timed:
        done = run_timed(
            argv, env=env if env is not None else self.env, cwd=self.root, launcher=self.launcher
        )
        return done.check() if check else done

    def make_venv(self, name: str, *, with_pip: bool = False) -> Venv:
        venv = Venv(self.root / name)
        if venv.root.exists():
            shutil.rmtree(venv.root)
        self.run([self.uv, "venv", "--quiet", "--python", sys.executable, str(venv.root)])
        if with_pip:
            wheel = bundled_pip_wheel()
            if wheel is None:
                raise BenchError("no bundled pip wheel: cannot compare with pip uninstall")
            self.uv_pip(venv, "install", "--no-index", str(wheel))
        return venv

    def uv_pip(
        self, venv: Venv, verb: str, *args: str, env: Mapping[str, str] | None = None
    ) -> Timed:
        return self.run([self.uv, "pip", verb, "--python", str(venv.python), *args], env=env)
