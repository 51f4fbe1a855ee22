"""``bisect`` beside another process that changes the environment: at every switch between
states, what that process installed or uninstalled is noticed, kept (never undone), named, and
the bisect ends ``bisect-concurrent-kept`` (exit 4), its journal kept for ``recover``.

The other process acts inside a switch, deterministically: the uv the tool runs is a stand-in
(conftest.stand_in_uv) that, on the N-th ``pip uninstall`` (a switch to a state to probe, or the
return to the start), first installs leftpad or uninstalls toolpkg with the real uv."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Venv, stand_in_uv
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

PARTS = [f"part{i}" for i in range(4)]
PROBE = "import " + ", ".join(PARTS)


def _four_parts_upgraded(make_venv: MakeVenv, house: Path) -> tuple[Venv, str]:
    """part0..part3 at 1.0 in snapshot GOOD, at 2.0 now (part2 2.0 fails to import), and
    toolpkg installed in both, untouched by the bisect."""
    for name in PARTS:
        build_wheel(house, name, "1.0", {f"{name}.py": "VERSION = '1.0'\n"})
        body = "raise ImportError('broken in 2.0')\n" if name == "part2" else "VERSION = '2.0'\n"
        build_wheel(house, name, "2.0", {f"{name}.py": body})
    venv = make_venv("toolpkg")
    venv.install(*(f"{n}==1.0" for n in PARTS), find_links=house)
    good = venv.tool("snapshot", "-q")
    assert good.returncode == 0, good.stderr
    venv.install(*(f"{n}==2.0" for n in PARTS), find_links=house)
    return venv, good.stdout.strip()


def _other_process_at(count: Path, switch: int, argv: list[str]) -> str:
    """Stand-in uv code: the ``switch``-th ``pip uninstall`` first runs ``argv`` (the real uv's
    install or uninstall, as another process would), then the tool's own uninstall goes on."""
    return (
        f"count = pathlib.Path({str(count)!r})\n"
        "n = int(count.read_text()) + 1 if count.exists() else 1\n"
        "count.write_text(str(n))\n"
        f"if n == {switch}:\n"
        f"    subprocess.run([real, *{argv!r}], check=True, capture_output=True)\n"
    )


def _switches(venv: Venv, good: str, tmp_path: Path) -> int:
    """How many switches (uninstalls) a bisect of these parts makes, the return included."""
    count = tmp_path / "counted"
    uv = stand_in_uv(tmp_path / "uv-counting", _other_process_at(count, 0, []), "pathlib")
    done = venv.tool("--json", "bisect", good, "--probe", PROBE, SAFE_UNINSTALL_UV=str(uv))
    assert done.returncode == 0, done.stdout + done.stderr
    return int(count.read_text())


# The search over four units with one culprit is deterministic: these switches, then the
# return to the start (test_every_switch_is_covered checks the count).
SWITCHES = 5


def test_every_switch_is_covered(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv, good = _four_parts_upgraded(make_venv, tmp_path / "house")
    assert _switches(venv, good, tmp_path) == SWITCHES


@pytest.mark.parametrize("switch", range(1, SWITCHES + 1))
@pytest.mark.parametrize("kind", ["install", "uninstall"])
def test_a_change_by_another_process_at_a_switch_is_kept_and_named(
    make_venv: MakeVenv, tmp_path: Path, switch: int, kind: str
) -> None:
    venv, good = _four_parts_upgraded(make_venv, tmp_path / "house")
    python = ["--python", str(venv.python)]
    if kind == "install":
        argv = ["pip", "install", *python, "--no-index", "--find-links", str(venv.wheelhouse)]
        argv.append("leftpad==1.0")
        named = "appeared: leftpad-1.0.dist-info"
    else:
        argv = ["pip", "uninstall", *python, "toolpkg"]
        named = "went: toolpkg-1.0.dist-info"
    count = tmp_path / "count"
    uv = stand_in_uv(tmp_path / "uv", _other_process_at(count, switch, argv), "pathlib, subprocess")

    done = venv.tool(
        "--json",
        "bisect",
        good,
        "--probe",
        PROBE,
        SAFE_UNINSTALL_UV=str(uv),
        UV_CACHE_DIR=str(venv.uv_cache),
    )

    assert int(count.read_text()) >= switch  # the other process did act
    data = done.json()
    assert done.returncode == 4, data
    assert data["outcome"] == "bisect-concurrent-kept"
    said = " ".join(map(str, data["messages"]))  # type: ignore[arg-type]
    assert named in said
    assert "back where it started" not in done.stdout
    installed = venv.installed()
    if kind == "install":
        assert installed.get("leftpad") == "1.0"  # the other process's install stands
    else:
        assert "toolpkg" not in installed  # its uninstall stands
    assert int(count.read_text()) == switch  # nothing was switched after it was noticed
    assert venv.journal.exists()
    assert str(data["next_command"]).endswith("recover")


def test_a_change_by_another_process_before_a_refusal_s_return_is_kept_and_named(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The metric fails in GOOD's state (its run there, made first, is the last before the
    refusal), and another process installs leftpad while it runs: the return to the start
    that the refusal makes would uninstall it. It is kept and named instead."""
    venv, good = _four_parts_upgraded(make_venv, tmp_path / "house")
    install = [UV, "pip", "install", "--python", str(venv.python), "--no-index"]
    install += ["--find-links", str(venv.wheelhouse), "--cache-dir", str(venv.uv_cache)]
    code = (
        "import subprocess, sys; "
        f"subprocess.run({[*install, 'leftpad==1.0']!r}, check=True, capture_output=True); "
        "sys.exit(1)"
    )
    metric = shlex.join([str(venv.python), "-c", code])

    done = venv.tool("--json", "bisect", good, "--probe-metric", metric, "--metric-runs", "1")

    data = done.json()
    assert done.returncode == 4, (data, venv.installed().get("leftpad"))
    assert data["outcome"] == "bisect-concurrent-kept"
    said = " ".join(map(str, data["messages"]))  # type: ignore[arg-type]
    assert "appeared: leftpad-1.0.dist-info" in said
    assert venv.installed().get("leftpad") == "1.0"  # the other process's install stands
    assert venv.journal.exists()
