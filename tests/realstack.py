"""Real environments from the package index: the stacks users have, for the tests whose answer
depends on real wheels (namespace packages, Requires-Dist with markers and extras, auditwheel
``.libs`` folders, the CUDA libraries of a torch build).

Each stack is a pinned requirements file in ``tests/stacks/``. It is installed once per machine:
uv downloads its wheels into a cache outside the repository (``SAFE_UNINSTALL_STACKS``, else
``~/.cache/safe-uninstall-stacks``) and the install is checked once by importing the stack. A test
then gets its own venv, installed from that cache offline and hard-linked (uv's default link
mode on Linux): about a second, against minutes for the first install.

The files of a test's venv share inodes with uv's cache, as in every uv venv: a test may remove,
restore and add files (that is what the tool does), but must not edit a file in place.

Where the machine's pip is configured with local indexes (``file://`` extra index URLs: a mirror
of the package index), uv is given them too, so the 3 GB of a CUDA torch build are read from disk
when they are there; the pins are the same wheels either way.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from filelock import FileLock

from safeuninstall.environment.interpreter import find_uv

if TYPE_CHECKING:  # conftest imports this module for its fixtures
    from tests.conftest import Venv

UV = find_uv()

STACKS_DIR = Path(__file__).parent / "stacks"
# What proves a stack installed: one import per stack, run once when it is first installed.
SMOKE = {
    "azure": "from azure.storage.blob import BlobServiceClient",
    "gcs": "from google.cloud import storage",
    "jupyterlab": "import jupyterlab, jupyter_server, ipykernel",
    "requests": "import requests",
    "requests-old": "import requests, urllib3; assert urllib3.__version__ == '2.2.3'",
    "rich": "from rich.markdown import Markdown",
    "scipy": "import pandas, scipy.linalg, matplotlib.pyplot",
    "sklearn": "import sklearn.linear_model",
    "torch": "import torch; torch.cuda.device_count()",
    "torchdup": "import torch; torch.cuda.device_count()",
    "tool": "import click, filelock, msgspec, packaging.requirements, tomli_w, uv",
}
# Stacks for bench/ only, which no test is parametrized over: 235 distributions, 62,767 files.
BENCH_SMOKE = {
    "ml": "import torch, transformers, sentence_transformers, sklearn, pandas, jupyterlab",
}


def cache_root() -> Path:
    return Path(
        os.environ.get("SAFE_UNINSTALL_STACKS") or Path.home() / ".cache" / "safe-uninstall-stacks"
    )


def _local_indexes() -> list[str]:
    """The ``file://`` extra index URLs of the machine's pip configuration, if any."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    urls = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("extra-index-url"):
            urls += [u for u in value.strip("'\"").split() if u.startswith("file://")]
    return [u for u in urls if Path(u.removeprefix("file://")).is_dir()]


