"""Installs made the legacy way (issue 12 #21, issue 13): an .egg-info folder from pip's legacy
``setup.py install`` and a legacy editable (``.egg-link``, ``setup.py develop``), made as
tests/legacy_layouts.py says, on toy projects.

Each is removed, its probe failing and passing, rolled back, killed half way and recovered,
and compared with uv removing the same install; every file's sha256 inside the environment
(site-packages and bin, ``__pycache__`` included: uv deletes those too) and outside it (the
project folder, a folder beside the environment) is compared with before. Hostile input:
paths out of the environment in installed-files.txt and top_level.txt, symbolic links, files
that are not regular, huge files; and the layouts uv (and pip) refuse.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import legacy_layouts
from tests.conftest import UV, MakeVenv, Run, Venv, stand_in_uv
from tests.legacy_layouts import Project, make_project

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

LAYOUTS = ("egg-info", "egg-link")
MIB = 1024 * 1024


def hashes(*roots: Path) -> dict[str, str]:
    """Every entry under each root: a file's sha256 (read in chunks: some are huge), a
    symlink's target, "folder", or the kind of anything else; caches included."""
    found = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in [*dirs, *files]:
                path = Path(folder, name)
                mode = path.lstat().st_mode
                key = f"{root.name}/{path.relative_to(root)}"
                if stat.S_ISLNK(mode):
                    found[key] = "-> " + os.readlink(path)
                elif stat.S_ISDIR(mode):
                    found[key] = "folder"
                elif stat.S_ISREG(mode):
                    digest = hashlib.sha256()
                    with path.open("rb") as handle:
                        while chunk := handle.read(MIB):
                            digest.update(chunk)
                    found[key] = digest.hexdigest()
                else:
                    found[key] = f"special {stat.S_IFMT(mode):o}"
    return found


class Legacy:
    """A venv with one legacy install of ``project``, and everything a test compares."""

    def __init__(self, venv: Venv, project: Project, layout: str, outside: Path) -> None:
        self.venv = venv
        self.project = project
        self.layout = layout
        self.outside = outside
        if layout == "egg-info":
            self.metadata = legacy_layouts.install(venv, project)
        else:
            self.metadata = legacy_layouts.develop(venv, project)
        self.made_by = legacy_layouts.made_by()

    @property
    def package(self) -> str:
        return f"{self.project.module}_pkg"

    def state(self) -> dict[str, str]:
        venv = self.venv
        return hashes(venv.site_packages, venv.root / "bin", self.project.root, self.outside)

    def tool(self, *args: str, **env: str) -> Run:
        # No probe writes a .pyc: every cache the comparison sees is one the install made.
        return self.venv.tool(*args, PYTHONDONTWRITEBYTECODE="1", **env)

    def imports(self) -> bool:
        return self.venv.run_python(f"import {self.package}").returncode == 0


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me\n")
    (folder / "precious_pkg").mkdir()
    (folder / "precious_pkg" / "__init__.py").write_text("")
    return folder


@pytest.fixture
def legacy(
    make_venv: MakeVenv, tmp_path: Path, outside: Path, request: pytest.FixtureRequest
) -> Callable[..., Legacy]:
    def make(layout: str, name: str = "legacy-pkg", venv: Venv | None = None) -> Legacy:
        venv = venv or make_venv("leftpad")
        project = make_project(tmp_path / f"project-{name}-{layout}-{venv.root.name}", name)
        return Legacy(venv, project, layout, outside)

    return make


def pins(venv: Venv) -> set[str]:
    return {f"{name}=={version}" for name, version in venv.installed().items()}


