"""What every command owes its caller: an outcome that says what happened and exits with the
code of the state it leaves, an error as one line (one JSON object with --json), -q honoured,
and, on a terminal, each step said while it happens."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import typing
from pathlib import Path

import msgspec
import pytest

from safeuninstall.base import envelope
from safeuninstall.base.errors import EXIT_CODES
from safeuninstall.base.outcome import Cause, Ending, Endings, Mark, Outcome, parse_note
from safeuninstall.cli.render.operation import operation
from safeuninstall.environment.installed import Source
from safeuninstall.operations import payloads
from safeuninstall.operations.endings.rollback import (
    RECOVER,
    RECOVER_FELL_SHORT,
    RECOVERED,
    ROLLBACK,
    ROLLED_BACK,
)
from safeuninstall.operations.endings.run import RUN
from safeuninstall.operations.endings.trial import TRY_RESTORED_PROBE_FAILS, TRY_UNMET
from safeuninstall.operations.endings.uninstall import PASSED, RESTORED_PROBE_FAILS, UNINSTALL
from safeuninstall.operations.results import ProbeRuns, Result, RollbackResult, ShownSnapshot
from safeuninstall.probe.kinds import ProbeKind
from safeuninstall.probe.runner import Probe, ProbeResult
from safeuninstall.state.snapshot import (
    PackageEntry,
    PackageStash,
    PthLine,
    Snapshot,
    StashedFile,
    Target,
)
from tests.conftest import UV, MakeVenv, Venv, read_terminal, run_tool, stand_in_uv

needs_uv = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

# Every command, with the arguments it needs to reach its target.
COMMANDS: list[tuple[str, ...]] = [
    ("uninstall", "leftpad"),
    ("rollback",),
    ("recover",),
    ("snapshot",),
    ("snapshots",),
    ("show",),
    ("probe",),
    ("check", "leftpad"),
    ("doctor",),
    ("prune", "--keep", "1"),
    ("export",),
    ("run", "--", "true"),
    ("diff",),
    ("bisect", "0001"),
    ("try", "leftpad"),
]


# -- outcomes ------------------------------------------------------------------------------


# The contract: every outcome's id, as --json and snapshot folders write it, and its exit code.
# Scripts read both; an outcome added, renamed or given another code changes this table.
OUTCOMES = {
    "nothing-to-do": 0,
    "dry-run": 0,
    "refused-strict": 1,
    "refused-unmet": 1,
    "checked": 0,
    "removed": 0,
    "removed-kept-needed": 0,
    "needed-restored": 0,
    "needed-incomplete": 4,
    "probe-failed-kept": 4,
    "probe-failed-restored": 3,
    "probe-failed-incomplete": 4,
    "restored-probe-fails": 5,
    "drift-restored": 3,
    "drift-incomplete": 4,
    "hollow-restored": 3,
    "hollow-incomplete": 4,
    "inconclusive-restored": 6,
    "inconclusive-incomplete": 4,
    "inconclusive-kept": 4,
    "interrupted-restored": 3,
    "interrupted-incomplete": 4,
    "uninstall-failed-restored": 1,
    "uninstall-failed-incomplete": 4,
    "concurrent-restored": 3,
    "concurrent-incomplete": 4,
    "error-restored": 1,
    "error-incomplete": 4,
    "already-matches": 0,
    "rolled-back": 0,
    "rolled-back-probe-fails": 5,
    "rolled-back-probe-interrupted": 5,
    "incomplete": 4,
    "rollback-incomplete": 4,
    "nothing-to-roll-back": 0,
    "rollback-probe-failed-restored": 3,
    "rollback-probe-failed-incomplete": 4,
    "rollback-inconclusive-restored": 6,
    "rollback-inconclusive-incomplete": 4,
    "rollback-inconclusive-restored-except-aside": 4,
    "rollback-failed-restored": 3,
    "rollback-failed-incomplete": 4,
    "rollback-probe-failed-restored-except-aside": 4,
    "rollback-failed-restored-except-aside": 4,
    "rollback-failed-not-undone": 4,
    "rollback-concurrent-kept": 4,
    "rollback-concurrent-restored": 3,
    "rollback-concurrent-incomplete": 4,
    "rollback-concurrent-restored-except-aside": 4,
    "nothing-to-recover": 0,
    "recovered": 0,
    "recovered-probe-fails": 5,
    "recovered-probe-interrupted": 5,
    "recover-incomplete": 4,
    "recover-concurrent-kept": 4,
    "ran": 0,
    "ran-no-change": 0,
    "run-command-failed-unchanged": 1,
    "run-command-failed-restored": 3,
    "run-command-failed-incomplete": 4,
    "run-command-failed-kept": 4,
    "run-probe-failed-restored": 3,
    "run-probe-failed-incomplete": 4,
    "run-probe-failed-kept": 4,
    "run-inconclusive-restored": 6,
    "run-inconclusive-incomplete": 4,
    "run-inconclusive-kept": 4,
    "run-inconclusive-restored-except-aside": 4,
    "run-unmet-restored": 3,
    "run-unmet-incomplete": 4,
    "run-unmet-kept": 4,
    "run-interrupted-restored": 3,
    "run-interrupted-incomplete": 4,
    "run-error-restored": 3,
    "run-error-incomplete": 4,
    "run-command-failed-restored-except-aside": 4,
    "run-probe-failed-restored-except-aside": 4,
    "run-unmet-restored-except-aside": 4,
    "run-interrupted-restored-except-aside": 4,
    "run-error-restored-except-aside": 4,
    "run-concurrent-kept": 4,
    "run-concurrent-restored": 3,
    "run-concurrent-incomplete": 4,
    "run-concurrent-restored-except-aside": 4,
    "run-not-undone": 4,
    "bisected": 0,
    "bisect-interrupted": 3,
    "bisect-stopped": 3,
    "bisect-inconclusive": 6,
    "bisect-refused": 1,
    "bisect-concurrent-kept": 4,
    "bisect-incomplete": 4,
    "try-passes": 0,
    "try-faster": 0,
    "try-breaks": 7,
    "try-slower": 8,
    "try-inconclusive": 6,
    "try-unmet": 7,
    "try-interrupted": 3,
    "try-stopped": 3,
    "try-restored-probe-fails": 5,
    "try-incomplete": 4,
    "try-not-returned": 4,
    "passed": 0,
    "failed": 1,
}


def test_every_outcome_id_and_exit_code_is_the_contract() -> None:
    assert {outcome.id: outcome.exit_code for outcome in Outcome} == OUTCOMES


@pytest.mark.parametrize("outcome", list(Outcome), ids=lambda o: o.id)
def test_every_outcome_has_text_and_a_documented_exit_code(outcome: Outcome) -> None:
    assert outcome.exit_code in EXIT_CODES
    assert outcome.text and outcome.text != outcome.id
    assert parse_note(outcome.id) is (Mark.RECOVERED if outcome is RECOVERED else outcome)


@pytest.mark.parametrize("outcome", list(Outcome), ids=lambda o: o.id)
def test_every_outcome_is_rendered_as_its_text(outcome: Outcome) -> None:
    ran = ProbeResult(
        probe=Probe(kind=ProbeKind.PYTHON, code="pass", origin="--probe"),
        passed=True,
        returncode=0,
        timed_out=False,
        seconds=0.1,
        output="",
    )
    result = Result(
        command="uninstall",
        outcome=outcome,
        python="/v/bin/python",
        probes=ProbeRuns(after=(ran,)),  # a probe ran: the outcome's own words apply
    )
    for quiet in (False, True):
        text = operation(result, verbose=False, quiet=quiet)
        assert text.splitlines()[-1] == f"uninstall: {outcome.text}"
        as_json = _as_json(result)
        assert (as_json["outcome"], as_json["exit_code"]) == (outcome.id, outcome.exit_code)


UNINSTALL_CAUSES = [
    Cause.PROBE_FAILED,
    Cause.DRIFT,
    Cause.HOLLOW,
    Cause.NEEDED,
    Cause.INTERRUPTED,
    Cause.FAILED,
    Cause.CONCURRENT,
    Cause.ERROR,
]


@pytest.mark.parametrize("cause", UNINSTALL_CAUSES, ids=lambda c: c.name)
def test_every_cause_to_restore_a_removal_has_both_ends(cause: Cause) -> None:
    restored = UNINSTALL[cause, Ending.RESTORED]
    incomplete = UNINSTALL[cause, Ending.INCOMPLETE]
    assert incomplete.exit_code == 4
    assert restored.exit_code in (0, 1, 3)  # 1 when nothing was meant to change, 0: --keep-needed
    assert restored.undone and not incomplete.undone
    assert (restored.cause, incomplete.cause) == (cause, cause)


RUN_CAUSES = [
    Cause.COMMAND_FAILED,
    Cause.PROBE_FAILED,
    Cause.UNMET,
    Cause.INTERRUPTED,
    Cause.ERROR,
]


@pytest.mark.parametrize("cause", RUN_CAUSES, ids=lambda c: c.name)
def test_every_cause_a_run_is_undone_for_is_kept_whatever_was_put_back(cause: Cause) -> None:
    """A run undone but for a second dist-info folder kept aside still says why it was
    undone (the probe failed, the command failed...), as each of its siblings does: in its
    JSON word and before the first colon of its text."""
    ends = [RUN[cause, e] for e in (Ending.RESTORED, Ending.INCOMPLETE)]
    aside = RUN[cause, Ending.RESTORED_EXCEPT_ASIDE]
    assert aside.exit_code == 4  # not all is back
    assert aside.undone  # a plain rollback passes over it, as over run-*-restored
    for sibling in ends:
        assert aside.id.startswith(sibling.id.rpartition("-")[0])
        assert aside.text.partition(":")[0] == sibling.text.partition(":")[0].partition(",")[0]


@pytest.mark.parametrize("endings", [ROLLBACK, RECOVER], ids=["rollback", "recover"])
def test_a_rollback_and_a_recover_each_have_their_own_ends(endings: Endings) -> None:
    operation = endings.operation
    stopped = endings[Cause.ERROR, Ending.INCOMPLETE]
    concurrent = endings[Cause.CONCURRENT, Ending.KEPT]
    for outcome in (stopped, concurrent):
        assert outcome.id.startswith(operation.value + "-")
        assert f"the {operation.value}" in outcome.text
        assert outcome.exit_code == 4 and not outcome.undone


def test_a_recover_that_falls_short_says_so_in_its_own_words() -> None:
    """Its id stays what scripts read; its text is the recover's, not a rollback's."""
    outcome = RECOVER[Cause.FAILED, Ending.INCOMPLETE]
    assert outcome is RECOVER_FELL_SHORT
    assert (outcome.id, outcome.exit_code) == ("incomplete", 4)
    assert "recover" in outcome.text and "rollback" not in outcome.text


CHANGED_NOTHING = {
    "nothing-to-do",
    "dry-run",
    "refused-strict",
    "refused-unmet",
    "checked",
    "already-matches",
    "nothing-to-roll-back",
    "nothing-to-recover",
    "ran-no-change",
    "run-command-failed-unchanged",
    "passed",
    "failed",
    "try-unmet",
}

# A try's change undone, verified, whatever its verdict: the verdict is in the id.
TRIED_AND_UNDONE = {
    "try-passes",
    "try-faster",
    "try-breaks",
    "try-slower",
    "try-inconclusive",
    "try-interrupted",
    "try-stopped",
}


@pytest.mark.parametrize("outcome", list(Outcome), ids=lambda o: o.id)
def test_what_an_outcome_says_of_the_environment(outcome: Outcome) -> None:
    """changed nothing: the environment is as before the command; undone: the change was put
    back and verified (what a plain rollback passes over)."""
    assert outcome.changed_nothing == (outcome.id in CHANGED_NOTHING)
    undone = outcome.id.endswith(("-restored", "-restored-except-aside"))
    undone = undone or outcome.id in TRIED_AND_UNDONE
    # Undone, verified, and the probe fails there all the same: exit 5.
    fails_there = outcome in (RESTORED_PROBE_FAILS, TRY_RESTORED_PROBE_FAILS)
    assert outcome.undone == (undone or fails_there)
    if outcome.changed_nothing:  # a try says what the change would do: it breaks, exit 7
        assert outcome.exit_code in (0, 1) or outcome is TRY_UNMET
    if outcome.undone:
        assert (outcome.exit_code == 5) == fails_there
    assert outcome.returned_to is None


@pytest.mark.parametrize(
    ("text", "undone", "returned_to"),
    [
        ("pending", False, None),
        ("taken", False, None),
        ("recovered", True, None),  # on the snapshot a recover returned to: its change undone
        ("rollback-to-0007", False, "0007"),
        ("recover-to-123456789", False, "123456789"),
        ("probe-failed-restored", True, None),
        ("run-unmet-restored-except-aside", True, None),
        ("rollback-failed-not-undone", False, None),
        ("removed", False, None),
    ],
)
def test_a_stored_note_reads_back_as_written(
    text: str, undone: bool, returned_to: str | None
) -> None:
    note = parse_note(text)
    assert (note.id, note.undone, note.returned_to) == (text, undone, returned_to)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "restored",
        "probe-failed-restored ",
        "rollback-to-7",
        "rollback-to-0007x",
        "uninstall-to-0007",
        "rollback-to-../0007",
        "REMOVED",
        "x" * 500,
    ],
)
def test_a_stored_note_this_tool_never_writes_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="unknown outcome"):
        parse_note(text)


def _as_json(result: object) -> dict[str, object]:
    """A result's --json object, as the CLI prints it."""
    data = json.loads(envelope.encode(payloads.payload(result, "schema.json")))
    assert isinstance(data, dict)
    return data


