from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

# A snapshot's note names an outcome of any operation: they are registered when the operations
# package is imported, as every command does before it reads one. Tests that call the state
# layer in-process do the same.
import safeuninstall.operations  # noqa: F401
from safeuninstall.environment.interpreter import find_uv
from safeuninstall.state.layout import SnapshotFolder
from safeuninstall.state.store import STATE_DIR_NAME, Store
from tests.wheels import build_wheel, compile_shared_library

UV = find_uv()


@pytest.fixture(autouse=True)
def _clean_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No PIP_*, UV_*, VIRTUAL_ENV, SAFE_UNINSTALL_*, NO_COLOR or user config.toml from the
    developer's shell."""
    for key in list(os.environ):
        if key.startswith(("PIP_", "UV_", "SAFE_UNINSTALL_")) or key in (
            "VIRTUAL_ENV",
            "PYTHONPATH",
            "LD_LIBRARY_PATH",
            "NO_COLOR",
        ):
            monkeypatch.delenv(key, raising=False)
    # An empty config home: ~/.config/safe-uninstall/config.toml must not steer the tests.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    monkeypatch.setenv("UV_NO_PROGRESS", "1")


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's uv cache (one per xdist worker). Every make_venv venv holds hard links
    to its unpacked wheels: a test that writes into such a file in place writes into the cache,
    and every later install of that wheel gets its bytes (_uv_cache_unchanged fails it)."""
    return tmp_path_factory.mktemp("uv-cache")


@dataclass
class _UnpackedWheels:
    """What a session's uv cache holds under archive-v0 (wheels as uv unpacked them, never
    rewritten by uv): each file's inode, size, mtime and mode, as last seen."""

    archive: Path
    seen: dict[Path, tuple[int, int, int, int]]

    def changes(self) -> list[str]:
        """The files changed since last seen, or new and not as their wheel's RECORD says;
        then remembers what is there now."""
        now = {}
        if self.archive.is_dir():
            for folder, _, files in os.walk(self.archive):
                for name in files:
                    info = os.lstat(os.path.join(folder, name))
                    now[Path(folder, name)] = (
                        info.st_ino,
                        info.st_size,
                        info.st_mtime_ns,
                        info.st_mode,
                    )
        found = [f"{path}: changed" for path, sig in self.seen.items() if now.get(path) != sig]
        for entry in {p.relative_to(self.archive).parts[0] for p in now.keys() - self.seen}:
            found += _not_as_recorded(self.archive / entry)
        self.seen = now
        return sorted(found)


def _not_as_recorded(unpacked: Path) -> list[str]:
    """The files of an unpacked wheel whose sha256 is not the one its RECORD gives."""
    found = []
    for record in unpacked.glob("*.dist-info/RECORD"):
        for line in record.read_text().splitlines():
            rel, _, rest = line.rpartition(",")[0].partition(",sha256=")
            path = unpacked / rel
            if rest and path.is_file():
                digest = hashlib.sha256(path.read_bytes()).digest()
                if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != rest:
                    found.append(f"{path}: not as its RECORD says")
    return found


@pytest.fixture(scope="session")
def _unpacked_wheels(uv_cache: Path) -> _UnpackedWheels:
    return _UnpackedWheels(uv_cache / "archive-v0", {})


