"""Hostile input, part two: never lose a package, even under attack.

Each test sets up the hostile thing, runs the real command, and compares the sha256 of every
file in the environment (site-packages and bin) and in a folder outside it with before; no
traceback is ever printed.
"""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv, Run, Venv, error_line
from tests.test_bad_input import _tree

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

MIB = 1024 * 1024


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the environment that no command may touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me\n")
    return folder


def everything(venv: Venv, outside: Path) -> dict[str, str]:
    return {**venv.file_hashes(), **{f"outside/{k}": v for k, v in _tree(outside).items()}}


def run_bounded(venv: Venv, *args: str, stdin: bytes = b"", **extra_env: str) -> Run:
    """``venv.tool`` with a ceiling: 2 GiB of address space and two minutes. Before the fixes
    below, ``-r /dev/zero`` took 3.9 GB in 7 s and a FIFO blocked forever; a test that proves
    that must not take the machine down with it."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2048 * MIB, 2048 * MIB))

    env = {
        **os.environ,
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": str(venv.root.parent / f"empty-uv-cache-{venv.root.name}"),
        **extra_env,
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "safeuninstall", "--python", str(venv.root), *args],
            input=stdin,
            capture_output=True,
            env=env,
            timeout=120,
            preexec_fn=limit,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} did not finish in two minutes")
    return Run(done.returncode, done.stdout.decode(), done.stderr.decode(errors="replace"))


def assert_refused(run: Run, message: str, *, code: int = 1) -> None:
    assert run.returncode == code, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert message in run.stderr, run.stderr


# -- 15: a requirements file that never ends, never opens, or is too big ---------------------


def _zero(tmp_path: Path) -> str:
    return "/dev/zero"


def _fifo_without_writer(tmp_path: Path) -> str:
    fifo = tmp_path / "names.fifo"
    os.mkfifo(fifo)
    return str(fifo)


def _seventeen_mib(tmp_path: Path) -> str:
    big = tmp_path / "big-requirements.txt"
    with big.open("wb") as handle:
        handle.truncate(17 * MIB)  # sparse: 17 MiB of NUL bytes, no disk needed
    return str(big)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_zero, "-r /dev/zero: more than 16 MiB, the limit: not a requirements file"),
        (_seventeen_mib, "bytes, over the limit of 16 MiB: not a requirements file"),
    ],
    ids=["dev-zero", "regular-over-16-MiB"],
)
def test_requirements_file_is_read_within_bounds(
    make_venv: MakeVenv,
    tmp_path: Path,
    outside: Path,
    make: Callable[[Path], str],
    message: str,
) -> None:
    venv = make_venv("leftpad")
    path = make(tmp_path)
    before = everything(venv, outside)

    run = run_bounded(venv, "--no-probe", "-r", path)

    assert_refused(run, message)
    if not path.startswith("/dev/"):
        assert path in run.stderr
    assert everything(venv, outside) == before


def test_a_fifo_no_one_writes_to_is_not_waited_for(
    make_venv: MakeVenv, tmp_path: Path, outside: Path
) -> None:
    """Its open does not wait for a writer: nothing to read, so no names, and nothing to do,
    as for an empty file."""
    venv = make_venv("leftpad")
    path = _fifo_without_writer(tmp_path)
    before = everything(venv, outside)

    run = run_bounded(venv, "--no-probe", "-r", path)

    assert run.returncode == 0, run.stdout + run.stderr
    assert f"-r {path}: no package named; nothing to uninstall" in run.stdout
    assert everything(venv, outside) == before


def test_a_bad_requirements_line_is_quoted_short(make_venv: MakeVenv, tmp_path: Path) -> None:
    venv = make_venv("leftpad")
    junk = tmp_path / "junk.txt"
    junk.write_text("not a requirement " + "x" * 1_000_000 + "\n")

    run = run_bounded(venv, "--no-probe", "-r", str(junk))

    assert_refused(run, f"{junk}:1: not a requirement: 'not a requirement xxx")
    assert len(run.stderr) < 1000


def test_requirements_from_a_pipe_and_from_standard_input(make_venv: MakeVenv) -> None:
    """The bound keeps what a user pipes in working: ``-r /dev/stdin`` (a pipe) as before,
    and ``-r -``, standard input as uv reads it, which used to be a file named ``-``."""
    venv = make_venv("leftpad", "toolpkg")
    first = run_bounded(venv, "--no-probe", "-r", "/dev/stdin", stdin=b"leftpad\n")
    assert first.returncode == 0, first.stdout + first.stderr
    second = run_bounded(venv, "--no-probe", "-r", "-", stdin=b"toolpkg  # a comment\n")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "leftpad" not in venv.installed() and "toolpkg" not in venv.installed()


# -- 17: dist-info files that are not what they claim -------------------------------------------


def _dist_info(venv: Venv, name: str) -> Path:
    (found,) = venv.site_packages.glob(f"{name}-*.dist-info")
    return found


def _append(data: bytes) -> Callable[[Path], None]:
    def write(dist_info: Path) -> None:
        with (dist_info / "RECORD").open("ab") as handle:
            handle.write(data)

    return write


def _replace(name: str, data: bytes) -> Callable[[Path], None]:
    return lambda dist_info: (dist_info / name).write_bytes(data)


# RECORD lines: a valid one that points outside the environment comes first, so a tool that
# acted on half a RECORD would touch the outside folder.
_OUTSIDE_LINE = b"../../../../outside/precious.txt,,\n"
BROKEN_RECORDS = {
    "not-utf8": _append(_OUTSIDE_LINE + b"caf\xe9.py,,\n"),
    "nul-in-path": _append(_OUTSIDE_LINE + b"a\x00b.py,,\n"),
    "field-over-128-KiB": _append(_OUTSIDE_LINE + b'"' + b"a" * 200_000 + b'",,\n'),
    "size-of-5000-digits": _append(_OUTSIDE_LINE + b"big.py,," + b"9" * 5000 + b"\n"),
}
BROKEN_FILES = {
    **BROKEN_RECORDS,
    "installer-not-utf8": _replace("INSTALLER", b"\xff\xfeuv\n"),
    "direct-url-not-utf8": _replace("direct_url.json", b'{"url": "file:///caf\xe9"}'),
}


@pytest.mark.parametrize("breaks", BROKEN_FILES.values(), ids=BROKEN_FILES.keys())
def test_a_broken_neighbour_does_not_block_removing_another(
    make_venv: MakeVenv, outside: Path, breaks: Callable[[Path], None]
) -> None:
    venv = make_venv("leftpad", "toolpkg")
    breaks(_dist_info(venv, "toolpkg"))
    before = everything(venv, outside)
    record_broken = breaks in BROKEN_RECORDS.values()

    for command in (("check", "leftpad"), ("doctor",)):
        looked = run_bounded(venv, *command)
        assert looked.returncode in (0, 1), looked.stdout + looked.stderr
        assert "Traceback" not in looked.stderr
        if record_broken:  # said where it matters: what toolpkg owns is unknown
            assert "toolpkg-1.0.dist-info/RECORD" in looked.stdout, looked.stdout
    assert everything(venv, outside) == before

    run = run_bounded(venv, "--no-probe", "leftpad")

    assert "Traceback" not in run.stderr
    after = everything(venv, outside)
    if run.returncode == 1 and "Failed to read metadata" in run.stdout:
        # uv itself (0.13) refuses to uninstall anything beside a direct_url.json it cannot
        # parse; the tool then restores what uv may have done and proves it.
        assert breaks is BROKEN_FILES["direct-url-not-utf8"], run.stdout
        assert "everything was restored and verified" in run.stdout
        assert after == before
        return
    assert run.returncode == 0, run.stdout + run.stderr
    gone = {k for k in before if "leftpad" in k}
    assert gone and after == {k: v for k, v in before.items() if k not in gone}


@pytest.mark.parametrize("breaks", BROKEN_RECORDS.values(), ids=BROKEN_RECORDS.keys())
def test_a_broken_record_of_the_removed_package_refuses_before_any_change(
    make_venv: MakeVenv, outside: Path, breaks: Callable[[Path], None]
) -> None:
    venv = make_venv("leftpad", "toolpkg")
    record = _dist_info(venv, "leftpad") / "RECORD"
    breaks(record.parent)
    before = everything(venv, outside)

    run = run_bounded(venv, "--no-probe", "leftpad")

    assert_refused(run, f"leftpad 1.0: cannot read its RECORD: {record}")
    assert "the environment was not changed" in run.stderr
    assert everything(venv, outside) == before
    assert not venv.journal.exists()


# -- 18: a size that is not a number ------------------------------------------------------------


@pytest.mark.parametrize("size", ["nan", "nanM", "inf", "1e999G", "-infK"])
def test_prune_max_size_that_is_not_a_number_is_a_usage_error(
    make_venv: MakeVenv, outside: Path, size: str
) -> None:
    venv = make_venv("leftpad")
    assert venv.tool("snapshot").returncode == 0
    state = _tree(venv.root / ".safe-uninstall")
    before = everything(venv, outside)

    run = venv.tool("prune", "--max-size", size)

    assert_refused(run, "is not a size like 500M or 2G", code=2)
    assert everything(venv, outside) == before
    assert _tree(venv.root / ".safe-uninstall") == state


# -- 19 and 22: interrupts at a known point -----------------------------------------------------

# Installed as sitecustomize for the tool's own interpreter only (the tool gives its children an
# environment without PYTHONPATH): sends SIGINT to the process at one named point, once (or at
# each of several, see below).
#   import:MODULE            when MODULE is about to be imported
#   call:FUNCTION            when a Python function of that name is called
#   c_call:FUNCTION:BUILTIN  when FUNCTION calls the builtin BUILTIN (os.close, say)
#   record:FILE              nothing: write every module imported, in order, to FILE
# Points joined by "," fire in turn; every one after the first is a call:FUNCTION, watched by
# sys.settrace and sys.setprofile alternately: the interrupt is raised inside the hook that
# fired, which unsets that hook (Python's rule), so the next point is watched by the other.
_HOOK = """
import os, signal, sys