def test_a_rollback_s_payload_has_every_key_of_an_operation_and_its_own() -> None:
    plain = _as_json(Result(command="probe", outcome=PASSED, python="p"))
    rolled = _as_json(RollbackResult(command="rollback", outcome=ROLLED_BACK, python="p"))
    assert set(rolled) - set(plain) == {"rollback_plan", "rollback_choice", "undo", "impact"}
    assert (rolled["outcome"], rolled["exit_code"]) == ("rolled-back", 0)


# -- the command a command line names ---------------------------------------------------------


@needs_uv
def test_a_command_line_names_its_command_after_the_shared_options(make_venv: MakeVenv) -> None:
    """`safe-uninstall [OPTIONS] PACKAGE...` is a removal; an option every command shares may
    come before a command's name (`safe-uninstall -p .venv audit`) and is that command's."""
    venv = make_venv()
    listed = venv.tool("--json", "snapshots")  # tool() puts --python first
    assert listed.returncode == 0, listed.stderr
    assert listed.json()["snapshots"] == []
    # uninstall's own option: the line is a removal, of a package named like a command too
    for args in (["--dry-run", "--json", "snapshots"], ["uninstall", "--json", "snapshots"]):
        removal = venv.tool(*args)
        assert removal.returncode == 0, removal.stderr
        assert removal.json()["command"] == "uninstall"
        assert removal.json()["absent"] == ["snapshots"]
    # only shared options: a removal that names nothing
    empty = venv.tool("--json")
    assert (empty.returncode, empty.json()["error"]) == (
        1,
        "no package names given (pass PACKAGE... or -r FILE)",
    )
    # an option the command does not take is refused, wherever it stands
    refused = venv.tool("--no-probe", "snapshots")
    assert refused.returncode == 2, refused.stdout
    assert "No such option" in refused.stderr
    # -p is every command's, config's too
    assert venv.tool("config").returncode == 0


