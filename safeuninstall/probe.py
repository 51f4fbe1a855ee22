"""Smoke probes: does the environment still work?

A Python probe runs in the target interpreter through a small driver that, at the end, records
which shared objects the process had loaded (from /proc/self/maps), so a removal that "passes"
only because the loader found another copy of a library can be told apart.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from subprocess import Popen

from msgspec import Struct, field

from . import config, process
from .environment import InstalledDistribution, Interpreter
from .errors import InvalidInput
from .options import ProbeOptions

DEFAULT_TIMEOUT = 300.0
# torch's own check, plus the libraries a CUDA build loads lazily: without these a removal of
# cuDNN or NCCL passes `import torch` and fails at the first real call (see FACTS.md).
TORCH_PROBE = """import torch
torch.cuda.device_count()
if torch.version.cuda:
    torch.backends.cudnn.version()
    if hasattr(torch.cuda, "nccl"):
        torch.cuda.nccl.version()"""
# Top-level names that wheels ship by mistake; importing them proves nothing.
_NOT_MODULES = frozenset({"tests", "test", "testing", "docs", "examples", "benchmarks", "scripts"})

# Runs the probe code as __main__, then writes the loaded shared objects to argv[2], one a line
# (the kernel escapes a newline in a mapped path as \012), renamed into place once complete.
# Bytes throughout, so no locale is involved; no json: its import would add to every probe run.
_DRIVER = r"""
import sys
_code, _maps_out = sys.argv[1], sys.argv[2]
del sys.argv[1:]
def _record_maps():
    import os
    try:
        with open("/proc/self/maps", "rb") as f:
            libs = sorted({l.split(None, 5)[5].strip() for l in f
                           if len(l.split(None, 5)) == 6 and b".so" in l})
        with open(_maps_out + ".part", "wb") as out:
            out.write(b"".join(lib + b"\n" for lib in libs))
        os.replace(_maps_out + ".part", _maps_out)
    except OSError:
        return