_points = os.environ["INTERRUPT_AT"].split(",")
_kind, _, _where = _points.pop(0).partition(":")
_fired = []


def _fire():
    global _kind, _where
    _fired.append(_where)
    if _points:  # armed first: the interrupt may be raised as soon as it is sent
        _kind, _, _where = _points.pop(0).partition(":")
        sys.settrace(_trace) if len(_fired) % 2 else sys.setprofile(_profile)
    os.kill(os.getpid(), signal.SIGINT)


def _trace(frame, event, arg):
    if _kind == "call" and event == "call" and frame.f_code.co_name == _where:
        sys.settrace(None)
        _fire()


class _Imports:
    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if _kind == "record":
            with open(_where, "a") as handle:
                handle.write(fullname + "\\n")
        elif fullname == _where:
            sys.meta_path.remove(_Imports)
            _fire()
        return None


def _profile(frame, event, arg):
    if _kind == "call" and event == "call" and frame.f_code.co_name == _where:
        sys.setprofile(None)
        _fire()
    elif _kind == "c_call" and event == "c_call":
        function, _, builtin = _where.partition(":")
        if frame.f_code.co_name == function and getattr(arg, "__name__", "") == builtin:
            sys.setprofile(None)
            _fire()


if _kind in ("import", "record"):
    sys.meta_path.insert(0, _Imports)