# -- what uv removes, this tool removes; and gives back ------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_removal_deletes_what_uv_deletes_and_rollback_gives_it_back(
    legacy: Callable[..., Legacy], layout: str
) -> None:
    """Two identical environments: ``uv pip uninstall`` in one, ``safe-uninstall --no-probe``
    in the other; the same files are left (relative to each venv), easy-install.pth the same
    bytes less the project's own line; and a rollback then gives back every byte."""
    by_uv, by_tool = legacy(layout), legacy(layout)
    before = by_tool.state()
    removed = by_uv.venv.uv("pip", "uninstall", "--python", str(by_uv.venv.python), "legacy-pkg")
    assert "- legacy-pkg==1.0" in removed.stderr, removed.stderr

    run = by_tool.tool("--no-probe", "legacy-pkg")

    assert run.returncode == 0, run.stdout + run.stderr + legacy_layouts.made_by()
    assert "legacy-pkg==1.0" not in pins(by_tool.venv)
    assert _left(by_tool) == _left(by_uv)
    rolled = by_tool.tool("rollback", "--no-probe")
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert by_tool.state() == before


def _left(install: Legacy) -> tuple[set[str], str]:
    """The paths in the venv (relative), and easy-install.pth with the project's path as X."""
    venv = install.venv
    pth = venv.site_packages / "easy-install.pth"
    text = pth.read_text().replace(str(install.project.root), "X") if pth.exists() else ""
    paths = {p.split("/", 1)[1] for p in hashes(venv.root)}
    return {p for p in paths if not p.startswith(".safe-uninstall")}, text


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_failing_probe_restores_every_byte(legacy: Callable[..., Legacy], layout: str) -> None:
    install = legacy(layout)
    assert install.imports()
    before = install.state()

    run = install.tool("--json", "--probe", f"import {install.package}", "legacy-pkg")

    assert run.returncode == 3, run.stdout + run.stderr + install.made_by
    result = run.json()
    assert result["verification"]["ok"] is True
    assert install.state() == before
    assert install.imports()
    snapshot = json.loads(install.tool("show", "--json").stdout)
    (entry,) = [p for p in snapshot["packages"] if p["name"] == "legacy-pkg"]
    assert entry["layout"] == layout
    assert entry["stash"]["complete"] is True
    if layout == "egg-link":
        (line,) = entry["stash"]["lines"]
        assert line["line"] == str(install.project.root)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_passing_removal_then_rollback(legacy: Callable[..., Legacy], layout: str) -> None:
    install = legacy(layout)
    before = install.state()
    run = install.tool("--probe", "import leftpad", "legacy-pkg")
    assert run.returncode == 0, run.stdout + run.stderr
    assert not install.imports()
    assert "legacy-pkg==1.0" not in pins(install.venv)

    rolled = install.tool("rollback", "--probe", f"import {install.package}")

    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert install.state() == before
    assert "legacy-pkg==1.0" in pins(install.venv)


def _partial_uv(tmp_path: Path, install: Legacy) -> Path:
    """A uv that does part of the removal the real one does (the package folder of an
    .egg-info install, the .egg-link of an editable) and is then killed with the tool."""
    target = install.venv.site_packages / (
        install.package if install.layout == "egg-info" else install.metadata.name
    )
    delete = "shutil.rmtree" if install.layout == "egg-info" else "os.unlink"
    return stand_in_uv(
        tmp_path / "partial-uv",
        f"{delete}({str(target)!r})\nos.kill(os.getppid(), signal.SIGKILL)\nsys.exit(9)",
        imports="shutil, signal",
    )


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kill", ["uninstall", "half-way", "probe"])
def test_kill_during_the_removal_then_recover(
    legacy: Callable[..., Legacy], tmp_path: Path, layout: str, kill: str
) -> None:
    """Killed before uv runs, while it runs (part of the install deleted), after it ran."""
    install = legacy(layout)
    before = install.state()
    if kill == "half-way":
        env = {"SAFE_UNINSTALL_UV": str(_partial_uv(tmp_path, install))}
    else:
        env = {"SAFE_UNINSTALL_FAULT": f"{kill}:KILL"}

    killed = install.tool("--probe", f"import {install.package}", "legacy-pkg", **env)

    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert install.venv.journal.exists()
    if kill != "uninstall":
        assert install.state() != before
    recovered = install.tool("recover", "--no-probe")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert not install.venv.journal.exists()
    assert install.state() == before
    assert install.imports()