# -- errors and -q on every command ----------------------------------------------------------


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_every_command_fails_as_one_json_object(args: tuple[str, ...], tmp_path: Path) -> None:
    missing = tmp_path / "no-such-venv"
    run = run_tool(args[0], "--json", "--python", str(missing), *args[1:])
    assert run.returncode == 1, run.stdout + run.stderr
    data = json.loads(run.stdout)
    assert data["outcome"] == "error"
    assert data["exit_code"] == 1
    assert str(missing) in data["error"]
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_every_command_fails_in_one_line_with_quiet(args: tuple[str, ...], tmp_path: Path) -> None:
    missing = tmp_path / "no-such-venv"
    run = run_tool(args[0], "-q", "--python", str(missing), *args[1:])
    assert run.returncode == 1
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert lines[0].startswith("safe-uninstall: error: --python ")
    assert lines[1:] == ["safe-uninstall: the environment was not changed"]


@needs_uv
def test_a_removal_that_no_probe_judged_says_so(make_venv: MakeVenv) -> None:
    """No "every probe passed" when no probe ran."""
    venv = make_venv("requests", "leftpad", "toolpkg")
    unprobed = venv.tool("--no-probe", "leftpad")
    assert unprobed.stdout.splitlines()[-1] == "uninstall: removed without a probe (--no-probe)"
    assert unprobed.returncode == 0
    nothing_applies = venv.tool("toolpkg")  # no dependents, no torch: no probe is derived
    assert nothing_applies.stdout.splitlines()[-1] == "uninstall: removed; no probe applies"
    probed = venv.tool(
        "--allow-unmet", "--probe", "import requests", "urllib3", "--keep-on-failure"
    )
    assert probed.returncode == 4  # a probe ran and failed: said as before


