"""The command line: parse options into frozen records, call one core function, render.

``safe-uninstall PACKAGE...`` is the ``uninstall`` command; the other commands are subcommands.
A package whose name equals a subcommand is removed with ``safe-uninstall uninstall NAME``.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, TypeVar

import click
import msgspec
from click.core import ParameterSource
from click.shell_completion import CompletionItem
from msgspec import Struct

from safeuninstall import __version__, config, options
from safeuninstall.base import interrupts
from safeuninstall.base.errors import EXIT_UNCHANGED, Interrupted, SafeUninstallError, UsageError
from safeuninstall.base.events import Event, Events
from safeuninstall.cli.render.paint import plain, use_color
from safeuninstall.environment.sizes import count_text
from safeuninstall.probe.metric import DEFAULT_MAX_RUNS, Metric

# Each command imports the operation it runs, and the renderer of its text, in its body: a
# read-only command loads no restore machinery nor another command's renderer, and a
# change-making one loads it all with its operation's module and its renderer, before it
# changes anything (docs/performance.md, "What is deferred at start-up").
if TYPE_CHECKING:
    from safeuninstall.cli.render.paint import Paint
    from safeuninstall.context.baseline import HeadStart
    from safeuninstall.context.context import Context
    from safeuninstall.operations.results import (
        BisectResult,
        DiffResult,
        PruneResult,
        Result,
        ShownSnapshot,
        SnapshotList,
        SnapshotTaken,
    )
    from safeuninstall.probe.runner import ProbeSettings
    from safeuninstall.reports.audit import AuditReport
    from safeuninstall.reports.doctor import DoctorReport
    from safeuninstall.transaction.retention import Kept

if TYPE_CHECKING:  # the module is imported by the export command alone (docs/performance.md)
    from safeuninstall.operations.export import ExportResult

ResultT = TypeVar("ResultT", bound="Result")

_WEEK = 7 * 24 * 3600.0  # upper bound of every duration option


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """FloatRange lets nan through (every comparison with nan is false)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds")
    return value


# The options several commands share, defined once: each command gets its own copy, and the
# group a hidden one, so that they may come before the command's name too
# (`safe-uninstall -p .venv audit`).
def _target_options(hidden: bool = False) -> list[click.Option]:
    return [
        click.Option(
            ["-p", "--python"],
            metavar="PYTHON",
            hidden=hidden,
            help="Target interpreter or environment directory (default: as uv pip finds "
            "it: $UV_PYTHON, [pip] python of uv's configuration, $VIRTUAL_ENV, $CONDA_PREFIX, "
            "else .venv in this or a parent folder).",
        ),
        click.Option(
            ["--system/--no-system"],
            default=None,
            hidden=hidden,
            help="The first Python on PATH, as uv finds it (not a virtual environment). "
            "[default: $UV_SYSTEM_PYTHON, else uv's configuration]",
        ),
        click.Option(
            ["-t", "--target"],
            metavar="DIR",
            hidden=hidden,
            help="The packages in DIR, as `uv pip install --target DIR` put them there.",
        ),
        click.Option(
            ["--prefix"],
            metavar="DIR",
            hidden=hidden,
            help="The packages under the prefix DIR (DIR/lib/pythonX.Y/site-packages).",
        ),
        click.Option(
            ["--break-system-packages/--no-break-system-packages"],
            default=None,
            hidden=hidden,
            help="Change an interpreter its distributor manages (PEP 668), as uv allows with it. "
            "[default: $UV_BREAK_SYSTEM_PACKAGES, else uv's configuration]",
        ),
        click.Option(
            ["--state-dir"],
            metavar="DIR",
            hidden=hidden,
            help="Where snapshots and stashes live (default: <venv>/.safe-uninstall).",
        ),
        click.Option(
            ["--lock-timeout"],
            type=click.FloatRange(min=0, max=_WEEK),
            callback=_finite,
            metavar="SECONDS",
            hidden=hidden,
            help="How long to wait for another operation on the same environment. [default: 60]",
        ),
    ]


def _output_options(hidden: bool = False) -> list[click.Option]:
    return [
        click.Option(
            ["--json", "as_json"],
            is_flag=True,
            hidden=hidden,
            help="Print one JSON object on stdout.",
        ),
        click.Option(
            ["-v", "--verbose"],
            is_flag=True,
            hidden=hidden,
            help="Show probe and installer output.",
        ),
        click.Option(
            ["-q", "--quiet"], is_flag=True, hidden=hidden, help="Print only the outcome."
        ),
        click.Option(
            ["--color"],
            type=click.Choice(config.COLOR_CHOICES),
            expose_value=False,
            callback=lambda ctx, param, value: _remember_color(ctx, value),
            hidden=hidden,
            help="Colour the text output (auto: on a terminal, unless NO_COLOR is set). "
            "[default: auto]",
        ),
    ]


def _probe_options(hidden: bool = False) -> list[click.Option]:
    return [
        click.Option(
            ["--probe", "probes"],
            multiple=True,
            metavar="CODE",
            hidden=hidden,
            help="Python code run by the target interpreter; repeatable.",
        ),
        click.Option(
            ["--probe-cmd", "probe_cmds"],
            multiple=True,
            metavar="COMMAND",
            hidden=hidden,
            help="A command (no shell) run with the environment's bin first on PATH; repeatable.",
        ),
        click.Option(
            ["--probe-timeout"],
            type=click.FloatRange(min=0, min_open=True, max=_WEEK),
            callback=_finite,
            metavar="SECONDS",
            hidden=hidden,
            help="Kill a probe (its whole process group) after this long. [default: 300]",
        ),
        click.Option(["--no-probe"], is_flag=True, hidden=hidden, help="Run no probe at all."),
        *_metric_options(hidden),
    ]


def _metric_options(hidden: bool) -> list[click.Option]:
    return [
        click.Option(
            ["--probe-metric"],
            metavar="COMMAND",
            hidden=hidden,
            help="A command (no shell) run like --probe-cmd whose last line is a number, higher "
            "is better: a change that makes its median worse than before by more than "
            "--max-regression, significantly (a Mann-Whitney U test at the 1% level), fails "
            "like a failing probe; runs that cannot tell are inconclusive, never a pass.",
        ),
        click.Option(
            ["--lower-is-better"],
            is_flag=True,
            hidden=hidden,
            help="The --probe-metric number is a cost (seconds, bytes): lower is better.",
        ),
        click.Option(
            ["--metric-runs"],
            type=click.IntRange(min=1, max=1000),
            default=3,
            show_default=True,
            metavar="N",
            hidden=hidden,
            help="Runs of --probe-metric before and after the change; the median counts.",
        ),
        click.Option(
            ["--metric-max-runs"],
            type=click.IntRange(min=1, max=1000),
            default=DEFAULT_MAX_RUNS,
            show_default=True,
            metavar="N",
            hidden=hidden,
            help="Where the two states can be switched (each bisect round), runs of each are "
            "added, in turn, until the answer is decided, up to this many a side; undecided "
            "then, it is inconclusive.",
        ),
        click.Option(
            ["--max-regression"],
            type=click.FloatRange(min=0, max=1e6),
            callback=_finite,
            default=10.0,
            show_default=True,
            metavar="PERCENT",
            hidden=hidden,
            help="How much worse than before the --probe-metric median may get.",
        ),
    ]