def test_two_legacy_editables_removed_together_give_easy_install_pth_back(
    legacy: Callable[..., Legacy], make_venv: MakeVenv
) -> None:
    """Both lines come out of easy-install.pth; the restore puts both back where they were,
    the file byte for byte (its other lines, a CRLF line end and no final newline too)."""
    venv = make_venv("leftpad")
    first = legacy("egg-link", "legacy-pkg", venv=venv)
    second = legacy("egg-link", "other-pkg", venv=venv)
    pth = venv.site_packages / "easy-install.pth"
    text = pth.read_text()
    pth.write_bytes(b"/some/where/else\r\n" + text.encode() + b"./old-1.0-py3.11.egg")
    before = first.state()

    run = first.tool("--probe", "import legacy_pkg_pkg, other_pkg_pkg", "legacy-pkg", "other-pkg")

    assert run.returncode == 3, run.stdout + run.stderr
    assert first.state() == before
    assert second.imports()


def test_easy_install_pth_written_in_place_during_a_run_comes_back_from_a_copy(
    legacy: Callable[..., Legacy],
) -> None:
    """setuptools writes easy-install.pth in place (open and truncate, the same inode). A
    guarded command does so, then removes the editable and fails: the stash's easy-install.pth
    is a copy, not a link to that inode, so it still holds the line the removal took out."""
    assert UV is not None
    install = legacy("egg-link")
    venv = install.venv
    pth = venv.site_packages / "easy-install.pth"
    before = install.state()
    uninstall = [UV, "pip", "uninstall", "--python", str(venv.python), install.project.name]
    body = (
        "import subprocess, sys\n"
        f"with open({str(pth)!r}, 'r+') as handle:\n"
        "    text = handle.read()\n"
        "    handle.seek(0)\n"
        "    handle.truncate()\n"
        "    handle.write(text + '/another/project\\n')\n"
        f"subprocess.run({uninstall!r}, check=True)\n"
        "sys.exit(1)\n"
    )

    run = install.tool("--json", "run", "--no-probe", "--", str(venv.python), "-c", body)

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "run-command-failed-restored"
    assert install.imports()
    after = install.state()
    lines = pth.read_text().splitlines()
    assert str(install.project.root) in lines and "/another/project" in lines
    assert {k: v for k, v in after.items() if not k.endswith("easy-install.pth")} == {
        k: v for k, v in before.items() if not k.endswith("easy-install.pth")
    }


def test_an_editable_line_removes_a_legacy_editable_as_pip_does(
    legacy: Callable[..., Legacy], tmp_path: Path
) -> None:
    """``-e file:///PROJECT#egg=NAME`` in a requirements file, PROJECT the folder of a
    ``setup.py develop`` install: uv skips it, the tool removes it as pip does (pip's
    test_uninstall_from_reqs_file expects it), and rollback gives it back. A documented
    difference (docs/usage.md)."""
    install = legacy("egg-link")
    venv = install.venv
    requirements = tmp_path / "req.txt"
    requirements.write_text(f"-e {install.project.root.as_uri()}#egg={install.project.name}\n")
    before = install.state()

    by_uv = venv.uv("pip", "uninstall", "--python", str(venv.python), "-r", str(requirements))
    assert install.state() == before and install.imports(), by_uv.stderr
    run = install.tool("--no-probe", "-r", str(requirements))

    assert run.returncode == 0, run.stdout + run.stderr
    assert not install.imports()
    back = install.tool("rollback", "--no-probe")
    assert back.returncode == 0, back.stdout + back.stderr
    assert install.state() == before


# -- refused as uv and pip refuse them, before anything changes ---------------------------------