@needs_uv
def test_an_installer_that_removes_nothing_is_an_error(make_venv: MakeVenv, tmp_path: Path) -> None:
    """Uv (here a stand-in) exits 0 and removes nothing: not
    "removed", but exit 1 with the environment proven unchanged."""
    venv = make_venv("requests", "leftpad")
    hashes = venv.file_hashes()
    idle = stand_in_uv(tmp_path / "idle-uv", "sys.exit(0)")
    run = venv.tool("--json", "--no-probe", "leftpad", SAFE_UNINSTALL_UV=str(idle))
    data = run.json()
    assert run.returncode == 1, data
    assert data["outcome"] == "uninstall-failed-restored"
    assert "leftpad is still installed: nothing of it was removed" in str(data["messages"])
    assert venv.file_hashes() == hashes


def test_config_fails_as_one_json_object(tmp_path: Path) -> None:
    env = {**os.environ, "SAFE_UNINSTALL_LOCK_TIMEOUT": "soon"}
    run = run_tool("config", "--json", env=env, cwd=tmp_path)
    assert run.returncode == 2
    assert json.loads(run.stdout)["outcome"] == "error"
    assert "SAFE_UNINSTALL_LOCK_TIMEOUT" in json.loads(run.stdout)["error"]


@needs_uv
def test_quiet_prints_only_the_outcome_on_every_command(make_venv: MakeVenv) -> None:
    venv = make_venv("requests", "leftpad")
    assert (
        venv.tool("-q", "--no-probe", "leftpad").stdout
        == "uninstall: removed without a probe (--no-probe)\n"
    )
    snapshot_id = venv.tool("snapshot", "-q").stdout.strip()
    assert snapshot_id.isdigit()
    assert venv.tool("snapshots", "-q").stdout.split() == [snapshot_id, "0001"]
    assert venv.tool("show", "-q").stdout == f"snapshot {snapshot_id} (snapshot, taken)\n"
    assert venv.tool("check", "-q", "urllib3").stdout == "check: checked: nothing was changed\n"
    assert venv.tool("probe", "-q", "--probe", "pass").stdout == "probe: every probe passed\n"
    assert venv.tool("probe", "-q").stdout == "probe: no probe to run\n"  # nothing configured
    # 0001 holds the only copy of leftpad: deleted only when asked
    pruned = venv.tool("prune", "-q", "--keep", "1", "--dry-run", "--drop-only-copies")
    pruned = pruned.stdout.splitlines()
    assert len(pruned) == 1 and pruned[0].startswith("would delete 1 snapshot,")
    assert venv.tool("recover", "-q").stdout == "recover: nothing to recover\n"
    assert venv.tool("export", "-q", "-o", str(venv.root / "req.txt")).stdout == ""


