"""--keep-needed and --with-orphans on real venvs of toy wheels: what the static
evidence shows as needed is kept untried, with its reason; a need only the probe sees (an
entry-point plugin, a module imported by the probe alone) is found by bisection within
bisection.bound; one snapshot, so one rollback undoes the whole cleanup, byte for byte."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from safeuninstall.plans.bisection import bound
from safeuninstall.reports.needs import Trial, kept_by_search
from tests.conftest import MakeVenv, Venv, stand_in_uv
from tests.wheels import build_wheel, compile_shared_library

# The reason of a candidate the search keeps: its failure, confirmed by a second run
BISECTED = "the probe fails without it, confirmed by a second run (bisection)"

HOST = """
from importlib.metadata import entry_points
_formats = {e.name: e for e in entry_points(group="toyhost.formats")}
FORMAT = _formats["fmt3"].load()  # a plugin by name: no Requires-Dist says so
"""


@pytest.fixture
def plugins(tmp_path: Path) -> Path:
    house = tmp_path / "plugins"
    build_wheel(house, "toyhost", "1.0", {"toyhost/__init__.py": HOST})
    for i in range(8):
        build_wheel(
            house,
            f"toyfmt{i}",
            "1.0",
            {f"toyfmt{i}.py": f"NAME = 'fmt{i}'\n"},
            entry_points=f"[toyhost.formats]\nfmt{i} = toyfmt{i}:NAME\n",
        )
    return house


def _installed_with(make_venv: MakeVenv, house: Path, *names: str) -> Venv:
    venv = make_venv()
    venv.install(*names, find_links=house)
    return venv


def _kept(data: dict[str, object]) -> dict[str, tuple[str, str]]:
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    return {k["name"]: (k["why"], k["reasons"][0]) for k in cleanup["kept"]}


def test_an_entry_point_plugin_is_found_by_bisection(make_venv: MakeVenv, plugins: Path) -> None:
    venv = _installed_with(make_venv, plugins, "toyhost", *(f"toyfmt{i}" for i in range(8)))
    before = venv.file_hashes()
    done = venv.tool("--json", "--keep-needed", "--probe", "import toyhost", "toyfmt*")
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "removed-kept-needed"
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["tried"] == [f"toyfmt{i}" for i in range(8)]  # static evidence sees nothing
    assert cleanup["removed"] == [f"toyfmt{i}" for i in range(8) if i != 3]
    why, reason = _kept(data)["toyfmt3"]
    assert why == "probe" and "KeyError: 'fmt3'" in reason
    runs = cleanup["probe_runs"]
    assert isinstance(runs, int) and runs == len(cleanup["trials"]) <= bound(8, 1) == 5
    assert cleanup["trials"][-1] == {  # ends on a passing run of exactly the final state
        "removed": cleanup["removed"],
        "passed": True,
        "inconclusive": False,
        "why": "",
    }
    assert data["removed"] == [f"toyfmt{i}==1.0" for i in range(8) if i != 3]
    assert set(venv.installed()) >= {"toyhost", "toyfmt3"}
    assert venv.run_python("import toyhost").returncode == 0
    back = venv.tool("rollback")
    assert back.returncode == 0, back.stderr
    assert venv.file_hashes() == before


# A probe that fails on its Nth run only (the baseline is run 1), counted in a file.
FLAKY = """
import pathlib
runs = pathlib.Path({counter!r})
n = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(n))
if n == {fails_on}:
    raise RuntimeError(f"by chance, on run {{n}}")