@pytest.fixture(autouse=True)
def _uv_cache_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test that wrote into the session's uv cache, where it did it, not a later
    test that installs the damaged wheel (per xdist worker: each has its own cache)."""
    if "uv_cache" not in request.fixturenames:
        yield
        return
    wheels: _UnpackedWheels = request.getfixturevalue("_unpacked_wheels")
    yield
    if changes := wheels.changes():
        pytest.fail(
            f"{request.node.nodeid} changed the session's uv cache (a file of its venv is a hard "
            "link into it: replace such a file, or install it with --link-mode copy, instead of "
            "writing into it): " + "; ".join(changes),
            pytrace=False,
        )


# A suite started in the background of a non-interactive shell (`cmd &`) inherits SIGINT
# ignored, and so would every tool it runs: the tool keeps an ignored signal ignored (as nohup
# asks), so every Ctrl-C test would fail. The tests are of a user whose Ctrl-C works: restore
# Python's own handler here, which children see as the default action after exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# -- the wheelhouse: every wheel the tests install, built once per session -------------------

LIB_TEMPLATE = """
int {func}(void) {{ return {value}; }}
"""

CONSUMER_C = """
int foo_version(void); int bar_version(void); int baz_version(void);
int consumer_check(void) { return foo_version() * 100 + bar_version() * 10 + baz_version(); }
"""

CONSUMER_INIT = """
import ctypes, os
_lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libconsumer.so"))
CHECK = _lib.consumer_check()
"""


@dataclass(frozen=True)
class Wheelhouse:
    path: Path


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Wheelhouse:
    house = tmp_path_factory.mktemp("wheelhouse")
    build = tmp_path_factory.mktemp("build")
    # Pure-Python packages: a requests/urllib3-like pair and friends.
    build_wheel(house, "urllib3", "2.2.1", {"urllib3/__init__.py": "VERSION = '2.2.1'\n"})
    build_wheel(house, "urllib3", "2.3.0", {"urllib3/__init__.py": "VERSION = '2.3.0'\n"})
    build_wheel(
        house,
        "requests",
        "2.32.3",
        {"requests/__init__.py": "import urllib3\n", "requests/api.py": "def get(): pass\n"},
        requires=["urllib3>=2"],
    )
    build_wheel(
        house,
        "toolpkg",
        "1.0",
        {"toolpkg/__init__.py": "def main():\n    print('tool ran')\n"},
        entry_points="[console_scripts]\ntoolpkg = toolpkg:main\n",
    )
    build_wheel(house, "leftpad", "1.0", {"leftpad.py": "def pad(s): return ' ' + s\n"})
    # The canonical case: three provider wheels that ship a shared library each, and a
    # consumer whose library needs all three through RUNPATH, as torch needs the nvidia wheels.
    libs = {}
    for pkg, lib, func, value in (
        ("nvfoo", "libfoo.so.1", "foo_version", 1),
        ("nvbar", "libbar.so.2", "bar_version", 2),
        ("nvbaz", "libbaz.so.3", "baz_version", 3),
    ):
        out = compile_shared_library(
            build / pkg / lib, LIB_TEMPLATE.format(func=func, value=value), soname=lib
        )
        libs[pkg] = out
        build_wheel(
            house,
            f"{pkg}-cu13",
            "1.0",
            {f"{pkg}/__init__.py": "", f"{pkg}/lib/{lib}": out.read_bytes()},
            tag="py3-none-linux_x86_64",
        )
    runpath = ":".join(f"$ORIGIN/../../{pkg}/lib" for pkg in ("nvfoo", "nvbar", "nvbaz"))
    consumer = compile_shared_library(
        build / "consumer" / "libconsumer.so", CONSUMER_C, link=list(libs.values()), rpath=runpath
    )
    build_wheel(
        house,
        "consumer",
        "1.0",
        {
            "consumer/__init__.py": CONSUMER_INIT,
            "consumer/lib/libconsumer.so": consumer.read_bytes(),
        },
        tag="py3-none-linux_x86_64",
    )
    # Drift: a consumer that finds libfoo.so.1 through DT_RPATH, which the loader searches
    # before LD_LIBRARY_PATH; once nvfoo is gone, a copy on LD_LIBRARY_PATH is taken silently.
    drifting = compile_shared_library(
        build / "drift" / "libdriftc.so",
        "int foo_version(void);\nint drift_check(void) { return foo_version(); }\n",
        link=[libs["nvfoo"]],
        rpath="$ORIGIN/../../nvfoo/lib",
        old_dtags=True,
    )
    drift_init = CONSUMER_INIT.replace("libconsumer.so", "libdriftc.so").replace(
        "consumer_check", "drift_check"
    )
    build_wheel(
        house,
        "driftconsumer",
        "1.0",
        {
            "driftconsumer/__init__.py": drift_init,
            "driftconsumer/lib/libdriftc.so": drifting.read_bytes(),
        },
        tag="py3-none-linux_x86_64",
    )
    # Two builds of one library that install the same path (a cu12 and a cu13 wheel).
    for flavour in ("cu12", "cu13"):
        build_wheel(
            house,
            f"sharedlib-{flavour}",
            "1.0",
            {"sharedlib/__init__.py": f"FLAVOUR = {flavour!r}\n", f"sharedlib/{flavour}.txt": ""},
        )
    # Eight modules in two folders: a fault between two of its files is a real "half way".
    modules = {f"multipkg/{d}/mod{i}.py": f"N = {i}\n" for d in ("a", "b") for i in range(4)}
    build_wheel(house, "multipkg", "1.0", {"multipkg/__init__.py": "", **modules})
    # Metadata only: stands for nvfoo, ships nothing but its dist-info.
    build_wheel(house, "nvfoo-meta", "1.0", {}, top_level=["nvfoo"])
    return Wheelhouse(house)


SYSTEM_FOO = "int foo_version(void) { return 9; }\n"  # an older "system" copy of libfoo.so.1


# -- real environments --------------------------------------------------------------------

# Where uv finds wheels: a folder, a page's URL, or several of them.
FindLinks = Path | str | Sequence[Path | str]


def _find_links(places: FindLinks) -> list[str]:
    listed = [places] if isinstance(places, (Path, str)) else places
    return [arg for place in listed for arg in ("--find-links", str(place))]


@dataclass(frozen=True)
class Venv:
    root: Path
    uv_cache: Path
    wheelhouse: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def journal(self) -> Path:
        """The environment's journal (store.own_files): with it, whatever the state folder."""
        return self.root / ".safe-uninstall.journal.toml"

    @property
    def state(self) -> Store:
        """The environment's default state folder."""
        return Store(self.root / STATE_DIR_NAME)

    def snapshot(self, snapshot_id: str) -> SnapshotFolder:
        """A snapshot's folder in the default state folder (layout.py: what is in it)."""
        return self.state.folder(snapshot_id)

    @property
    def site_packages(self) -> Path:
        (site,) = (self.root / "lib").glob("python3*/site-packages")
        return site

    def env(self) -> dict[str, str]:
        return {**os.environ, "UV_CACHE_DIR": str(self.uv_cache)}

    def uv(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert UV is not None
        return subprocess.run(
            [UV, *args], env=self.env(), capture_output=True, text=True, check=check
        )

    def install(
        self, *requirements: str, find_links: FindLinks | None = None, copies: bool = False
    ) -> None:
        """Offline, from the session's wheelhouse or from ``find_links`` (a folder or a page
        that lists wheels, or several). The files are hard links into the venv's uv cache,
        unless ``copies``: for a test that writes into one in place."""
        self.uv(
            "pip",
            "install",
            "--python",
            str(self.python),
            "--no-index",
            *_find_links(find_links or self.wheelhouse),
            *(("--link-mode", "copy") if copies else ()),
            *requirements,
        )

    def installed(self) -> dict[str, str]:
        """{canonical name: version} as uv itself reports it."""
        done = self.uv("pip", "list", "--python", str(self.python), "--format", "json")
        return {item["name"]: item["version"] for item in json.loads(done.stdout)}

    def run_python(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), "-c", code], capture_output=True, text=True, cwd=self.root
        )

    def tool(self, *args: str, cwd: Path | None = None, **extra_env: str) -> Run:
        """``safe-uninstall -p <venv> ARGS`` with the network off and an empty uv cache.

        UV_OFFLINE=1 and a fresh UV_CACHE_DIR: whatever the tool restores must come from its own
        stash, unless a test passes UV_FIND_LINKS/UV_NO_INDEX to allow a local reinstall.
        """
        empty_cache = self.root.parent / f"empty-uv-cache-{self.root.name}"
        env = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(empty_cache), **extra_env}
        return run_tool("--python", str(self.root), *args, env=env, cwd=cwd)

    def tool_reinstalling(self, *args: str, find_links: Path | None = None) -> Run:
        """``tool(ARGS)`` where uv may also reinstall, offline, from the session's wheelhouse (or
        ``find_links``) and from no index: for the paths where the tool reinstalls what its
        stash does not hold."""
        house = str(find_links or self.wheelhouse)
        return self.tool(*args, UV_NO_INDEX="1", UV_FIND_LINKS=house)

    def file_hashes(self) -> dict[str, str]:
        """sha256 of every file in site-packages and bin, except caches and our own state."""
        hashes = {}
        for base in (self.site_packages, self.root / "bin"):
            for path in sorted(base.rglob("*")):
                if "__pycache__" in path.parts or not path.is_file():
                    continue
                hashes[str(path.relative_to(self.root))] = hashlib.sha256(
                    path.read_bytes()
                ).hexdigest()
        return hashes


