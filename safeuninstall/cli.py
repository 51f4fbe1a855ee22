"""The command line: parse options into frozen records, call one core function, render.

``safe-uninstall PACKAGE...`` is the ``uninstall`` command; the other commands are subcommands.
A package whose name equals a subcommand is removed with ``safe-uninstall uninstall NAME``.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click

from . import __version__, config, options, report
from .errors import EXIT_UNCHANGED, Interrupted, InvalidInput, SafeUninstallError

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from .core import OperationResult

F = TypeVar("F", bound=Callable[..., Any])

_WEEK = 7 * 24 * 3600.0  # upper bound of every duration option


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """FloatRange lets nan through (every comparison with nan is false)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds")
    return value


EXPORT_FORMATS = ("requirements", "pylock")  # export.FORMATS; a test keeps them equal


def _compose(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


target_options = _compose(
    click.option(
        "-p",
        "--python",
        metavar="PYTHON",
        help="Target interpreter or environment directory "
        "(default: $VIRTUAL_ENV, else .venv in this or a parent folder).",
    ),
    click.option(
        "--state-dir",
        metavar="DIR",
        help="Where snapshots and stashes live (default: <venv>/.safe-uninstall).",
    ),
    click.option(
        "--lock-timeout",
        type=click.FloatRange(min=0, max=_WEEK),
        callback=_finite,
        metavar="SECONDS",
        help="How long to wait for another operation on the same environment. [default: 60]",
    ),
)

output_options = _compose(
    click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout."),
    click.option("-v", "--verbose", is_flag=True, help="Show probe and installer output."),
    click.option("-q", "--quiet", is_flag=True, help="Print only the outcome."),
    click.option(
        "--color",
        type=click.Choice(config.COLOR_CHOICES),
        expose_value=False,
        callback=lambda ctx, param, value: _remember_color(ctx, value),
        help="Colour the text output (auto: on a terminal, unless NO_COLOR is set). "
        "[default: auto]",
    ),
)

probe_options = _compose(
    click.option(
        "--probe",
        "probes",
        multiple=True,
        metavar="CODE",
        help="Python code run by the target interpreter; repeatable.",
    ),
    click.option(
        "--probe-cmd",
        "probe_cmds",
        multiple=True,
        metavar="COMMAND",
        help="A command (no shell) run with the environment's bin first on PATH; repeatable.",
    ),
    click.option(
        "--probe-timeout",
        type=click.FloatRange(min=0, min_open=True, max=_WEEK),
        callback=_finite,
        metavar="SECONDS",
        help="Kill a probe (its whole process group) after this long. [default: 300]",
    ),
    click.option("--no-probe", is_flag=True, help="Run no probe at all."),
)

offline_option = click.option(
    "--offline/--no-offline",
    default=None,
    help="A reinstall, if one is needed, uses no network. [default: no-offline]",
)


def _say_waiting(message: str) -> None:
    click.echo(f"safe-uninstall: {message}", err=True)


def _echo_installer(text: str) -> None:
    click.echo(text, err=True, nl=False)


class _ProgressBar:
    """A one-line bar on stderr for file steps that take more than a second (a copy to
    another filesystem, hashing a large stash); nothing for the instant ones."""

    _DELAY = 1.0
    _WIDTH = 30

    def __init__(self) -> None:
        self._started: dict[str, float] = {}

    def __call__(self, step: str, done: int, total: int) -> None:
        now = time.monotonic()
        started = self._started.setdefault(step, now)
        if now - started < self._DELAY or total <= 0:
            return
        filled = self._WIDTH * done // total
        mib = 1024 * 1024
        line = (
            f"\r{step:<8} [{'#' * filled}{'-' * (self._WIDTH - filled)}] "
            f"{done // mib}/{total // mib} MiB"
        )
        click.echo(line, err=True, nl=done >= total)


def _target(
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    *,
    verbose: bool = False,
) -> options.TargetOptions:
    state_dir, lock_timeout = _configured_target(state_dir, lock_timeout)
    return options.TargetOptions(
        python=python,
        cwd=Path.cwd(),
        environ=dict(os.environ),
        command=("safe-uninstall", *sys.argv[1:]),
        state_dir=state_dir,
        lock_timeout=lock_timeout,
        on_wait=_say_waiting,
        on_installer_output=_echo_installer if verbose else None,
        on_progress=_ProgressBar() if sys.stderr.isatty() else None,
    )


def _probe(
    probes: tuple[str, ...],
    probe_cmds: tuple[str, ...],
    probe_timeout: float | None,
    no_probe: bool,
) -> options.ProbeOptions:
    return options.ProbeOptions(
        probes=probes, probe_cmds=probe_cmds, timeout=probe_timeout, disabled=no_probe
    )


def _emit(result: OperationResult, as_json: bool, verbose: bool, quiet: bool) -> None:
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        color = _use_color(sys.stdout)
        text = report.operation(result, verbose=verbose, quiet=quiet, paint=_painter(color))
        click.echo(text, color=color)
    sys.exit(result.exit_code)


def _fail(err: SafeUninstallError, as_json: bool, verbose: bool) -> None:
    if as_json:
        payload = {
            "outcome": "error",
            "exit_code": err.exit_code,
            "error": err.message,
            "detail": err.detail,
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        color = _use_color(sys.stderr)
        error = _painter(color)("error:", "bad")
        click.echo(f"safe-uninstall: {error} {err.message}", err=True, color=color)
        if err.detail:
            lines = err.detail.rstrip().splitlines()
            if not verbose and len(lines) > 20:
                lines = ["...", *lines[-20:]]
            click.echo("\n".join("    " + line for line in lines), err=True)
        if err.exit_code == EXIT_UNCHANGED:
            click.echo(f"safe-uninstall: {err.state}", err=True)
    sys.exit(err.exit_code)


def _run_operation(
    call: Callable[[], OperationResult], as_json: bool, verbose: bool, quiet: bool
) -> None:
    try:
        result = call()
    except SafeUninstallError as err:
        _fail(err, as_json, verbose)
    except KeyboardInterrupt:
        # The core restores whatever it changed before letting an interrupt out; one that
        # reaches here came before any change.
        _fail(Interrupted("interrupted before any change"), as_json, verbose)
    except OSError as err:
        # Likewise: the core turns errors after a change into a restore and a result.
        _fail(SafeUninstallError(str(err)), as_json, verbose)
    else:
        _emit(result, as_json, verbose, quiet)


class _DefaultToUninstall(click.Group):
    """``safe-uninstall [OPTIONS] PACKAGE...`` means ``safe-uninstall uninstall ...``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in ("--help", "-h", "--version"):
            args = self._route(ctx, args)
        return super().parse_args(ctx, args)

    def _route(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Put the subcommand first (``-p X rollback`` works too), else insert ``uninstall``."""
        uninstall = self.commands["uninstall"]
        takes_value = {
            opt
            for param in uninstall.get_params(ctx)
            if isinstance(param, click.Option) and not param.is_flag
            for opt in param.opts
        }
        index = 0
        while index < len(args):
            token = args[index]
            if token == "--":
                break
            if not token.startswith("-") or token == "-":
                if token in self.commands:
                    return [token, *args[:index], *args[index + 1 :]]
                break
            index += 2 if token in takes_value else 1
        return ["uninstall", *args]

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """At the top level ``uninstall``'s options are valid too: offer them with ours."""
        items = super().shell_complete(ctx, incomplete)
        if incomplete.startswith("-"):
            uninstall = self.commands["uninstall"]
            sub = uninstall.make_context("uninstall", [], parent=ctx, resilient_parsing=True)
            known = {item.value for item in items}
            items += [i for i in uninstall.shell_complete(sub, incomplete) if i.value not in known]
        return items


@click.group(cls=_DefaultToUninstall, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="safe-uninstall")
def cli() -> None:
    """Remove Python packages without breaking the environment.

    safe-uninstall PACKAGE... snapshots the installed set, keeps the removed files, uninstalls
    through uv, runs a probe, and restores everything in one batch if the probe fails.
    """


@cli.command("uninstall")
@click.argument("packages", nargs=-1)
@click.option(
    "-r",
    "--requirements",
    "requirement_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read the names to remove from a file; repeatable.",
)
@target_options
@probe_options
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option(
    "--keep-on-failure", is_flag=True, help="When the probe fails, report but do not restore."
)
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse (exit 1, nothing changed) when the impact report finds breakage or drift.",
)
@click.option(
    "--fresh-baseline",
    is_flag=True,
    help="Run the baseline probe even when a cached pass for this environment is valid.",
)
@click.option(
    "--probe-after-restore",
    is_flag=True,
    help="Run the probe again after a restore even when the restore is proven byte-identical "
    "to the state the baseline passed in.",
)
@click.option(
    "--allow-drift",
    is_flag=True,
    help="Accept a probe that passes only because a library now loads from another file.",
)
@offline_option
@output_options
def uninstall_command(
    packages: tuple[str, ...],
    requirement_files: tuple[Path, ...],
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    probes: tuple[str, ...],
    probe_cmds: tuple[str, ...],
    probe_timeout: float | None,
    no_probe: bool,
    dry_run: bool,
    keep_on_failure: bool,
    strict: bool,
    fresh_baseline: bool,
    probe_after_restore: bool,
    allow_drift: bool,
    offline: bool | None,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Uninstall PACKAGE... safely (the default command)."""

    def call() -> OperationResult:
        names = list(packages)
        for path in requirement_files:
            names += read_requirement_names(path)
        if not names:
            raise InvalidInput("no package names given (pass PACKAGE... or -r FILE)")
        target = _target(python, state_dir, lock_timeout, verbose=verbose)
        probe_options = _probe(probes, probe_cmds, probe_timeout, no_probe)
        wanted = options.UninstallOptions(
            names=tuple(names),
            dry_run=dry_run,
            keep_on_failure=keep_on_failure,
            offline=_offline(offline),
            strict=strict,
            allow_drift=allow_drift,
            fresh_baseline=fresh_baseline,
            probe_after_restore=probe_after_restore,
        )
        from .baseline import HeadStart, head_start

        early: HeadStart | None = None
        try:
            # The baseline probe begins before the core and all it needs are imported.
            early = head_start(target, probe_options, wanted)
            from . import core

            return core.uninstall(target, probe_options, wanted, early)
        finally:
            if early is not None:
                early.baseline.cancel()  # no probe outlives the command

    _run_operation(call, as_json, verbose, quiet)


def read_requirement_names(path: Path) -> list[str]:
    """Distribution names from a requirements file: one per line, specifiers and markers ignored."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InvalidInput(f"-r {path}: cannot read it: {err.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"-r {path}: not a UTF-8 text file") from None
    names = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise InvalidInput(f"{path}:{number}: options are not supported here: {line!r}")
        try:
            names.append(Requirement(line).name)
        except InvalidRequirement:
            raise InvalidInput(f"{path}:{number}: not a requirement: {line!r}") from None
    return names


@cli.command("rollback")
@click.argument("snapshot", required=False)
@target_options
@probe_options
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@offline_option
@output_options
def rollback_command(
    snapshot: str | None,
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    probes: tuple[str, ...],
    probe_cmds: tuple[str, ...],
    probe_timeout: float | None,
    no_probe: bool,
    dry_run: bool,
    offline: bool | None,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Bring the environment back to SNAPSHOT's exact set (default: the latest)."""
    from . import core

    _run_operation(
        lambda: core.rollback(
            _target(python, state_dir, lock_timeout, verbose=verbose),
            _probe(probes, probe_cmds, probe_timeout, no_probe),
            options.RollbackOptions(snapshot=snapshot, dry_run=dry_run, offline=_offline(offline)),
        ),
        as_json,
        verbose,
        quiet,
    )


@cli.command("snapshot")
@target_options
@click.option(
    "--stash/--no-stash",
    default=True,
    show_default=True,
    help="Also keep every installed file (hard links: no data is copied).",
)
@output_options
def snapshot_command(
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    stash: bool,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Take a snapshot of the environment now."""
    from . import core

    try:
        snap = core.snapshot_now(_target(python, state_dir, lock_timeout), stash=stash)
    except SafeUninstallError as err:
        _fail(err, as_json, verbose)
    else:
        if as_json:
            click.echo(json.dumps(snap.to_dict(), indent=2))
        else:
            click.echo(f"snapshot {snap.id}: {len(snap.packages)} distributions")


@cli.command("snapshots")
@target_options
@output_options
def snapshots_command(
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """List the snapshots of the environment, newest first."""
    from . import core

    try:
        summaries = core.list_snapshots(_target(python, state_dir, lock_timeout))
    except SafeUninstallError as err:
        _fail(err, as_json, verbose)
    else:
        if as_json:
            payload = {"snapshots": [s.to_dict() for s in summaries]}
            click.echo(json.dumps(payload, indent=2, default=list))
        else:
            click.echo(report.snapshots_table(summaries))


@cli.command("show")
@click.argument("snapshot", required=False)
@target_options
@output_options
def show_command(
    snapshot: str | None,
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Show one snapshot (default: the latest)."""
    from . import core
    from .snapshot import dumps

    try:
        snap = core.show_snapshot(_target(python, state_dir, lock_timeout), snapshot)
    except SafeUninstallError as err:
        _fail(err, as_json, verbose)
    else:
        if as_json:
            click.echo(json.dumps(snap.to_dict(), indent=2))
        elif verbose:
            click.echo(dumps(snap))
        else:
            click.echo(report.snapshot_details(snap))


@cli.command("probe")
@target_options
@probe_options
@output_options
def probe_command(
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    probes: tuple[str, ...],
    probe_cmds: tuple[str, ...],
    probe_timeout: float | None,
    no_probe: bool,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Run the configured probes now."""
    from . import core

    _run_operation(
        lambda: core.probe_now(
            _target(python, state_dir, lock_timeout),
            _probe(probes, probe_cmds, probe_timeout, no_probe),
        ),
        as_json,
        verbose,
        quiet,
    )


@cli.command("check")
@click.argument("packages", nargs=-1, required=True)
@target_options
@click.option("--strict", is_flag=True, help="Exit 1 when the report finds breakage or drift.")
@output_options
def check_command(
    packages: tuple[str, ...],
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    strict: bool,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Report what removing PACKAGE... would break or change; change nothing."""
    from . import core

    _run_operation(
        lambda: core.check(_target(python, state_dir, lock_timeout), packages, strict=strict),
        as_json,
        verbose,
        quiet,
    )


@cli.command("doctor")
@target_options
@output_options
def doctor_command(
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Find everything already broken (missing libraries, unmet requirements, hollow installs)
    and print the one command that repairs it."""
    from . import core

    try:
        report_ = core.doctor(_target(python, state_dir, lock_timeout))
    except SafeUninstallError as err:
        _fail(err, as_json, verbose)
    else:
        if as_json:
            click.echo(json.dumps(report_.to_dict(), indent=2))
        else:
            click.echo(report.doctor_report(report_))
        sys.exit(0 if report_.healthy else 1)


@cli.command("recover")
@target_options
@probe_options
@offline_option
@output_options
def recover_command(
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    probes: tuple[str, ...],
    probe_cmds: tuple[str, ...],
    probe_timeout: float | None,
    no_probe: bool,
    offline: bool | None,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Finish an operation that was killed half way: back to its snapshot, verified."""
    from . import core

    _run_operation(
        lambda: core.recover(
            _target(python, state_dir, lock_timeout, verbose=verbose),
            _probe(probes, probe_cmds, probe_timeout, no_probe),
            options.RollbackOptions(offline=_offline(offline)),
        ),
        as_json,
        verbose,
        quiet,
    )


_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def _parse_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """``500M``, ``2G``, ``1.5GiB`` or a number of bytes (units are powers of 1024)."""
    if value is None:
        return None
    text = value.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1:] if text[-1:] in _SIZE_UNITS else ""
    try:
        size = float(text[: len(text) - len(unit)]) * _SIZE_UNITS[unit]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a size like 500M or 2G") from None
    if size < 0:
        raise click.BadParameter("a size can't be negative")
    return int(size)


@cli.command("prune")
@target_options
@click.option("--keep", type=click.IntRange(min=1), help="Keep the newest N snapshots.")
@click.option(
    "--max-size",
    callback=_parse_size,
    metavar="SIZE",
    help="Delete the oldest snapshots until the rest hold at most SIZE (e.g. 500M, 2G).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be deleted; delete nothing.")
@output_options
def prune_command(
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    keep: int | None,
    max_size: int | None,
    dry_run: bool,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Delete old snapshots and their stashes (never the latest, nor one still in use)."""
    from . import core

    try:
        result = core.prune(
            _target(python, state_dir, lock_timeout),
            options.PruneOptions(keep=keep, max_size=max_size, dry_run=dry_run),
        )
    except SafeUninstallError as err:
        _fail(err, as_json, verbose)
    else:
        if as_json:
            click.echo(json.dumps(result.to_dict(), indent=2))
        else:
            click.echo(report.prune_summary(result))


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM takes the same path as Ctrl-C: an in-flight removal is restored before exit.
    raise KeyboardInterrupt


def run(argv: list[str] | None = None) -> int:
    """Run one command line (default: ``sys.argv``) and return its exit code."""
    # SIGTERM and a hang-up (an SSH session that drops) take the same path as Ctrl-C: an
    # in-flight removal is restored before exit.
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    try:
        cli(args=argv, prog_name="safe-uninstall")
    except SystemExit as done:
        return _exit_code(done.code)
    except OSError as err:  # the last resort: one line, never a traceback
        click.echo(f"safe-uninstall: error: {err}", err=True)
        return 1
    return 0


def _exit_code(code: object) -> int:
    """What the interpreter would make of ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    click.echo(code, err=True)
    return 1


# -- configuration and colour ----------------------------------------------------------------
# What was typed wins; what was not comes from config.resolve (environment, pyproject.toml,
# the user's config.toml, defaults). These are read inside each command's error handling, so a
# bad configuration file is reported like any other error (exit 2, JSON under --json).

_COLOR_META = "safe_uninstall.color"
_TONES = {"good": "green", "warn": "yellow", "bad": "red"}


def _remember_color(ctx: click.Context, value: str | None) -> None:
    if value is not None:
        ctx.meta[_COLOR_META] = value


def _settings(typed: dict[str, config.Value] | None = None) -> config.Settings:
    ctx = click.get_current_context(silent=True)
    color = ctx.meta.get(_COLOR_META) if ctx is not None else None
    return config.resolve(Path.cwd(), os.environ, {"color": color, **(typed or {})})


def _configured_target(
    state_dir: str | None, lock_timeout: float | None
) -> tuple[str | None, float]:
    settings = _settings({"state-dir": state_dir, "lock-timeout": lock_timeout})
    return settings.text("state-dir"), settings.seconds("lock-timeout")


def _offline(offline: bool | None) -> bool:
    return _settings({"offline": offline}).flag("offline")


def _use_color(stream: TextIO) -> bool:
    try:
        choice = _settings().text("color") or "auto"
    except SafeUninstallError:
        # The configuration itself is what failed: still honour --color and NO_COLOR.
        ctx = click.get_current_context(silent=True)
        choice = (ctx.meta.get(_COLOR_META) if ctx is not None else None) or "auto"
    return report.use_color(choice, isatty=stream.isatty(), environ=os.environ)


def _painter(color: bool) -> report.Paint:
    if not color:
        return report.plain
    return lambda text, tone: click.style(text, fg=_TONES[tone], bold=tone == "bad" or None)


@cli.command("config")
@output_options
def config_command(as_json: bool, verbose: bool, quiet: bool) -> None:
    """Show every setting's effective value and where it came from.

    Places, strongest first: the command line, SAFE_UNINSTALL_* environment variables,
    [tool.safe-uninstall] in the nearest pyproject.toml, the user's
    $XDG_CONFIG_HOME/safe-uninstall/config.toml; then the defaults. -q prints the effective
    values as TOML (unset keys left out); -v also names the files consulted.
    """
    try:
        settings = _settings()
    except SafeUninstallError as err:
        _fail(err, as_json, verbose)
    else:
        if as_json:
            click.echo(json.dumps(settings.to_dict(), indent=2))
        else:
            click.echo(report.settings(settings, verbose=verbose, quiet=quiet))


# -- export ------------------------------------------------------------------------------------


@cli.command("export")
@click.argument("snapshot", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(EXPORT_FORMATS),
    default="requirements",
    show_default=True,
    help="requirements: for pip/uv. pylock: PEP 751 pylock.toml, where the snapshot allows one "
    "(else requirements, and why).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (atomically) instead of standard output.",
)
@target_options
@output_options
def export_command(
    snapshot: str | None,
    fmt: str,
    output: Path | None,
    python: str | None,
    state_dir: str | None,
    lock_timeout: float | None,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Write SNAPSHOT's exact set as a requirements file or a pylock.toml.

    SNAPSHOT is an id (default: the latest) or the path of a snapshot.toml. Give the set back
    in a fresh environment with: uv pip sync FILE.
    """
    try:
        from . import export as export_file  # only here: it pulls in urllib and packaging.pylock

        result = export_file.export(
            _target(python, state_dir, lock_timeout),
            export_file.ExportOptions(snapshot=snapshot, format=fmt, output=output),
        )
    except SafeUninstallError as err:
        _fail(err, as_json, verbose)
    else:
        if as_json:
            click.echo(json.dumps(result.to_dict(), indent=2))
            return
        if result.fallback_reason:
            click.echo(
                f"safe-uninstall: no pylock.toml for snapshot {result.snapshot}, requirements "
                f"instead: {result.fallback_reason}",
                err=True,
            )
        if result.output is None:
            click.echo(result.text, nl=False)
        elif not quiet:
            click.echo(f"wrote {result.output}: {result.packages} distributions ({result.format})")
