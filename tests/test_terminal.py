"""Terminal manners: colour that honours --color and NO_COLOR (never in --json), and click's
shell completion, run for real in bash (and fish where it is installed)."""

from __future__ import annotations

import os
import pty
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from safeuninstall.cli.render.paint import use_color
from tests.conftest import UV, MakeVenv, Venv, error_line, read_terminal

ESC = "\x1b["
# A colour (SGR) sequence; a terminal also gets ESC[K, which erases the live line.
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
needs_uv = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


@pytest.mark.parametrize(
    ("choice", "isatty", "environ", "expected"),
    [
        ("auto", True, {}, True),
        ("auto", False, {}, False),
        ("auto", True, {"NO_COLOR": "1"}, False),
        ("auto", True, {"NO_COLOR": ""}, True),  # no-color.org: empty means unset
        ("auto", True, {"TERM": "dumb"}, False),
        ("always", False, {"NO_COLOR": "1"}, True),  # an explicit choice beats NO_COLOR
        ("never", True, {}, False),
    ],
)
def test_when_to_colour(choice: str, isatty: bool, environ: dict[str, str], expected: bool) -> None:
    assert use_color(choice, isatty=isatty, environ=environ) is expected


def run_on_a_terminal(venv: Venv, *args: str, **extra_env: str) -> str:
    """The tool with stdout and stderr on a pseudo-terminal, as a person runs it."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", **extra_env}
    proc = subprocess.Popen(
        [sys.executable, "-m", "safeuninstall", "--python", str(venv.root), *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    shown = read_terminal(leader)
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    return shown.decode()


@needs_uv
def test_colour_on_a_terminal_unless_no_color(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad")
    probe = ("probe", "--probe", "import leftpad")

    coloured = run_on_a_terminal(venv, *probe)
    assert f"{ESC}32mevery probe passed{ESC}0m" in coloured
    assert f"{ESC}32mpassed in " in coloured

    assert not COLOUR.search(run_on_a_terminal(venv, *probe, NO_COLOR="1"))
    assert not COLOUR.search(run_on_a_terminal(venv, *probe, "--color", "never"))
    assert not COLOUR.search(run_on_a_terminal(venv, *probe, SAFE_UNINSTALL_COLOR="never"))
    forced = run_on_a_terminal(venv, *probe, "--color", "always", NO_COLOR="1")
    assert f"{ESC}32mevery probe passed" in forced
    assert ESC not in run_on_a_terminal(venv, *probe, "--json", "--color", "always")


@needs_uv
def test_colour_through_a_pipe_only_when_asked(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    piped = venv.tool("--allow-unmet", "--probe", "import requests", "urllib3")
    assert piped.returncode == 3
    assert ESC not in piped.stdout + piped.stderr

    forced = venv.tool(
        "--color", "always", "--allow-unmet", "--probe", "import requests", "urllib3"
    )
    assert forced.returncode == 3
    assert f"{ESC}31m{ESC}1mfailed with exit code 1" in forced.stdout
    assert f"{ESC}33mthe probe failed after the removal: all was restored" in forced.stdout

    as_json = venv.tool(
        "--json", "--color", "always", "--allow-unmet", "--probe", "import requests", "urllib3"
    )
    assert as_json.json()["outcome"] == "probe-failed-restored"
    assert ESC not in as_json.stdout

    error = venv.tool("rollback", "--color", "always", "9")
    assert error.returncode == 1
    shown = error_line(error.stderr, f"safe-uninstall: {ESC}31m{ESC}1merror:{ESC}0m")
    assert shown.startswith(f"safe-uninstall: {ESC}31m{ESC}1merror:{ESC}0m no snapshot '9'")


# -- shell completion: click's, under the variable _SAFE_UNINSTALL_COMPLETE --------------------

TOOL = Path(sys.executable).with_name("safe-uninstall")
needs_script = pytest.mark.skipif(not TOOL.exists(), reason="the console script is not installed")


def complete(words: str) -> list[str]:
    """What click answers bash for the command line ``words`` (the last word is incomplete)."""
    parts = words.split(" ")
    done = subprocess.run(
        [str(TOOL)],
        env={
            **os.environ,
            "_SAFE_UNINSTALL_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(parts) - 1),
        },
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.split(",", 1)[1] for line in done.stdout.splitlines()]


@needs_script
def test_completion_of_commands_options_and_choices() -> None:
    assert complete("safe-uninstall ro") == ["rollback"]
    assert complete("safe-uninstall sn") == ["snapshot", "snapshots"]
    assert complete("safe-uninstall co") == ["config"]
    # safe-uninstall [OPTIONS] PACKAGE... is the uninstall command: its options at the top too
    assert complete("safe-uninstall --probe-") == [
        "--probe-cmd",
        "--probe-timeout",
        "--probe-metric",
        "--probe-after-restore",
    ]
    assert complete("safe-uninstall --probe x --dr") == ["--dry-run"]
    assert complete("safe-uninstall rollback --dr") == ["--dry-run"]
    assert complete("safe-uninstall --color ") == ["auto", "always", "never"]
    assert complete("safe-uninstall export 1 --format ") == ["requirements", "pylock"]


@needs_script
def test_bash_completion_script_really_completes(tmp_path: Path) -> None:
    script = (
        'eval "$(_SAFE_UNINSTALL_COMPLETE=bash_source safe-uninstall)"\n'
        "COMP_WORDS=(safe-uninstall rollb); COMP_CWORD=1\n"
        "_safe_uninstall_completion safe-uninstall\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
        "complete -p safe-uninstall\n"
    )
    env = {**os.environ, "PATH": f"{TOOL.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "--norc", "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == [
        "rollback",
        "complete -o nosort -F _safe_uninstall_completion safe-uninstall",
    ]


@needs_script
@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completion_script_really_completes() -> None:
    script = (
        "env _SAFE_UNINSTALL_COMPLETE=fish_source safe-uninstall | source\n"
        'complete -C "safe-uninstall --color "\n'
    )
    env = {**os.environ, "PATH": f"{TOOL.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["fish", "--no-config", "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert sorted(done.stdout.split()) == ["always", "auto", "never"]


@needs_script
def test_zsh_completion_script_is_generated() -> None:
    """zsh itself needs an interactive completion widget (checked by hand under tmux, see
    docs/how-to/shell-completion.md); here: the script click writes for it."""
    done = subprocess.run(
        [str(TOOL)],
        env={**os.environ, "_SAFE_UNINSTALL_COMPLETE": "zsh_source"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "#compdef safe-uninstall" in done.stdout
    assert "compdef _safe_uninstall_completion safe-uninstall" in done.stdout


def test_progress_bar_shows_only_steps_longer_than_a_second(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from safeuninstall.cli import commands as cli

    clock = iter([0.0, 0.5, 1.5, 2.0])
    monkeypatch.setattr(cli.time, "monotonic", lambda: next(clock))
    bar = cli._ProgressBar()
    mib = 1024 * 1024
    bar("restore", 10 * mib, 100 * mib)  # t=0: starts the clock
    bar("restore", 20 * mib, 100 * mib)  # t=0.5: still quiet
    bar("restore", 50 * mib, 100 * mib)  # t=1.5: shown
    bar("restore", 100 * mib, 100 * mib)  # t=2.0: shown, and the line ends
    err = capsys.readouterr().err
    assert "20/100" not in err
    assert "\n" not in err
    assert "restore  [###############---------------] 50/100 MiB" in err
    # transient: erased when the step ends (click drops the ESC[K through a pipe)
    assert err.endswith("50/100 MiB\r")


def test_verbose_streams_the_installers_output(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad", "toolpkg")
    loud = venv.tool("-v", "--no-probe", "leftpad")
    assert loud.returncode == 0
    assert "Uninstalled 1 package" in loud.stderr
    quiet = venv.tool("--no-probe", "toolpkg")
    assert "Uninstalled" not in quiet.stderr


def test_the_snapshot_reports_stash_progress(make_venv: MakeVenv) -> None:
    from safeuninstall import options
    from safeuninstall.context.context import open_context
    from safeuninstall.environment.installed import installed_distributions
    from safeuninstall.transaction.transaction import SnapshotSpec, take_snapshot

    venv = make_venv("leftpad")
    calls: list[tuple[str, int, int]] = []
    target = options.TargetOptions(
        python=str(venv.root),
        cwd=venv.root,
        environ=dict(os.environ),
        on_progress=lambda step, done, total: calls.append((step, done, total)),
    )
    ctx = open_context(target)
    installed = installed_distributions(ctx.interpreter)
    spec = SnapshotSpec(operation="snapshot", stash=["leftpad"])
    take_snapshot(ctx, installed, ctx.store.new_folder(), spec)
    assert calls and calls[-1][0] == "stash"
    assert calls[-1][1] == calls[-1][2] > 0


def test_a_count_of_one_is_singular(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")

    run = venv.tool("--no-probe", "--allow-unmet", "urllib3")
    audit = venv.tool("audit")
    doctor = venv.tool("doctor", "-q")

    assert run.returncode == 0, run.stderr
    assert "impact report: 1 distribution affected" in run.stderr
    assert "(1 distribution stashed)" in run.stderr
    assert f"audit of {venv.python}: 1 distribution, " in audit.stdout
    assert doctor.stdout.startswith("doctor: 1 problem found"), doctor.stdout


def screen(raw: str) -> list[str]:
    """The lines a terminal shows in the end: a carriage return goes back to the start of the
    line and ESC[K erases the rest of it, so a line rewritten in place shows its last text."""
    lines: list[str] = []
    line, cursor = "", 0
    for token in re.split(r"(\r\n|\n|\r|\x1b\[K)", raw):
        if token in ("\r\n", "\n"):
            lines.append(line)
            line, cursor = "", 0
        elif token == "\r":
            cursor = 0
        elif token == "\x1b[K":
            line = line[:cursor]
        else:
            line = line[:cursor] + token + line[cursor + len(token) :]
            cursor += len(token)
    return [*lines, line] if line else lines


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_a_plain_removal_in_a_terminal_reads_at_a_glance(make_venv: MakeVenv) -> None:
    """What was removed as uv says it, the verdict, the snapshot and how to undo it: the live
    line said each step while it ran, and is gone. -v keeps every step and the whole report."""
    venv = make_venv("leftpad", "toolpkg")

    shown = run_on_a_terminal(venv, "--color", "never", "leftpad")

    assert screen(shown) == [
        "Uninstalled 1 package",
        " - leftpad==1.0",
        f"snapshot 0001: `safe-uninstall --python {venv.python} rollback` puts it back",
        "uninstall: removed; no probe applies",
    ], shown
    assert "\rsafe-uninstall: removing: leftpad" in shown  # said while it happened
    verbose = screen(run_on_a_terminal(venv, "--color", "never", "-v", "toolpkg"))
    assert "safe-uninstall: snapshot: 0002 (1 distribution stashed)" in verbose, verbose
    assert "removing: toolpkg==1.0" in verbose


# -- what stays on a real terminal of a given width (tmux) --------------------------------

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def on_screen(venv: Venv, tmp_path: Path, columns: int, *args: str) -> tuple[list[str], list[str]]:
    """What a terminal ``columns`` wide shows once the tool has ended (tmux draws it: lines
    wrap, a carriage return goes to the start of the row, ESC[K erases the row): its rows,
    and its lines (the rows of a wrapped line joined)."""
    socket = tmp_path / f"tmux-{columns}"
    command = shlex.join(
        [
            sys.executable,
            "-m",
            "safeuninstall",
            "--python",
            str(venv.root),
            "--color",
            "never",
            *args,
        ]
    )
    tmux = ["tmux", "-S", str(socket), "-f", "/dev/null"]
    # The pane stays open after the tool (read waits on it) until the test has read it.
    shell = f"{command}; {shlex.join(tmux)} wait-for -S ended; read never"
    env = {**os.environ, **venv.env(), "UV_OFFLINE": "1", "TERM": "xterm"}
    env["UV_CACHE_DIR"] = str(venv.root.parent / f"empty-uv-cache-{venv.root.name}")
    size = ["-x", str(columns), "-y", "100"]
    subprocess.run([*tmux, "new-session", "-d", *size, "sh", "-c", shell], env=env, check=True)
    try:
        subprocess.run([*tmux, "wait-for", "ended"], check=True, timeout=300)
        shown = [
            subprocess.run(
                [*tmux, "capture-pane", "-p", *join], check=True, capture_output=True, text=True
            ).stdout.rstrip("\n")
            for join in ((), ("-J",))
        ]
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
    rows, lines = ([line.rstrip() for line in text.splitlines()] for text in shown)
    return rows, lines


KEEP_NEEDED = ("nvfoo-cu13", "nvbar-cu13", "nvbaz-cu13", "consumer", "leftpad", "multipkg")


@needs_tmux
@pytest.mark.parametrize("columns", [80, 120])
def test_a_search_leaves_only_its_report_on_a_narrow_terminal(
    make_venv: MakeVenv, tmp_path: Path, columns: int
) -> None:
    """--keep-needed says each trial on one live line, wider than the terminal: it is cut to
    the width, so erasing it leaves nothing; the screen holds the report alone (uv's own
    lines aside), each row within the width."""
    venv = make_venv(*KEEP_NEEDED, "toolpkg")
    names = ("nv*", "leftpad", "multipkg", "toolpkg")
    probe = "import consumer; import multipkg.a.mod1"

    rows, lines = on_screen(venv, tmp_path, columns, "--keep-needed", "--probe", probe, *names)

    assert [line for line in lines if line.startswith("safe-uninstall: ")] == [], rows
    assert lines[0].startswith("environment: "), rows  # no rest of a wrapped live line above
    assert lines[-1].startswith("uninstall: removed what nothing needs"), rows
    assert sum(line.startswith("kept, needed: ") for line in lines) == 4, rows  # said once
    # every row on the screen is one of the report's lines, wrapped
    assert len(rows) == sum(max(1, -(-len(line) // columns)) for line in lines), rows


def test_a_bar_counts_in_a_unit_its_total_fills(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from safeuninstall.cli import commands as cli

    clock = iter([0.0, 1.5, 1.6, 1.7, 1.8])
    monkeypatch.setattr(cli.time, "monotonic", lambda: next(clock))
    bar = cli._ProgressBar()
    bar("restore", 0, 600 * 1024)  # t=0: starts the clock
    bar("restore", 300 * 1024, 600 * 1024)  # t=1.5: shown
    bar("restore", 600 * 1024, 600 * 1024)  # ends: erased
    bar("restore", 0, 0)  # nothing to count: no bar
    err = capsys.readouterr().err
    assert "restore  [###############---------------] 300/600 KiB\r" in err
    assert " MiB" not in err


@needs_tmux
@pytest.mark.parametrize("columns", [80, 120])
def test_the_snapshots_table_fits_the_terminal(
    make_venv: MakeVenv, tmp_path: Path, columns: int
) -> None:
    """Long removed lists and commands are cut to the width; every column starts where its
    heading does, apart from the one before by two spaces at least."""
    venv = make_venv(*KEEP_NEEDED, "toolpkg", "requests")
    assert venv.tool("--no-probe", *KEEP_NEEDED, "toolpkg").returncode == 0
    assert venv.tool("--no-probe", "--allow-unmet", "urllib3").returncode == 0

    rows, lines = on_screen(venv, tmp_path, columns, "snapshots")

    header, *table = rows[:3]
    assert lines[:3] == rows[:3] and all(len(row) < columns for row in rows[:3]), rows
    assert lines[3].startswith("the stashes keep "), rows  # a sentence, which may wrap
    starts = [header.index(name) for name in ("created", "outcome", "removed", "command")]
    kept = header.index("kept") + len("kept")  # sizes align right, under its end
    for row in table:
        for start in starts:
            assert row[start - 2 : start] == "  " and row[start] != " ", (start, rows)
        assert row[kept - 1] != " " and row[kept : kept + 2] == "  ", rows
    assert "..." in table[-1]  # the longest removal is cut, not wrapped


def test_the_snapshots_table_through_a_pipe_keeps_every_name(make_venv: MakeVenv) -> None:
    venv = make_venv(*KEEP_NEEDED, "toolpkg")
    assert venv.tool("--no-probe", *KEEP_NEEDED, "toolpkg").returncode == 0

    header, row = venv.tool("snapshots").stdout.splitlines()[:2]

    assert all(name in row for name in KEEP_NEEDED)
    start = header.index("command")
    assert row[start - 2 : start] == "  " and row[start:].startswith("safe-uninstall "), row


@needs_tmux
@pytest.mark.parametrize("columns", [80, 120])
def test_a_bisect_leaves_only_its_report_on_a_narrow_terminal(
    make_venv: MakeVenv, tmp_path: Path, columns: int
) -> None:
    """Each round's switch and probe said on the live line, wider than the terminal: nothing
    of them stays, and no progress bar."""
    venv = make_venv(*KEEP_NEEDED, "toolpkg", "requests")
    assert venv.tool("snapshot").returncode == 0  # GOOD: every file stashed
    gone = ("nvfoo-cu13", "leftpad", "multipkg", "toolpkg", "requests", "urllib3")
    venv.uv("pip", "uninstall", "--python", str(venv.python), *gone)

    rows, lines = on_screen(venv, tmp_path, columns, "bisect", "1", "--probe", "import consumer")

    assert [line for line in lines if line.startswith("safe-uninstall: ")] == [], rows
    assert lines[0].startswith("good: snapshot 0001; "), rows
    assert lines[-1].startswith("to bring back the good versions of the culprits"), rows
    assert not [line for line in lines if " MiB" in line or "restore  [" in line], rows
    assert len(rows) == sum(max(1, -(-len(line) // columns)) for line in lines), rows


def test_each_run_of_a_step_has_its_own_clock(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bisect restores many times, each quickly: a restore seconds after an earlier one
    shows no bar, and a step that ends unseen erases nothing."""
    from safeuninstall.cli import commands as cli

    clock = iter([0.0, 0.1, 5.0, 5.1, 9.0, 9.5])
    monkeypatch.setattr(cli.time, "monotonic", lambda: next(clock))
    bar = cli._ProgressBar()
    mib = 1024 * 1024
    for _ in range(3):
        bar("restore", 0, 4 * mib)
        bar("restore", 4 * mib, 4 * mib)
    assert capsys.readouterr().err == ""