def _offline_option(hidden: bool = False) -> click.Option:
    return click.Option(
        ["--offline/--no-offline"],
        default=None,
        hidden=hidden,
        help="A reinstall, if one is needed, uses no network. [default: no-offline]",
    )


# uninstall and rollback: both uninstall, and both are refused when that leaves a requirement unmet
_ALLOW_UNMET_OPTION = click.option(
    "--allow-unmet",
    is_flag=True,
    help="Go ahead although what it uninstalls leaves a requirement of a remaining distribution "
    "unmet (refused otherwise, exit 1, nothing changed); the probe judges it.",
)


# Options of `uv pip uninstall` that steer uv itself (its cache, its network, its discovery of
# Python, its configuration): accepted with uv's meaning, passed on to every uv the tool runs as
# the variable uv reads for each. Hidden: docs/usage.md lists them.
_UV_META = "safe_uninstall.uv_settings"
_UV_VALUES = {  # option: the variable, for an option that takes a value
    "--keyring-provider": "UV_KEYRING_PROVIDER",
    "--cert": "SSL_CERT_FILE",
    "--allow-insecure-host": "UV_INSECURE_HOST",
    "--cache-dir": "UV_CACHE_DIR",
    "--project": "UV_PROJECT",
    "--config-file": "UV_CONFIG_FILE",
}
_UV_FLAGS = {  # flag: (variable, value)
    "--system-certs": ("UV_SYSTEM_CERTS", "1"),
    "--no-cache": ("UV_NO_CACHE", "1"),
    "--managed-python": ("UV_MANAGED_PYTHON", "1"),
    "--no-managed-python": ("UV_NO_MANAGED_PYTHON", "1"),
    "--no-python-downloads": ("UV_PYTHON_DOWNLOADS", "never"),
    "--no-progress": ("UV_NO_PROGRESS", "1"),
    "--no-config": ("UV_NO_CONFIG", "1"),
}


def _uv_setting(ctx: click.Context, param: click.Parameter, value: object) -> None:
    if not value:
        return
    settings = ctx.meta.setdefault(_UV_META, {})
    option = max(param.opts, key=len)
    if option in _UV_VALUES:
        values = value if isinstance(value, tuple) else (value,)
        settings[_UV_VALUES[option]] = " ".join(str(v) for v in values)
    else:
        variable, setting = _UV_FLAGS[option]
        settings[variable] = setting


