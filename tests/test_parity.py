"""Parity with uv: a drop-in for ``uv pip uninstall``.

Each scenario of uv's ``crates/uv/tests/pip/pip_uninstall.rs`` and of pip's
``tests/functional/test_uninstall.py`` that applies to a Python environment (not the legacy
layouts: ``.egg-info``, ``.egg-link``, distutils), and the argument forms uv accepts beyond them,
is replayed on two identical environments: one gets ``uv pip uninstall ARGS``, the other
``safe-uninstall --no-probe ARGS``. Then both are compared: the exit status (success or not)
and every file's sha256 (bytecode caches included), with each side's own folder written as
``<SIDE>`` so that absolute paths compare equal. Where the tool changed anything, ``rollback``
must bring back every byte of the state before.

A scenario ends one of two ways: ``same`` (what uv did, the tool did), or ``refused``: a
difference documented in docs/usage.md ("Differences from uv pip uninstall"), where the tool
changes nothing and says why. Each test is named after the test it replays; ``test_more_*`` are
the forms of the issue that no source test covers.
"""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from safeuninstall.cli.commands import cli
from tests.conftest import UV, Run, Venv, changed, run_tool, tree
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

# Where a scenario removes what another distribution requires: uv has no such refusal.
_UNINSTALL = cli.get_command(click.Context(cli), "uninstall")
assert _UNINSTALL is not None
ALLOW_UNMET = tuple(
    opt
    for param in _UNINSTALL.params
    for opt in getattr(param, "opts", ())
    if opt == "--allow-unmet"
)

# The tool's own files in an environment, and uv's lock: neither is part of what is compared.
_OWN = {".safe-uninstall", ".safe-uninstall.lock", ".safe-uninstall.journal.toml", ".lock"}