MakeVenv = Callable[..., Venv]


@pytest.fixture
def make_venv(tmp_path: Path, uv_cache: Path, wheelhouse: Wheelhouse) -> Iterator[MakeVenv]:
    counter = iter(range(1000))

    def make(*requirements: str, python: str = sys.executable) -> Venv:
        root = tmp_path / f"venv{next(counter)}"
        venv = Venv(root=root, uv_cache=uv_cache, wheelhouse=wheelhouse.path)
        venv.uv("venv", "--quiet", "--python", python, str(root))
        if requirements:
            venv.install(*requirements)
        return venv

    yield make


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, object]:
        data = json.loads(self.stdout)
        assert isinstance(data, dict)
        return data


def run_tool(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    """The real command, as a user runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "safeuninstall", *args],
        capture_output=True,
        text=True,
        env=env if env is not None else dict(os.environ),
        cwd=cwd,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` and ``root`` itself: a file's sha256, a symlink's target,
    "folder", or the kind of anything else (a FIFO is never opened), caches included."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in ["", *dirs, *files] if folder == str(root) else [*dirs, *files]:
            path = Path(folder, name)
            mode = path.lstat().st_mode
            rel = str(path.relative_to(root)) if name else "."
            if stat.S_ISLNK(mode):
                found[rel] = "-> " + os.readlink(path)
            elif stat.S_ISDIR(mode):
                found[rel] = "folder"
            elif stat.S_ISREG(mode):
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[rel] = f"special {stat.S_IFMT(mode):o}"
    return found


def changed(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The paths added, removed or changed: empty when nothing was touched."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def wait_for(path: Path, seconds: float = 30.0) -> None:
    """Until ``path`` exists (a background process says it got there)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process. A zombie (dead, not yet reaped by its parent) is not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


@pytest.fixture
def process_tag(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A variable to give a command (see tagged_processes). Whatever still carries it when the
    test ends is killed, so a failing test leaves no process behind."""
    tag = {"OUTLIVE_TEST_TAG": str(tmp_path)}
    yield tag
    for pid in tagged_processes(tag):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def tagged_processes(tag: Mapping[str, str]) -> list[int]:
    """Live processes other than this one whose environment holds the variable ``tag``.

    Given to a command, the variable is inherited by everything it starts (the probes keep the
    caller's environment), at whatever stage a child is, even before it runs a line of its own:
    so once the command has exited, an empty list proves that nothing it started outlived it,
    without waiting to see whether something would.
    """
    ((name, value),) = tag.items()
    wanted = os.fsencode(f"{name}={value}")
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:  # gone meanwhile, or another user's
            continue
        if wanted in environ.split(b"\0") and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def returns_promptly(func: Callable[[], object], fifo: Path, seconds: float = 30.0) -> bool:
    """Whether ``func`` returns although nobody writes to ``fifo``. If it blocks, a writer that
    closes at once releases it, so that the failing test does not hang the suite."""
    call = threading.Thread(target=func)
    call.start()
    call.join(timeout=seconds)
    blocked = call.is_alive()
    if blocked:
        os.close(os.open(fifo, os.O_WRONLY))
        call.join()
    return not blocked


def read_terminal(
    fd: int, until: bytes | re.Pattern[bytes] | None = None, seconds: float = 60.0
) -> bytes:
    """What a pseudo-terminal shows: read until ``until`` (bytes, or a pattern searched for)
    appears, the child closes it (EOF or EIO), or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    seen = b""

    def arrived() -> bool:
        if until is None:
            return False
        if isinstance(until, bytes):
            return until in seen
        return until.search(seen) is not None

    while not arrived():
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0.0, left))
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    return seen


def once_the_snapshot_exists(snapshot: Path, done: Path, action: str) -> str:
    """A probe (Python code) that, on its first run only, waits for ``snapshot`` to be written,
    then runs ``action`` (lines of Python) and touches ``done``: another process acting in the
    environment after the snapshot and before the removal."""
    body = "".join(f"    {line}\n" for line in action.splitlines())
    return (
        "import pathlib, time\n"
        f"done = pathlib.Path({str(done)!r})\n"
        "if not done.exists():\n"
        "    deadline = time.monotonic() + 60\n"
        f"    while not pathlib.Path({str(snapshot)!r}).exists():\n"
        "        assert time.monotonic() < deadline, 'no snapshot'\n"
        "        time.sleep(0.01)\n"
        f"{body}"
        "    done.touch()\n"
    )


def stand_in_uv(path: Path, on_uninstall: str, imports: str = "") -> Path:
    """Write at ``path`` a uv that runs ``on_uninstall`` (Python, indented by the caller's
    lines as they are, with ``real`` naming the real uv) when called as ``pip uninstall``, then
    the real uv with the same arguments unless that code exited; every other call is the real
    uv. ``imports``: the modules ``on_uninstall`` needs, comma-separated."""
    assert UV is not None
    body = "".join(f"    {line}\n" for line in on_uninstall.splitlines())
    modules = ", ".join(["os", "sys", *filter(None, (m.strip() for m in imports.split(",")))])
    path.write_text(
        f"#!{sys.executable}\n"
        f"import {modules}\n"
        f"real = {UV!r}\n"
        "if sys.argv[1:3] == ['pip', 'uninstall']:\n"
        f"{body}"
        "os.execv(real, [real, *sys.argv[1:]])\n"
    )
    path.chmod(0o755)
    return path


def logging_uv(path: Path, log: Path) -> Path:
    """Write at ``path`` a uv that appends its arguments to ``log`` (one JSON list a line),
    then runs the real uv with them: what the tool asked of its installer, and how often."""
    assert UV is not None
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"with open({str(log)!r}, 'a') as log:\n"
        "    log.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"os.execv({UV!r}, [{UV!r}, *sys.argv[1:]])\n"
    )
    path.chmod(0o755)
    return path