def _refused(install: Legacy, run: Run, before: dict[str, str], message: str) -> None:
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert message in run.stderr, run.stderr
    assert "the environment was not changed" in run.stderr
    assert install.state() == before


@pytest.mark.parametrize("file_name", ["demo.egg-info", "demo-1.0-py3.11.egg-info"])
def test_a_distutils_install_is_refused_like_uv_refuses_it(
    make_venv: MakeVenv, tmp_path: Path, outside: Path, file_name: str
) -> None:
    venv = make_venv("leftpad")
    (venv.site_packages / file_name).write_text("Metadata-Version: 1.1\nName: demo\nVersion: 1.0\n")
    by_uv = venv.uv("pip", "uninstall", "--python", str(venv.python), "demo", check=False)
    assert by_uv.returncode == 2
    # uv wraps its message to the terminal width, after the venv's path: where depends on it
    said = " ".join(by_uv.stderr.split())
    assert "distutils-installed distributions do not include the metadata" in said
    before = hashes(venv.site_packages, outside)

    run = venv.tool("--no-probe", "demo")

    assert run.returncode == 1, run.stdout + run.stderr
    assert "distutils .egg-info file" in run.stderr
    assert "distutils-installed distributions do not include the metadata" in run.stderr
    assert "uv pip uninstall" not in run.stderr  # uv refuses it too: no command to suggest
    assert hashes(venv.site_packages, outside) == before
    assert venv.tool("snapshot").returncode == 0
    assert "demo==1.0  [legacy egg-info-file; partly stashed, 0 files]" in venv.tool("show").stdout


def test_an_egg_info_without_top_level_txt_is_refused_like_uv(
    legacy: Callable[..., Legacy],
) -> None:
    install = legacy("egg-info")
    (install.metadata / "top_level.txt").unlink()
    before = install.state()
    by_uv = install.venv.uv(
        "pip", "uninstall", "--python", str(install.venv.python), "--dry-run", "legacy-pkg"
    )
    assert "Would uninstall 1 package" in by_uv.stderr  # listed by uv, which then stops on it

    run = install.tool("--no-probe", "legacy-pkg")

    _refused(install, run, before, "has no top_level.txt: uv stops with an error")


def test_a_legacy_editable_without_easy_install_pth_is_refused(
    legacy: Callable[..., Legacy],
) -> None:
    """uv deletes the .egg-link, then stops on the missing file: half a removal."""
    install = legacy("egg-link")
    (install.venv.site_packages / "easy-install.pth").unlink()
    before = install.state()

    run = install.tool("--no-probe", "legacy-pkg")

    _refused(install, run, before, "there is no ")


def test_with_pip_as_the_installer_a_legacy_install_is_refused(
    legacy: Callable[..., Legacy],
) -> None:
    """pip removes by installed-files.txt and the scripts, not by uv's rule the stash keeps."""
    install = legacy("egg-info")
    subprocess.run([str(install.venv.python), "-m", "ensurepip"], capture_output=True, check=True)
    before = install.state()

    run = install.tool("--no-probe", "legacy-pkg", SAFE_UNINSTALL_UV="none")

    _refused(install, run, before, "pip removes it by its own rule")


def test_an_easy_install_egg_is_not_installed_for_uv_nor_here(
    make_venv: MakeVenv, outside: Path
) -> None:
    venv = make_venv("leftpad")
    egg = venv.site_packages / "old-1.0-py3.11.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: old\nVersion: 1.0\n")
    (venv.site_packages / "easy-install.pth").write_text("./old-1.0-py3.11.egg\n")
    by_uv = venv.uv("pip", "uninstall", "--python", str(venv.python), "old")
    assert "Skipping old as it is not installed" in by_uv.stderr
    before = hashes(venv.site_packages, outside)

    run = venv.tool("--no-probe", "old")

    assert run.returncode == 0, run.stdout + run.stderr
    assert "nothing to do" in run.stdout
    assert "is an easy_install egg, which uv neither lists nor removes" in run.stdout
    assert hashes(venv.site_packages, outside) == before


