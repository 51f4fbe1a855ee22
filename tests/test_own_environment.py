"""The tool pointed at the environment it runs from, installed there as users install it (a
wheel, not an editable install): a removal that takes away the tool's own files or its
dependencies must still be able to restore them, and --with-orphans must not take them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Run, Venv
from tests.realstack import RealVenv
from tests.wheels import build_wheel

ROOT = Path(__file__).resolve().parent.parent


def _tool_wheel(dest: Path) -> Path:
    """A wheel of this work tree's safeuninstall package, as its pyproject declares it."""
    files: dict[str, bytes | str] = {
        str(path.relative_to(ROOT)): path.read_bytes()
        for path in sorted((ROOT / "safeuninstall").rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    return build_wheel(
        dest,
        "safe-uninstall",
        "0.1.0",
        files,
        requires=["click", "packaging", "filelock", "tomli-w", "msgspec", "uv"],
        top_level=["safeuninstall"],
        entry_points="[console_scripts]\nsafe-uninstall = safeuninstall.__main__:main\n",
    )


@pytest.fixture
def own(real_venv: RealVenv, tmp_path: Path) -> Venv:
    venv = real_venv("tool")
    wheel = _tool_wheel(tmp_path / "house")
    venv.uv("pip", "install", "--python", str(venv.python), "--no-deps", "--offline", str(wheel))
    return venv


def _own_tool(venv: Venv, *args: str) -> Run:
    """``safe-uninstall -p <venv> ARGS``, run from that venv's own installation."""
    env = {
        **os.environ,
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": str(venv.root.parent / "empty-uv-cache"),
    }
    done = subprocess.run(
        [str(venv.root / "bin" / "safe-uninstall"), "--python", str(venv.root), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=venv.root.parent,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def test_the_tool_removing_itself_restores_itself(own: Venv) -> None:
    # The probe fails without the tool: the restore runs in a process whose package is gone
    # from disk, and imports nothing from it that it had not loaded before the removal.
    before = own.file_hashes()
    done = _own_tool(own, "--json", "--probe", "import safeuninstall", "safe-uninstall")
    assert "Traceback" not in done.stderr, done.stderr
    data = done.json()
    assert data["outcome"] == "probe-failed-restored", data["messages"]
    assert done.returncode == 3
    assert own.file_hashes() == before
    assert not own.journal.exists()


def test_the_tool_that_removed_itself_prints_its_report(own: Venv) -> None:
    # In text, the probe passing: the report is rendered once the tool's files are gone, by
    # modules loaded before the removal.
    done = _own_tool(own, "--probe", "import json", "safe-uninstall")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert "removing: safe-uninstall==0.1.0" in done.stdout.splitlines()
    assert done.stdout.splitlines()[-1].startswith("uninstall: "), done.stdout
    assert "safe-uninstall" not in own.installed()


def test_the_tool_keeps_what_its_search_needs_while_removing_itself(own: Venv) -> None:
    # Without the tool nothing requires tomli-w, so both are tried; the probe needs tomli-w:
    # the search restores it, from a process whose package is gone, and removes the tool.
    done = _own_tool(
        own, "--json", "--keep-needed", "--probe", "import tomli_w", "safe-uninstall", "tomli-w"
    )
    assert "Traceback" not in done.stderr, done.stderr
    data = done.json()
    assert data["outcome"] == "removed-kept-needed", data["messages"]
    assert done.returncode == 0
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["removed"] == ["safe-uninstall"]
    assert "tomli-w" in own.installed()
    assert "safe-uninstall" not in own.installed()


def test_with_orphans_never_takes_the_tool_nor_what_it_runs_on(own: Venv) -> None:
    # Run from the environment: uv and the tool's own requirements are never orphans.
    before = own.file_hashes()
    mine = _own_tool(own, "--json", "--dry-run", "--with-orphans", "safe-uninstall").json()
    assert mine["orphans"] == []
    assert mine["removed"] == ["safe-uninstall==0.1.0"]
    spared = "orphans left installed: click, packaging, filelock, tomli-w, msgspec, uv"
    assert any(m.startswith(spared) for m in mine["messages"]), mine["messages"]  # type: ignore[union-attr]
    # Run from elsewhere, what the tool runs on is another environment's: only uv is spared.
    other = own.tool("--json", "--dry-run", "--with-orphans", "safe-uninstall").json()
    assert other["orphans"] == ["click", "packaging", "filelock", "tomli-w", "msgspec"]
    assert any(
        m.startswith("orphans left installed: uv (")
        for m in other["messages"]  # type: ignore[union-attr]
    ), other["messages"]
    assert own.file_hashes() == before


def test_what_the_tool_runs_on_is_removed_only_with_the_tool(own: Venv) -> None:
    """Removed from the environment the tool runs from, click would leave no tool to roll the
    removal back (the probe passes: it imports the user's packages): refused, even with
    --allow-unmet and --no-probe, and under --dry-run."""
    before = own.file_hashes()
    for flags in (("--no-probe",), ("--dry-run",)):
        done = _own_tool(own, "--json", "--allow-unmet", *flags, "click", "msgspec")
        assert done.returncode == 1, done.stdout + done.stderr
        error = done.json()["error"]
        assert isinstance(error, str)
        assert "safe-uninstall runs from this environment and needs click, msgspec" in error
        assert f"--python {own.python}" in error
    assert own.file_hashes() == before
    # With the tool itself, or from another environment, it is what was asked.
    with_tool = _own_tool(own, "--json", "--dry-run", "--allow-unmet", "safe-uninstall", "click")
    assert with_tool.returncode == 0, with_tool.stdout + with_tool.stderr
    from_elsewhere = own.tool("--json", "--allow-unmet", "--no-probe", "click")
    assert from_elsewhere.returncode == 0, from_elsewhere.stdout + from_elsewhere.stderr
    assert "click" not in own.installed()


def test_a_guarded_command_that_removes_what_the_tool_runs_on_is_undone(own: Venv) -> None:
    """`run` judges a change after it is made: one that took click from the tool's own
    environment is undone whatever --keep-on-failure or --allow-unmet say (kept, it would
    leave no tool to roll it back)."""
    before = own.file_hashes()
    uninstall = ["uv", "pip", "uninstall", "--python", str(own.python), "click"]
    for flags in (("--keep-on-failure",), ("--allow-unmet",)):
        done = _own_tool(own, "--json", "run", "--probe", "import json", *flags, "--", *uninstall)
        assert "Traceback" not in done.stderr, done.stderr
        data = done.json()
        assert data["outcome"] == "run-unmet-restored", data["messages"]
        assert done.returncode == 3
        messages = data["messages"]
        assert isinstance(messages, list)
        assert any("which safe-uninstall runs on here" in m for m in messages), messages
        assert own.file_hashes() == before
        assert not own.journal.exists()


def test_the_tool_knows_its_own_requirements_from_its_metadata() -> None:
    """What the running tool needs, read from its own installed metadata: what `runs_on`
    adds where the target's metadata does not say it (the tool's requirements in the base
    of a --system-site-packages venv it runs from)."""
    from safeuninstall.context.context import _own_closure

    assert {"safe-uninstall", "click", "packaging", "filelock", "tomli-w", "msgspec", "uv"} <= (
        _own_closure()
    )