def installer_calls(log: Path, *verb: str) -> list[list[str]]:
    """The calls ``logging_uv`` logged whose first arguments are ``verb`` (``pip``,
    ``install``), a dry run left out."""
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [c for c in calls if c[: len(verb)] == list(verb) and "--dry-run" not in c]


# -- commands run by a test: in the background, interrupted, recovered ----------------------


def uv_install(venv: Venv, *args: str, find_links: Path | None = None) -> list[str]:
    """The command line a user guards: uv installing into the activated environment."""
    assert UV is not None
    return [
        UV,
        "pip",
        "install",
        "--no-index",
        "--find-links",
        str(find_links or venv.wheelhouse),
        *args,
    ]


def script(venv: Venv, body: str) -> list[str]:
    """A command that is a Python script of the test's (run by the test's interpreter)."""
    return [sys.executable, "-c", body]


def tool_in_background(venv: Venv, *args: str, **extra_env: str) -> subprocess.Popen[str]:
    """``safe-uninstall -p <venv> ARGS`` started, not waited for: a test signals it."""
    env = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(venv.root.parent / "uv-cache")}
    argv = [sys.executable, "-m", "safeuninstall", "--python", str(venv.root), *args]
    pipe = subprocess.PIPE
    return subprocess.Popen(argv, stdout=pipe, stderr=pipe, text=True, env={**env, **extra_env})


