"""``bisect`` says what it did and what it proved, and a refusal leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Venv
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

PARTS = [f"part{i}" for i in range(4)]
PROBE = "import " + ", ".join(PARTS)


def _upgraded(
    make_venv: MakeVenv,
    house: Path,
    broken: set[str],
    *,
    copies: bool = False,
    requires: dict[str, list[str]] | None = None,
    stash: bool = True,
) -> tuple[Venv, str]:
    """part0..part3 at 1.0 in snapshot GOOD, at 2.0 now (those in ``broken`` fail to import;
    ``requires``: 2.0's requirements); toolpkg and leftpad installed in both, untouched."""
    for name in PARTS:
        build_wheel(house, name, "1.0", {f"{name}.py": "VERSION = '1.0'\n"})
        body = "raise ImportError('broken in 2.0')\n" if name in broken else "VERSION = '2.0'\n"
        build_wheel(
            house, name, "2.0", {f"{name}.py": body}, requires=(requires or {}).get(name, ())
        )
    venv = make_venv("toolpkg", "leftpad")
    venv.install(*(f"{n}==1.0" for n in PARTS), find_links=house, copies=copies)
    good = venv.tool("snapshot", "-q", *(() if stash else ("--no-stash",)))
    assert good.returncode == 0, good.stderr
    venv.install(*(f"{n}==2.0" for n in PARTS), find_links=house, copies=copies)
    return venv, good.stdout.strip()


def test_a_refusal_after_the_baseline_in_good_s_state_leaves_nothing_behind(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """No probe given: the derived one is judged against its run in GOOD's state, made first,
    so the refusal ("passes now") comes after a switch to GOOD and back. It says so, proves the
    start, and leaves neither a snapshot nor a journal: the next commands are not refused."""
    venv, good = _upgraded(make_venv, tmp_path / "house", set())
    before = venv.installed(), venv.file_hashes()
    snapshots = sorted(venv.state.snapshots_dir.iterdir())

    done = venv.tool("bisect", good)

    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stderr
    assert "the probe passes now" in said
    assert f"switched to the state of snapshot {good} and back" in said
    assert "the installed set is the start's again" in said
    assert "nothing is left behind" in said
    assert "nothing was changed" not in said
    assert (venv.installed(), venv.file_hashes()) == before
    assert not venv.journal.exists()
    assert sorted(venv.state.snapshots_dir.iterdir()) == snapshots

    dry = venv.tool("--dry-run", "--no-probe", "leftpad")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    removed = venv.tool("--no-probe", "leftpad")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "leftpad" not in venv.installed()


def test_a_refusal_because_the_probe_fails_in_good_leaves_nothing_behind(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    venv, good = _upgraded(make_venv, tmp_path / "house", {"part1"})
    before = venv.installed(), venv.file_hashes()
    snapshots = sorted(venv.state.snapshots_dir.iterdir())

    done = venv.tool("bisect", good, "--probe", "raise SystemExit(1)")

    assert done.returncode == 1, done.stdout + done.stderr
    assert f"the probe fails in snapshot {good} too" in done.stderr
    assert "nothing is left behind" in done.stderr
    assert (venv.installed(), venv.file_hashes()) == before
    assert not venv.journal.exists()
    assert sorted(venv.state.snapshots_dir.iterdir()) == snapshots
    assert venv.tool("--no-probe", "leftpad").returncode == 0


def test_a_file_written_in_place_by_the_probe_is_not_claimed_back(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """part2 is the culprit. The probe appends a line to a file of part0, in place: the stash
    holds that file by a hard link, so the edit reaches it too, and when the culprit is
    confirmed on its own (part0 switched to GOOD's) and the start comes back, part0's bytes
    are not the start's: the stash's copy fails its hash and is not used. The end says so
    (NOT verified, part0 named, bisect-incomplete, exit 4), and never that the environment is
    back where it started. The return counts as proven only when it was verified: an end that
    took it as proven unless the restore raised would say `bisected` here."""
    venv, good = _upgraded(make_venv, tmp_path / "house", {"part2"}, copies=True)
    target = venv.site_packages / "part0.py"
    probe = f"with open({str(target)!r}, 'a') as f: f.write('# touched\\n')\n" + PROBE

    done = venv.tool("--json", "bisect", good, "--probe", probe)

    data = done.json()
    assert data["outcome"] == "bisect-incomplete", data
    assert done.returncode == 4
    verification = data["verification"]
    assert isinstance(verification, dict)
    # the stash's copy fails its hash: part0 is not brought back from it
    not_back = [*verification["missing"], *verification["hash_mismatches"]]
    assert any(m.startswith("part0==2.0") for m in not_back), verification
    assert "environment is back where it started" not in done.stdout


def test_the_end_of_a_bisect_claims_the_installed_set(make_venv: MakeVenv, tmp_path: Path) -> None:
    """A bisect whose probe writes nothing: the end claims what was checked, the installed set
    and the files brought back, not the environment's every byte."""
    venv, good = _upgraded(make_venv, tmp_path / "house", {"part2"}, copies=True)
    text = venv.tool("bisect", good, "--probe", PROBE)
    assert "environment is back where it started" not in text.stdout
    assert "the installed set is back where it started, verified" in text.stdout
    assert "verified: the installed set equals the snapshot; " in text.stdout


def test_the_rounds_name_the_units_as_the_header_does(make_venv: MakeVenv, tmp_path: Path) -> None:
    """part1 2.0 requires part3 2.0: one unit, part1+part3, in the header, every round that
    has it, the events and the culprit."""
    venv, good = _upgraded(
        make_venv, tmp_path / "house", {"part3"}, requires={"part1": ["part3>=2"]}
    )

    done = venv.tool("bisect", good, "--probe", PROBE)

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "(part0, part1+part3, part2)" in lines[0], lines[0]
    rounds = [line.split(": as now: ")[1].split(" -- ")[0] for line in lines if "as now:" in line]
    assert rounds and any("part1+part3" in r for r in rounds), rounds
    named = {unit.split(" (confirming ")[0] for r in rounds for unit in r.split(", ")}
    assert named <= {"part0", "part1+part3", "part2", "none (as the good snapshot)"}, named
    assert "culprit: part1+part3:" in done.stdout
    assert "probe with part0, part1+part3, part2 as now: FAILED" in done.stderr


@pytest.mark.parametrize("stash", [True, False], ids=["from-a-stash", "from-the-index"])
def test_dry_run_prints_the_plan_and_changes_nothing(
    make_venv: MakeVenv, tmp_path: Path, stash: bool
) -> None:
    venv, good = _upgraded(make_venv, tmp_path / "house", {"part2"}, stash=stash)
    before = venv.installed(), venv.file_hashes()
    snapshots = sorted(venv.state.snapshots_dir.iterdir())

    done = venv.tool("bisect", good, "--probe", PROBE, "--dry-run")

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"good: snapshot {good}; 4 units of change since (part0, part1, part2, part3)" in out
    assert "--dry-run: would snapshot the start, stashing 4 distributions (hard links)" in out
    where = f"from a stash (snapshot {good})" if stash else "from the index"
    for name in PARTS:
        assert f"{name}==1.0 {where}" in out
    assert "at most 4 rounds for one culprit among 4 units, 7 for two" in out
    assert "bisect: dry run: nothing was changed" in out
    assert (venv.installed(), venv.file_hashes()) == before
    assert sorted(venv.state.snapshots_dir.iterdir()) == snapshots
    assert not venv.journal.exists()
    data = venv.tool("--json", "bisect", good, "--probe", PROBE, "--dry-run").json()
    assert data["outcome"] == "dry-run"
    assert data["snapshot"] is None
    assert data["bisect"]["units"] == [[n] for n in PARTS]  # type: ignore[index]


def test_dry_run_ties_the_units_by_what_the_installed_set_requires(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """part1 2.0, installed now, requires part3 2.0; GOOD's versions require nothing: the tie
    is known from the installed side alone, as the plan reads it before any snapshot."""
    venv, good = _upgraded(
        make_venv, tmp_path / "house", {"part3"}, requires={"part1": ["part3>=2"]}, stash=False
    )

    data = venv.tool("--json", "bisect", good, "--probe", PROBE, "--dry-run").json()

    assert data["outcome"] == "dry-run"
    assert data["bisect"]["units"] == [["part0"], ["part1", "part3"], ["part2"]]  # type: ignore[index]


def test_a_new_hard_link_to_a_file_of_a_unit_is_not_called_a_write(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """A hard link made to part0's file (as uv links a cache's inodes into another venv) moves
    its ctime only: nothing is named as written in place."""
    venv, good = _upgraded(make_venv, tmp_path / "house", {"part2"}, copies=True)
    target = venv.site_packages / "part0.py"
    link = tmp_path / "another-venv-s-link"
    probe = (
        f"import os\nif not os.path.exists({str(link)!r}): "
        f"os.link({str(target)!r}, {str(link)!r})\n"
    )

    done = venv.tool("--json", "bisect", good, "--probe", probe + PROBE)

    data = done.json()
    assert data["outcome"] == "bisected", data
    assert link.exists()
    assert "NOT as at the start" not in " ".join(map(str, data["messages"]))  # type: ignore[arg-type]
