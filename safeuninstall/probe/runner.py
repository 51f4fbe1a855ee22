"""Smoke probes: does the environment still work?

A Python probe runs in the target interpreter through a small driver that, at the end, records
which shared objects the process had loaded (from /proc/self/maps), so a removal that "passes"
only because the loader found another copy of a library can be told apart.

A configured probe (--probe, --probe-cmd, the configuration) passes or fails as a whole. Where
none is configured, the probe is derived from what a removal affects: the modules and entry
points of those distributions (importables.py), and torch's CUDA check where torch is
installed. One process tries each of these candidates on its own and writes down each result,
and the removal is judged by the candidates that passed before it: one that already fails is
dropped, named, and blocks nothing (a regression probe).
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from subprocess import Popen
from typing import NamedTuple

import msgspec
from msgspec import Struct, field

from safeuninstall import config
from safeuninstall.base import process
from safeuninstall.base.bounded import read_bytes
from safeuninstall.base.errors import InvalidInput
from safeuninstall.environment.interpreter import Interpreter
from safeuninstall.environment.sizes import count_text
from safeuninstall.probe.kinds import CandidateKind, ProbeKind
from safeuninstall.probe.metric import (
    Metric,
    MetricRuns,
    interleaved,
    measured,
    no_number_why,
    noise_note,
    read_number,
)

DEFAULT_TIMEOUT = 300.0

_MAPS_PART = r"""
import sys
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
"""
# Runs the probe code as __main__, then writes the loaded shared objects to argv[2], one a line
# (the kernel escapes a newline in a mapped path as \012), renamed into place once complete.
# Bytes throughout, so no locale is involved; no json: its import would add to every probe run.
_DRIVER = (
    _MAPS_PART
    + r"""