"""


def test_a_probe_failure_made_once_by_chance_keeps_nothing(
    make_venv: MakeVenv, plugins: Path, tmp_path: Path
) -> None:
    """The search's first run fails by chance: it is run again on the same state, passes, and
    nothing is kept needed (it was kept, with that chance failure as its reason)."""
    venv = _installed_with(make_venv, plugins, *(f"toyfmt{i}" for i in range(3)))
    counter = tmp_path / "probe-runs"
    probe = FLAKY.format(counter=str(counter), fails_on=2)
    done = venv.tool("--json", "--keep-needed", "--probe", probe, "toyfmt*")
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "removed", data["messages"]
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["kept"] == []
    assert cleanup["removed"] == ["toyfmt0", "toyfmt1", "toyfmt2"]
    assert cleanup["reruns"] == 1
    assert cleanup["trials"] == [
        {
            "removed": ["toyfmt0", "toyfmt1", "toyfmt2"],
            "passed": True,
            "inconclusive": False,
            "why": "failed once (RuntimeError: by chance, on run 2), then passed when run again",
        }
    ]
    assert counter.read_text() == "3"  # the baseline, the failure, the run that confirms


def test_two_needed_of_eight_imported_by_the_probe_alone(
    make_venv: MakeVenv, plugins: Path
) -> None:
    venv = _installed_with(make_venv, plugins, *(f"toyfmt{i}" for i in range(8)))
    before = venv.file_hashes()
    probe = "import toyfmt1, toyfmt6"
    done = venv.tool("--json", "--keep-needed", "--probe", probe, "toyfmt*")
    assert done.returncode == 0, done.stderr
    cleanup = done.json()["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["removed"] == [f"toyfmt{i}" for i in range(8) if i not in (1, 6)]
    assert {k["name"] for k in cleanup["kept"]} == {"toyfmt1", "toyfmt6"}
    assert cleanup["probe_runs"] <= bound(8, 2) == 9
    assert venv.run_python(probe).returncode == 0
    assert venv.tool("rollback").returncode == 0
    assert venv.file_hashes() == before


def test_static_evidence_keeps_without_trying(make_venv: MakeVenv) -> None:
    # consumer's libconsumer.so needs libfoo/libbar/libbaz from the nv*-cu13 wheels (RUNPATH);
    # nvfoo-meta and leftpad nothing needs.
    venv = make_venv("consumer", "nvfoo-cu13", "nvbar-cu13", "nvbaz-cu13", "nvfoo-meta", "leftpad")
    before = venv.file_hashes()
    dry = venv.tool("--json", "--dry-run", "--keep-needed", "--no-probe", "nv*", "leftpad")
    assert dry.returncode == 0, dry.stderr
    kept = _kept(dry.json())
    assert kept["nvfoo-cu13"] == (
        "library",
        "consumer/lib/libconsumer.so needs libfoo.so.1 from it",
    )
    assert set(kept) == {"nvfoo-cu13", "nvbar-cu13", "nvbaz-cu13"}
    assert venv.file_hashes() == before
    done = venv.tool("--json", "--keep-needed", "--probe", "import consumer", "nv*", "leftpad")
    assert done.returncode == 0, done.stderr
    cleanup = done.json()["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["tried"] == ["nvfoo-meta", "leftpad"]
    assert cleanup["removed"] == ["nvfoo-meta", "leftpad"]
    assert cleanup["probe_runs"] == 1
    text = venv.tool("rollback")
    assert text.returncode == 0, text.stderr
    assert venv.file_hashes() == before


def test_every_candidate_needed_restores_all(make_venv: MakeVenv, plugins: Path) -> None:
    venv = _installed_with(make_venv, plugins, "toyfmt0", "toyfmt1")
    before = venv.file_hashes()
    done = venv.tool("--json", "--keep-needed", "--probe", "import toyfmt0, toyfmt1", "toyfmt*")
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "needed-restored"
    assert data["removed"] == []
    assert venv.file_hashes() == before
    # Nothing of it is in effect: a plain rollback passes it over.
    assert "nothing to roll back" in venv.tool("rollback").stdout


def test_with_orphans_removes_the_dependencies_left_unrequired(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")  # urllib3 comes with requests: not requested
    before = venv.file_hashes()
    dry = venv.tool("--json", "--dry-run", "--with-orphans", "requests")
    data = dry.json()
    assert data["orphans"] == ["urllib3"]
    assert data["removed"] == ["requests==2.32.3", "urllib3==2.3.0"]
    assert "orphans, removed too: urllib3" in [e["text"] for e in data["events"]]  # type: ignore[index]
    done = venv.tool("--with-orphans", "--no-probe", "requests")
    assert done.returncode == 0, done.stderr
    assert set(venv.installed()) == {"leftpad"}
    assert venv.tool("rollback").returncode == 0
    assert venv.file_hashes() == before


def test_an_orphan_is_not_one_that_pip_installed_on_request(make_venv: MakeVenv) -> None:
    # uv writes REQUESTED for every distribution (astral-sh/uv#13278); pip for those named.
    venv = make_venv("requests")
    (info,) = venv.site_packages.glob("urllib3-*.dist-info")
    (info / "INSTALLER").unlink()  # replaced, not edited: its inode is uv's cache's
    (info / "INSTALLER").write_text("pip\n")
    data = venv.tool("--json", "--dry-run", "--with-orphans", "requests").json()
    assert data["orphans"] == []
    assert data["removed"] == ["requests==2.32.3"]
    (info / "REQUESTED").unlink()  # pip installed it as a dependency
    data = venv.tool("--json", "--dry-run", "--with-orphans", "requests").json()
    assert data["orphans"] == ["urllib3"]


@pytest.mark.parametrize("step", ["uninstall", "probe", "restore", "verify"])
def test_an_interrupt_during_the_search_restores_the_snapshot_state(
    make_venv: MakeVenv, plugins: Path, step: str
) -> None:
    # The search needs a restore (toyfmt3 is needed): a Ctrl-C at its first uninstall, probe,
    # partial restore or verification ends with everything back as it was, verified.
    venv = _installed_with(make_venv, plugins, "toyhost", *(f"toyfmt{i}" for i in range(4)))
    before = venv.file_hashes()
    done = venv.tool(
        "--json",
        "--keep-needed",
        "--probe",
        "import toyhost",
        "toyfmt*",
        SAFE_UNINSTALL_FAULT=f"{step}:INT",
    )
    data = done.json()
    assert data["outcome"] == "interrupted-restored", data["messages"]
    assert done.returncode == 3
    assert data["removed"] == []
    assert venv.file_hashes() == before
    assert not venv.journal.exists()
    assert "nothing to roll back" in venv.tool("rollback").stdout


def test_ctrl_c_while_uv_uninstalls_in_the_search_restores_what_it_removed(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    # The Ctrl-C arrives while uv removes the first trial's candidates: it is held back until
    # uv is done, then obeyed. What uv removed by then must be known as gone, and restored.
    venv = make_venv("leftpad", "toolpkg", "multipkg")
    before, installed = venv.file_hashes(), venv.installed()
    uv = stand_in_uv(tmp_path / "uv", "os.kill(os.getppid(), signal.SIGINT)", "signal")
    done = venv.tool(
        "--json",
        "--keep-needed",
        "--probe",
        "import sys",
        "leftpad",
        "toolpkg",
        "multipkg",
        SAFE_UNINSTALL_UV=str(uv),
    )
    data = done.json()
    assert data["outcome"] == "interrupted-restored", data["messages"]
    assert done.returncode == 3
    assert venv.installed() == installed
    assert venv.file_hashes() == before
    assert not venv.journal.exists()


# -- another process's change during the search -----------------------------------------------
# The other process acts inside a move of the search, deterministically: the uv the tool runs
# is a stand-in (conftest.stand_in_uv) that, on the N-th ``pip uninstall``, first installs
# leftpad with the real uv. The search below (toyhost needs toyfmt3) moves by two uninstalls:
# its first run, then one after a restore.
MOVES = 2


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


def _searched_beside(venv: Venv, uv: Path, *probe: str) -> dict[str, object]:
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


def test_every_move_of_the_search_is_covered(
    make_venv: MakeVenv, plugins: Path, tmp_path: Path
) -> None:
    venv = _installed_with(make_venv, plugins, "toyhost", *(f"toyfmt{i}" for i in range(4)))
    count = tmp_path / "counted"
    uv = stand_in_uv(tmp_path / "uv-counting", _other_process_at(count, 0, []), "pathlib")
    data = _searched_beside(venv, uv, "--probe", "import toyhost")
    assert data["exit"] == 0, data
    assert int(count.read_text()) == MOVES


@pytest.mark.parametrize(
    ("move", "probe"),
    [(move, ("--probe", "import toyhost")) for move in range(1, MOVES + 1)]
    + [(1, ("--no-probe",))],
)
def test_an_install_by_another_process_during_the_search_is_kept_and_named(
    make_venv: MakeVenv, plugins: Path, tmp_path: Path, move: int, probe: tuple[str, ...]
) -> None:
    """Noticed at the move it lands in (with or without a probe), named, never undone; what
    the search removed comes back, and the removal ends as one does beside another process
    (``concurrent-restored``, exit 3)."""
    venv = _installed_with(make_venv, plugins, "toyhost", *(f"toyfmt{i}" for i in range(4)))
    before = venv.installed()
    python = ["--python", str(venv.python)]
    argv = ["pip", "install", *python, "--no-index", "--find-links", str(venv.wheelhouse)]
    count = tmp_path / "count"
    uv = stand_in_uv(
        tmp_path / "uv",
        _other_process_at(count, move, [*argv, "leftpad==1.0"]),
        "pathlib, subprocess",
    )

    data = _searched_beside(venv, uv, *probe)

    assert int(count.read_text()) == move  # it did act, and nothing was moved after it
    assert data["exit"] == 3, data
    assert data["outcome"] == "concurrent-restored"
    said = " ".join(map(str, data["messages"]))  # type: ignore[arg-type]
    assert "appeared: leftpad-1.0.dist-info" in said
    assert "leftpad" in said.split("but for what another process changed")[1]
    assert venv.installed() == {**before, "leftpad": "1.0"}  # theirs stands, ours came back
    assert not venv.journal.exists()


def test_an_installer_that_removes_nothing_in_the_search_is_said_and_all_is_restored(
    make_venv: MakeVenv, plugins: Path, tmp_path: Path
) -> None:
    """Uv (here a stand-in) exits 0 and removes nothing at the search's first move: the
    installer failed, named as such (not taken for another process's change), and what the
    search changed comes back, proven."""
    venv = _installed_with(make_venv, plugins, "toyhost", *(f"toyfmt{i}" for i in range(4)))
    hashes = venv.file_hashes()
    idle = stand_in_uv(tmp_path / "idle-uv", "sys.exit(0)")
    data = _searched_beside(venv, idle, "--probe", "import toyhost")
    assert data["exit"] == 1, data
    assert data["outcome"] == "uninstall-failed-restored"
    assert "toyfmt3 are still installed: nothing of them was removed" in str(data["messages"])
    assert venv.file_hashes() == hashes
    assert not venv.journal.exists()


def test_the_history_names_what_stayed_removed_and_rollback_restores_all(
    make_venv: MakeVenv,
) -> None:
    # toolpkg is needed by the probe alone: tried, restored by the search, kept. The history
    # says what stayed removed; a rollback still brings back all that was ever removed.
    venv = make_venv("leftpad", "toolpkg", "multipkg")
    before = venv.file_hashes()
    done = venv.tool(
        "--json", "--keep-needed", "--probe", "import toolpkg", "leftpad", "toolpkg", "multipkg"
    )
    data = done.json()
    assert data["outcome"] == "removed-kept-needed", data["messages"]
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["removed"] == ["leftpad", "multipkg"]
    listed = venv.tool("--json", "snapshots").json()["snapshots"]
    assert isinstance(listed, list)
    assert listed[0]["removed"] == ["leftpad", "multipkg"]
    # The note is read as untrusted: a name the snapshot did not set out to remove voids it.
    note = venv.snapshot(listed[0]["id"]).removed_file
    kept_note = note.read_text()
    note.write_text("leftpad\nurllib3\n")
    listed = venv.tool("--json", "snapshots").json()["snapshots"]
    assert isinstance(listed, list)
    assert listed[0]["removed"] == ["leftpad", "toolpkg", "multipkg"]
    note.write_text(kept_note)
    back = venv.tool("rollback", "--no-probe")
    assert back.returncode == 0, back.stderr
    assert "removal of leftpad, multipkg (removed-kept-needed)" in back.stdout
    assert venv.file_hashes() == before


def test_candidates_that_share_files_are_tried_together(make_venv: MakeVenv) -> None:
    # sharedlib-cu12 and -cu13 both list sharedlib/__init__.py. Tried apart, removing cu12
    # alone passes `import sharedlib` (a namespace package is left) and leaves cu13 hollow.
    venv = make_venv("sharedlib-cu12", "sharedlib-cu13", "leftpad")
    before = venv.file_hashes()
    done = venv.tool(
        "--json", "--keep-needed", "--probe", "import sharedlib", "sharedlib-*", "leftpad"
    )
    assert done.returncode == 0, done.stderr
    cleanup = done.json()["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["removed"] == ["leftpad"]
    kept = {k["name"]: k["reasons"][0] for k in cleanup["kept"]}
    assert set(kept) == {"sharedlib-cu12", "sharedlib-cu13"}
    assert "tried together with sharedlib-cu13" in kept["sharedlib-cu12"]
    left = {p: h for p, h in before.items() if "leftpad" not in p}
    assert {p: h for p, h in venv.file_hashes().items()} == left  # nothing hollow
    assert cleanup["bound"] == bound(2, 1)


def test_without_a_probe_the_static_evidence_alone_judges_and_says_so(
    make_venv: MakeVenv,
) -> None:
    venv = make_venv("consumer", "nvfoo-cu13", "leftpad")
    done = venv.tool("--keep-needed", "--no-probe", "nvfoo-cu13", "leftpad")
    assert done.returncode == 0, done.stderr
    assert "kept, needed: nvfoo-cu13: consumer/lib/libconsumer.so needs libfoo.so.1" in (
        done.stdout
    )
    assert "probe runs: 0 for 1 tried" in done.stdout
    assert done.stdout.rstrip().endswith(
        "uninstall: removed what nothing needs, kept what is needed; no probe (--no-probe)"
    )


# -- what a kept candidate requires stays too -------------------------------------------------
# apkg requires bpkg[fast], and bpkg's extra "fast" requires cpkg; apkg imports bpkg only when
# called, so `import apkg` passes without bpkg and cpkg: the probe alone would let them go and
# leave apkg's requirements unmet (the rich stack: rich imports markdown-it-py only for
# Markdown). ctshim is apkg with a shared library it loads with ctypes (the load map keeps it);
# host, which stays, requires apkg (the metadata keeps it).

SHIM_INIT = """
import ctypes, os
CHECK = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "libshim.so")).shim_check()
"""


@pytest.fixture
def requiring(tmp_path: Path) -> Path:
    house = tmp_path / "requiring"
    lazy = "def render():\n    import bpkg\n    return bpkg.X\n"
    build_wheel(house, "apkg", "1.0", {"apkg/__init__.py": lazy}, requires=["bpkg[fast]>=1"])
    build_wheel(
        house, "bpkg", "1.0", {"bpkg/__init__.py": "X = 1\n"}, requires=['cpkg; extra == "fast"']
    )
    build_wheel(house, "cpkg", "1.0", {"cpkg.py": ""})
    build_wheel(house, "lonely", "1.0", {"lonely.py": ""})
    build_wheel(house, "host", "1.0", {"host.py": "import apkg\n"}, requires=["apkg"])
    # twin-a and twin-b list twin/__init__.py both: the search moves them together.
    for twin in ("a", "b"):
        build_wheel(house, f"twin-{twin}", "1.0", {"twin/__init__.py": "", f"twin/{twin}.txt": ""})
    build_wheel(house, "tpkg", "1.0", {"tpkg.py": ""}, requires=["twin-a"])
    shim = compile_shared_library(
        tmp_path / "build" / "libshim.so", "int shim_check(void) { return 7; }\n"
    )
    build_wheel(
        house,
        "ctshim",
        "1.0",
        {"ctshim/__init__.py": SHIM_INIT + lazy, "ctshim/libshim.so": shim.read_bytes()},
        requires=["bpkg[fast]>=1"],
        tag="py3-none-linux_x86_64",
    )
    return house


def _doctor_clean(venv: Venv) -> None:
    doctor = venv.tool("doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout
    assert "missing requirement" not in venv.tool("doctor").stdout


@pytest.mark.parametrize(
    ("first", "kept_by", "probe"),
    [
        ("ctshim", ("loaded", "the probe's process loads ctshim/libshim.so from it"), "ctshim"),
        (
            "apkg",
            ("probe", BISECTED),
            "apkg",
        ),
        ("apkg", ("metadata", "host requires apkg"), "host"),  # kept before as it is now
    ],
    ids=["load-map", "bisection", "metadata"],
)
def test_a_kept_candidate_keeps_the_candidates_it_requires(
    make_venv: MakeVenv, requiring: Path, first: str, kept_by: tuple[str, str], probe: str
) -> None:
    venv = _installed_with(make_venv, requiring, first, "lonely", *(["host"] * (probe == "host")))
    before = venv.file_hashes()
    code = f"import {probe}" if probe != "apkg" else "import apkg; apkg.__name__"
    done = venv.tool("--json", "--keep-needed", "--probe", code, first, "bpkg", "cpkg", "lonely")
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "removed-kept-needed", data["messages"]
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["removed"] == ["lonely"]
    kept = _kept(data)
    assert set(kept) == {first, "bpkg", "cpkg"}
    assert kept[first][0] == kept_by[0] and kept[first][1].startswith(kept_by[1])
    assert kept["bpkg"] == ("metadata", f"{first} (kept) requires bpkg[fast]>=1")
    assert kept["cpkg"] == (
        "metadata",
        f"bpkg (kept)[fast] requires cpkg, an extra requested by {first} (kept)",
    )
    assert cleanup["trials"][-1] == {
        "removed": ["lonely"],
        "passed": True,
        "inconclusive": False,
        "why": "",
    }
    assert set(venv.installed()) >= {first, "bpkg", "cpkg"}
    _doctor_clean(venv)
    assert venv.run_python(f"import {first}; {first}.render()").returncode == 0
    assert venv.tool("rollback").returncode == 0
    assert venv.file_hashes() == before


def test_with_orphans_a_needed_candidate_keeps_its_orphans(
    make_venv: MakeVenv, requiring: Path
) -> None:
    venv = _installed_with(make_venv, requiring, "apkg")
    before = venv.file_hashes()
    done = venv.tool("--json", "--keep-needed", "--with-orphans", "--probe", "import apkg", "apkg")
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["orphans"] == ["bpkg"]  # cpkg: behind an extra, which --with-orphans leaves
    assert data["outcome"] == "needed-restored", data["messages"]
    kept = _kept(data)
    assert kept["apkg"][0] == "probe"
    assert kept["bpkg"] == ("metadata", "apkg (kept) requires bpkg[fast]>=1")
    assert data["removed"] == []
    assert venv.file_hashes() == before
    _doctor_clean(venv)


def test_what_a_kept_candidate_requires_stays_with_the_files_it_shares(
    make_venv: MakeVenv, requiring: Path
) -> None:
    venv = _installed_with(make_venv, requiring, "tpkg", "twin-b", "lonely")
    before = venv.file_hashes()
    done = venv.tool(
        "--json", "--keep-needed", "--probe", "import tpkg", "tpkg", "twin-*", "lonely"
    )
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "removed-kept-needed", data["messages"]
    kept = _kept(data)
    assert kept["tpkg"][0] == "probe"
    assert kept["twin-a"] == ("metadata", "tpkg (kept) requires twin-a")
    assert kept["twin-b"] == (
        "shared-file",
        "it lists files in common with twin-a (kept): alone, its removal would leave twin-a hollow",
    )
    assert data["removed"] == ["lonely==1.0"]
    assert {p: h for p, h in before.items() if "lonely" not in p} == venv.file_hashes()
    _doctor_clean(venv)


# -- the answer does not depend on the order the candidates are named in -----------------------
# xpkg requires ypkg; the probe imports ypkg. Tried first alone, ypkg stays for xpkg: that run
# removes nothing, so it proved nothing about ypkg, and nothing may be inferred about xpkg.


@pytest.fixture
def chained(tmp_path: Path) -> Path:
    house = tmp_path / "chained"
    build_wheel(house, "xpkg", "1.0", {"xpkg.py": ""}, requires=["ypkg"])
    build_wheel(house, "ypkg", "1.0", {"ypkg.py": ""})
    # A chain: c1 requires c2, which requires c3 (c2 imports it only when called); d is alone.
    build_wheel(house, "c1", "1.0", {"c1.py": ""}, requires=["c2"])
    build_wheel(house, "c2", "1.0", {"c2.py": "def f():\n    import c3\n"}, requires=["c3"])
    build_wheel(house, "c3", "1.0", {"c3.py": ""})
    build_wheel(house, "d", "1.0", {"d.py": ""})
    # ea requires host[x] (host stays: no candidate), whose extra x requires eb: staying, ea
    # keeps eb through an extra of another.
    build_wheel(house, "ea", "1.0", {"ea.py": ""}, requires=["host[x]"])
    build_wheel(house, "eb", "1.0", {"eb.py": ""})
    build_wheel(house, "host", "1.0", {"host.py": ""}, requires=['eb; extra == "x"'])
    # A cycle: p1 and p2 require each other, so neither can go without the other.
    build_wheel(house, "p1", "1.0", {"p1.py": ""}, requires=["p2"])
    build_wheel(house, "p2", "1.0", {"p2.py": ""}, requires=["p1"])
    return house


@pytest.mark.parametrize("names", [("xpkg", "ypkg"), ("ypkg", "xpkg")], ids=["x-y", "y-x"])
def test_a_requirement_named_first_is_not_blamed_on_its_requirer(
    make_venv: MakeVenv, chained: Path, names: tuple[str, str]
) -> None:
    venv = _installed_with(make_venv, chained, "xpkg")
    before = venv.file_hashes()
    done = venv.tool("--json", "--keep-needed", "--probe", "import ypkg", *names)
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "removed-kept-needed", data["messages"]
    assert data["removed"] == ["xpkg==1.0"]
    kept = _kept(data)
    assert set(kept) == {"ypkg"}
    assert kept["ypkg"] == (
        "probe",
        f"{BISECTED}: ModuleNotFoundError: No module named 'ypkg'",
    )
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["probe_runs"] <= cleanup["bound"] == bound(2, 1)
    assert cleanup["trials"][-1] == {
        "removed": ["xpkg"],
        "passed": True,
        "inconclusive": False,
        "why": "",
    }
    assert venv.tool("rollback").returncode == 0
    assert venv.file_hashes() == before


def test_every_order_of_a_requirement_chain_gives_the_same_answer(
    make_venv: MakeVenv, chained: Path
) -> None:
    venv = _installed_with(make_venv, chained, "c1", "d")
    before = venv.file_hashes()
    answers = {}
    for names in itertools.permutations(["c1", "c2", "c3", "d"]):
        done = venv.tool("--json", "--keep-needed", "--probe", "import c2", *names)
        assert done.returncode == 0, done.stderr
        data = done.json()
        cleanup = data["keep_needed"]
        assert isinstance(cleanup, dict)
        assert cleanup["probe_runs"] <= cleanup["bound"]
        answers[names] = (data["outcome"], sorted(data["removed"]), _kept(data))
        assert venv.tool("rollback", "--no-probe").returncode == 0
        assert venv.file_hashes() == before
    expected = (
        "removed-kept-needed",
        ["c1==1.0", "d==1.0"],
        {
            "c2": (
                "probe",
                f"{BISECTED}: ModuleNotFoundError: No module named 'c2'",
            ),
            "c3": ("metadata", "c2 (kept) requires c3"),
        },
    )
    wrong = {names: answer for names, answer in answers.items() if answer != expected}
    assert not wrong, f"{len(wrong)} of {len(answers)} orders differ: {wrong}"


@pytest.mark.parametrize("names", [("p1", "p2", "d"), ("p2", "p1", "d")], ids=["p1-p2", "p2-p1"])
def test_candidates_that_require_each_other_are_tried_together(
    make_venv: MakeVenv, chained: Path, names: tuple[str, ...]
) -> None:
    venv = _installed_with(make_venv, chained, "p1", "d")
    before = venv.file_hashes()
    done = venv.tool("--json", "--keep-needed", "--probe", "import p2", *names)
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "removed-kept-needed", data["messages"]
    assert data["removed"] == ["d==1.0"]
    failure = f"{BISECTED}: ModuleNotFoundError: No module named 'p2'"
    assert _kept(data) == {
        "p1": ("probe", f"{failure} (tried together with p2: they require each other)"),
        "p2": ("probe", f"{failure} (tried together with p1: they require each other)"),
    }
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["bound"] == bound(2, 1)  # two units: p1 with p2, and d
    assert cleanup["probe_runs"] <= cleanup["bound"]
    assert venv.tool("rollback").returncode == 0
    assert venv.file_hashes() == before


@pytest.mark.parametrize("names", [("ea", "eb"), ("eb", "ea")], ids=["ea-eb", "eb-ea"])
def test_a_candidate_kept_through_an_extra_of_another_is_tried_after_its_requester(
    make_venv: MakeVenv, chained: Path, names: tuple[str, str]
) -> None:
    venv = _installed_with(make_venv, chained, "ea")
    before = venv.file_hashes()
    done = venv.tool("--json", "--keep-needed", "--probe", "import eb", *names)
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "removed-kept-needed", data["messages"]
    assert data["removed"] == ["ea==1.0"]
    assert _kept(data) == {
        "eb": (
            "probe",
            f"{BISECTED}: ModuleNotFoundError: No module named 'eb'",
        )
    }
    assert venv.tool("rollback").returncode == 0
    assert venv.file_hashes() == before


UNSURE = "INCONCLUSIVE: the metric's runs show neither a regression nor a change within it"


@pytest.mark.parametrize(
    ("trials", "kind", "starts"),
    [
        # the smallest run without it that did not pass decides how it is said
        (
            [Trial(("a", "b"), False, "ImportError"), Trial(("a",), False, UNSURE, True)],
            "inconclusive",
            "inconclusive: the metric's runs could not tell whether it is needed: "
            "the metric's runs show neither",
        ),
        (
            [Trial(("a", "b"), False, UNSURE, True), Trial(("a",), False, "ImportError")],
            "probe",
            "the probe fails without it, confirmed by a second run (bisection): ImportError",
        ),
        # of the same size, a decided failure before an inconclusive one
        (
            [Trial(("a", "b"), False, UNSURE, True), Trial(("a", "c"), False, "KeyError")],
            "probe",
            "the probe fails without it, confirmed by a second run (bisection): KeyError",
        ),
        ([Trial(("b",), True)], "probe", "the probe fails without it"),
    ],
)
def test_how_a_candidate_the_search_kept_is_said(
    trials: list[Trial], kind: str, starts: str
) -> None:
    found_kind, reason = kept_by_search("a", trials)

    assert found_kind == kind
    assert reason.startswith(starts), reason