def _change_directory(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """uv's --directory: the command runs from DIR (paths, .venv discovery, configuration)."""
    if value is not None:
        try:
            os.chdir(value)
        except OSError as err:
            raise click.BadParameter(f"{value}: {err.strerror}") from None


def _uv_settings() -> dict[str, str]:
    ctx = click.get_current_context(silent=True)
    while ctx is not None and _UV_META not in ctx.meta:
        ctx = ctx.parent
    return dict(ctx.meta[_UV_META]) if ctx is not None else {}


_UV_OPTIONS = (
    *(
        click.option(
            *(("-n", option) if option == "--no-cache" else (option,)),
            is_flag=True,
            hidden=True,
            expose_value=False,
            callback=_uv_setting,
        )
        for option in _UV_FLAGS
    ),
    *(
        click.option(
            option,
            hidden=True,
            expose_value=False,
            multiple=option == "--allow-insecure-host",
            callback=_uv_setting,
        )
        for option in _UV_VALUES
    ),
    click.option(
        "--directory", hidden=True, expose_value=False, callback=_change_directory, is_eager=True
    ),
)


def _with_uv_options(func: Callable[..., None]) -> Callable[..., None]:
    for decorator in reversed(_UV_OPTIONS):
        decorator(func)
    return func


def _echo_installer(text: str) -> None:
    click.echo(text, err=True, nl=False)


def _fit(text: str, tail: str = "") -> str:
    """``text`` and then ``tail``, ``text`` cut so that both fit the terminal's width less one
    column: a transient line that wrapped would leave its first rows behind when it is erased
    (a carriage return goes back to the start of the last row only), and a line that fills
    the last column wraps on some terminals."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        columns = 0
    room = columns - 1 - len(tail)
    if room < 8 or len(text) <= room:  # a width unknown (0) or too narrow to cut to
        return text + tail
    return text[: room - 3] + "..." + tail


def _amounts(done: int, total: int) -> str:
    """``12/340 MiB``, in the largest unit of which ``total`` holds one at least."""
    unit, size = "B", 1
    for name, scale in (("KiB", 1024), ("MiB", 1024 * 1024), ("GiB", 1024**3)):
        if total >= scale:
            unit, size = name, scale
    return f"{done // size}/{total // size} {unit}"


class _ProgressBar:
    """A transient bar on stderr for file steps that take more than a second (a copy to
    another filesystem, hashing a large stash); nothing for the instant ones, nor for a step
    with nothing to count. The bar is erased when its step ends."""

    _DELAY = 1.0
    _WIDTH = 30

    def __init__(self) -> None:
        self._started: dict[str, float] = {}
        self._shown: set[str] = set()

    def __call__(self, step: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total:  # the step ends: the next run of it starts its own clock
            self._started.pop(step, None)
            if step in self._shown:
                self._shown.discard(step)
                click.echo("\r\x1b[K", err=True, nl=False)
            return
        started = self._started.setdefault(step, now)
        if now - started < self._DELAY:
            return
        self._shown.add(step)
        filled = self._WIDTH * done // total
        line = f"{step:<8} [{'#' * filled}{'-' * (self._WIDTH - filled)}] {_amounts(done, total)}"
        click.echo(f"\r{_fit(line)}\x1b[K", err=True, nl=False)


class Output(Struct, frozen=True):
    """How the result is shown: the output options every command takes."""

    as_json: bool = False
    verbose: bool = False
    quiet: bool = False


class _Live:
    """Receives the core's events: each is written to stderr as it happens (not with --json
    or -q), and kept for --json. On a terminal a step that goes on (a probe running, the
    installer, a restore) has a spinner and its elapsed time until the next event, and each
    step's line replaces the one before: the live line is gone when the operation ends, and
    the report says what happened (with -v every step stays, with its time). Through a pipe
    the same lines come unadorned, one each. A wait for another operation is always said: the
    command would otherwise seem to hang."""

    _FRAMES = "|/-\\"
    _TICK = 0.1

    def __init__(self, output: Output) -> None:
        self.events: list[Event] = []
        self._output = output
        self._live = False  # until an operation's steps begin (speak)
        self._tty = sys.stderr.isatty()
        self._lock = threading.Lock()
        # (last line, when it began, whether it goes on: a spinner and the time so far)
        self._ongoing: tuple[str, float, bool] | None = None
        self._wake = threading.Event()
        self._spinner: threading.Thread | None = None

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if not (self._live or event.step == "waiting"):
            return
        lines = f"safe-uninstall: {event.text}".splitlines() or [""]
        with self._lock:
            self._end_ongoing()
            if self._tty and not self._output.verbose and len(lines) == 1:
                # One live line: each step replaces the one before, and goes at the end.
                self._ongoing = (lines[0], time.monotonic(), event.ongoing)
                self._draw(0)
                self._start_spinner()
                return
            if not (self._tty and event.ongoing):
                click.echo("\n".join(lines), err=True)
                return
            if lines[:-1]:
                click.echo("\n".join(lines[:-1]), err=True)
            self._ongoing = (lines[-1], time.monotonic(), True)
            self._draw(0)
            self._start_spinner()

    def _start_spinner(self) -> None:
        if self._spinner is None:
            self._spinner = threading.Thread(target=self._spin, daemon=True)
            self._spinner.start()

    def speak(self) -> None:
        """The command is an operation (a removal, rollback, probe...): its steps are said.
        Other commands (export, snapshots...) say only a wait."""
        self._live = not (self._output.as_json or self._output.quiet)

    def stop(self) -> None:
        """Before the result is printed: the spinner's line ends, with its elapsed time. The
        spinner is stopped first: an interrupt here must not leave it drawing over the error."""
        self._wake.set()
        with self._lock:
            self._end_ongoing()

    def _draw(self, frame: int) -> None:
        assert self._ongoing is not None
        line, began, ongoing = self._ongoing
        if not ongoing:
            click.echo(f"\r{_fit(line)}\x1b[K", err=True, nl=False)
            return
        spin = self._FRAMES[frame % len(self._FRAMES)]
        shown = _fit(line, f" {spin} {time.monotonic() - began:.1f} s")
        click.echo(f"\r{shown}\x1b[K", err=True, nl=False)

    def _end_ongoing(self) -> None:
        """The live line ends: erased (the next step or the report takes its place), or with
        -v ended with the time it took."""
        if self._ongoing is not None:
            line, began, _ = self._ongoing
            if self._output.verbose:
                click.echo(f"\r{line} ({time.monotonic() - began:.1f} s)\x1b[K", err=True)
            else:
                click.echo("\r\x1b[K", err=True, nl=False)
            self._ongoing = None

    def _spin(self) -> None:
        frame = 0
        while not self._wake.wait(self._TICK):
            frame += 1
            with self._lock:
                if self._ongoing is not None and self._ongoing[2]:
                    self._draw(frame)


class Common:
    """The options every command shares, as parsed, and what is built from them once per
    command: the configuration, the probe settings, the opened target."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.output = Output(values.pop("as_json"), values.pop("verbose"), values.pop("quiet"))
        self._typed: dict[str, config.Value] = {
            "state-dir": values.pop("state_dir", None),
            "lock-timeout": values.pop("lock_timeout", None),
            "offline": values.pop("offline", None),
        }
        self._python: str | None = values.pop("python", None)
        self._where = {key: values.pop(key, None) for key in ("system", "target", "prefix")}
        self._break_system_packages: bool | None = values.pop("break_system_packages", None)
        self._no_probe: bool | None = None  # None: a command without probe options
        if "probes" in values:
            self._no_probe = values.pop("no_probe")
            self._metric: dict[str, Any] = {
                key: values.pop(key)
                for key in (
                    "probe_metric",
                    "metric_runs",
                    "metric_max_runs",
                    "max_regression",
                    "lower_is_better",
                )
            }
            self._typed |= {
                "probe": values.pop("probes"),
                "probe-cmd": values.pop("probe_cmds"),
                "probe-timeout": values.pop("probe_timeout"),
            }
        self.live = _Live(self.output)
        self._context: Context | None = None
        self.read_only = False  # a dry run: the target is opened to write nothing

    @property
    def target_given(self) -> bool:
        """An option that names the environment was given (-p, --system, --target, --prefix)."""
        return self._python is not None or any(v is not None for v in self._where.values())

    def settings(self) -> config.Settings:
        """Resolved once per command (the first call wins; every call passes the same)."""
        return _settings(self._typed)

    @property
    def offline(self) -> bool:
        return self.settings().flag("offline")

    def settled(self, result: ResultT) -> ResultT:
        """``result`` with what the snapshots keep on disk, once the retention policy has
        run; as it is when the operation changed nothing (a dry run, a refusal, nothing to do)
        or left its work unfinished (exit 4: the journal's snapshot must keep its stash).

        The operation is over and its report must be printed whatever happens here: a busy
        lock, a full disk or an interrupt only skips the policy, and says so."""
        if result.snapshot is None or result.exit_code not in (0, 3, 5, 7, 8):
            return result
        if result.outcome.changed_nothing:  # nothing new for the retention policy to weigh
            return result
        kept, note = self.retain()
        if note:
            return msgspec.structs.replace(result, messages=(*result.messages, note))
        return result if kept is None else msgspec.structs.replace(result, kept=kept)

    def retain(self) -> tuple[Kept | None, str]:
        """The retention policy (``keep``, ``max-size``) applied after an operation, and what
        the snapshots then keep; None (nothing pruned) while an operation is unfinished. The
        lock is not waited for: the operation is done, and the next one runs the policy. A
        busy lock, a full disk or an interrupt only skips it, and the note says so."""

        try:
            ctx = self.context()
            settings = self.settings()
            from safeuninstall.transaction.retention import Policy, installed_pins, settle

            policy = Policy(keep=settings.bound("keep"), max_size=settings.bound("max-size"))
            with ctx.locked(timeout=0):
                if ctx.journal().read() is not None:
                    return None, ""
                kept = settle(ctx.store, policy, lambda: installed_pins(ctx.interpreter))
                if kept is not None:
                    kept = msgspec.structs.replace(kept, command=ctx.suggest())
                return kept, ""
        except (SafeUninstallError, OSError, KeyboardInterrupt) as err:
            why = "interrupted" if isinstance(err, KeyboardInterrupt) else str(err)
            return None, f"the retention policy did not run ({why}); the next operation runs it"

    def probes(self) -> ProbeSettings:
        assert self._no_probe is not None, "a command without probe options"
        line = self._metric["probe_metric"]
        if line is not None and self._no_probe:
            raise UsageError("--probe-metric and --no-probe can't be given together")
        from safeuninstall.probe.runner import metric_probe, probes_from

        settings = probes_from(self.settings(), disabled=self._no_probe, cwd=Path.cwd())
        if line is None:
            return settings
        metric = Metric(
            runs=self._metric["metric_runs"],
            max_runs=self._metric["metric_max_runs"],
            max_regression=self._metric["max_regression"],
            lower_is_better=self._metric["lower_is_better"],
        )
        probe = metric_probe(line, "--probe-metric", Path.cwd(), metric)
        return msgspec.structs.replace(settings, probes=(*settings.probes, probe))

    def context(self) -> Context:
        """The target, opened on first use (``export`` of a snapshot file needs none)."""
        if self._context is None:
            settings = self.settings()
            if self._where["target"] and self._where["prefix"]:
                raise UsageError("--target and --prefix can't be given together")
            target = options.TargetOptions(
                python=self._python,
                cwd=Path.cwd(),
                environ={**os.environ, **_uv_settings()},
                command=("safe-uninstall", *sys.argv[1:]),
                state_dir=settings.text("state-dir"),
                lock_timeout=settings.seconds("lock-timeout"),
                on_installer_output=_echo_installer if self.output.verbose else None,
                on_progress=_ProgressBar() if sys.stderr.isatty() else None,
                read_only=self.read_only,
                system=self._where["system"],
                target=self._where["target"],
                prefix=self._where["prefix"],
                break_system_packages=self._break_system_packages,
            )

            from safeuninstall.context.context import open_context

            self._context = open_context(target, Events(self.live))
        return self._context