_code, _maps_out = sys.argv[1], sys.argv[2]
del sys.argv[1:]
try:
    exec(compile(_code, "<probe>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
finally:
    _record_maps()
"""
)
# The derived probe's driver: argv[3:] are candidates (``m:module``, ``e:module:attr,attr``,
# ``c:code``), each tried in its own try. Before each it writes "N start", after it "N ok" or
# "N failed <the traceback's last 8 lines, unicode_escape'd>" to argv[2], unbuffered: a
# candidate that kills the process (a crash, the time limit) is the one started and not
# finished. A candidate marked ``!`` decides the verdict: once one of them fails, the others
# are not tried, each written "N skipped". It ends with os._exit: a thread that an imported
# module started and left running must not keep the probe alive until its time limit.
_CANDIDATES_DRIVER = (
    _MAPS_PART
    + r"""
_maps_out, _results_out, _tries = sys.argv[1], sys.argv[2], sys.argv[3:]
del sys.argv[1:]
def _try(item):
    kind, _, what = item.partition(":")
    if kind == "c":
        exec(compile(what, "<probe>", "exec"), {"__name__": "__main__",
                                                "__builtins__": __builtins__})
        return
    import importlib
    module, _, attrs = what.partition(":")
    found = importlib.import_module(module)
    for attr in attrs.split(",") if attrs else ():
        obj = found
        for part in attr.split("."):
            obj = getattr(obj, part)
def _tail():
    import traceback
    return "\n".join(traceback.format_exc().rstrip().splitlines()[-8:])
_failed = False
try:
    with open(_results_out, "wb", buffering=0) as _out:
        for _index, _item in enumerate(_tries):
            _decisive = _item.startswith("!")
            _out.write(b"%d start\n" % _index)
            try:
                _try(_item[_decisive:])
                _out.write(b"%d ok\n" % _index)
            except (Exception, SystemExit):
                _failed = True
                _out.write(b"%d failed %s\n" % (_index, _tail().encode("unicode_escape")))
                if _decisive:
                    _rest = range(_index + 1, len(_tries))
                    _out.write(b"".join(b"%d skipped\n" % _i for _i in _rest))
                    break
finally:
    _record_maps()
import os
for _stream in (sys.stdout, sys.stderr):
    try:
        _stream.flush()
    except Exception:
        pass
os._exit(1 if _failed else 0)
"""
)
_MAX_RESULTS_BYTES = 4 * 1024 * 1024
_MAX_CANDIDATE_OUTPUT = 4096  # characters of one candidate's traceback kept


class Candidate(Struct, frozen=True):
    """One thing the derived probe tries on its own: a module to import, an entry point to load
    (its module imported, its attributes resolved, never called), or Python code."""

    kind: CandidateKind
    target: str  # the module (of an entry point too), or the code
    distribution: str  # whose it is: what the removal affects
    attrs: tuple[str, ...] = ()  # an entry point's attributes (dotted), resolved in turn
    why: str = ""  # "console_scripts: jupyter-lab", "imports markdown_it", "CUDA check"

    @property
    def name(self) -> str:
        """Short, for a note: the module (and attributes), or what the code is for."""
        if self.kind is CandidateKind.CODE:
            return f"{self.distribution} ({self.why})"
        return self.label.partition(" ")[2]

    @property
    def label(self) -> str:
        """One line saying what is tried."""
        if self.kind is CandidateKind.CODE:
            return f"{self.distribution}: {self.why}"
        if self.kind is CandidateKind.MODULE:
            return f"import {self.target}"
        shown = ", ".join(self.attrs[:3]) + (", ..." if len(self.attrs) > 3 else "")
        return f"load {self.target}" + (f":{shown}" if shown else "")

    def argument(self) -> str:
        """How the driver is told (see _CANDIDATES_DRIVER)."""
        return _CANDIDATE_ARGUMENT[self.kind](self)


class CandidateResult(Struct, frozen=True):
    """How one candidate of a derived probe ended in one run."""

    candidate: Candidate
    # "passed", "failed", "unfinished" (the process ended while it was tried: a crash or the
    # time limit), "not-run" (the process ended before it), "skipped" (not tried: a candidate
    # that decides the verdict had failed before it, see Probe.decisive)
    status: str
    output: str = ""  # the last lines of its traceback, or why it did not finish
    # counts for the verdict: in a baseline, it passed; after a change, it passed before
    judged: bool = True

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"

    @property
    def reason(self) -> str:
        """Why it did not pass, in one line."""
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        return lines[-1] if lines else self.status

    # The candidate's own keys, beside how it ended (the --json payload is flat).
    @property
    def kind(self) -> CandidateKind:
        return self.candidate.kind

    @property
    def target(self) -> str:
        return self.candidate.target

    @property
    def attrs(self) -> tuple[str, ...]:
        return self.candidate.attrs

    @property
    def distribution(self) -> str:
        return self.candidate.distribution

    @property
    def why(self) -> str:
        return self.candidate.why

    @property
    def label(self) -> str:
        return self.candidate.label


class Probe(Struct, frozen=True):
    """One smoke probe: Python code run in the target, a command, or the derived probe (its
    candidates, each tried on its own in one Python process)."""

    kind: ProbeKind
    code: str  # Python code, or the command line as typed; derived: its candidates, a line each
    origin: str  # "--probe", "pyproject.toml", "SAFE_UNINSTALL_PROBE", "derived"
    candidates: tuple[Candidate, ...] = ()
    metric: Metric | None = None  # a metric probe's runs and limit
    # After a change: the candidates whose failure alone fails the verdict (those that passed
    # before it). The run stops at the first of them that fails; the rest are "skipped". Not
    # part of the key: it says how far to run, not what is tried.
    decisive: tuple[Candidate, ...] = ()

    @property
    def label(self) -> str:
        if self.kind is ProbeKind.DERIVED:
            return f"the derived probe ({count_text(len(self.candidates), 'candidate')})"
        if self.kind is ProbeKind.METRIC:
            return f"metric $ {self.code}"
        return self.code if self.kind is ProbeKind.PYTHON else f"$ {self.code}"

    @property
    def runs_python(self) -> bool:
        """Run by the driver in the target interpreter (so its loaded libraries are known)."""
        return self.kind in (ProbeKind.PYTHON, ProbeKind.DERIVED)

    def key(self) -> list[object]:
        """What identifies the probe for the baseline cache."""
        return [self.kind.value, self.code, [c.argument() for c in self.candidates]]

    def only(self, keep: Collection[Candidate]) -> Probe:
        """The derived probe with only the candidates in ``keep``."""
        kept = tuple(c for c in self.candidates if c in keep)
        decisive = tuple(c for c in self.decisive if c in keep)
        return msgspec.structs.replace(
            self, candidates=kept, code=derived_code(kept), decisive=decisive
        )

    def stopping_at(self, decisive: Collection[Candidate]) -> Probe:
        """The derived probe that stops at the first failure of one of ``decisive``."""
        return msgspec.structs.replace(
            self, decisive=tuple(c for c in self.candidates if c in decisive)
        )

    def to_the_end(self) -> Probe:
        """The probe that tries every candidate whatever fails."""
        return msgspec.structs.replace(self, decisive=()) if self.decisive else self


def derived_code(candidates: Sequence[Candidate]) -> str:
    """The derived probe as text, a candidate a line (code candidates as their code)."""
    return "\n".join(c.target if c.kind is CandidateKind.CODE else c.label for c in candidates)


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
    candidates: tuple[CandidateResult, ...] = ()  # the derived probe's, each on its own
    metric: MetricRuns | None = None  # a metric probe's numbers, and how they were judged

    @property
    def judged(self) -> tuple[CandidateResult, ...]:
        return tuple(c for c in self.candidates if c.judged)

    @property
    def dropped(self) -> tuple[CandidateResult, ...]:
        return tuple(c for c in self.candidates if not c.judged)

    @property
    def regressed(self) -> tuple[CandidateResult, ...]:
        """Candidates that count and did not pass (tried: a skipped one has no end)."""
        return tuple(c for c in self.judged if not c.passed and not c.skipped)

    @property
    def skipped(self) -> tuple[CandidateResult, ...]:
        """Candidates not tried: the verdict was known before them."""
        return tuple(c for c in self.candidates if c.skipped)

    def failure_outputs(self) -> list[str]:
        """What the run printed, and each failing candidate's traceback: where a missing
        library is named (doctor.diagnose)."""
        return [self.output, *(c.output for c in self.regressed)]

    def summary(self) -> str:
        if self.cached:
            text = "passed (cached: the environment is unchanged since it last passed)"
        else:
            text = self._outcome()
        if self.probe.kind is ProbeKind.DERIVED:
            text += f"; {self._counts()}"
        if self.metric is not None:
            text += f"; {self.metric.summary()}"
        return text

    def _outcome(self) -> str:
        if self.metric is not None and self.metric.why:
            return f"FAILED: {self.metric.why}"
        if self.passed:
            return f"passed in {self.seconds:.2f} s"
        if self.probe.kind is ProbeKind.DERIVED and self.regressed:
            return f"FAILED in {self.seconds:.2f} s"
        if self.timed_out:
            return f"timed out after {self.seconds:.1f} s (killed, with every process it started)"
        return f"failed with exit code {self.returncode}"

    def _counts(self) -> str:
        # A dropped candidate left untried is counted once, as not judged.
        judged, dropped = self.judged, len(self.dropped)
        skipped = sum(c.skipped for c in judged)
        passed, failed = sum(c.passed for c in judged), len(self.regressed)
        verb = "passes" if passed == 1 else "pass"
        counts = f"{passed} of {count_text(len(judged), 'candidate')} {verb}"
        if failed:
            counts += f", {failed} {'fails' if failed == 1 else 'fail'}"
        if skipped:
            counts += f", {skipped} not tried (the verdict was known at the first failure)"
        if dropped:
            counts += f"; {dropped} not judged (they did not pass before the change)"
        return counts

    # The probe's keys, beside how the run ended (the --json payload is flat).
    @property
    def label(self) -> str:
        return self.probe.label

    @property
    def kind(self) -> ProbeKind:
        return self.probe.kind

    @property
    def origin(self) -> str:
        return self.probe.origin

    @property
    def rounded_seconds(self) -> float:
        return round(self.seconds, 3)


class ProbeSettings(Struct, frozen=True):
    """The probes to run around a change, and their time limit."""

    probes: tuple[Probe, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    disabled: bool = False
    # probes chosen by default are explained to the user; configured ones are not
    notes: tuple[str, ...] = field(default_factory=tuple)


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
    return Probe(kind=ProbeKind.PYTHON, code=code, origin=origin)


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
    return Probe(kind=ProbeKind.COMMAND, code=line, origin=origin)


def metric_probe(line: str, origin: str, cwd: Path, metric: Metric) -> Probe:
    """A metric probe: a command whose last line is a number, run ``metric.runs`` times."""
    command = command_probe(line, origin, cwd)
    return Probe(kind=ProbeKind.METRIC, code=command.code, origin=origin, metric=metric)


def run_probe(
    probe: Probe,
    interpreter: Interpreter,
    *,
    settings: RunSettings,
    on_start: Callable[[Popen[bytes]], None] | None = None,
) -> ProbeResult:
    """Run one probe; a probe that cannot even start (no working folder on a full disk, no
    such program) is a failed probe, never an exception: it may run after a change."""
    if probe.metric is not None:
        return _measure(probe, probe.metric, interpreter, settings, on_start)
    return _run_once(probe, interpreter, settings, on_start)


def _measure(
    probe: Probe,
    metric: Metric,
    interpreter: Interpreter,
    settings: RunSettings,
    on_start: Callable[[Popen[bytes]], None] | None,
) -> ProbeResult:
    """A metric probe run ``metric.runs`` times; the first run that fails or prints no number
    ends it, failed."""
    values: list[float] = []
    seconds = 0.0
    for _ in range(metric.runs):
        run = _run_once(probe, interpreter, settings, on_start)
        seconds += run.seconds
        assert run.metric is not None
        if not run.passed:
            metric_runs = MetricRuns((*values, *run.metric.values), None, why=run.metric.why)
            return msgspec.structs.replace(run, seconds=seconds, metric=metric_runs)
        values += run.metric.values
    return msgspec.structs.replace(run, seconds=seconds, metric=measured(values, metric.runs))


def _run_once(
    probe: Probe,
    interpreter: Interpreter,
    settings: RunSettings,
    on_start: Callable[[Popen[bytes]], None] | None,
) -> ProbeResult:
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
    maps_out, results_out = workdir / _MAPS_FILE, workdir / _RESULTS_FILE
    argv = _ARGV[probe.kind](probe, interpreter, workdir)
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
    result = ProbeResult(
        probe=probe,
        passed=done.ok,
        returncode=None if done.timed_out else done.returncode,
        timed_out=done.timed_out,
        seconds=done.seconds,
        output=done.output(),
        libraries=_read_libraries(maps_out) if probe.runs_python else None,
    )
    if probe.kind is ProbeKind.METRIC:
        return _with_number(result, done.stdout)
    if probe.kind is not ProbeKind.DERIVED:
        return result
    candidates = _read_candidates(results_out, probe.candidates, result)
    return msgspec.structs.replace(
        result, candidates=candidates, passed=all(c.passed for c in candidates)
    )


def _with_number(result: ProbeResult, stdout: str) -> ProbeResult:
    """One metric run: the number its last line prints, or why it fails."""
    if not result.passed:
        why = (
            "the metric command timed out"
            if result.timed_out
            else f"the metric command failed with exit code {result.returncode}"
        )
        return msgspec.structs.replace(result, metric=MetricRuns((), None, why=why))
    value = read_number(stdout)
    if value is None:
        why = no_number_why(stdout)
        return msgspec.structs.replace(result, passed=False, metric=MetricRuns((), None, why=why))
    return msgspec.structs.replace(result, metric=MetricRuns((value,), value))


_MAPS_FILE, _RESULTS_FILE = "maps.txt", "candidates.txt"  # in the probe's working folder


def _python_argv(probe: Probe, interpreter: Interpreter, workdir: Path) -> list[str]:
    return [interpreter.executable, "-c", _DRIVER, probe.code, str(workdir / _MAPS_FILE)]


def _command_argv(probe: Probe, interpreter: Interpreter, workdir: Path) -> list[str]:
    return shlex.split(probe.code)


def _derived_argv(probe: Probe, interpreter: Interpreter, workdir: Path) -> list[str]:
    decisive = set(probe.decisive)
    tries = [("!" if c in decisive else "") + c.argument() for c in probe.candidates]
    maps_out, results_out = str(workdir / _MAPS_FILE), str(workdir / _RESULTS_FILE)
    return [interpreter.executable, "-c", _CANDIDATES_DRIVER, maps_out, results_out, *tries]


# How each kind of probe is run: the command line of its process.
_ARGV: dict[ProbeKind, Callable[[Probe, Interpreter, Path], list[str]]] = {
    ProbeKind.PYTHON: _python_argv,
    ProbeKind.COMMAND: _command_argv,
    ProbeKind.DERIVED: _derived_argv,
    ProbeKind.METRIC: _command_argv,  # a command, run ``metric.runs`` times
}

# How the derived probe's driver is told each kind of candidate (see _CANDIDATES_DRIVER).
_CANDIDATE_ARGUMENT: dict[CandidateKind, Callable[[Candidate], str]] = {
    CandidateKind.CODE: lambda c: f"c:{c.target}",
    CandidateKind.MODULE: lambda c: f"m:{c.target}",
    CandidateKind.ENTRY_POINT: lambda c: f"e:{c.target}:{','.join(c.attrs)}",
}


def _not_started(probe: Probe, why: str) -> ProbeResult:
    return ProbeResult(
        probe=probe,
        passed=False,
        returncode=None,
        timed_out=False,
        seconds=0.0,
        output=why,
        candidates=tuple(
            CandidateResult(c, "not-run", "the probe process did not start")
            for c in probe.candidates
        ),
        metric=MetricRuns((), None, why=why) if probe.metric is not None else None,
    )


def _read_candidates(
    path: Path, candidates: Sequence[Candidate], run: ProbeResult
) -> tuple[CandidateResult, ...]:
    """Each candidate's result from the driver's file. The process wrote it, and it runs the
    environment's code: a line that is not one the driver writes is ignored, and a candidate
    without a result did not finish (the one started last) or did not run."""
    try:
        data = read_bytes(path, _MAX_RESULTS_BYTES)
    except OSError:
        data = b""
    started: set[int] = set()
    ended: dict[int, tuple[str, str]] = {}
    for line in data.split(b"\n")[:-1]:  # the last piece is unfinished (or empty)
        index, _, rest = line.partition(b" ")
        status, _, text = rest.partition(b" ")
        if not index.isdigit() or int(index) >= len(candidates):
            continue
        number = int(index)
        if status == b"start":
            started.add(number)
        elif status == b"ok":
            ended[number] = ("passed", "")
        elif status == b"failed":
            ended[number] = ("failed", _unescaped(text)[-_MAX_CANDIDATE_OUTPUT:])
        elif status == b"skipped":
            ended[number] = ("skipped", "")
    results = []
    decisive, decided = set(run.probe.decisive), ""
    for number, candidate in enumerate(candidates):
        if number in ended:
            end, said = ended[number]
            if end == "skipped":
                said = (
                    f"not tried: {decided} failed first, which decided the verdict"
                    if decided
                    else "not tried: the verdict was already known"
                )
            elif end == "failed" and candidate in decisive and not decided:
                decided = candidate.name
            results.append(CandidateResult(candidate, end, said))
        elif number in started:
            results.append(CandidateResult(candidate, "unfinished", _why_unfinished(run)))
        else:
            results.append(CandidateResult(candidate, "not-run", "the probe process ended first"))
    return tuple(results)


def _unescaped(text: bytes) -> str:
    try:
        return text.decode("unicode_escape")
    except UnicodeDecodeError:
        return text.decode("utf-8", errors="replace")


def _why_unfinished(run: ProbeResult) -> str:
    if run.timed_out:
        return f"the probe's time limit ran out while it was tried ({run.seconds:.1f} s)"
    return f"the probe process ended while it was tried (exit code {run.returncode})"


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


class StatesCompared(NamedTuple):
    """A metric judged by runs of two states, interleaved (``compare_states``)."""

    # its output the last run's in the changed state (where one ran), its seconds every run's
    result: ProbeResult
    baseline_failed: str  # why a run of the state before failed: nothing judged ("" if none)
    noise: str  # what to do when the state before's own runs spread wider than the limit, or ""


def compare_states(
    probe: Probe,
    interpreter: Interpreter,
    how: RunSettings,
    switch: Callable[[bool], None],
    *,
    after_first: bool,
) -> StatesCompared:
    """A metric ``probe`` in two states, one run at a time, interleaved (metric.interleaved):
    ``switch(True)`` moves the environment to the changed state, ``switch(False)`` to the one
    before it (each a no-op where it is already). ``after_first``: the changed state is the one
    reached now. Every caller (a removal, a run, a rollback, bisect, try) judges by this one
    comparison: the probe's result, whether the state before failed, and its noise note."""
    assert probe.metric is not None
    once = msgspec.structs.replace(probe, metric=msgspec.structs.replace(probe.metric, runs=1))
    ran: dict[bool, list[ProbeResult]] = {False: [], True: []}

    def sample(after: bool) -> float | str:
        switch(after)
        run = run_probe(once, interpreter, settings=how)
        ran[after].append(run)
        assert run.metric is not None
        return run.metric.values[0] if run.passed else run.metric.why

    compared = interleaved(probe.metric, sample, after_first=after_first)
    last = (ran[True] or ran[False])[-1]
    result = msgspec.structs.replace(
        last,
        probe=probe,
        passed=not compared.runs.why,
        seconds=sum(r.seconds for r in (*ran[False], *ran[True])),
        metric=compared.runs,
    )
    failed = compared.runs.why if compared.baseline_failed else ""
    return StatesCompared(result, failed, noise_note(probe.metric, compared.runs.baseline_values))


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
