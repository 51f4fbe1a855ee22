"""``--keep-needed`` beside another process that changes the environment: at every move of the
search between the states it tries, an install by that process is noticed, named and kept
(never undone); what the search removed comes back, and the removal ends
``concurrent-restored`` (exit 3), as a removal does.

The other process acts inside a move, deterministically: the uv the tool runs is a stand-in
(conftest.stand_in_uv) that, on the N-th ``pip uninstall``, first installs leftpad with the real
uv."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Venv, stand_in_uv
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

HOST = """
from importlib.metadata import entry_points
_formats = {e.name: e for e in entry_points(group="toyhost.formats")}
FORMAT = _formats["fmt3"].load()  # a plugin by name: no Requires-Dist says so
"""


def _plugins(make_venv: MakeVenv, house: Path) -> Venv:
    """toyhost and four plugins; toyhost loads toyfmt3 by name (the search keeps it)."""
    build_wheel(house, "toyhost", "1.0", {"toyhost/__init__.py": HOST})
    for i in range(4):
        build_wheel(
            house,
            f"toyfmt{i}",
            "1.0",
            {f"toyfmt{i}.py": f"NAME = 'fmt{i}'\n"},
            entry_points=f"[toyhost.formats]\nfmt{i} = toyfmt{i}:NAME\n",
        )
    venv = make_venv()
    venv.install("toyhost", *(f"toyfmt{i}" for i in range(4)), find_links=house)
    return venv


def _other_process_at(count: Path, move: int, argv: list[str]) -> str:
    """Stand-in uv code: the ``move``-th ``pip uninstall`` first runs ``argv`` (the real uv's
    install, as another process would), then the tool's own uninstall goes on."""
    return (
        f"count = pathlib.Path({str(count)!r})\n"
        "n = int(count.read_text()) + 1 if count.exists() else 1\n"
        "count.write_text(str(n))\n"
        f"if n == {move}:\n"
        f"    subprocess.run([real, *{argv!r}], check=True, capture_output=True)\n"
    )


def _keep_needed(venv: Venv, uv: Path, *probe: str) -> dict[str, object]:
    done = venv.tool(
        "--json",
        "--keep-needed",
        *probe,
        "toyfmt*",
        SAFE_UNINSTALL_UV=str(uv),
        UV_CACHE_DIR=str(venv.uv_cache),
    )
    data = done.json()
    data["exit"] = done.returncode
    return data


def test_every_move_is_covered(make_venv: MakeVenv, tmp_path: Path) -> None:
    """The search below moves by two uninstalls: the first run, then one after a restore."""
    venv = _plugins(make_venv, tmp_path / "house")
    count = tmp_path / "counted"
    uv = stand_in_uv(tmp_path / "uv-counting", _other_process_at(count, 0, []), "pathlib")
    data = _keep_needed(venv, uv, "--probe", "import toyhost")
    assert data["exit"] == 0, data
    assert int(count.read_text()) == MOVES


MOVES = 2


@pytest.mark.parametrize(
    ("move", "probe"),
    [(move, ("--probe", "import toyhost")) for move in range(1, MOVES + 1)]
    + [(1, ("--no-probe",))],
)
def test_an_install_by_another_process_during_a_trial_is_kept_and_named(
    make_venv: MakeVenv, tmp_path: Path, move: int, probe: tuple[str, ...]
) -> None:
    venv = _plugins(make_venv, tmp_path / "house")
    before = venv.installed()
    python = ["--python", str(venv.python)]
    argv = ["pip", "install", *python, "--no-index", "--find-links", str(venv.wheelhouse)]
    count = tmp_path / "count"
    uv = stand_in_uv(
        tmp_path / "uv",
        _other_process_at(count, move, [*argv, "leftpad==1.0"]),
        "pathlib, subprocess",
    )

    data = _keep_needed(venv, uv, *probe)

    assert int(count.read_text()) >= move  # the other process did act
    assert data["exit"] == 3, data
    assert data["outcome"] == "concurrent-restored"
    said = " ".join(map(str, data["messages"]))  # type: ignore[arg-type]
    assert "appeared: leftpad-1.0.dist-info" in said
    assert "leftpad" in said.split("but for what another process changed")[1]
    assert venv.installed() == {**before, "leftpad": "1.0"}  # theirs stands, ours came back
    assert int(count.read_text()) == move  # nothing was moved after it was noticed
    assert not venv.journal.exists()