# -- hostile input --------------------------------------------------------------------------------


def test_installed_files_txt_out_of_the_environment_is_never_read(
    legacy: Callable[..., Legacy], outside: Path
) -> None:
    """uv removes by top_level.txt, not by installed-files.txt: ``../../`` and absolute paths
    there reach nothing, here as in uv; a huge one is not read either."""
    install = legacy("egg-info")
    listed = install.metadata / "installed-files.txt"
    depth = len(install.metadata.relative_to(outside.parent).parts)
    escapes = [
        "../" * depth + "outside/precious.txt",
        str(outside / "precious_pkg"),
        "/etc/hostname",
    ]
    listed.write_text(listed.read_text() + "\n".join(escapes) + "\n")
    with listed.open("ab") as handle:
        handle.truncate(listed.stat().st_size + 64 * MIB)  # sparse: a NUL-padded 64 MiB file
    before = install.state()

    failed = install.tool("--probe", f"import {install.package}", "legacy-pkg")
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert install.state() == before
    run = install.tool("--no-probe", "legacy-pkg")

    assert run.returncode == 0, run.stdout + run.stderr
    assert (outside / "precious.txt").read_text() == "keep me\n"
    assert (outside / "precious_pkg" / "__init__.py").exists()
    assert install.tool("rollback", "--no-probe").returncode == 0
    assert install.state() == before


def test_top_level_txt_out_of_the_environment_is_skipped_as_uv_skips_it(
    legacy: Callable[..., Legacy], outside: Path
) -> None:
    install = legacy("egg-info")
    depth = len(install.venv.site_packages.relative_to(outside.parent).parts)
    escapes = ["../" * depth + "outside", str(outside / "precious_pkg"), "..", "."]
    top_level = install.metadata / "top_level.txt"
    top_level.write_text(top_level.read_text() + "\n".join(escapes) + "\n\n   \n")
    before = install.state()

    failed = install.tool("--probe", f"import {install.package}", "legacy-pkg")

    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert install.state() == before
    run = install.tool("--no-probe", "legacy-pkg")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "which is no top-level name: uv skips it" in run.stdout
    assert (outside / "precious_pkg" / "__init__.py").exists()
    assert install.tool("rollback", "--no-probe").returncode == 0
    assert install.state() == before


def _link_package_out(install: Legacy, outside: Path) -> None:
    """The package folder replaced by a link to a folder outside the environment."""
    package = install.venv.site_packages / install.package
    os.rename(package, outside / "moved_pkg")
    package.symlink_to(outside / "moved_pkg", target_is_directory=True)


def _link_inside_package(install: Legacy, outside: Path) -> None:
    (install.venv.site_packages / install.package / "data").symlink_to(outside)


def _fifo_inside_package(install: Legacy, outside: Path) -> None:
    os.mkfifo(install.venv.site_packages / install.package / "pipe")


def _module_is_a_folder(install: Legacy, outside: Path) -> None:
    mod = install.venv.site_packages / f"{install.project.module}_mod.py"
    mod.unlink()
    mod.mkdir()


def _huge_top_level(install: Legacy, outside: Path) -> None:
    with (install.metadata / "top_level.txt").open("ab") as handle:
        handle.truncate(2 * MIB)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_link_package_out, "is a symbolic link: uv deletes the link itself"),
        (_link_inside_package, "is a symbolic link: uv deletes the link itself"),
        (_fifo_inside_package, "is not a regular file"),
        (_module_is_a_folder, "is a folder: uv stops with an error there"),
        (_huge_top_level, "over the limit of 1 MiB"),
    ],
    ids=["package-links-out", "link-inside", "fifo-inside", "module-is-a-folder", "huge-list"],
)
def test_what_a_stash_cannot_give_back_is_refused_before_any_change(
    legacy: Callable[..., Legacy],
    outside: Path,
    make: Callable[[Legacy, Path], None],
    message: str,
) -> None:
    install = legacy("egg-info")
    make(install, outside)
    before = install.state()

    run = install.tool("--no-probe", "legacy-pkg")

    _refused(install, run, before, message)


