"""Legacy installs, made the way pip's legacy paths made them, on toy projects.

- ``install``: what ``pip install`` did for a project without a wheel before pip 23.1
  (src/pip/_internal/operations/install/legacy.py): ``setup.py install --record FILE
  --single-version-externally-managed --compile --install-headers ...`` run by the target's
  interpreter, then installed-files.txt written into the .egg-info folder from that record
  (each path relative to the folder, sorted).
- ``develop``: ``pip install -e`` of such a project before PEP 660: ``setup.py develop
  --no-deps``: ``<name>.egg-link`` and a line in easy-install.pth, the metadata in the project.

Where the setuptools beside the tests still has those commands (before 80, which made
``develop`` call pip), they are run for real; otherwise the same files are written by hand, as
that setuptools wrote them. ``made_by`` says which.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import Venv


@dataclass(frozen=True)
class Project:
    """A setup.py project: package ``<module>_pkg`` (two modules), module ``<module>_mod``, and a
    console script ``<name>-tool``."""

    root: Path
    name: str  # the distribution name, with a dash
    version: str = "1.0"

    @property
    def module(self) -> str:
        return self.name.replace("-", "_")

    @property
    def egg_name(self) -> str:
        return f"{self.module}-{self.version}"


def make_project(root: Path, name: str, version: str = "1.0") -> Project:
    project = Project(root, name, version)
    package = root / f"{project.module}_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"VERSION = {version!r}\n\ndef main():\n    print('ok')\n")
    (package / "util.py").write_text("def helper():\n    return 42\n")
    (root / f"{project.module}_mod.py").write_text("FLAG = True\n")
    (root / "setup.py").write_text(
        "from setuptools import setup\n"
        f"setup(name={name!r}, version={version!r}, packages=[{package.name!r}],\n"
        f"      py_modules=[{project.module + '_mod'!r}],\n"
        f"      entry_points={{'console_scripts': ['{name}-tool = {package.name}:main']}})\n"
    )
    return project


def _setuptools() -> tuple[str, str] | None:
    """(the folder that holds setuptools, its version) beside the tests, if it still has
    ``setup.py install`` and ``develop`` as pip ran them."""
    spec = importlib.util.find_spec("setuptools")
    if spec is None or spec.origin is None:
        return None
    version = importlib.metadata.version("setuptools")
    if int(version.split(".")[0]) >= 80:
        return None
    return os.path.dirname(os.path.dirname(spec.origin)), version


def made_by() -> str:
    found = _setuptools()
    return f"setuptools {found[1]}, run for real" if found else "by hand"


def _run_setup(venv: Venv, project: Project, *args: str) -> None:
    found = _setuptools()
    assert found is not None
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = found[0]
    done = subprocess.run(
        [str(venv.python), "-u", "setup.py", *args],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def install(venv: Venv, project: Project) -> Path:
    """pip's legacy ``setup.py install``; the .egg-info folder it made."""
    site = venv.site_packages
    egg_info = site / f"{project.egg_name}-py{_python_version(venv)}.egg-info"
    record = project.root.parent / f"{project.name}-install-record.txt"
    if _setuptools():
        _run_setup(
            venv,
            project,
            "install",
            "--record",
            str(record),
            "--single-version-externally-managed",
            "--compile",
            "--install-headers",
            str(venv.root / "include" / "site" / f"python{_python_version(venv)}" / project.name),
        )
        lines = record.read_text().splitlines()
    else:
        lines = _install_by_hand(venv, project, egg_info)
    # pip's write_installed_files_from_setuptools_record
    entries = sorted(
        os.path.relpath(line.strip() + (os.sep if os.path.isdir(line) else ""), egg_info)
        for line in lines
    )
    (egg_info / "installed-files.txt").write_text("\n".join(entries) + "\n")
    assert egg_info.is_dir()
    return egg_info


def _install_by_hand(venv: Venv, project: Project, egg_info: Path) -> list[str]:
    """The files setuptools 65's ``install --single-version-externally-managed --compile``
    writes, and its record."""
    site = venv.site_packages
    tag = f"cpython-{_python_version(venv).replace('.', '')}"
    package = f"{project.module}_pkg"
    written = []
    for source in (
        f"{package}/__init__.py",
        f"{package}/util.py",
        f"{project.module}_mod.py",
    ):
        dest = site / source
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes((project.root / source).read_bytes())
        written.append(dest)
    compile_code = "import py_compile, sys\nfor p in sys.argv[1:]: py_compile.compile(p)"
    subprocess.run(
        [str(venv.python), "-c", compile_code, *map(str, written)],
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    )
    compiled = [
        site / "__pycache__" / f"{project.module}_mod.{tag}.pyc",
        site / package / "__pycache__" / f"__init__.{tag}.pyc",
        site / package / "__pycache__" / f"util.{tag}.pyc",
    ]
    egg_info.mkdir()
    metadata = {
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {project.name}\nVersion: {project.version}\n",
        "SOURCES.txt": "",
        "dependency_links.txt": "\n",
        "entry_points.txt": f"[console_scripts]\n{project.name}-tool = {package}:main\n",
        "top_level.txt": f"{project.module}_mod\n{package}\n",
    }
    for name, text in metadata.items():
        (egg_info / name).write_text(text)
    script = _script(venv, project)
    return [str(p) for p in (*written, *compiled, *(egg_info / n for n in metadata), script)]


def _script(venv: Venv, project: Project) -> Path:
    """The console script setuptools' easy_install writer makes (install and develop)."""
    script = venv.root / "bin" / f"{project.name}-tool"
    script.write_text(
        f"#!{venv.python}\n# EASY-INSTALL-ENTRY-SCRIPT: '{project.name}=={project.version}',"
        f"'console_scripts','{project.name}-tool'\nimport sys\n"
        f"from {project.module}_pkg import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return script


def develop(venv: Venv, project: Project) -> Path:
    """pip's legacy editable install, ``setup.py develop --no-deps``; the .egg-link it made."""
    site = venv.site_packages
    if _setuptools():
        _run_setup(venv, project, "develop", "--no-deps")
    else:
        egg_info = project.root / f"{project.module}.egg-info"
        egg_info.mkdir()
        (egg_info / "PKG-INFO").write_text(
            f"Metadata-Version: 2.1\nName: {project.name}\nVersion: {project.version}\n"
        )
        (egg_info / "top_level.txt").write_text(f"{project.module}_mod\n{project.module}_pkg\n")
        (site / f"{project.name}.egg-link").write_text(f"{project.root}\n.")
        pth = site / "easy-install.pth"
        before = pth.read_text() if pth.exists() else ""
        pth.write_text(before + f"{project.root}\n")
        _script(venv, project)
    egg_link = site / f"{project.name}.egg-link"
    assert egg_link.is_file()
    return egg_link


def _python_version(venv: Venv) -> str:
    return venv.site_packages.parent.name.removeprefix("python")