# -- a terminal that talks while the command works ---------------------------------------------


@needs_uv
def test_the_baseline_is_said_while_it_runs(venv_with_requests: Venv, tmp_path: Path) -> None:
    """The probe waits for a file that the test writes only once the terminal has shown the
    baseline line: that line was on the screen before the probe ended."""
    venv = venv_with_requests
    release = tmp_path / "release"
    probe = (
        "import pathlib, time\n"
        f"while not pathlib.Path({str(release)!r}).exists():\n"
        "    time.sleep(0.01)\n"
        "import requests\n"
    )
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "UV_OFFLINE": "1"}
    argv = [sys.executable, "-m", "safeuninstall", "--python", str(venv.root)]
    proc = subprocess.Popen(
        [*argv, "-v", "--probe-timeout", "60", "--probe", probe, "leftpad"],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    try:
        shown = read_terminal(leader, until=b"waiting for it to finish")
        assert b"baseline probe running" in shown, shown.decode(errors="replace")
        assert not release.exists() and proc.poll() is None  # the probe is still waiting
        # The spinner counts while it waits: a time above 0.0 s (under load it may skip any one).
        shown += read_terminal(leader, until=re.compile(rb"[|/\\-] (0\.[1-9]|[1-9]\d*\.\d) s"))
        release.touch()
        rest = read_terminal(leader, until=b"uninstall: removed")
    finally:
        release.touch()
        os.close(leader)
        proc.wait(timeout=60)
    text = (shown + rest).decode(errors="replace")
    assert proc.returncode == 0, text
    steps = ["environment:", "baseline probe running", "snapshot:", "removing: leftpad"]
    positions = [text.index(step) for step in steps]
    assert positions == sorted(positions), text
    assert "probe after the removal: passed" in text
    # While the removal waits for the baseline, its line has a spinner and the time so far,
    # and (-v: the steps stay on screen) ends with the time it took.
    waiting = "baseline probe running: waiting for it to finish"
    assert re.search(re.escape(waiting) + r" [|/\\-] \d+\.\d s", text), text
    assert re.search(re.escape(waiting) + r" \(\d+\.\d s\)", text), text


@needs_uv
def test_events_are_in_the_json_and_not_on_stderr(venv_with_requests: Venv) -> None:
    run = venv_with_requests.tool("--json", "--probe", "import requests", "leftpad")
    data = run.json()
    steps = [event["step"] for event in data["events"]]  # type: ignore[union-attr]
    assert steps[0] == "environment"
    assert {"baseline", "snapshot", "removing", "probe"} <= set(steps)
    assert "safe-uninstall: " not in run.stderr  # --json: the steps are in the object


@needs_uv
def test_steps_are_said_unadorned_through_a_pipe(venv_with_requests: Venv) -> None:
    """Piped (a CI log, `| tee`), each step is a plain line on stderr as it happens: no
    spinner, no carriage return, no escape sequence; the report stays on stdout."""
    run = venv_with_requests.tool("--probe", "import requests", "leftpad")

    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stderr.splitlines()
    steps = ["environment:", "baseline probe running", "snapshot:", "removing: leftpad"]
    positions = [
        next(i for i, line in enumerate(lines) if line.startswith(f"safe-uninstall: {step}"))
        for step in steps
    ]
    assert positions == sorted(positions), run.stderr
    assert "safe-uninstall: probe after the removal: passed" in lines
    assert "\r" not in run.stderr and "\x1b" not in run.stderr
    assert "uninstall: removed" in run.stdout and "safe-uninstall: " not in run.stdout


@needs_uv
def test_quiet_says_no_steps(venv_with_requests: Venv) -> None:
    run = venv_with_requests.tool("-q", "--probe", "import requests", "leftpad")

    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stderr == ""


@pytest.fixture
def venv_with_requests(make_venv: MakeVenv) -> Venv:
    return make_venv("requests", "leftpad")


# -- the environment a child process gets ------------------------------------------------------


def test_children_get_the_targets_environment_scrubbed(
    venv_with_requests: Venv, tmp_path: Path
) -> None:
    """From the options' environ, not os.environ; less what points at another environment."""
    from safeuninstall import options
    from safeuninstall.base.process import SCRUBBED_VARIABLES
    from safeuninstall.context.context import open_context

    venv = venv_with_requests
    environ = {"PATH": "/usr/bin", "MARKER": "from the options", "VIRTUAL_ENV": "/elsewhere"}
    leaky = set(SCRUBBED_VARIABLES) - {"VIRTUAL_ENV"}
    environ |= {name: str(tmp_path / "elsewhere") for name in leaky}
    ctx = open_context(options.TargetOptions(python=str(venv.root), cwd=tmp_path, environ=environ))
    env = ctx.child_env()
    assert env["MARKER"] == "from the options"
    assert env["VIRTUAL_ENV"] == str(venv.root)
    assert env["PATH"] == f"{venv.root / 'bin'}{os.pathsep}/usr/bin"
    assert not leaky & set(env)
    assert ctx.backend.env == env  # the installer's processes get the same


@needs_uv
def test_a_probe_sees_no_pip_target_or_pythonpath(venv_with_requests: Venv, tmp_path: Path) -> None:
    venv = venv_with_requests
    probe = (
        "import os\n"
        "assert 'PIP_TARGET' not in os.environ and 'PYTHONPATH' not in os.environ\n"
        f"assert os.environ['VIRTUAL_ENV'] == {str(venv.root)!r}\n"
        "import requests\n"
    )
    elsewhere = str(tmp_path / "elsewhere")
    run = venv.tool("--probe", probe, "leftpad", PIP_TARGET=elsewhere, PYTHONPATH=elsewhere)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--json", "--bogus"], "No such option '--bogus'"),
        (["--json", "--probe-timeout", "abc", "leftpad"], "Invalid value for '--probe-timeout'"),
        (["--json", "prune", "--keep", "-1"], "Invalid value for '--keep'"),
        (["snapshots", "--bogus", "--json"], "No such option '--bogus'"),
    ],
)
def test_a_usage_error_under_json_is_the_documented_error_object(
    tmp_path: Path, args: list[str], error: str
) -> None:
    """exit-codes.md: with --json, an error before any change is an error object on stdout,
    usage errors (exit 2) included; click's own message stays on stderr."""
    done = run_tool(*args, cwd=tmp_path)
    assert done.returncode == 2
    data = done.json()
    assert data["outcome"] == "error"
    assert data["exit_code"] == 2
    assert isinstance(data["error"], str) and data["error"].startswith(error), data
    assert "Usage: safe-uninstall" in done.stderr
    # without --json, nothing on stdout, as before
    plain = run_tool(*[a for a in args if a != "--json"], cwd=tmp_path)
    assert (plain.returncode, plain.stdout) == (2, "")