def _command(
    name: str,
    *,
    target: bool = True,
    probes: bool = False,
    offline: bool = False,
    interspersed: bool = True,
) -> Callable[[Callable[..., None]], click.Command]:
    """A subcommand of ``cli`` with the shared options: target and probe options before its
    own, offline and output options after them; the function receives them as one ``Common``
    first."""
    before = [*(_target_options() if target else ()), *(_probe_options() if probes else ())]
    after = [*((_offline_option(),) if offline else ()), *_output_options()]

    def register(func: Callable[..., None]) -> click.Command:
        def with_common(**values: Any) -> None:
            func(Common(values), **values)

        command = cli.command(name)(func)  # its own arguments and options, its help
        command.params = [*before, *command.params, *after]
        command.callback = with_common
        command.allow_interspersed_args = interspersed
        return command

    return register


Render = Callable[[Any, Output], str]


def _run(
    common: Common, call: Callable[[], Any], render: Render, *, operation: bool = False
) -> NoReturn:
    """The one way a command runs: call the core, print its result (text or JSON) once, exit
    with its code; an expected failure is one line (JSON on stdout with --json). An operation
    (``operation``, see ``_run_operation``) says its steps as they happen."""
    output = common.output
    if operation:
        common.live.speak()
    if output.as_json:
        # Loaded before the core changes anything: a removal of the tool's own environment
        # (its files among those removed) still prints its object.
        from safeuninstall.base import envelope
        from safeuninstall.operations import payloads
    result: Any = _NO_RESULT
    try:
        interrupts.release()  # one that came during start-up is raised here
        try:
            result = call()
        finally:
            # The outcome is decided: an interrupt from here on changes neither the report
            # nor the exit code (nor passes for one that came before any change).
            interrupts.settle()
            common.live.stop()  # a spinner's line ends before anything else is printed
    except SafeUninstallError as err:
        _fail(err, output)
    except KeyboardInterrupt:
        # The core restores whatever it changed before letting an interrupt out; one that
        # reaches here came before any change, or after the core returned (before settle).
        if result is _NO_RESULT:
            _fail(Interrupted("interrupted before any change"), output)
    except OSError as err:
        # Likewise: the core turns errors after a change into a restore and a result.
        _fail(SafeUninstallError(str(err)), output)
    if output.as_json:
        # an operation's payload says what happened, step by step
        events = common.live.events if operation else ()
        click.echo(envelope.encode(payloads.payload(result, str(JSON_SCHEMA), events)))
    else:
        text = render(result, output)
        if text:
            click.echo(text, color=_use_color(sys.stdout))
    sys.exit(getattr(result, "exit_code", 0))


_NO_RESULT = object()  # _run's result before the core returned one


# The schema of the --json contract (base/envelope.py), shipped in the package: generated from
# the payloads' types (docs/gen_schema.py); every object names it.
JSON_SCHEMA = Path(__file__).with_name("json-schema.json")


def _print_failure(exit_code: int, error: str, detail: str) -> None:
    """The --json object of an error: the envelope, and the message."""
    from safeuninstall.base import envelope
    from safeuninstall.base.envelope import Failure

    failure = Failure(json_schema=str(JSON_SCHEMA), exit_code=exit_code, error=error, detail=detail)
    click.echo(envelope.encode(failure))


def _fail(err: SafeUninstallError, output: Output) -> NoReturn:
    if output.as_json:
        _print_failure(err.exit_code, err.message, err.detail)
    else:
        color = _use_color(sys.stderr)
        error = _painter(color)("error:", "bad")
        click.echo(f"safe-uninstall: {error} {err.message}", err=True, color=color)
        if err.detail and not output.quiet:
            lines = err.detail.rstrip().splitlines()
            if not output.verbose and len(lines) > 20:
                lines = ["...", *lines[-20:]]
            click.echo("\n".join("    " + line for line in lines), err=True)
        if err.exit_code == EXIT_UNCHANGED:
            click.echo(f"safe-uninstall: {err.state}", err=True)
    sys.exit(err.exit_code)


def _run_operation(common: Common, call: Callable[[], Result]) -> NoReturn:
    """``_run`` for an operation, rendered as its report. The renderer is loaded here, before
    the core changes anything: a removal of the tool's own files still prints its report."""
    from safeuninstall.cli.render.operation import operation

    def render(result: Result, output: Output) -> str:
        paint = _painter(_use_color(sys.stdout))
        # In a terminal, a plain removal in a few lines; -v, or a pipe (a log), the whole report.
        brief = sys.stdout.isatty() and not output.verbose
        verbose, quiet = output.verbose, output.quiet
        return operation(result, verbose=verbose, quiet=quiet, paint=paint, brief=brief)

    _run(common, call, render, operation=True)


class _DefaultToUninstall(click.Group):
    """``safe-uninstall [OPTIONS] PACKAGE...`` means ``safe-uninstall uninstall ...``: a command
    line whose first word, after the shared options, is not a command's name."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args[0] == "try" and "--" in args:  # the command form: what follows is COMMAND's
            ctx.meta[_TRY_ARGV] = tuple(args[args.index("--") + 1 :])
        if args[0] in self.commands:
            return super().resolve_command(ctx, args)
        return "uninstall", self._uninstall(), args

    def _uninstall(self) -> click.Command:
        return self.commands["uninstall"]

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, "[OPTIONS] PACKAGE... | COMMAND [ARGS]...")

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The group's options, then the removal's (the default command), then the commands."""
        click.Command.format_options(self, ctx, formatter)
        uninstall = self._uninstall()
        sub = uninstall.make_context("uninstall", [], parent=ctx, resilient_parsing=True)
        rows = [
            record
            for param in uninstall.get_params(sub)
            if isinstance(param, click.Option) and "--help" not in param.opts
            if (record := param.get_help_record(sub)) is not None
        ]
        with formatter.section("Removal options (safe-uninstall [OPTIONS] PACKAGE...)"):
            formatter.write_dl(rows)
        self.format_commands(ctx, formatter)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """At the top level ``uninstall``'s options are valid too: offer them with ours."""
        items = super().shell_complete(ctx, incomplete)
        if incomplete.startswith("-"):
            uninstall = self._uninstall()
            sub = uninstall.make_context("uninstall", [], parent=ctx, resilient_parsing=True)
            known = {item.value for item in items}
            items += [i for i in uninstall.shell_complete(sub, incomplete) if i.value not in known]
        return items