def interrupted_at(
    proc: subprocess.Popen[str],
    marker: Path,
    signal_number: int = signal.SIGINT,
    timeout: float = 60.0,
) -> tuple[str, str]:
    """Once ``marker`` exists, ``proc`` gets the signal (a Ctrl-C by default); its output."""
    wait_for(marker)
    proc.send_signal(signal_number)
    return proc.communicate(timeout=timeout)


def probe_that_outlives(started: Path, *, when_leftpad: bool) -> str:
    """A probe that, in the state named, says it started, then runs for ten minutes: still there
    after the command has exited only if the command left it behind."""
    test = "is not None" if when_leftpad else "is None"
    return (
        "import importlib.util, pathlib, time\n"
        f"if importlib.util.find_spec('leftpad') {test}:\n"
        f"    pathlib.Path({str(started)!r}).touch()\n"
        "    time.sleep(600)\n"
    )


def assert_recovered(venv: Venv, hashes: dict[str, str], installed: dict[str, str]) -> None:
    """``recover`` ends what was left: no journal, the installed set and every file as before."""
    run = venv.tool("recover", "--no-probe")
    assert run.returncode == 0, run.stdout + run.stderr
    assert not venv.journal.exists()
    assert venv.installed() == installed
    assert venv.file_hashes() == hashes