def test_show_s_object_holds_the_snapshot_as_its_file_does() -> None:
    """``show --json`` writes a snapshot's keys as snapshot.toml holds them: the keys a file
    leaves out when they hold their default (a layout, a stash, a link) left out there too."""
    stash = PackageStash(
        "0001/a",
        (StashedFile("a/x.py", "0" * 64, 3), StashedFile("l", "1" * 64, 1, link="t", swept=True)),
        True,
        (PthLine("e.pth", "/src", "2" * 64, 5),),
        ("gone.py",),
    )
    legacy = PackageEntry("a", "1.0", "uv", True, Source("url", url="file:///x"), "a.egg-info")
    packages = (
        msgspec.structs.replace(legacy, stash=stash, layout="egg-info"),
        PackageEntry("b", "2"),
    )
    snap = Snapshot(
        "0001",
        "2026-01-01T00:00:00Z",
        "0.3",
        ("x",),
        "uninstall",
        Target("/p", "/e", "3.11"),
        packages,
        removed=("a",),
        outcome="removed",
    )
    shown = _as_json(ShownSnapshot(snap, 5, None))
    mine = {"json_version", "json_schema", "exit_code", "stash_bytes", "stash_pruned", "returns_to"}
    assert {k: v for k, v in shown.items() if k not in mine} == snap.to_dict()


def test_a_diff_change_s_kinds_are_the_tool_s() -> None:
    """The payload names the kinds of a change without importing the diff (a command that only
    reads loads no snapshot reader for its JSON): the two lists are one."""
    from safeuninstall.plans.diff import ChangeKind

    kinds = typing.get_args(typing.get_type_hints(payloads.Change)["change"])
    assert list(kinds) == [kind.value for kind in ChangeKind]