else:
    sys.setprofile(_profile)
"""


@pytest.fixture
def interrupt_at(tmp_path: Path) -> Callable[[str], dict[str, str]]:
    """The variables that make the tool's process interrupt itself at ``where``."""
    hook = tmp_path / "interrupt-hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_HOOK)
    return lambda where: {"PYTHONPATH": str(hook), "INTERRUPT_AT": where}


def assert_interrupted_before_any_change(run: Run) -> None:
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.splitlines()
    at = lines.index(error_line(run.stderr))  # after the steps said before it, if any
    assert lines[at:] == [
        "safe-uninstall: error: interrupted before any change",
        "safe-uninstall: the environment was not changed",
    ], run.stderr


START_UP_POINTS = [
    "import:safeuninstall.base",  # the first of the tool's own modules the entry point imports
    "import:safeuninstall.base.interrupts",  # the one that holds interrupts
    "import:safeuninstall.cli",  # the first thing main() does: most of start-up
    "import:click",
    "import:msgspec",
    "import:safeuninstall.config",
    "call:parse_args",  # click reading the command line
    "call:with_common",  # the command's function, before its core
    "call:open_context",  # inside the core, before any change: mapped already
]


@pytest.mark.parametrize("where", START_UP_POINTS)
def test_an_interrupt_at_start_up_is_one_line(
    make_venv: MakeVenv,
    outside: Path,
    interrupt_at: Callable[[str], dict[str, str]],
    where: str,
) -> None:
    venv = make_venv("leftpad")
    before = everything(venv, outside)

    run = venv.tool("--no-probe", "leftpad", **interrupt_at(where))

    assert_interrupted_before_any_change(run)
    assert everything(venv, outside) == before
    assert "leftpad" in venv.installed()


def test_an_interrupt_in_any_import_of_start_up_is_one_line(
    make_venv: MakeVenv,
    tmp_path: Path,
    outside: Path,
    interrupt_at: Callable[[str], dict[str, str]],
) -> None:
    """Every module the command imports after holding interrupts, recorded by one run; then
    ten of them, drawn with a seed that a failure prints, each interrupted in a run of its own."""
    venv = make_venv("leftpad")
    order = tmp_path / "imports.txt"
    recorded = venv.tool("--no-probe", "--dry-run", "leftpad", **interrupt_at(f"record:{order}"))
    assert recorded.returncode == 0, recorded.stderr
    names = list(dict.fromkeys(order.read_text().split()))
    held = names[names.index("safeuninstall.base.interrupts") + 1 :]
    assert "safeuninstall.cli.commands" in held and len(held) > 20, held
    seed = int(os.environ.get("INTERRUPT_SEED", "20261130"))
    chosen = random.Random(seed).sample(held, 10)
    before = everything(venv, outside)

    for module in chosen:
        run = venv.tool("--no-probe", "leftpad", **interrupt_at(f"import:{module}"))
        context = f"seed {seed} (INTERRUPT_SEED), import of {module}:\n{run.stderr}"
        assert run.returncode == 1, context
        assert "Traceback" not in run.stderr, context
        assert error_line(run.stderr) == "safe-uninstall: error: interrupted before any change", (
            context
        )
        assert everything(venv, outside) == before, context