@click.group(
    cls=_DefaultToUninstall,
    params=[
        *_target_options(hidden=True),
        *_probe_options(hidden=True),
        _offline_option(hidden=True),
        *_output_options(hidden=True),
    ],
    invoke_without_command=True,
    no_args_is_help=True,
    # The rest of the line is the command's: an option of uninstall's own (`--dry-run X`)
    # comes with its package names.
    context_settings={"help_option_names": ["-h", "--help"], "ignore_unknown_options": True},
)
@click.version_option(__version__, prog_name="safe-uninstall")
@click.pass_context
def cli(ctx: click.Context, /, **shared: object) -> None:
    """Remove Python packages without breaking the environment.

    safe-uninstall PACKAGE... snapshots the installed set, keeps the removed files, uninstalls
    through uv, runs a probe, and restores everything in one batch if the probe fails.
    """
    # An option every command shares may come before the command's name: it is the command's.
    name = ctx.invoked_subcommand or "uninstall"
    command = cli.commands[name]
    takes = {param.name for param in command.params}
    typed = {}
    for param in ctx.command.params:
        if ctx.get_parameter_source(str(param.name)) is not ParameterSource.COMMANDLINE:
            continue
        if param.name not in takes:
            raise click.NoSuchOption(param.opts[0], ctx=ctx)
        if param.expose_value:  # --color is kept in ctx.meta, which the command's shares
            typed[param.name] = shared[param.name]
    ctx.default_map = {name: typed}
    if ctx.invoked_subcommand is None:  # only shared options: a removal that names nothing
        with command.make_context(name, [], parent=ctx) as sub:
            command.invoke(sub)


@_command("uninstall", probes=True, offline=True)
@click.argument("packages", nargs=-1)
@click.option(
    "-r",
    "--requirements",
    "--requirement",
    "requirement_files",
    multiple=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Remove the packages a requirements file, pylock.toml, pyproject.toml or script "
    "names (- for standard input); repeatable.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing, write nothing.")
@click.option(
    "--keep-on-failure", is_flag=True, help="When the probe fails, report but do not restore."
)
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse (exit 1, nothing changed) when a name is not installed, or the impact report "
    "finds breakage or drift.",
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
@_ALLOW_UNMET_OPTION
@click.option(
    "--keep-needed",
    is_flag=True,
    help="Remove only those of the named packages that nothing needs: what metadata or the "
    "library model shows as needed is kept, with its reason; the rest are removed and probed, "
    "and bisected to the largest subset that passes when the probe fails.",
)
@click.option(
    "--with-orphans",
    is_flag=True,
    help="Also remove the dependencies of the named packages that nothing else then requires, "
    "that were not requested (REQUESTED) and whose libraries nothing loads; listed before.",
)
@click.option(
    "-y", "--yes", "_yes", is_flag=True, help="No effect: nothing is asked (as in uv and pip)."
)
@click.option("--disable-pip-version-check", "_pip_check", is_flag=True, hidden=True)
@_with_uv_options
def uninstall_command(
    common: Common,
    packages: tuple[str, ...],
    requirement_files: tuple[str, ...],
    _yes: bool,
    _pip_check: bool,
    **flags: bool,
) -> None:
    """Uninstall PACKAGE... safely (the default command).

    PACKAGE is what `uv pip uninstall` takes: a name, a requirement (its version, extras and
    marker are ignored: the installed distribution of that name is removed, as uv does), or
    the path or URL a distribution was installed from (`./project`, also editable).
    """

    common.read_only = flags["dry_run"]

    def call() -> Result:
        # Before the target is looked for: a bad argument is said first, whatever the target.
        from safeuninstall.environment.requirements import read_request

        request = read_request(packages, requirement_files, Path.cwd(), os.environ)
        wanted = options.UninstallOptions(
            names=packages,
            requirement_files=requirement_files,
            request=request,
            offline=common.offline,
            **flags,
        )
        return _removal(common, wanted)

    _run_operation(common, call)


def _removal(common: Common, wanted: options.UninstallOptions) -> Result:
    """The removal of ``uninstall`` and ``try PACKAGE...``, its baseline begun at once."""
    configured = common.probes()
    ctx = common.context()
    from safeuninstall.context.baseline import head_start
    from safeuninstall.operations.uninstall.command import uninstall

    early: HeadStart | None = None
    try:
        early = head_start(ctx, configured, wanted)  # the baseline probe, in a thread
        removal = uninstall(ctx, configured, wanted, early)
    finally:
        if early is not None:
            early.baseline.cancel()  # no probe outlives the command
    return common.settled(removal)


# COMMAND's own options are its, not ours: nothing after COMMAND is parsed.
@_command("run", probes=True, offline=True, interspersed=False)
@click.argument(
    "argv", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- COMMAND [ARGS]..."
)
@click.option("--dry-run", is_flag=True, help="Print the plan; run nothing, change nothing.")
@click.option(
    "--keep-on-failure",
    is_flag=True,
    help="When the command fails, a requirement is left unmet or the probe fails, report but "
    "do not restore.",
)
@click.option(
    "--fresh-baseline",
    is_flag=True,
    help="Run the baseline probe even when a cached pass for this environment is valid.",
)
@click.option(
    "--allow-unmet",
    is_flag=True,
    help="Keep a change that leaves a requirement unmet when the probe passes (restored "
    "otherwise).",
)
def run_command(common: Common, argv: tuple[str, ...], **flags: bool) -> None:
    """Run COMMAND against the environment, guarded: snapshot first (every file kept), judge
    the change it makes (requirements, the probe), and put everything back in one batch when
    it fails, exits non-zero or is interrupted.

    COMMAND runs with the environment activated (VIRTUAL_ENV, its scripts first on PATH):
    `safe-uninstall run -- uv pip install -U urllib3`.
    """

    common.read_only = flags["dry_run"]

    def call() -> Result:
        wanted = options.RunOptions(
            argv=argv,
            offline=common.offline,
            output_to_stderr=common.output.as_json,
            **flags,
        )
        from safeuninstall.operations.run import run as run_guarded

        return common.settled(run_guarded(common.context(), common.probes(), wanted))

    _run_operation(common, call)


_TRY_ARGV = "safe_uninstall.try_argv"  # try -- COMMAND: the command, as typed after ``--``
# What try never takes: it always goes back (--keep-on-failure), and judges the change it is
# given (--keep-needed would choose one).
_NOT_TRIED = ("keep_on_failure", "keep_needed", "_yes", "_pip_check")
# What only a removal takes, refused with a command.
_REMOVAL_ONLY = ("strict", "probe_after_restore", "allow_drift", "with_orphans")