class Stacks:
    """The cache of real stacks, and the venvs made from it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.uv_cache = root / "uv-cache"
        self.indexes = _local_indexes()

    def _uv(self, *args: str, offline: bool = False) -> subprocess.CompletedProcess[str]:
        assert UV is not None
        env = {
            **os.environ,
            "UV_CACHE_DIR": str(self.uv_cache),
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_NO_PROGRESS": "1",
        }
        index_args = [a for url in self.indexes for a in ("--extra-index-url", url)]
        if index_args:
            index_args += ["--index-strategy", "unsafe-best-match"]
        install = args[:2] == ("pip", "install")
        done = subprocess.run(
            [UV, *args, *(index_args if install else []), *(["--offline"] if offline else [])],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"uv {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def offline_env(self) -> dict[str, str]:
        """Variables under which an install of this cache's pins runs offline, as a user's
        uv would with the machine's configuration: the cache, and the indexes it was filled
        from (uv keeps a wheel under the index it came from)."""
        env = {"UV_CACHE_DIR": str(self.uv_cache), "UV_OFFLINE": "1"}
        if self.indexes:
            env["UV_EXTRA_INDEX_URL"] = " ".join(self.indexes)
            env["UV_INDEX_STRATEGY"] = "unsafe-best-match"
        return env

    def pins(self, stack: str) -> Path:
        path = STACKS_DIR / f"{stack}.txt"
        if not path.is_file():
            known = sorted({**SMOKE, **BENCH_SMOKE})
            raise KeyError(f"no stack {stack!r}: tests/stacks/ has {known}")
        return path

    def _key(self, stack: str) -> str:
        text = self.pins(stack).read_bytes() + sys.version.encode() + sys.platform.encode()
        return f"{stack}-{hashlib.sha256(text).hexdigest()[:16]}"

    def _install(self, stack: str, root: Path, *, offline: bool) -> None:
        self._uv("venv", "--quiet", "--python", sys.executable, str(root))
        self._pip_install(root, ["-r", str(self.pins(stack))], offline=offline)

    def _pip_install(self, root: Path, requirements: list[str], *, offline: bool) -> None:
        """``requirements`` into the venv at ``root``, pinned, no dependencies, hard-linked."""
        self._uv(
            "pip",
            "install",
            "--quiet",
            "--python",
            str(root / "bin" / "python"),
            "--no-deps",
            "--link-mode",
            "hardlink",
            *requirements,
            offline=offline,
        )

    def ensure(self, stack: str) -> None:
        """The stack's wheels in the cache, installed and imported once on this machine."""
        ready = self.root / "ready" / self._key(stack)
        if ready.exists():
            return
        ready.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(ready) + ".lock"):
            if ready.exists():
                return
            master = self.root / "masters" / self._key(stack)
            shutil.rmtree(master, ignore_errors=True)
            started = time.monotonic()
            self._install(stack, master, offline=False)
            done = subprocess.run(
                [str(master / "bin" / "python"), "-c", {**SMOKE, **BENCH_SMOKE}[stack]],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise RuntimeError(f"stack {stack} does not import:\n{done.stderr}")
            ready.write_text(f"installed in {time.monotonic() - started:.1f} s\n")
            shutil.rmtree(master)  # the cache is what tests copy from

    def install(self, stack: str, root: Path) -> None:
        """A new venv at ``root`` holding ``stack``, from the cache, offline (bench/ too)."""
        self.ensure(stack)
        self._install(stack, root, offline=True)

    def pinned(self, stack: str, names: Collection[str]) -> list[str]:
        """The stack's pin lines (``name==version``) of ``names``."""
        lines = self.pins(stack).read_text().splitlines()
        return [line for line in lines if line.partition("==")[0] in names]

    def reinstall(self, stack: str, root: Path, names: Collection[str]) -> None:
        """Put ``names`` back into the venv at ``root`` at the stack's pins, offline."""
        self._pip_install(root, self.pinned(stack, names), offline=True)

    def venv(self, stack: str, root: Path) -> Venv:
        """A new venv at ``root`` holding ``stack``, from the cache, offline."""
        self.install(stack, root)
        from tests.conftest import Venv

        return Venv(root=root, uv_cache=self.uv_cache, wheelhouse=self.root)


RealVenv = Callable[[str], "Venv"]


@pytest.fixture(scope="session")
def stacks() -> Stacks:
    if UV is None:
        pytest.fail("uv is a dependency of the project and must be installed")
    return Stacks(cache_root())


def linked_files(root: Path) -> dict[int, tuple[str, int, int]]:
    """The regular files under ``root`` that have another link (in a venv of a stack: the
    stack cache's copy), by inode: their path, size and mtime."""
    found: dict[int, tuple[str, int, int]] = {}
    folders = [str(root)]
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:  # removed or replaced by the test: nothing of the cache in it now
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                if info.st_nlink > 1:
                    found[info.st_ino] = (entry.path, info.st_size, info.st_mtime_ns)
    return found


def written_in_place(before: dict[int, tuple[str, int, int]], root: Path) -> list[str]:
    """The files of ``before`` that still have their inode and whose size or mtime changed:
    written into, and with them the stack cache's copy that every later venv links to."""
    now = linked_files(root)
    return sorted(
        now[ino][0]
        for ino, (_, size, mtime) in before.items()
        if now.get(ino, (0, size, mtime))[1:] != (size, mtime)
    )


@pytest.fixture
def real_venv(request: pytest.FixtureRequest, tmp_path: Path, stacks: Stacks) -> Iterator[RealVenv]:
    """``real_venv("rich")``: a fresh venv of that stack (tests/stacks/rich.txt). Fails the
    test that wrote into a file of such a venv in place (the stack cache's file too)."""
    counter = iter(range(1000))
    made: list[tuple[Path, dict[int, tuple[str, int, int]]]] = []

    def make(stack: str) -> Venv:
        venv = stacks.venv(stack, tmp_path / f"{stack}{next(counter)}")
        made.append((venv.root, linked_files(venv.root)))
        return venv

    yield make
    written = [path for root, before in made for path in written_in_place(before, root)]
    if written:
        pytest.fail(
            f"{request.node.nodeid} wrote in place into files hard-linked with the stack cache "
            f"({stacks.root}); every later venv of that stack gets these bytes. Replace such a "
            "file instead: " + ", ".join(written[:10]),
            pytrace=False,
        )