# Once the outcome is decided: as the command leaves _run (its output printed) or _fail (its
# error printed), and as the entry point flushes the streams before it exits.
AFTER_THE_OUTCOME = [
    ("c_call:_run:exit", ("--dry-run", "leftpad")),
    ("c_call:main:flush", ("--dry-run", "--json", "leftpad")),
    ("c_call:_fail:exit", ("rollback", "0042")),  # no such snapshot: an error, exit 1
    ("c_call:main:flush", ("rollback", "--json", "0042")),
]


@pytest.mark.parametrize(("where", "args"), AFTER_THE_OUTCOME)
def test_an_interrupt_after_the_outcome_changes_neither_the_exit_code_nor_the_output(
    make_venv: MakeVenv,
    interrupt_at: Callable[[str], dict[str, str]],
    where: str,
    args: tuple[str, ...],
) -> None:
    venv = make_venv("leftpad")
    quiet = venv.tool(*args)

    run = venv.tool(*args, **interrupt_at(where))

    assert (run.returncode, run.stderr) == (quiet.returncode, quiet.stderr)
    if "--json" in args:  # the same but for the events' times
        assert _timeless(run.json()) == _timeless(quiet.json())
    else:
        assert run.stdout == quiet.stdout


def _timeless(payload: dict[str, object]) -> dict[str, object]:
    events = payload.get("events")
    if isinstance(events, list):
        payload["events"] = [{**event, "seconds": None} for event in events]
    return payload


def test_an_interrupt_after_a_removal_is_printed_keeps_its_exit_code(
    make_venv: MakeVenv, interrupt_at: Callable[[str], dict[str, str]]
) -> None:
    venv = make_venv("leftpad", "multipkg")

    run = venv.tool("--no-probe", "leftpad", **interrupt_at("c_call:_run:exit"))

    assert run.returncode == 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "interrupted" not in run.stdout + run.stderr
    assert "leftpad" not in venv.installed()
    assert not venv.journal.exists()


def test_an_interrupt_during_the_write_test_leaves_nothing(
    make_venv: MakeVenv, outside: Path, interrupt_at: Callable[[str], dict[str, str]]
) -> None:
    """SIGINT right after the write test created its file (as it closes it): the file must be
    gone when the command says that the environment was not changed."""
    venv = make_venv("leftpad")
    before = everything(venv, outside)

    run = venv.tool("--no-probe", "leftpad", **interrupt_at("c_call:ensure_writable:close"))

    assert_interrupted_before_any_change(run)
    assert everything(venv, outside) == before
    leftovers = [p for p in venv.root.rglob(".safe-uninstall-write-test-*")]
    assert leftovers == []


# Where a second interrupt lands once the first (in the baseline's wait, the snapshot taken,
# nothing removed) has begun giving the removal up.
GIVING_UP_POINTS = [
    "call:cancel",  # the stash hasher stopped
    "call:_give_up",  # before the snapshot is deleted
    "call:_rmtree_safe_fd",  # as it is deleted
]


@pytest.mark.parametrize("second", GIVING_UP_POINTS)
def test_a_second_interrupt_does_not_cut_the_give_up_short(
    make_venv: MakeVenv, interrupt_at: Callable[[str], dict[str, str]], second: str
) -> None:
    """Ctrl-C pressed twice (and `timeout -s INT`, which signals the process, then its group):
    the second one used to stop the give-up, leaving the journal and a "pending" snapshot, and
    every later command refused, after "nothing was changed"."""
    venv = make_venv("leftpad")

    run = venv.tool(
        "--probe", "import leftpad", "leftpad", **interrupt_at(f"call:_baseline_results,{second}")
    )

    assert run.returncode == 1, run.stdout + run.stderr
    assert error_line(run.stderr) == (
        "safe-uninstall: error: interrupted before anything was removed; nothing was changed"
    ), run.stderr
    assert not venv.journal.exists()
    assert list(venv.state.snapshots_dir.iterdir()) == []
    assert "leftpad" in venv.installed()
    assert venv.tool("--dry-run", "leftpad").returncode == 0


def test_a_platform_that_is_not_posix_is_refused_in_one_line() -> None:
    """On Windows the command says it is not supported, exit 1, before anything is imported
    that needs POSIX (no traceback)."""
    code = (
        "import os, runpy; os.name = 'nt'; runpy.run_module('safeuninstall', run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr == (
        "safe-uninstall: Windows is not supported; it runs on Linux (macOS untested)\n"
    )
