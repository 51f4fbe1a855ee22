"""How uv's own settings choose the environment, read as uv reads them (uvsettings.py), and the
other ways ``uv pip`` finds one without -p (interpreter.find_python)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from safeuninstall.base.errors import InvalidInput
from safeuninstall.context.context import open_context
from safeuninstall.environment.interpreter import find_python
from safeuninstall.environment.uvsettings import PipTarget, pip_target
from safeuninstall.options import TargetOptions
from tests.conftest import MakeVenv, run_tool


def _config(folder: Path, text: str, name: str = "uv.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder


def test_each_setting_comes_from_the_option_then_the_variable_then_the_configuration(
    tmp_path: Path,
) -> None:
    project = _config(
        tmp_path / "project",
        "[pip]\npython = 'from-file'\nsystem = true\nbreak-system-packages = true\n",
    )
    home = {"XDG_CONFIG_HOME": str(tmp_path / "home"), "XDG_CONFIG_DIRS": str(tmp_path / "etc")}
    cwd = project / "sub" / "folder"

    def chosen(python: str | None, flag: bool | None, **env: str) -> PipTarget:
        return pip_target(python, flag, flag, cwd=cwd, environ={**home, **env})

    from_file = f"[pip] python of {project / 'uv.toml'}"
    assert chosen(None, None) == PipTarget("from-file", True, True, from_file)
    variables = {"UV_PYTHON": "var", "UV_SYSTEM_PYTHON": "0", "UV_BREAK_SYSTEM_PACKAGES": "no"}
    assert chosen(None, None, **variables) == PipTarget("var", False, False, "UV_PYTHON")
    assert chosen("opt", True, **variables) == PipTarget("opt", True, True)
    assert chosen("opt", False) == PipTarget("opt", False, False)
    assert chosen(None, None, UV_NO_CONFIG="1") == PipTarget(None, False, False)
    with pytest.raises(InvalidInput, match="UV_SYSTEM_PYTHON=maybe"):
        chosen(None, None, UV_SYSTEM_PYTHON="maybe")


def test_the_project_file_comes_before_the_user_and_system_ones(tmp_path: Path) -> None:
    _config(tmp_path / "etc" / "uv", "[pip]\npython = 'system'\nsystem = true\n")
    _config(tmp_path / "home" / "uv", "[pip]\npython = 'user'\n")
    project = _config(
        tmp_path / "project",
        "[project]\nname = 'p'\n[tool.uv.pip]\nbreak-system-packages = true\n",
        name="pyproject.toml",
    )
    environ = {"XDG_CONFIG_HOME": str(tmp_path / "home"), "XDG_CONFIG_DIRS": str(tmp_path / "etc")}

    user = f"[pip] python of {tmp_path / 'home' / 'uv' / 'uv.toml'}"
    assert pip_target(None, None, None, cwd=project, environ=environ) == PipTarget(
        "user", True, True, user
    )
    # A pyproject.toml without [tool.uv] is passed over; --config-file is read alone.
    _config(tmp_path / "plain", "[project]\nname = 'q'\n", name="pyproject.toml")
    assert pip_target(None, None, None, cwd=tmp_path / "plain", environ=environ).python == "user"
    alone = _config(tmp_path / "alone", "[pip]\npython = 'alone'\n") / "uv.toml"
    only = {**environ, "UV_CONFIG_FILE": str(alone)}
    assert pip_target(None, None, None, cwd=project, environ=only) == PipTarget(
        "alone", False, False, f"[pip] python of {alone}"
    )
    bad = _config(tmp_path / "bad", "[pip]\nsystem = 'yes'\n")
    with pytest.raises(InvalidInput, match=r"\[pip\] system = 'yes' is not a bool"):
        pip_target(None, None, None, cwd=bad, environ=environ)


def test_the_environment_the_current_folder_is_in(make_venv: MakeVenv) -> None:
    """Run from inside a virtual environment not named .venv: uv acts on that one."""
    venv = make_venv()
    found = find_python(None, cwd=venv.root / "lib", environ={})
    assert found == venv.python


def test_break_system_packages_from_the_variable_reaches_uv_and_printed_commands(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv = make_venv()
    target = TargetOptions(
        python=str(venv.root),
        cwd=tmp_path,
        environ={"UV_BREAK_SYSTEM_PACKAGES": "1", "XDG_STATE_HOME": str(tmp_path)},
        read_only=True,
    )
    ctx = open_context(target)
    assert ctx.break_system_packages
    assert "--break-system-packages" in ctx.backend.uninstall_argv(["x"])
    assert "--break-system-packages" in ctx.command_line("rollback")


def test_an_interpreter_the_configuration_names_but_that_is_not_there_names_the_file(
    tmp_path: Path,
) -> None:
    project = _config(tmp_path / "project", "[pip]\npython = 'gone/bin/python'\n")
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "h")}

    done = run_tool("--dry-run", "leftpad", env={**os.environ, **env}, cwd=project)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "--python gone/bin/python: no such interpreter or environment directory" in done.stderr
    assert f"(the interpreter named by [pip] python of {project / 'uv.toml'})" in done.stderr