try:
    exec(compile(_code, "<probe>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
finally:
    _record_maps()
"""


class Probe(Struct, frozen=True):
    """One smoke probe: Python code run in the target, or a command."""

    kind: str  # "python" or "command"
    code: str  # Python code, or the command line as typed
    origin: str  # "--probe", "pyproject.toml", "SAFE_UNINSTALL_PROBE", "default: ..."

    @property
    def label(self) -> str:
        return self.code if self.kind == "python" else f"$ {self.code}"


class ProbeResult(Struct, frozen=True):
    """How one probe run ended, and which shared libraries it loaded."""

    probe: Probe
    passed: bool
    returncode: int | None
    timed_out: bool
    seconds: float
    output: str
    # realpaths of shared objects the probe process loaded; None where that can't be known
    libraries: tuple[str, ...] | None = None
    cached: bool = False  # a baseline taken from the cache, not run now

    def summary(self) -> str:
        if self.cached:
            return "passed (cached: the environment is unchanged since it last passed)"
        return self._outcome()

    def _outcome(self) -> str:
        if self.passed:
            return f"passed in {self.seconds:.2f} s"
        if self.timed_out:
            return f"timed out after {self.seconds:.1f} s (killed, with every process it started)"
        return f"failed with exit code {self.returncode}"

    def to_dict(self) -> dict[str, object]:
        return {
            "probe": self.probe.label,
            "kind": self.probe.kind,
            "origin": self.probe.origin,
            "passed": self.passed,
            "returncode": self.returncode,
            "timed_out": self.timed_out,
            "seconds": round(self.seconds, 3),
            "cached": self.cached,
            "output": self.output,
        }


class ProbeSettings(Struct, frozen=True):
    """The probes to run around a change, and their time limit."""

    probes: tuple[Probe, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    disabled: bool = False
    # probes chosen by default are explained to the user; configured ones are not
    notes: tuple[str, ...] = field(default_factory=tuple)


def configured_probes(
    options: ProbeOptions, cwd: Path, environ: Mapping[str, str]
) -> ProbeSettings:
    """The probes and their time limit as config.resolve settles them: typed on the command
    line, else from the strongest place that sets them. May be empty."""
    settings = config.resolve(cwd, environ, typed_probes(options))
    return probes_from(settings, disabled=options.disabled, cwd=cwd)


def typed_probes(options: ProbeOptions) -> dict[str, config.Value]:
    """The probe options as typed, for config.resolve."""
    return {
        "probe": options.probes,
        "probe-cmd": options.probe_cmds,
        "probe-timeout": options.timeout,
    }


def probes_from(settings: config.Settings, *, disabled: bool, cwd: Path) -> ProbeSettings:
    """The probes of resolved ``settings`` (``disabled``: --no-probe)."""
    timeout = settings.seconds("probe-timeout")
    if disabled:
        return ProbeSettings(
            timeout=timeout, disabled=True, notes=("probes disabled (--no-probe)",)
        )
    probes = [python_probe(code, _origin(settings, "probe")) for code in settings.strings("probe")]
    probes += [
        command_probe(line, _origin(settings, "probe-cmd"), cwd)
        for line in settings.strings("probe-cmd")
    ]
    return ProbeSettings(probes=tuple(probes), timeout=timeout)


def _origin(settings: config.Settings, name: str) -> str:
    """Where a probe came from: its option when it was typed, else the file or variable."""
    setting = settings.by_key[name]
    return setting.key.option if setting.origin == config.COMMAND_LINE else setting.origin


def python_probe(code: str, origin: str) -> Probe:
    try:
        compile(code, "<probe>", "exec")
    except SyntaxError as err:
        raise InvalidInput(
            f"probe from {origin} is not valid Python: {err.msg} ({code!r})"
        ) from None
    return Probe(kind="python", code=code, origin=origin)


def command_probe(line: str, origin: str, cwd: Path) -> Probe:
    """A command probe. A relative program path (``./check.sh``) is made absolute against
    ``cwd`` now: probes run in an empty temporary folder, where it would not be found."""
    try:
        argv = shlex.split(line)
    except ValueError as err:
        raise InvalidInput(f"probe command from {origin} cannot be split: {err}") from None
    if not argv:
        raise InvalidInput(f"probe command from {origin} is empty")
    if "/" in argv[0] and not os.path.isabs(argv[0]):
        line = shlex.join([str(cwd / argv[0]), *argv[1:]])
    return Probe(kind="command", code=line, origin=origin)


def run_probe(
    probe: Probe,
    interpreter: Interpreter,
    *,
    settings: RunSettings,
    on_start: Callable[[Popen[bytes]], None] | None = None,
) -> ProbeResult:
    """Run one probe; a probe that cannot even start (no working folder on a full disk, no
    such program) is a failed probe, never an exception: it may run after a change."""
    # An empty working folder, so a package in the user's current folder can't shadow one.
    try:
        with tempfile.TemporaryDirectory(
            prefix="safe-uninstall-probe-", ignore_cleanup_errors=True
        ) as workdir:
            return _run_in(Path(workdir), probe, interpreter, settings, on_start)
    except OSError as err:
        return _not_started(probe, f"cannot create its working folder: {err.strerror or err}")


def _run_in(
    workdir: Path,
    probe: Probe,
    interpreter: Interpreter,
    settings: RunSettings,
    on_start: Callable[[Popen[bytes]], None] | None,
) -> ProbeResult:
    maps_out = workdir / "maps.txt"
    if probe.kind == "python":
        argv = [interpreter.executable, "-c", _DRIVER, probe.code, str(maps_out)]
    else:
        argv = shlex.split(probe.code)
    try:
        done = process.run(
            argv,
            timeout=settings.timeout,
            env=settings.env,
            cwd=workdir,
            watch=process.Watch(on_start=on_start),
        )
    except OSError as err:
        return _not_started(probe, f"cannot start {argv[0]}: {err.strerror}")
    return ProbeResult(
        probe=probe,
        passed=done.ok,
        returncode=None if done.timed_out else done.returncode,
        timed_out=done.timed_out,
        seconds=done.seconds,
        output=done.output(),
        libraries=_read_libraries(maps_out) if probe.kind == "python" else None,
    )


def _not_started(probe: Probe, why: str) -> ProbeResult:
    return ProbeResult(
        probe=probe, passed=False, returncode=None, timed_out=False, seconds=0.0, output=why
    )


def _read_libraries(path: Path) -> tuple[str, ...] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None  # the driver did not get to write it (killed, or no /proc)
    return tuple(os.fsdecode(line) for line in data.split(b"\n") if line)


class RunSettings(Struct, frozen=True):
    """How a probe process is run: its time limit and its environment (Context.child_env)."""

    timeout: float
    env: Mapping[str, str]


def run_all(
    settings: ProbeSettings, interpreter: Interpreter, env: Mapping[str, str]
) -> list[ProbeResult]:
    how = RunSettings(settings.timeout, env)
    return [run_probe(p, interpreter, settings=how) for p in settings.probes]


class Running:
    """Probes running in a thread; ``results`` blocks until they are done. The caller owns its
    lifetime: every path out of it ends in ``results`` or ``cancel``.

    Waits are on the ``done`` event, never on ``Thread.join``: on Python 3.11 and 3.12 a join
    cut short by Ctrl-C marks the thread as finished while it still runs, and ``cancel`` would
    then leave its probe running.
    """

    def __init__(self, settings: ProbeSettings, interpreter: Interpreter, env: Mapping[str, str]):
        self._settings = settings
        self._interpreter = interpreter
        self._how = RunSettings(settings.timeout, env)
        self._results: list[ProbeResult] = []
        self._children: list[Popen[bytes]] = []
        self._error: list[BaseException] = []
        self._cancelled = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._work, name="probe", daemon=True)

    def _work(self) -> None:
        try:
            for probe in self._settings.probes:
                if self._cancelled.is_set():
                    return
                self._results.append(
                    run_probe(
                        probe,
                        self._interpreter,
                        settings=self._how,
                        on_start=self._children.append,
                    )
                )
        except BaseException as err:  # handed to the caller's thread by results()
            self._error.append(err)
        finally:
            self._done.set()

    def start(self) -> Running:
        try:
            self._thread.start()
        except BaseException:
            # Ctrl-C while start() waits for the thread: it may run anyway, and its probe must
            # not outlive us. Once cancelled, a thread not yet running starts no probe; one that
            # runs (its ident is set first thing) is waited for and its probe killed.
            self._cancelled.set()
            if self._thread.ident is not None:
                self.cancel()
            raise
        return self

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def results(self) -> list[ProbeResult]:
        self._done.wait()
        if self._error:
            raise self._error[0]
        return self._results

    def cancel(self) -> None:
        """Start no further probe, kill the one running (its whole group), wait for the thread."""
        self._cancelled.set()
        while not self._done.is_set():
            # poll() is None only for a child not yet reaped: its pid can't have been reused.
            if self._children and self._children[-1].poll() is None:
                process.kill(self._children[-1])
            self._done.wait(0.05)


def start(settings: ProbeSettings, interpreter: Interpreter, env: Mapping[str, str]) -> Running:
    """``settings``' probes, begun in a thread."""
    return Running(settings, interpreter, env).start()


def top_level_modules(dist: InstalledDistribution) -> list[str]:
    """The importable top-level names a distribution provides."""
    folder = dist.metadata_dir
    try:
        text = (folder / "top_level.txt").read_text() if folder is not None else ""
        names = [line.strip() for line in text.splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError):
        names = []
    if not names:
        names = _modules_from_record(dist)
    return sorted(
        {n for n in names if n.isidentifier() and not n.startswith("_") and n not in _NOT_MODULES}
    )


def _modules_from_record(dist: InstalledDistribution) -> list[str]:
    try:
        entries = dist.record()
    except OSError:
        return []
    names = set()
    for entry in entries:
        first, _, rest = entry.path.partition("/")
        if first.startswith("..") or first.endswith((".dist-info", ".data")):
            continue
        if rest.startswith("__init__.") and rest.endswith((".py", ".so")):
            names.add(first)
        elif not rest and first.endswith(".py"):
            names.add(first[:-3])
        elif not rest and (".so" in first or first.endswith(".pyd")):
            names.add(first.split(".", 1)[0])
    return sorted(names)


def default_probes(
    installed: Mapping[str, InstalledDistribution], affected: Sequence[str] | None
) -> tuple[tuple[Probe, ...], str]:
    """The probe used when none is configured, and a sentence that says why it was chosen.

    ``affected`` are the distributions the impact report says a removal touches (metadata
    dependents, library consumers, distributions left hollow); None when the operation is not
    a removal (rollback, recover, probe). One probe process covers them all: a probe run is the
    tool's main cost.
    """
    modules = sorted(
        {
            module
            for name in affected or ()
            if name != "torch"
            for module in top_level_modules(installed[name])
        }
    )
    lines = [f"import {module}" for module in modules]
    reasons = []
    if modules:
        reasons.append(f"an import of what the removal affects ({', '.join(affected or ())})")
    if "torch" in installed:
        lines.append(TORCH_PROBE)
        reasons.append("torch's CUDA initialisation (and cuDNN/NCCL versions on CUDA builds)")
    if not lines:
        if affected is None:
            return (), "no probe configured and torch is not installed: no probe to run"
        return (), "nothing installed is affected by this removal: no probe to run"
    probe = Probe(kind="python", code="\n".join(lines), origin="default")
    return (probe,), "probing " + " and ".join(reasons)