_FIND_LINKS_OPTION = click.option(
    "--find-links",
    "find_links",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    metavar="DIR",
    help="A folder of wheels (a wheelhouse copied from another node) the installs also look "
    "in, offline too. Repeatable.",
)


@_command("try", probes=True, offline=True)
@click.argument(
    "targets", nargs=-1, type=click.UNPROCESSED, metavar="PACKAGE... | -- COMMAND | --state FILE"
)
@click.option(
    "--state",
    "state",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Try the state FILE describes (a snapshot.toml the tool wrote, a pylock.toml, a pinned "
    "requirements file) in place of a change: every difference at once.",
)
@_FIND_LINKS_OPTION
def try_command(
    common: Common,
    targets: tuple[str, ...],
    requirement_files: tuple[str, ...],
    state: str | None,
    find_links: tuple[str, ...],
    **flags: bool,
) -> None:
    """Try a change and go back: remove PACKAGE... (as `uninstall` does, with its options),
    run `-- COMMAND` (as `run` does) or switch to the state `--state FILE` describes (as
    `bisect FILE` reaches it: versions from a stash, the index or --find-links), judge it
    (probes, `--probe-metric`), then ALWAYS put everything back, verified, and say what the
    change would do: passes (exit 0), faster (0), breaks (7), slower (8), inconclusive (6);
    `try PACKAGE` whose probe, run again back at the start, fails there says nothing of it
    (5).

    `safe-uninstall try --probe 'import torch' numexpr`,
    `safe-uninstall try --probe-metric 'python bench.py' -- uv pip install -U numpy`,
    `safe-uninstall try --probe-metric 'python bench.py' --state fast-node.toml`.
    """

    argv: tuple[str, ...] | None = click.get_current_context().meta.get(_TRY_ARGV)
    common.read_only = flags["dry_run"]
    if state is not None:
        _refuse_with_a_state(targets, argv, requirement_files, flags)
        return _try_state(common, state, find_links)
    if find_links:
        raise click.UsageError("--find-links: only for try --state FILE")
    if argv is not None:
        _refuse_removal_options(targets, argv, requirement_files, flags)

    def call() -> Result:
        if argv is not None:
            wanted = options.RunOptions(
                argv=argv,
                offline=common.offline,
                output_to_stderr=common.output.as_json,
                dry_run=flags["dry_run"],
                fresh_baseline=flags["fresh_baseline"],
                allow_unmet=flags["allow_unmet"],
                always_undo=True,
            )
            from safeuninstall.operations.run import run as run_guarded

            return common.settled(run_guarded(common.context(), common.probes(), wanted))
        from safeuninstall.environment.requirements import read_request

        request = read_request(targets, requirement_files, Path.cwd(), os.environ)
        removal = options.UninstallOptions(
            names=targets,
            requirement_files=requirement_files,
            request=request,
            offline=common.offline,
            always_undo=True,
            **flags,
        )
        return _removal(common, removal)

    _run_operation(common, call)


def _try_state(common: Common, state: str, find_links: tuple[str, ...]) -> None:
    def call() -> Result:
        wanted = options.BisectOptions(good=state, offline=common.offline, find_links=find_links)
        from safeuninstall.operations.bisect import try_state

        return common.settled(try_state(common.context(), common.probes(), wanted))

    _run_operation(common, call)


def _refuse_with_a_state(
    targets: tuple[str, ...],
    argv: tuple[str, ...] | None,
    requirement_files: tuple[str, ...],
    flags: dict[str, bool],
) -> None:
    """try --state FILE is the whole change: a package or a command too, or an option of a
    removal's, is a mistake said before anything is read."""
    if targets or argv is not None or requirement_files:
        raise click.UsageError("try takes PACKAGE..., -- COMMAND or --state FILE, one of them")
    given = [name for name, value in flags.items() if value is True]
    if given:
        shown = ", ".join("--" + name.replace("_", "-") for name in given)
        raise click.UsageError(f"{shown}: not for try --state FILE")


def _refuse_removal_options(
    targets: tuple[str, ...],
    argv: tuple[str, ...],
    requirement_files: tuple[str, ...],
    flags: dict[str, bool],
) -> None:
    """try -- COMMAND takes what run takes: a package named too, or a removal's option, is a
    mistake said before anything is read."""
    if targets != argv or requirement_files:
        raise click.UsageError("try takes PACKAGE... or -- COMMAND, not both")
    given = [name for name in _REMOVAL_ONLY if flags[name]]
    if given:
        shown = ", ".join("--" + name.replace("_", "-") for name in given)
        raise click.UsageError(f"{shown}: only for try PACKAGE..., not for try -- COMMAND")


def _with_the_removal_s_options(command: click.Command) -> None:
    """try PACKAGE... takes a removal's own options (defined once, on uninstall), after its
    arguments, but those it never takes."""
    have = {p.name for p in command.params} | {"packages", *_NOT_TRIED}
    own = [p for p in uninstall_command.params if p.name not in have]
    at = [p.name for p in command.params].index("targets") + 1
    command.params[at:at] = own


_with_the_removal_s_options(try_command)


@_command("rollback", probes=True, offline=True)
@click.argument("snapshot", required=False)
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@_ALLOW_UNMET_OPTION
def rollback_command(
    common: Common, snapshot: str | None, dry_run: bool, allow_unmet: bool
) -> None:
    """Bring the environment back to SNAPSHOT's exact set (default: the state before the latest
    change still in effect: snapshots of rollbacks and undone removals are passed over)."""

    common.read_only = dry_run

    def call() -> Result:
        wanted = options.RollbackOptions(
            snapshot=snapshot, dry_run=dry_run, offline=common.offline, allow_unmet=allow_unmet
        )
        from safeuninstall.operations.rollback import rollback

        return common.settled(rollback(common.context(), common.probes(), wanted))

    _run_operation(common, call)


@_command("bisect", probes=True, offline=True)
@click.argument("good")
@_FIND_LINKS_OPTION
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan (the units, which versions come from a stash and which from the "
    "index or --find-links, the most rounds); change nothing.",
)
def bisect_command(common: Common, good: str, find_links: tuple[str, ...], dry_run: bool) -> None:
    """Find which changes since GOOD make the probe fail (it passes in GOOD and fails now), by
    probing states between the two; end where it started, verified, and print the culprits
    and the one command that brings back their good versions.

    GOOD is a snapshot (a number, `latest`) or a file that describes another environment: a
    snapshot.toml the tool wrote (`export`, another machine), a pylock.toml, or a pinned
    requirements file (`uv pip freeze`). The changes are grouped into units that can be
    applied apart (tied by a requirement or sharing files); versions come from the stashes
    first, else from the index or --find-links (with --offline, from --find-links only:
    what none of them holds is refused before any change). Interrupted, it returns to the
    start; killed, `safe-uninstall recover` does.
    """

    common.read_only = dry_run

    def call() -> Result:
        wanted = options.BisectOptions(
            good=good, offline=common.offline, find_links=find_links, dry_run=dry_run
        )
        from safeuninstall.operations.bisect import bisect

        return common.settled(bisect(common.context(), common.probes(), wanted))

    # Loaded before the core changes anything, as an operation's renderer is (_run_operation).
    from safeuninstall.cli.render.bisect import bisect_report

    def render(result: BisectResult, output: Output) -> str:
        paint = _painter(_use_color(sys.stdout))
        return bisect_report(result, verbose=output.verbose, quiet=output.quiet, paint=paint)

    _run(common, call, render, operation=True)


@_command("snapshot")
@click.option(
    "--stash/--no-stash",
    default=True,
    show_default=True,
    help="Also keep every installed file (hard links: no data copied).",
)
def snapshot_command(common: Common, stash: bool) -> None:
    """Take a snapshot of the environment now."""

    def call() -> SnapshotTaken:
        from safeuninstall.operations.results import SnapshotTaken
        from safeuninstall.operations.snapshots import snapshot_now

        snap = snapshot_now(common.context(), stash=stash)
        kept, note = common.retain()
        return SnapshotTaken(snap, kept, (note,) if note else ())

    def render(taken: SnapshotTaken, output: Output) -> str:
        from safeuninstall.cli.render.snapshots import policy_lines

        snap = taken.snapshot
        if output.quiet:
            return snap.id
        lines = [*taken.messages, *policy_lines(taken.kept)]
        count = count_text(len(snap.packages), "distribution")
        return "\n".join([*lines, f"snapshot {snap.id}: {count}"])

    _run(common, call, render)


@_command("snapshots")
def snapshots_command(common: Common) -> None:
    """List the snapshots of the environment, newest first."""

    def call() -> SnapshotList:
        from safeuninstall.operations.snapshots import list_snapshots

        return list_snapshots(common.context())

    def render(listed: SnapshotList, output: Output) -> str:
        from safeuninstall.cli.render.snapshots import snapshots_table

        width = shutil.get_terminal_size((0, 0)).columns if sys.stdout.isatty() else 0
        return snapshots_table(listed, quiet=output.quiet, width=width)

    _run(common, call, render)


@_command("show")
@click.argument("snapshot", required=False)
def show_command(common: Common, snapshot: str | None) -> None:
    """Show one snapshot (default: the latest)."""

    def call() -> ShownSnapshot:
        from safeuninstall.operations.snapshots import show_snapshot

        return show_snapshot(common.context(), snapshot)

    def render(shown: ShownSnapshot, output: Output) -> str:
        if output.verbose:
            from safeuninstall.state.snapshot import dumps

            return dumps(shown.snapshot)
        from safeuninstall.cli.render.snapshots import shown_snapshot

        return shown_snapshot(shown, quiet=output.quiet)

    _run(common, call, render)


@_command("diff")
@click.argument("first", required=False, metavar="[A]")
@click.argument("second", required=False, metavar="[B]")
def diff_command(common: Common, first: str | None, second: str | None) -> None:
    """What changed from snapshot A to snapshot B: distributions added, removed, upgraded,
    downgraded, and those of the same version whose files differ, with sizes.

    No snapshot: the latest against now; one: that one against now. Either may be `now`.
    A or B may also be a file that describes another environment: a snapshot.toml, a
    pylock.toml, or a pinned requirements file (`uv pip freeze`, `safe-uninstall export`).
    A snapshot is named by its number or `latest`; anything else is a file's path (`./7` for
    a file named 7). A file gives versions only: files are not compared with it.
    Reads only: takes no lock, writes nothing.
    """

    common.read_only = True

    def call() -> DiffResult:
        from safeuninstall.operations.diff import diff

        return diff(common.context, first, second)

    def render(found: DiffResult, output: Output) -> str:
        from safeuninstall.cli.render.diff import diff_report

        return diff_report(found, quiet=output.quiet, verbose=output.verbose)

    _run(common, call, render)


@_command("probe", probes=True)
@click.argument("packages", nargs=-1)
def probe_command(common: Common, packages: tuple[str, ...]) -> None:
    """Run the configured probes now; with PACKAGE..., the probe that removing them would run
    (nothing is removed).

    Where no probe is configured, the probe of a removal is derived from what it affects; this
    shows each of its candidates and how it ends, and which would be dropped because they fail
    before any change.
    """

    def call() -> Result:
        from safeuninstall.operations.inspect import probe_now

        return probe_now(common.context(), common.probes(), packages)

    _run_operation(common, call)


@_command("check")
@click.argument("packages", nargs=-1, required=True)
@click.option("--strict", is_flag=True, help="Exit 1 when the report finds breakage or drift.")
def check_command(common: Common, packages: tuple[str, ...], strict: bool) -> None:
    """Report what removing PACKAGE... would break or change; change nothing."""

    def call() -> Result:
        from safeuninstall.operations.inspect import check

        return check(common.context(), packages, strict=strict)

    _run_operation(common, call)


@_command("doctor")
def doctor_command(common: Common) -> None:
    """Find everything already broken (missing libraries, unmet requirements, hollow installs)
    and print the one command that repairs it."""

    def call() -> DoctorReport:
        from safeuninstall.operations.inspect import doctor

        return doctor(common.context())

    def render(found: DoctorReport, output: Output) -> str:
        from safeuninstall.cli.render.doctor import doctor_report

        return doctor_report(found, quiet=output.quiet, verbose=output.verbose)

    _run(common, call, render)


@_command("audit", probes=True)
@click.option(
    "--load",
    is_flag=True,
    help="Also run the probes (configured, else one derived from the distributions that hold "
    "libraries) and report which files the probe process really mapped.",
)
def audit_command(common: Common, load: bool) -> None:
    """Report the whole environment, largest first: each distribution's size (its own files,
    each counted once), whether it was requested, who requires it and who loads its
    libraries, the orphans, metadata-only and unmet requirements; sonames that several
    distributions provide and which copy is loaded; the space the snapshots' stashes hold.
    Reads only: takes no lock, writes nothing."""

    common.read_only = True

    def call() -> AuditReport:
        from safeuninstall.operations.audit import audit

        return audit(common.context(), common.probes(), load=load)

    def render(found: AuditReport, output: Output) -> str:
        from safeuninstall.cli.render.audit import audit_report

        return audit_report(found, quiet=output.quiet, verbose=output.verbose)

    _run(common, call, render)


@_command("recover", probes=True, offline=True)
def recover_command(common: Common) -> None:
    """Finish an operation that was killed half way: back to its snapshot, verified."""

    def call() -> Result:
        wanted = options.RollbackOptions(offline=common.offline)
        from safeuninstall.operations.rollback import recover

        return common.settled(recover(common.context(), common.probes(), wanted))

    _run_operation(common, call)


def _parse_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """``500M``, ``2G``, ``1.5GiB`` or a number of bytes (units are powers of 1024)."""
    if value is None:
        return None
    size = config.parse_size(value)
    if size is None:
        raise click.BadParameter(f"{value!r} is not a size like 500M or 2G")
    return size


@_command("prune")
@click.option("--keep", type=click.IntRange(min=1), help="Keep the newest N snapshots.")
@click.option(
    "--max-size",
    callback=_parse_size,
    metavar="SIZE",
    help="Delete the oldest snapshots until the rest hold at most SIZE (e.g. 500M, 2G).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be deleted; delete nothing.")
@click.option(
    "--drop-only-copies",
    is_flag=True,
    help="Also delete snapshots whose stash holds the only copy of a distribution whose name is "
    "not installed now, at any version (a rollback then needs the index).",
)
def prune_command(
    common: Common, keep: int | None, max_size: int | None, dry_run: bool, drop_only_copies: bool
) -> None:
    """Delete old snapshots and their stashes (never the latest, nor one still in use, nor,
    unless --drop-only-copies, one holding the only copy of a removal still in effect)."""

    def call() -> PruneResult:
        wanted = options.PruneOptions(
            keep=keep, max_size=max_size, dry_run=dry_run, drop_only_copies=drop_only_copies
        )
        from safeuninstall.operations.snapshots import prune

        return prune(common.context(), wanted)

    def render(result: PruneResult, output: Output) -> str:
        from safeuninstall.cli.render.snapshots import prune_summary

        return prune_summary(result, quiet=output.quiet)

    _run(common, call, render)


def run(argv: list[str] | None = None) -> int:
    """Run one command line (default: ``sys.argv``) and return its exit code."""
    # Until the command's core begins (_run), an interrupt is held: parsing changes nothing.
    # Then Ctrl-C, SIGTERM and a hang-up all take one path: an in-flight removal is restored
    # before exit. Once the core has returned, they are dropped (interrupts.settle).
    interrupts.hold()
    args = sys.argv[1:] if argv is None else argv
    try:
        done = cli.main(args=args, prog_name="safe-uninstall", standalone_mode=False)
    except SystemExit as exited:
        return _exit_code(exited.code)
    except click.ClickException as err:  # a usage error: click's own message, exit 2
        err.show()
        if _asks_for_json(args):  # and the JSON that exit-codes.md promises
            _print_failure(err.exit_code, err.format_message(), "")
        return err.exit_code
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except OSError as err:  # the last resort: one line, never a traceback
        click.echo(f"safe-uninstall: error: {err}", err=True)
        return 1
    return done if isinstance(done, int) else 0


def _asks_for_json(args: list[str]) -> bool:
    """``--json`` among the tool's own arguments (not after ``--``, a guarded command's)."""
    own = args[: args.index("--")] if "--" in args else args
    return "--json" in own


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
_SETTINGS_META = "safe_uninstall.settings"
_TONES = {"good": "green", "warn": "yellow", "bad": "red"}


def _remember_color(ctx: click.Context, value: str | None) -> None:
    if value is not None:
        ctx.meta[_COLOR_META] = value


def _settings(typed: dict[str, config.Value] | None = None) -> config.Settings:
    """The configuration, resolved once per command: typed values first (see config.resolve)."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    if _SETTINGS_META not in meta:
        color = meta.get(_COLOR_META)
        meta[_SETTINGS_META] = config.resolve(
            Path.cwd(), os.environ, {"color": color, **(typed or {})}
        )
    settings: config.Settings = meta[_SETTINGS_META]
    return settings


def _use_color(stream: TextIO) -> bool:
    try:
        choice = _settings().text("color") or "auto"
    except SafeUninstallError:
        # The configuration itself is what failed: still honour --color and NO_COLOR.
        ctx = click.get_current_context(silent=True)
        choice = (ctx.meta.get(_COLOR_META) if ctx is not None else None) or "auto"
    return use_color(choice, isatty=stream.isatty(), environ=os.environ)


def _painter(color: bool) -> Paint:
    if not color:
        return plain
    return lambda text, tone: click.style(text, fg=_TONES[tone], bold=tone == "bad" or None)


class _ConfigShown(Struct, frozen=True):
    """What ``config`` shows: the settings, and with a target option the environment they
    apply to and the state folder its commands use."""

    settings: config.Settings
    environment: str | None = None
    state_dir: str | None = None

    @property
    def by_key(self) -> Mapping[str, config.Setting]:
        return self.settings.by_key

    @property
    def files(self) -> dict[str, object]:
        settings = self.settings
        project = settings.project_file
        return {
            "project": str(project) if project else None,
            "user": str(settings.user_file),
            "user_exists": settings.user_file_exists,
        }

    @property
    def ignored_variables(self) -> tuple[str, ...]:
        return self.settings.ignored_variables


@_command("config")
def config_command(common: Common) -> None:
    """Show every setting's effective value and where it came from.

    Places, strongest first: the command line, SAFE_UNINSTALL_* environment variables,
    [tool.safe-uninstall] in the nearest pyproject.toml, the user's
    $XDG_CONFIG_HOME/safe-uninstall/config.toml; then the defaults. -q prints the effective
    values as TOML (unset keys left out); -v also names the files consulted. With -p (or
    --system, --target, --prefix), also the environment and the state folder its commands
    use; nothing is written there.
    """

    def call() -> _ConfigShown:
        settings = common.settings()
        if not common.target_given:
            return _ConfigShown(settings)
        common.read_only = True
        ctx = common.context()
        return _ConfigShown(settings, ctx.where, str(ctx.store.root))

    def render(shown: _ConfigShown, output: Output) -> str:
        from safeuninstall.cli.render.settings import settings

        text = settings(shown.settings, verbose=output.verbose, quiet=output.quiet)
        if shown.environment is None or output.quiet:
            return text
        return f"{text}\nenvironment: {shown.environment}\nstate folder: {shown.state_dir}"

    _run(common, call, render)


# -- export ------------------------------------------------------------------------------------


@_command("export")
@click.argument("snapshot", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(options.EXPORT_FORMATS),
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
def export_command(common: Common, snapshot: str | None, fmt: str, output: Path | None) -> None:
    """Write SNAPSHOT's exact set as a requirements file or a pylock.toml.

    SNAPSHOT is an id, latest (the newest) or the path of a snapshot.toml; without it, what
    is installed now. Give the set back in a fresh environment with: uv pip sync FILE.
    """

    def call() -> ExportResult:
        from safeuninstall.operations import export  # deferred: docs/performance.md

        wanted = export.ExportOptions(snapshot=snapshot, format=fmt, output=output, cwd=Path.cwd())
        return export.export(wanted, common.context)

    _run(common, call, _export_text)


def _export_text(result: ExportResult, output: Output) -> str:
    if result.output is None:
        click.echo(result.text, nl=False)
        return ""
    if output.quiet:
        return ""
    count = count_text(result.packages, "distribution")
    return f"wrote {result.output}: {count} ({result.format})"