def test_an_easy_install_pth_that_links_out_is_refused(
    legacy: Callable[..., Legacy], outside: Path
) -> None:
    install = legacy("egg-link")
    pth = install.venv.site_packages / "easy-install.pth"
    (outside / "easy-install.pth").write_bytes(pth.read_bytes())
    pth.unlink()
    pth.symlink_to(outside / "easy-install.pth")
    before = install.state()

    run = install.tool("--no-probe", "legacy-pkg")

    _refused(install, run, before, "is a symbolic link")


def test_a_huge_file_in_a_legacy_package_is_kept_and_given_back(
    legacy: Callable[..., Legacy],
) -> None:
    """1 GiB (sparse) inside the package: stashed by a link, hashed once in chunks; the
    failing probe's restore gives it back; the tool stays within 2 GiB of address space."""
    from tests.test_hostile_input import run_bounded

    install = legacy("egg-info")
    with (install.venv.site_packages / install.package / "weights.bin").open("wb") as handle:
        handle.truncate(1024 * MIB)
    before = install.state()

    run = run_bounded(
        install.venv,
        "--probe",
        f"import {install.package}",
        "legacy-pkg",
        PYTHONDONTWRITEBYTECODE="1",
    )

    assert run.returncode == 3, run.stdout + run.stderr
    assert install.state() == before


def test_show_marks_legacy_installs(legacy: Callable[..., Legacy]) -> None:
    install = legacy("egg-info")
    legacy("egg-link", "edit-pkg", venv=install.venv)
    assert install.tool("snapshot").returncode == 0

    shown = install.tool("show").stdout

    assert "legacy-pkg==1.0  [legacy egg-info; stashed, 11 files]" in shown
    assert "edit-pkg==1.0  [legacy egg-link; editable file://" in shown


def test_rollback_refuses_a_legacy_install_no_stash_holds(legacy: Callable[..., Legacy]) -> None:
    """A snapshot without a stash: an installer would bring back a wheel, not this layout."""
    install = legacy("egg-info")
    assert install.tool("snapshot", "--no-stash").returncode == 0
    assert install.tool("--no-probe", "legacy-pkg").returncode == 0
    for folder in install.venv.state.snapshots_dir.iterdir():
        if folder.name != "0001":
            shutil.rmtree(folder)
    after = install.state()

    run = install.tool("rollback", "1", "--no-probe")

    assert run.returncode == 1, run.stdout + run.stderr
    assert "was installed the legacy way, and no stash holds it" in run.stderr
    assert install.state() == after


@pytest.mark.skipif(
    legacy_layouts.made_by() == "by hand", reason="no setuptools with setup.py install here"
)
def test_the_layouts_written_by_hand_are_those_setuptools_writes(
    make_venv: MakeVenv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where setuptools runs for real, the by-hand writer (for setuptools 80 and later) must
    make the same files: it is what the tests use there."""
    made: dict[str, tuple[set[str], int]] = {}
    for way in ("real", "by hand"):
        if way == "by hand":
            monkeypatch.setattr(legacy_layouts, "_setuptools", lambda: None)
        venv = make_venv()
        project = make_project(tmp_path / way.replace(" ", "-"), "legacy-pkg")
        legacy_layouts.install(venv, project)
        legacy_layouts.develop(venv, make_project(tmp_path / f"{way}-edit", "edit-pkg"))
        site, bin_dir = venv.site_packages, venv.root / "bin"
        files = {p.split("/", 1)[1] for p in hashes(site, bin_dir)}
        made[way] = files, (site / "easy-install.pth").read_text().count("\n")
    assert made["by hand"][0] ^ made["real"][0] == set()
    assert made["by hand"][1] == made["real"][1]
