"""``bisect`` and ``try --state`` beside an installer that reports success and does not do what
it was asked (removes or installs nothing) at a switch: that is the installer's failure, said as
such, never another process's change; the environment comes back to the start, proven.

The installer is a stand-in uv that does nothing and exits 0 on its first ``pip VERB`` (a dry
run aside), and is the real uv after that: the return to the start works."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Venv, stand_in_uv
from tests.test_bisect import PROBE as PROBE_EIGHT
from tests.test_bisect import _good_then_upgraded, _parts
from tests.test_bisect_files import house, nodes
from tests.test_bisect_others import PARTS, PROBE, _four_parts_upgraded
from tests.test_try_state import EITHER
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

__all__ = ["house", "nodes"]  # fixtures


def _idle_once(path: Path, verb: str) -> Path:
    """A uv that does nothing and exits 0 on its first ``pip VERB`` that is not a dry run;
    the real uv for every other call."""
    assert UV is not None
    done = path.with_suffix(".done")
    path.write_text(
        f"#!{sys.executable}\n"
        "import os, pathlib, sys\n"
        f"done = pathlib.Path({str(done)!r})\n"
        f"if sys.argv[1:3] == ['pip', {verb!r}] and '--dry-run' not in sys.argv "
        "and not done.exists():\n"
        "    done.write_text('idle')\n"
        "    sys.exit(0)\n"
        f"os.execv({UV!r}, [{UV!r}, *sys.argv[1:]])\n"
    )
    path.chmod(0o755)
    return path


def _said(data: dict[str, object]) -> str:
    return " ".join(map(str, data["messages"]))  # type: ignore[call-overload]


def _back_at_the_start(venv: Venv, start: tuple[dict[str, str], dict[str, str]]) -> None:
    assert (venv.installed(), venv.file_hashes()) == start
    assert not venv.journal.exists()


def _four_parts_added(make_venv: MakeVenv, house: Path) -> tuple[Venv, str]:
    """Snapshot GOOD has toolpkg alone; part0..part3 are installed since (part2 fails to
    import): a switch to a state uninstalls parts and brings nothing back in their place."""
    for name in PARTS:
        body = "raise ImportError('broken')\n" if name == "part2" else "VERSION = '2.0'\n"
        build_wheel(house, name, "2.0", {f"{name}.py": body})
    venv = make_venv("toolpkg")
    good = venv.tool("snapshot", "-q")
    assert good.returncode == 0, good.stderr
    venv.install(*(f"{n}==2.0" for n in PARTS), find_links=house)
    return venv, good.stdout.strip()


@pytest.mark.parametrize("since", ["upgraded", "added"])
def test_a_switch_whose_uninstall_removes_nothing_is_the_installer_s_failure(
    make_venv: MakeVenv, tmp_path: Path, since: str
) -> None:
    made = _four_parts_upgraded if since == "upgraded" else _four_parts_added
    venv, good = made(make_venv, tmp_path / "house")
    start = venv.installed(), venv.file_hashes()
    idle = _idle_once(tmp_path / "idle-uv", "uninstall")

    done = venv.tool("--json", "bisect", good, "--probe", PROBE, SAFE_UNINSTALL_UV=str(idle))

    data = done.json()
    assert (tmp_path / "idle-uv.done").exists()  # the installer did skip a switch's uninstall
    assert data["outcome"] == "bisect-stopped", data
    assert done.returncode != 4
    said = _said(data)
    assert "uv reported success, but part" in said
    assert "still installed: nothing of" in said
    assert "the installer failed" in said
    assert "another process" not in said
    assert data["verification"]["ok"] is True  # type: ignore[index]
    # The one command that goes on: the same bisect, once the installer works.
    assert str(data["next_command"]).endswith(shlex.join(["bisect", good, "--probe", PROBE]))
    _back_at_the_start(venv, start)


def test_an_installer_that_never_removes_leaves_the_return_to_recover_not_to_others(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Uv removes nothing at any switch, the return to the start too: the start cannot come
    back (part's other version stays beside it), which is said as the installer's failure,
    with ``recover``; nobody else is named."""
    venv, good = _four_parts_upgraded(make_venv, tmp_path / "house")
    idle = stand_in_uv(tmp_path / "idle-uv", "sys.exit(0)")

    done = venv.tool("--json", "bisect", good, "--probe", PROBE, SAFE_UNINSTALL_UV=str(idle))

    data = done.json()
    assert data["outcome"] == "bisect-incomplete", data
    said = _said(data)
    assert said.count("uv reported success, but part") >= 2  # the switch, then the return
    assert "another process" not in said
    assert venv.journal.exists()
    assert str(data["next_command"]).endswith("recover")


def test_a_switch_whose_install_installs_nothing_is_the_installer_s_failure(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """GOOD's versions are in no stash: a switch installs them with uv, which does nothing."""
    house = tmp_path / "house"
    _parts(house, {"part2"})
    venv, good = _good_then_upgraded(make_venv, house, stash=False)
    start = venv.installed(), venv.file_hashes()
    idle = _idle_once(tmp_path / "idle-uv", "install")

    done = venv.tool(
        "--json", "bisect", good, "--probe", PROBE_EIGHT,
        SAFE_UNINSTALL_UV=str(idle), UV_NO_INDEX="1", UV_FIND_LINKS=str(house),
    )  # fmt: skip

    data = done.json()
    assert (tmp_path / "idle-uv.done").exists()
    assert data["outcome"] == "bisect-stopped", data
    said = _said(data)
    assert "uv reported success, but part" in said
    assert "not installed: it installed nothing" in said
    assert "the installer failed" in said
    assert "another process" not in said
    _back_at_the_start(venv, start)


def test_try_state_whose_switch_removes_nothing_is_the_installer_s_failure(
    nodes: tuple[Venv, dict[str, Path]], house: Path, tmp_path: Path
) -> None:
    b, files = nodes
    start = b.installed(), b.file_hashes()
    idle = _idle_once(tmp_path / "idle-uv", "uninstall")

    done = b.tool(
        "--json", "try", "--state", str(files["export"]), "--find-links", str(house),
        "--probe", EITHER, SAFE_UNINSTALL_UV=str(idle), UV_CACHE_DIR=str(b.uv_cache),
    )  # fmt: skip

    data = done.json()
    assert (tmp_path / "idle-uv.done").exists()
    assert data["outcome"] == "try-stopped", data
    assert done.returncode != 4
    said = _said(data)
    assert "still installed: nothing of" in said
    assert "the installer failed" in said
    assert "another process" not in said
    assert data["verification"]["ok"] is True  # type: ignore[index]
    _back_at_the_start(b, start)