# -- files that describe an environment (diff FILE, bisect FILE) -----------------------------


def described_files(venv: Venv, find_links: Path, out: Path) -> dict[str, Path]:
    """``venv``'s set in every form a user has, each a file in ``out`` (as if copied from that
    node; its wheels also in ``find_links``): the snapshot.toml the tool wrote, ``export``'s
    requirements, ``uv pip freeze``'s, and a pylock.toml as a locker writes it (``export``
    writes one only where it knows the wheels' URLs and hashes, which an install from a local
    folder does not record)."""
    out.mkdir()
    snapshot_id = venv.tool("snapshot", "-q", "--no-stash").stdout.strip()
    shutil.copy(venv.snapshot(snapshot_id).snapshot_file, out / "snapshot.toml")
    exported = venv.tool("export", "-o", str(out / "exported.txt"))
    assert exported.returncode == 0, exported.stderr
    freeze = venv.uv("pip", "freeze", "--python", str(venv.python)).stdout
    (out / "freeze.txt").write_text(freeze)
    locked = venv.uv(
        "pip",
        "compile",
        "--quiet",
        "--no-index",
        *_find_links((venv.wheelhouse, find_links)),
        "--format",
        "pylock.toml",
        "--python",
        str(venv.python),
        "-o",
        str(out / "pylock.toml"),
        str(out / "freeze.txt"),
    )
    assert locked.returncode == 0, locked.stderr
    return {
        "snapshot": out / "snapshot.toml",
        "export": out / "exported.txt",
        "freeze": out / "freeze.txt",
        "pylock": out / "pylock.toml",
    }


# -- the real-stack tier: environments from the package index (tests/realstack.py) ---------

from tests.realstack import real_venv, stacks  # noqa: E402, F401 - fixtures for every test


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses a real stack is marked ``realstack``: ``-m "not realstack"`` leaves the
    tier out of a quick run."""
    for item in items:
        if {"real_venv", "stacks"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.realstack)


def error_line(stderr: str, prefix: str = "safe-uninstall: error: ") -> str:
    """The error a failed command printed: the first line of stderr but for the step lines said
    before it (``safe-uninstall: environment: ...``), which must be nothing else: no
    traceback, no warning."""
    lines = stderr.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith(prefix)), None)
    assert at is not None, stderr
    assert all(line.startswith("safe-uninstall: ") for line in lines[:at]), stderr
    return lines[at]