# -- the two sides ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One of the two identical folders of a scenario: the environment (``.venv``), and what
    the scenario puts beside it (projects, requirement files, a file a RECORD points at)."""

    root: Path
    house: Path  # the session's toy wheels
    cache: Path  # uv's cache for installs

    @property
    def venv(self) -> Path:
        return self.root / ".venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site(self) -> Path:
        (site,) = (self.venv / "lib").glob("python3*/site-packages")
        return site

    def env(self) -> dict[str, str]:
        return {**os.environ, "UV_CACHE_DIR": str(self.cache)}

    def uv(
        self,
        *args: str,
        check: bool = True,
        extra: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        assert UV is not None
        return subprocess.run(
            [UV, *args],
            env={**self.env(), **(extra or {})},
            capture_output=True,
            text=True,
            check=check,
            cwd=cwd or self.root,
        )

    def install(self, *requirements: str, find_links: Path | None = None) -> None:
        links = str(find_links or self.house)
        self.uv(
            "pip", "install", "--python", str(self.venv), "--no-index", "-f", links, *requirements
        )

    def run_python(self, code: str) -> None:
        """Run ``code`` in the environment, writing bytecode as an import does."""
        subprocess.run([str(self.python), "-c", code], check=True, cwd=self.root)

    def write(self, rel: str, data: str | bytes) -> Path:
        """A new file (a file installed by uv is a hard link into its cache: never edit one)."""
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def dist_info(self, name: str) -> Path:
        (found,) = (
            p for p in self.site.glob("*.dist-info") if p.name.lower().startswith(f"{name}-")
        )
        return found

    @property
    def wheels(self) -> Path:
        """Wheels a scenario builds, once for both sides (uv notes a wheel's timestamp)."""
        return self.root.parent / "wheels"

    def build(self, name: str, version: str, files: dict[str, str], **extra: str) -> None:
        if not any(self.wheels.glob(f"{name}-{version}-*.whl")):
            build_wheel(self.wheels, name, version, files, **extra)  # type: ignore[arg-type]

    def add_to_record(self, name: str, *lines: str) -> None:
        record = self.dist_info(name) / "RECORD"
        text = record.read_text().rstrip("\n") + "\n" + "".join(f"{line}\n" for line in lines)
        self.write(str(record.relative_to(self.root)), text)

    def tool(
        self, *args: str, extra: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> Run:
        env = {
            **os.environ,
            "UV_OFFLINE": "1",
            "UV_CACHE_DIR": str(self.root.parent / f"empty-uv-cache-{self.root.name}"),
            **(extra or {}),
        }
        return run_tool(*args, env=env, cwd=cwd or self.root)


def record_line(site: Path, rel: str) -> str:
    data = (site / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def state(side: Side, *, across: bool = False) -> dict[str, str]:
    """Every entry of the side's folder (the tool's own files and uv's lock left out): a
    file's sha256, a symlink's target, "folder".

    ``across``: for a comparison with the other side, the side's own path is written
    ``<SIDE>`` in every file, and a RECORD's hashes are left out (a console script's holds the
    side's path: its RECORD hash differs, and the script itself is compared)."""
    marker = os.fsencode(side.root)
    found = {}
    for folder, dirs, files in os.walk(side.root):
        if Path(folder) == side.venv:
            dirs[:] = [d for d in dirs if d not in _OWN]
            files = [f for f in files if f not in _OWN]
        for name in [*dirs, *files]:
            path = Path(folder, name)
            rel = str(path.relative_to(side.root))
            if path.is_symlink():
                target = os.readlink(path)
                found[rel] = "-> " + (
                    target.replace(str(side.root), "<SIDE>") if across else target
                )
            elif path.is_dir():
                found[rel] = "folder"
            else:
                data = path.read_bytes()
                if across:
                    data = data.replace(marker, b"<SIDE>")
                    if name == "RECORD":
                        data = re.sub(rb",sha256=[^,\n]*,", b",,", data)
                found[rel] = hashlib.sha256(data).hexdigest()
    return found


def differences(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


@dataclass
class Replay:
    """One scenario, run on both sides."""

    uv_side: Side
    tool_side: Side
    before: dict[str, str]
    uv: subprocess.CompletedProcess[str]
    tool: Run
    uv_after: dict[str, str]  # both as compared across the sides (see state)
    tool_after: dict[str, str]
    tool_raw_after: dict[str, str]  # as compared with the tool's side before
    where: tuple[str, ...] = ()  # how both commands named the environment (for the rollback)
    # what else named it: variables, the folder both ran in (for the rollback)
    extra: Mapping[str, str] | None = None
    cwd: Path | None = None

    def same(self) -> Replay:
        """The tool did what uv did: the same outcome, the same bytes; then rollback."""
        shown = f"uv: {self.uv.returncode} {self.uv.stderr}\ntool: {self.tool.returncode} "
        shown += self.tool.stdout + self.tool.stderr
        assert (self.uv.returncode == 0) == (self.tool.returncode == 0), shown
        assert differences(self.uv_after, self.tool_after) == [], shown
        return self.rolled_back()

    def refused(self, reason: str, *, uv_changes: bool = True) -> Replay:
        """A documented difference: uv succeeds (``uv_changes``: and changes the environment),
        the tool changes nothing and says why (exit 1)."""
        shown = self.tool.stdout + self.tool.stderr
        assert self.tool.returncode == 1, shown
        assert reason in shown, shown
        assert differences(self.before, self.tool_raw_after) == [], shown
        assert self.uv.returncode == 0, self.uv.stderr
        assert (self.uv_after != self.tool_after) is uv_changes, self.uv.stderr
        return self

    def rolled_back(self) -> Replay:
        """Where the tool changed anything, ``rollback`` gives back every byte of before."""
        if differences(self.before, self.tool_raw_after):
            back = self.tool_side.tool(
                "rollback", "--no-probe", *self.where, extra=self.extra, cwd=self.cwd
            )
            assert back.returncode == 0, back.stdout + back.stderr
            # Files and links; a folder left empty inside a folder a RECORD lists is not
            # brought back (a stash holds files).
            after = {k: v for k, v in state(self.tool_side).items() if v != "folder"}
            before = {k: v for k, v in self.before.items() if v != "folder"}
            assert differences(before, after) == [], back.stdout
        return self


Setup = Callable[[Side], object]


@dataclass(frozen=True)
class Pair:
    uv_side: Side
    tool_side: Side

    def replay(
        self,
        setup: Setup,
        *args: str,
        where: tuple[str, ...] = ("--python", ".venv"),
        tool_only: tuple[str, ...] = (),
        extra: Callable[[Side], Mapping[str, str]] | None = None,
        cwd: Callable[[Side], Path] | None = None,
    ) -> Replay:
        """Set both sides up, then ``uv pip uninstall WHERE ARGS`` on one and
        ``safe-uninstall --no-probe [TOOL_ONLY] WHERE ARGS`` on the other, in the side's folder
        (or ``cwd``'s), each with the side's ``extra`` variables."""
        for side in (self.uv_side, self.tool_side):
            setup(side)
        before = state(self.tool_side)
        assert (
            differences(state(self.uv_side, across=True), state(self.tool_side, across=True)) == []
        )
        env = {side: extra(side) if extra else None for side in (self.uv_side, self.tool_side)}
        at = {side: cwd(side) if cwd else None for side in (self.uv_side, self.tool_side)}
        uv = self.uv_side.uv(
            "pip",
            "uninstall",
            *where,
            *args,
            check=False,
            extra=env[self.uv_side],
            cwd=at[self.uv_side],
        )
        tool = self.tool_side.tool(
            "--no-probe",
            *tool_only,
            *where,
            *args,
            extra=env[self.tool_side],
            cwd=at[self.tool_side],
        )
        return Replay(
            self.uv_side,
            self.tool_side,
            before,
            uv,
            tool,
            state(self.uv_side, across=True),
            state(self.tool_side, across=True),
            state(self.tool_side),
            where,
            env[self.tool_side],
            at[self.tool_side],
        )


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory, uv_cache: Path) -> Path:
    """One fresh venv, copied for each side: ``uv venv`` costs 0.2 s, a copy 5 ms."""
    root = tmp_path_factory.mktemp("template") / ".venv"
    assert UV is not None
    env = {**os.environ, "UV_CACHE_DIR": str(uv_cache)}
    subprocess.run(
        [UV, "venv", "--quiet", "--python", sys.executable, str(root)], check=True, env=env
    )
    return root


@pytest.fixture(scope="session")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy wheels the scenarios install: stand-ins with the layout of the originals."""
    house = tmp_path_factory.mktemp("parity-house")
    build_wheel(house, "MarkupSafe", "2.1.3", {"markupsafe/__init__.py": "X = 1\n"})
    build_wheel(house, "simple.dist", "0.1", {"simpledist/__init__.py": ""})
    build_wheel(house, "simple", "3.0", {"simple/__init__.py": ""})
    build_wheel(house, "six", "1.16.0", {"six.py": "PY3 = True\n"})
    build_wheel(house, "PyLogo", "0.3", {"pylogo/__init__.py": ""})
    build_wheel(house, "rich", "13.7.1", {"rich/__init__.py": "", "rich/console.py": ""})
    build_wheel(
        house, "parent", "0.1", {"parent/__init__.py": "", "parent/plugins/__init__.py": ""}
    )
    build_wheel(
        house,
        "child",
        "0.1",
        {"child/__init__.py": "", "parent/plugins/child_plugin.py": "X = 1\n"},
    )
    build_wheel(house, "pd.find", "0.0.3", {"pd/find/__init__.py": "", "pd/find/tool.py": ""})
    build_wheel(
        house,
        "pd.requires",
        "0.0.3",
        {"pd/requires/__init__.py": ""},
        requires=["pd.find"],
    )
    build_wheel(
        house,
        "discover",
        "0.1",
        {"discover/__init__.py": "def main(): pass\n"},
        entry_points="[console_scripts]\ndiscover = discover:main\n",
    )
    build_wheel(
        house,
        "gui_pkg",
        "0.1",
        {"distutils_install/__init__.py": "def test(): pass\n"},
        entry_points="[gui_scripts]\ntest_ = distutils_install:test\n",
    )
    for version in ("21.3.1", "22.1.1"):
        build_wheel(house, "pip", version, {"pip/__init__.py": f"V = {version!r}\n"})
    build_wheel(house, "evilpkg", "0.1.0", {"evilpkg/__init__.py": ""})
    build_wheel(house, "dirpkg", "1.0", {"dirpkg/__init__.py": ""})
    return house


@pytest.fixture
def pair(
    tmp_path: Path, template: Path, house: Path, uv_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Pair]:
    # Imports in a scenario write bytecode, as they would for a user; so would the tool's own
    # use of the interpreter, if it let them.
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    # The state of a --target or --prefix folder is the user's (XDG_STATE_HOME), not the sides'.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    sides = []
    # Names of one length: bytecode holds each source's path, its length before it.
    for name in ("uv", "su"):
        root = tmp_path / name
        shutil.copytree(template, root / ".venv", symlinks=True)
        sides.append(Side(root, house, uv_cache))
    yield Pair(*sides)


def install_project(
    side: Side, name: str, files: dict[str, str], *, editable: bool, version: str = "0.1.0"
) -> Path:
    """A project folder beside the environment, installed from it the way a build backend and
    uv leave it: the files (or, editable, a .pth naming the folder) and a direct_url.json."""
    module = name.replace("-", "_")
    project = side.root / module
    for rel, text in {**files, "pyproject.toml": f'[project]\nname = "{name}"\n'}.items():
        side.write(f"{module}/{rel}", text)
    # The .pth names the folder relative to site-packages: the same bytes on both sides.
    content = {f"{module}.pth": f"../../../../{module}\n"} if editable else files
    side.build(name, version, content)
    side.install(name, find_links=side.wheels)
    dist_info = side.dist_info(module)
    direct = {"url": project.as_uri(), "dir_info": {"editable": True} if editable else {}}
    side.write(str(dist_info.relative_to(side.root) / "direct_url.json"), json.dumps(direct))
    # Listed without its hash (whose bytes name the side); uv's note of the wheel it came from
    # (with the wheel's timestamp) goes.
    (dist_info / "uv_cache.json").unlink(missing_ok=True)
    record = dist_info / "RECORD"
    lines = [line for line in record.read_text().splitlines() if "uv_cache.json" not in line]
    lines.append(f"{dist_info.name}/direct_url.json,,")
    side.write(str(record.relative_to(side.root)), "\n".join(lines) + "\n")
    return project


# == uv: crates/uv/tests/pip/pip_uninstall.rs ================================================


def test_no_arguments(pair: Pair) -> None:
    pair.replay(lambda side: None).same()


def test_invalid_requirement(pair: Pair) -> None:
    pair.replay(lambda side: side.install("simple.dist"), "flask==1.0.x", "simple.dist").same()


def test_missing_requirements_txt(pair: Pair) -> None:
    pair.replay(lambda side: None, "-r", "requirements.txt").same()


def test_invalid_requirements_txt_requirement(pair: Pair) -> None:
    pair.replay(
        lambda side: side.write("requirements.txt", "flask==1.0.x"), "-r", "requirements.txt"
    ).same()


def test_uninstall(pair: Pair) -> None:
    def setup(side: Side) -> None:
        side.install("MarkupSafe==2.1.3")
        side.run_python("import markupsafe")

    pair.replay(setup, "MarkupSafe").same()


def test_missing_record(pair: Pair) -> None:
    def setup(side: Side) -> None:
        side.install("MarkupSafe==2.1.3")
        (side.dist_info("markupsafe") / "RECORD").unlink()

    pair.replay(setup, "MarkupSafe").same()


def test_uninstall_editable_by_name(pair: Pair) -> None:
    files = {"flit_editable/__init__.py": "def main(): pass\n"}
    setup = lambda side: install_project(side, "flit-editable", files, editable=True)  # noqa: E731
    pair.replay(setup, "flit-editable").same()


def test_uninstall_by_path(pair: Pair) -> None:
    files = {"flit_editable/__init__.py": "def main(): pass\n"}
    setup = lambda side: install_project(side, "flit-editable", files, editable=False)  # noqa: E731
    pair.replay(setup, "./flit_editable").same()


def test_uninstall_duplicate_by_path(pair: Pair) -> None:
    files = {"flit_editable/__init__.py": "def main(): pass\n"}
    setup = lambda side: install_project(side, "flit-editable", files, editable=True)  # noqa: E731
    pair.replay(setup, "flit-editable", "./flit_editable").same()


def test_uninstall_duplicate(pair: Pair) -> None:
    """uv removes both dist-info folders of a name; a snapshot keeps one version per name, so
    the tool refuses."""

    def setup(side: Side) -> None:
        side.install("pip==21.3.1")
        other = side.root.parent / f"other-{side.root.name}"
        side.uv(
            "pip",
            "install",
            "--target",
            str(other),
            "--no-index",
            "-f",
            str(side.house),
            "pip==22.1.1",
        )
        shutil.copytree(other / "pip-22.1.1.dist-info", side.site / "pip-22.1.1.dist-info")

    pair.replay(setup, "pip").refused("installed more than once")


def test_uninstall_record_path_traversal(pair: Pair) -> None:
    """A RECORD line that leads out of the environment: uv skips it (and warns); so must the
    stash, and the rollback is byte-exact from the stash."""

    def setup(side: Side) -> None:
        side.install("evilpkg")
        side.write("traversal_target.txt", "I should not be deleted")
        side.add_to_record("evilpkg", "../../../../traversal_target.txt,,0")

    replay = pair.replay(setup, "evilpkg").same()
    assert (replay.tool_side.root / "traversal_target.txt").exists()


def test_yes_flag(pair: Pair) -> None:
    pair.replay(lambda side: side.install("simple.dist"), "--yes", "flask").same()


def test_yes_short_flag(pair: Pair) -> None:
    pair.replay(lambda side: side.install("simple.dist"), "-y", "simple.dist").same()


# == pip: tests/functional/test_uninstall.py =================================================


def test_basic_uninstall(pair: Pair) -> None:
    def setup(side: Side) -> None:
        side.install("six")
        side.run_python("import six")  # writes __pycache__/six.*.pyc, which no RECORD lists

    pair.replay(setup, "six", "-y").same()


@pytest.mark.parametrize("name", ["GTrolls.tar.gz", "https://guyto.com/archives/"])
def test_uninstall_invalid_parameter(pair: Pair, name: str) -> None:
    pair.replay(lambda side: side.install("six"), name, "-y").same()


def test_basic_uninstall_namespace_package(pair: Pair) -> None:
    """pd.requires requires pd.find: uv has no such check, so the tool is told to allow it."""
    setup = lambda side: side.install("pd.requires")  # noqa: E731
    replay = pair.replay(setup, "pd.find", "-y", tool_only=ALLOW_UNMET).same()
    assert (replay.uv_side.site / "pd" / "requires").is_dir()


def test_uninstall_overlapping_package(pair: Pair) -> None:
    """``child`` adds a module to ``parent``'s package. uv deletes the whole
    ``parent/plugins/__pycache__`` folder, with ``parent``'s own bytecode, which its RECORD
    lists (pip lists the .pyc it compiles): the stash must hold what uv really deletes."""

    def setup(side: Side) -> None:
        side.install("parent", "child")
        side.run_python("import parent.plugins.child_plugin, child")
        pyc = sorted(side.site.glob("parent/**/__pycache__/*.pyc"))
        assert pyc
        lines = [record_line(side.site, str(p.relative_to(side.site))) for p in pyc]
        side.add_to_record("parent", *[line for line in lines if "child_plugin" not in line])

    replay = pair.replay(setup, "-y", "child").same()
    assert (replay.uv_side.site / "parent" / "plugins" / "__init__.py").exists()


@pytest.mark.parametrize(
    "console_scripts",
    [
        "test_ = distutils_install:test",
        ",test_ = distutils_install:test_test",
        ", = distutils_install:test_test",
    ],
)
def test_uninstall_entry_point_colon_in_name(pair: Pair, console_scripts: str) -> None:
    def setup(side: Side) -> None:
        entry_points = (
            f"[console_scripts]\n{console_scripts}\n"
            "[pip_test.ep]\nep:name1 = distutils_install\nep:name2 = distutils_install\n"
        )
        files = {"distutils_install/__init__.py": "def test(): pass\ndef test_test(): pass\n"}
        side.build("ep_install", "0.1", files, entry_points=entry_points)
        side.install("ep_install", find_links=side.wheels)

    pair.replay(setup, "ep_install", "-y").same()


def test_uninstall_gui_scripts(pair: Pair) -> None:
    replay = pair.replay(lambda side: side.install("gui_pkg"), "gui_pkg", "-y").same()
    assert not (replay.uv_side.venv / "bin" / "test_").exists()


def test_uninstall_console_scripts(pair: Pair) -> None:
    replay = pair.replay(lambda side: side.install("discover"), "discover", "-y").same()
    assert not (replay.uv_side.venv / "bin" / "discover").exists()


def test_uninstall_console_scripts_uppercase_name(pair: Pair) -> None:
    def setup(side: Side) -> None:
        files = {"distutils_install/__init__.py": "def Test(): pass\n"}
        entry_points = "[console_scripts]\nTest = distutils_install:Test\n"
        side.build("ep_install", "0.1", files, entry_points=entry_points)
        side.install("ep_install", find_links=side.wheels)

    replay = pair.replay(setup, "ep_install", "-y").same()
    assert not (replay.uv_side.venv / "bin" / "Test").exists()


def test_uninstall_from_reqs_file(pair: Pair) -> None:
    """Option lines are ignored, an editable line names the project installed from there."""

    def setup(side: Side) -> None:
        project = install_project(side, "initools", {"initools/__init__.py": ""}, editable=True)
        side.install("PyLogo")
        side.write(
            "test-req.txt",
            "# -f, -i, and --extra-index-url should all be ignored by uninstall\n"
            "-f http://www.example.com\n"
            "-i http://www.example.com\n"
            "--extra-index-url http://www.example.com\n\n"
            f"-e {project}\n"
            "# and something else to test out:\n"
            "PyLogo<0.4\n",
        )

    pair.replay(setup, "-r", "test-req.txt", "-y").same()


def test_uninstallpathset_no_paths(pair: Pair) -> None:
    """A RECORD that lists no file: uv says it uninstalled the package, and removed nothing."""

    def setup(side: Side) -> None:
        side.install("simple.dist")
        side.write(str((side.dist_info("simple.dist") / "RECORD").relative_to(side.root)), "")

    pair.replay(setup, "simple.dist").same()


def test_uninstall_wheel(pair: Pair) -> None:
    pair.replay(lambda side: side.install("simple.dist"), "simple.dist", "-y").same()


@pytest.mark.parametrize(
    "installer",
    ["missing", "folder", "", os.linesep, b"\xc0\xff\xee", "pip", "MegaCorp Cloud Install-O-Matic"],
)
def test_uninstall_without_record_fails(pair: Pair, installer: str | bytes) -> None:
    def setup(side: Side) -> None:
        side.install("simple.dist")
        dist_info = side.dist_info("simple.dist")
        (dist_info / "RECORD").unlink()
        (dist_info / "INSTALLER").unlink()
        if installer == "folder":
            (dist_info / "INSTALLER").mkdir()
        elif installer != "missing":
            data = installer if isinstance(installer, bytes) else (installer + os.linesep).encode()
            (dist_info / "INSTALLER").write_bytes(data)

    pair.replay(setup, "simple.dist", "-y").same()


def test_uninstall_with_symlink(pair: Pair) -> None:
    """A RECORD line that is a symlink to a folder outside: the link goes, not its target."""

    def setup(side: Side) -> None:
        side.install("simple.dist")
        target = side.root / "target"
        target.mkdir()
        (side.site / "symlink").symlink_to(target)
        side.add_to_record("simple.dist", "symlink,,")

    replay = pair.replay(setup, "simple.dist", "-y").same()
    assert (replay.tool_side.root / "target").is_dir()


def test_uninstall_ignores_missing_packages(pair: Pair) -> None:
    pair.replay(lambda side: side.install("simple"), "-y", "non-existent-pkg").same()


def test_uninstall_ignores_missing_packages_and_uninstalls_rest(pair: Pair) -> None:
    pair.replay(lambda side: side.install("simple"), "-y", "non-existent-pkg", "simple").same()


# == the argument forms that no source test covers ==========================================


@pytest.mark.parametrize(
    "requirement", ["rich==15.0.0", "rich[jupyter]", "rich>=13", "rich; python_version < '3'"]
)
def test_more_requirement_specifiers(pair: Pair, requirement: str) -> None:
    """uv removes by name: the installed rich 13.7.1 goes, whatever the version asked."""
    replay = pair.replay(lambda side: side.install("rich", "six"), requirement).same()
    if requirement == "rich==15.0.0":
        assert "rich 13.7.1 is installed, and is removed all the same" in replay.tool.stdout


def test_more_uninstall_editable_by_path(pair: Pair) -> None:
    files = {"flit_editable/__init__.py": ""}
    setup = lambda side: install_project(side, "flit-editable", files, editable=True)  # noqa: E731
    pair.replay(setup, "./flit_editable/", "six").same()


def test_more_requirements_file_forms(pair: Pair) -> None:
    """Options ignored, nested files followed relative to their folder, -e lines, hashes."""

    def setup(side: Side) -> None:
        install_project(side, "proj", {"proj/__init__.py": ""}, editable=True)
        side.install("rich", "six", "PyLogo")
        side.write(
            "reqs/main.txt",
            "--index-url https://download.pytorch.org/whl/cu128\n"
            "--extra-index-url https://example.com/simple\n"
            "-r more/base.txt\n"
            "-e ./proj\n"
            "rich==13.7.1 \\\n    --hash=sha256:" + "0" * 64 + "\n",
        )
        side.write("reqs/more/base.txt", "--find-links https://example.com/l\nsix  # a comment\n")

    replay = pair.replay(setup, "-r", "reqs/main.txt").same()
    assert "'--index-url https://download.pytorch.org/whl/cu128' ignored" in replay.tool.stdout


@pytest.mark.parametrize(
    "encoded",
    [
        lambda text: codecs.BOM_UTF8 + text.encode(),
        lambda text: text.encode("utf-16"),  # a byte-order mark, then little-endian
        lambda text: codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
    ],
    ids=["utf-8-bom", "utf-16", "utf-16-be"],
)
def test_more_requirements_file_with_a_byte_order_mark(
    pair: Pair, encoded: Callable[[str], bytes]
) -> None:
    """A Windows editor's file: UTF-8 with a byte-order mark, or UTF-16 ("Unicode"); uv reads
    both, the mark no part of the first name, and so does the tool (nested files too)."""

    def setup(side: Side) -> None:
        side.install("rich", "six", "PyLogo")
        side.write("reqs.txt", encoded("six\r\n-r more.txt\r\n"))
        side.write("more.txt", encoded("rich\n"))

    pair.replay(setup, "-r", "reqs.txt").same()


def test_more_requirements_file_of_comments_only(pair: Pair) -> None:
    """A file that names no package: uv warns and uninstalls nothing, exit 0; so does the tool."""

    def setup(side: Side) -> None:
        side.install("six")
        side.write("req.txt", "# what to remove goes here\n\n--index-url https://example.com\n")

    replay = pair.replay(setup, "-r", "req.txt").same()
    assert replay.tool.returncode == 0 and replay.uv.returncode == 0
    assert "No packages to uninstall" in replay.uv.stderr
    assert "-r req.txt: no package named; nothing to uninstall" in replay.tool.stdout


def test_more_metadata_missing(pair: Pair) -> None:
    """A dist-info folder without METADATA: uv removes it by the folder's name; the tool cannot
    tell what it would keep, and refuses."""

    def setup(side: Side) -> None:
        side.install("simple.dist", "six")
        (side.dist_info("simple.dist") / "METADATA").unlink()

    replay = pair.replay(setup, "simple.dist").refused("has no METADATA")
    assert "uv pip uninstall" in replay.tool.stderr


@pytest.mark.parametrize("line", ["-f /nowhere", "--index-url=nowhere", "-f ./wheels"])
def test_more_requirements_option_locations(pair: Pair, line: str) -> None:
    """uv refuses a file whose index or find-links location is neither a path nor a URL."""

    def setup(side: Side) -> None:
        side.install("six")
        side.write("reqs/wheels/.keep", "")
        side.write("reqs/req.txt", f"{line}\nsix\n")

    pair.replay(setup, "-r", "reqs/req.txt").same()


def test_more_requirements_files_that_include_each_other(pair: Pair) -> None:
    """uv reads a file reached twice once; a cycle is all but sure to be a mistake: refused."""

    def setup(side: Side) -> None:
        side.install("six")
        side.write("a.txt", "six\n-r b.txt\n")
        side.write("b.txt", "-r a.txt\n")

    pair.replay(setup, "-r", "a.txt").refused("the requirement files include each other")


def without_dates(side: Side, name: str) -> None:
    """An export says when its snapshot was taken: not the same on the two sides."""
    lines = (side.root / name).read_text().splitlines()
    kept = [line for line in lines if not re.search(r"\d{4}-\d\d-\d\dT", line)]
    side.write(name, "\n".join(kept) + "\n")


def test_more_own_export_round_trips(pair: Pair) -> None:
    """What ``safe-uninstall export`` writes (an editable as ``-e file:///...``) is read back."""

    def setup(side: Side) -> None:
        install_project(side, "proj", {"proj/__init__.py": ""}, editable=True)
        side.install("six", "rich")
        venv = ("--python", str(side.venv))
        assert side.tool("snapshot", "--no-stash", *venv).returncode == 0
        assert side.tool("export", "-o", "exported.txt", *venv).returncode == 0
        assert "-e file://" in (side.root / "exported.txt").read_text()
        without_dates(side, "exported.txt")

    replay = pair.replay(setup, "-r", "exported.txt").same()
    assert replay.uv_after == {k: v for k, v in replay.uv_after.items() if "dist-info" not in k}


def test_more_pylock_toml(pair: Pair) -> None:
    """uv reads no requirement from a pylock.toml for an uninstall: it removes nothing and
    exits 0. Removing nothing of what was named is refused, with what to pass instead."""

    def setup(side: Side) -> None:
        install_project(side, "proj", {"proj/__init__.py": ""}, editable=True)
        install_project(side, "other", {"other/__init__.py": ""}, editable=False)
        venv = ("--python", str(side.venv))
        assert side.tool("snapshot", "--no-stash", *venv).returncode == 0
        done = side.tool("export", "--format", "pylock", "-o", "pylock.toml", *venv)
        assert done.returncode == 0 and "pylock" in done.stdout, done.stdout + done.stderr
        without_dates(side, "pylock.toml")

    replay = pair.replay(setup, "-r", "pylock.toml")
    replay.refused("uv pip uninstall reads no requirement from a pylock.toml", uv_changes=False)
    assert "No packages to uninstall" in replay.uv.stderr


def test_more_uv_pip_freeze_round_trips(pair: Pair) -> None:
    def setup(side: Side) -> None:
        install_project(side, "proj", {"proj/__init__.py": ""}, editable=True)
        install_project(side, "other", {"other/__init__.py": ""}, editable=False)
        side.install("six", "rich")
        frozen = side.uv("pip", "freeze", "--python", str(side.venv)).stdout
        assert "-e file://" in frozen and "other @ file://" in frozen
        side.write("frozen.txt", frozen)

    pair.replay(setup, "-r", "frozen.txt").same()


def test_more_record_lists_a_folder(pair: Pair) -> None:
    """uv deletes a folder its RECORD lists with everything in it: all of it is stashed."""

    def setup(side: Side) -> None:
        side.install("dirpkg", "six")
        data = side.site / "dirpkg" / "data"
        for rel in ("a.bin", "deep/b.bin", "deep/deeper/c.txt"):
            side.write(str((data / rel).relative_to(side.root)), rel * 100)
        (data / "empty").mkdir()
        (data / "link").symlink_to("a.bin")
        side.add_to_record("dirpkg", "dirpkg/data,,")

    replay = pair.replay(setup, "dirpkg").same()
    assert not (replay.uv_side.site / "dirpkg").exists()


def test_more_installer_not_utf8_of_another_distribution(pair: Pair) -> None:
    def setup(side: Side) -> None:
        side.install("six", "simple.dist")
        installer = side.dist_info("simple.dist") / "INSTALLER"
        side.write(str(installer.relative_to(side.root)), b"\xc0\xff\xee")

    pair.replay(setup, "six").same()


def test_more_dry_run(pair: Pair) -> None:
    pair.replay(lambda side: side.install("six", "rich"), "--dry-run", "six", "rich").same()


def test_more_typo_of_a_subcommand(pair: Pair) -> None:
    replay = pair.replay(lambda side: side.install("six"), "rollbak").same()
    assert "did you mean the command `safe-uninstall rollback`" in replay.tool.stdout


def test_a_dry_run_writes_nothing_anywhere(
    make_venv: Callable[..., Venv], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a byte anywhere: no lock file, no state folder, no cache, no bytecode from the
    interpreter query (a .pth file that imports a module, as every editable install has)."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    house = tmp_path / "hook-house"
    build_wheel(house, "hook", "1.0", {"hook.pth": "import hookmod\n", "hookmod.py": "X = 1\n"})
    venv = make_venv("consumer", "nvfoo-cu13", "nvbar-cu13", "nvbaz-cu13")
    venv.install("hook", find_links=house)
    home = {k: str(tmp_path / k.lower()) for k in ("HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")}
    before = tree(tmp_path)

    run = venv.tool("--dry-run", "nvfoo-cu13", **home)
    again = venv.tool("rollback", "--dry-run", **home)

    assert run.returncode == 0, run.stdout + run.stderr
    assert "would remove: nvfoo-cu13==1.0" in run.stdout
    assert again.returncode == 1 and "no snapshots" in again.stderr
    assert changed(before, tree(tmp_path)) == []


PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.mark.parametrize("request_", [PYTHON, "python3", f"cpython@{PYTHON}"])
def test_more_python_request(pair: Pair, request_: str) -> None:
    """``-p 3.11``: uv finds the .venv of the folder for that version; so does the tool (it asks
    uv). The rollback names the environment by its path."""
    replay = pair.replay(lambda side: side.install("six"), "six", where=("-p", request_))
    replay.where = ("--python", ".venv")
    replay.same()
    assert "environment: " + str(replay.tool_side.venv) in replay.tool.stdout


def test_more_python_request_that_finds_no_environment(pair: Pair) -> None:
    pair.replay(lambda side: side.install("six"), "six", where=("-p", "3.1")).same()


def test_more_target(pair: Pair) -> None:
    """``--target DIR``: the packages ``uv pip install --target DIR`` put there."""

    def setup(side: Side) -> None:
        folder = str(side.root / "tgt")
        side.uv(
            "pip",
            "install",
            "--target",
            folder,
            "--no-index",
            "-f",
            str(side.house),
            "six",
            "discover",
        )
        side.run_python("import sys; sys.path.insert(0, 'tgt'); import six, discover")

    replay = pair.replay(setup, "six", "discover", where=("--python", ".venv", "--target", "tgt"))
    replay.same()
    assert not (replay.uv_side.root / "tgt" / "six.py").exists()


def test_more_prefix(pair: Pair) -> None:
    def setup(side: Side) -> None:
        folder = str(side.root / "pfx")
        side.uv(
            "pip", "install", "--prefix", folder, "--no-index", "-f", str(side.house), "six", "rich"
        )

    replay = pair.replay(setup, "rich", where=("--python", ".venv", "--prefix", "pfx"))
    replay.same()
    assert list((replay.uv_side.root / "pfx").glob("lib/python*/site-packages/six.py"))


def test_more_system_is_the_interpreter_uv_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--system``: the first interpreter on PATH, as uv picks it; a dry run, which reads
    only (a removal from the machine's own Python is not for a test)."""
    assert UV is not None
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    uv = subprocess.run(
        [UV, "pip", "uninstall", "--system", "--dry-run", "no-such-package-here"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    tool = run_tool("--system", "--dry-run", "no-such-package-here", env=env, cwd=tmp_path)
    assert uv.returncode == tool.returncode == 0, uv.stderr + tool.stdout + tool.stderr
    (root,) = re.findall(r"environment at: (\S+)", uv.stderr)
    (python,) = re.findall(r"environment: (\S+)", tool.stdout)
    assert Path(python).is_relative_to(root), (root, python)
    assert not (tmp_path / "state").exists()


def test_more_uv_options(pair: Pair) -> None:
    """uv's own options (cache, network, discovery, configuration) are accepted with uv's
    meaning, and so are the negations and pip's leftovers it takes."""
    options = (
        "-n",
        "--cache-dir=../uv-cache",
        "--no-progress",
        "--keyring-provider=disabled",
        "--allow-insecure-host=example.com",
        "--no-python-downloads",
        "--no-managed-python",
        "--no-config",
        "--no-break-system-packages",
        "--no-system",
        "--disable-pip-version-check",
        "--directory=.",
    )
    pair.replay(lambda side: side.install("six", "rich"), *options, "six").same()


@pytest.mark.parametrize(
    "line",
    [
        "../../../bin/python",
        "../../../bin/python3",
        "../../../pyvenv.cfg",
        "../../../bin/",
        "../../../.safe-uninstall",
        "../../..",
    ],
)
def test_more_record_lists_the_interpreter(pair: Pair, line: str) -> None:
    """A RECORD line naming the environment's own interpreter, a link that leads to it, its
    pyvenv.cfg, the tool's state folder in it (where the stash goes) or a folder that holds
    them: uv deletes it, and then nothing opens the environment again, or finds the snapshot
    (no rollback, recover or doctor). The tool refuses, naming the line."""

    def setup(side: Side) -> None:
        side.install("evilpkg")
        side.add_to_record("evilpkg", f"{line},,")

    replay = pair.replay(setup, "evilpkg").refused(f"RECORD line {line!r}")
    assert "nothing was removed" in replay.tool.stderr


def test_more_a_removal_that_hollows_another_is_restored(pair: Pair) -> None:
    """Two builds of one library install the same file: uv removes one and leaves the other
    hollow; the tool restores it all (exit 3), even with --no-probe."""

    def setup(side: Side) -> None:
        for flavour in ("cu12", "cu13"):
            side.build(
                f"sharedlib-{flavour}", "1.0", {"sharedlib/__init__.py": f"F = {flavour!r}\n"}
            )
        # one after the other: installed together, which one's file wins is up to uv
        side.install("sharedlib-cu12", find_links=side.wheels)
        side.install("sharedlib-cu13", find_links=side.wheels)

    replay = pair.replay(setup, "sharedlib-cu12")
    assert replay.uv.returncode == 0, replay.uv.stderr
    assert not list(replay.uv_side.site.glob("sharedlib/__init__.py"))
    assert replay.tool.returncode == 3, replay.tool.stdout + replay.tool.stderr
    assert differences(replay.before, replay.tool_raw_after) == []


def test_every_documented_difference_names_a_test_that_exists() -> None:
    """The differences table in docs/usage.md: each row's test is one the suite has."""
    docs = Path(__file__).parent.parent / "docs" / "usage.md"
    text = docs.read_text().partition("### Differences from `uv pip uninstall`")[2]
    rows = [line for line in text.split("\n\n")[2].splitlines() if line.startswith("| ")][2:]
    assert rows
    for row in rows:
        named = row.rstrip(" |").rpartition("|")[2].strip()
        if named == "every test":
            continue
        (test,) = re.findall(r"`([^`]+)`", named)
        if test.endswith(".py"):  # a module's tests
            assert (Path(__file__).parent.parent / test).is_file(), row
            continue
        module, _, func = test.rpartition("::")
        source = Path(__file__).parent.parent / module if module else Path(__file__)
        assert f"def {func}(" in source.read_text(), row


# -- how uv finds the environment without -p ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("uv.toml", "[pip]\npython = '.venv'\n"),
        (
            "pyproject.toml",
            "[project]\nname = 'proj'\nversion = '0'\n[tool.uv.pip]\npython = '.venv'\n",
        ),
    ],
)
def test_more_pip_python_of_uv_configuration(
    pair: Pair, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, text: str
) -> None:
    """uv's configuration names the interpreter (``[pip] python``): it comes before an
    active environment, here one that does not exist."""
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "nowhere"))

    def setup(side: Side) -> None:
        side.install("six")
        side.write(name, text)

    pair.replay(setup, "six", where=()).same()


def test_more_an_explicit_python_comes_before_uv_configuration(pair: Pair, tmp_path: Path) -> None:
    """-p wins over the configuration's ``[pip] python``, which names nothing here."""

    def setup(side: Side) -> None:
        side.install("six")
        side.write("uv.toml", f"[pip]\npython = {str(tmp_path / 'nowhere')!r}\n")

    pair.replay(setup, "six").same()


@pytest.mark.parametrize("base", [False, True])
def test_more_conda_prefix(pair: Pair, base: bool) -> None:
    """An active conda environment ($CONDA_PREFIX) is the target when no virtual environment
    is active; conda's base environment (CONDA_DEFAULT_ENV names another folder) only after
    a .venv is looked for, and here only because it is a virtual environment (uv counts a
    base that is not as a system interpreter, changed only when asked for)."""

    def variables(side: Side) -> dict[str, str]:
        named = {"CONDA_DEFAULT_ENV": "base"} if base else {}
        return {"CONDA_PREFIX": str(side.venv), **named}

    replay = pair.replay(
        lambda side: side.install("six"),
        "six",
        where=(),
        extra=variables,
        cwd=lambda side: side.root.parent,
    )
    replay.same()
    assert replay.tool.returncode == 0, replay.tool.stderr


@pytest.mark.parametrize("how", ["UV_SYSTEM_PYTHON=1", "UV_SYSTEM_PYTHON=true", "uv.toml"])
def test_more_uv_system_python(tmp_path: Path, how: str) -> None:
    """UV_SYSTEM_PYTHON (or ``system = true`` in uv's configuration) is --system, for the
    tool as for uv: the first interpreter on PATH (a dry run: a removal from the machine's own
    Python is not for a test); --no-system overrides it."""
    assert UV is not None
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    if how == "uv.toml":
        (tmp_path / "uv.toml").write_text("[pip]\nsystem = true\n")
    else:
        env["UV_SYSTEM_PYTHON"] = how.partition("=")[2]
    argv = ("--dry-run", "no-such-package-here")
    uv = subprocess.run(
        [UV, "pip", "uninstall", *argv], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    tool = run_tool(*argv, env=env, cwd=tmp_path)
    assert uv.returncode == tool.returncode == 0, uv.stderr + tool.stdout + tool.stderr
    (root,) = re.findall(r"environment at: (\S+)", uv.stderr)
    (python,) = re.findall(r"environment: (\S+)", tool.stdout)
    assert Path(python).is_relative_to(root), (root, python)
    assert not (tmp_path / "state").exists()
    # --no-system: the discovery of an environment (none here: no Python of a venv first on
    # PATH). uv refuses --no-system beside UV_SYSTEM_PYTHON; the tool lets the option win.
    env["PATH"] = "/usr/bin:/bin"
    tool = run_tool("--no-system", *argv, env=env, cwd=tmp_path)
    assert tool.returncode == 1, tool.stdout + tool.stderr
    assert "no target environment" in tool.stderr
    if how == "uv.toml":
        uv = subprocess.run(
            [UV, "pip", "uninstall", "--no-system", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert uv.returncode != 0, uv.stderr


@pytest.mark.parametrize("option", ["--target", "--prefix"])
def test_more_target_that_does_not_exist(pair: Pair, option: str) -> None:
    """A --target (or --prefix) folder that does not exist holds nothing to remove: uv says so
    and exits 0 (leaving the folder made, with its lock file in it); so does the tool, which
    makes nothing there."""
    replay = pair.replay(
        lambda side: side.install("six"), "six", where=("--python", ".venv", option, "nope")
    )
    assert replay.uv.returncode == 0, replay.uv.stderr
    assert replay.tool.returncode == 0, replay.tool.stdout + replay.tool.stderr
    assert "nothing to do" in replay.tool.stdout
    assert differences(replay.before, replay.tool_raw_after) == []


@pytest.mark.parametrize("first", [True, False])
def test_more_a_venv_first_on_path(pair: Pair, first: bool) -> None:
    """No active environment, no .venv: uv takes the first Python on PATH when it is a
    virtual environment's (a container's ``ENV PATH=/venv/bin:$PATH``), and nothing when the
    first is a system one."""

    def variables(side: Side) -> dict[str, str]:
        folders = [str(side.venv / "bin"), "/usr/bin", "/bin"]
        return {"PATH": os.pathsep.join(folders if first else folders[::-1])}

    replay = pair.replay(
        lambda side: side.install("six"),
        "six",
        where=(),
        extra=variables,
        cwd=lambda side: side.root.parent,
    )
    replay.same()
    assert (replay.tool.returncode == 0) is first, replay.tool.stderr


def _externally_managed_python() -> str | None:
    """The machine's own Python where its distributor manages it (PEP 668), else None."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        return None
    done = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
        capture_output=True,
        text=True,
    )
    stdlib = done.stdout.strip()
    return python if done.returncode == 0 and Path(stdlib, "EXTERNALLY-MANAGED").is_file() else None


MANAGED = _externally_managed_python()


@pytest.mark.skipif(MANAGED is None, reason="no externally managed Python on this machine")
@pytest.mark.parametrize("how", ["UV_BREAK_SYSTEM_PACKAGES=1", "uv.toml", "neither"])
def test_more_break_system_packages_without_the_option(tmp_path: Path, how: str) -> None:
    """UV_BREAK_SYSTEM_PACKAGES (or ``break-system-packages = true`` in uv's configuration)
    lets uv, and the tool, act on an externally managed interpreter; without either both
    refuse. A dry run: the machine's own Python is not changed by a test."""
    assert UV is not None and MANAGED is not None
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    if how == "uv.toml":
        (tmp_path / "uv.toml").write_text("[pip]\nbreak-system-packages = true\n")
    elif how != "neither":
        env["UV_BREAK_SYSTEM_PACKAGES"] = "1"
    argv = ("-p", MANAGED, "--dry-run", "no-such-package-here")
    uv = subprocess.run(
        [UV, "pip", "uninstall", *argv], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    tool = run_tool(*argv, env=env, cwd=tmp_path)
    assert (uv.returncode == 0) is (how != "neither"), uv.stderr
    assert (tool.returncode == 0) is (how != "neither"), tool.stdout + tool.stderr
    if how == "neither":
        assert "is externally managed" in tool.stderr and tool.returncode == 1
    assert not (tmp_path / "state").exists()
