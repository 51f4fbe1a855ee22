"""The baseline: the probes' results before a change, run concurrently and cached.

A probe run is the tool's main cost (3-5 s for `import torch` with CUDA), and the baseline is a
second one. Two ways to pay less:

- **Concurrently**: the baseline runs in a thread while the snapshot and the stash are made;
  nothing is removed until it has passed.
- **Cached**: a passing baseline is kept, keyed by the probes and a fingerprint of the
  environment (the dist-info folders' names and mtimes, the interpreter, the process
  environment the probe inherits).
  A passing probe after a removal is the baseline of the new environment, and is cached too.
  ``--fresh-baseline`` ignores the cache.

A change that touches no dist-info folder (a file deleted by hand inside a package) does not
change the fingerprint; that is what ``--fresh-baseline`` is for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from msgspec import Struct
from packaging.utils import canonicalize_name

from safeuninstall.base.cachefile import CacheFile
from safeuninstall.context.context import Context
from safeuninstall.environment.installed import required_elsewhere
from safeuninstall.environment.interpreter import Interpreter
from safeuninstall.options import UninstallOptions
from safeuninstall.probe.kinds import ProbeKind
from safeuninstall.probe.runner import (
    CandidateResult,
    ProbeResult,
    ProbeSettings,
    Running,
    start,
)

CACHE_FILE = "baseline-cache.json"
_KEEP = 16  # cached baselines per environment
_MAX_CACHE_BYTES = 16 * 1024 * 1024  # 16 baselines, each with its probes' outputs


# Variables that change from one shell to the next without changing what a probe does.
_VOLATILE = ("_", "PWD", "OLDPWD", "SHLVL", "TERM", "COLUMNS", "LINES", "SSH_", "WINDOWID")


def fingerprint(interpreter: Interpreter, environ: Mapping[str, str]) -> str:
    """The environment a probe runs in: installed set, interpreter, and the process
    environment it inherits (a probe may read any variable: LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES,
    a flag of the user's own)."""

    digest = hashlib.sha256()
    digest.update(os.fsencode(interpreter.executable))
    for key in sorted(environ):
        if not key.startswith(_VOLATILE):
            # os.fsencode: a variable that is not UTF-8 arrives as surrogate escapes
            digest.update(os.fsencode(f"\0{key}={environ[key]}"))
    for site_dir in interpreter.site_dirs:
        # Not the folder's own mtime: the write test before a removal touches it every time.
        digest.update(os.fsencode(site_dir))
        try:
            entries = sorted(os.scandir(site_dir), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            # Legacy installs too, and .pth files (easy-install.pth puts an editable on the path)
            if entry.name.endswith((".dist-info", ".egg-info", ".egg-link", ".pth")):
                with contextlib.suppress(OSError):
                    digest.update(os.fsencode(f"{entry.name}:{entry.stat().st_mtime_ns}"))
    return digest.hexdigest()


def _probes_key(settings: ProbeSettings) -> str:
    return json.dumps([p.key() for p in settings.probes])


class _Passed(Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """A candidate's end as kept: only a pass is (one that failed before a removal is left
    out of its judgement, so that is seen again, never read)."""

    status: Literal["passed"]
    output: str


class _Baseline(Struct, frozen=True, forbid_unknown_fields=True):
    """One baseline: for each probe, the libraries it loaded, its seconds, its candidates."""

    libraries: list[list[str] | None]
    seconds: list[float]
    candidates: list[list[_Passed]]


class BaselineCache:
    """Passing baselines by probes and environment fingerprint, the last ``_KEEP`` of them."""

    def __init__(self, state_dir: Path) -> None:
        self._file: CacheFile[dict[str, _Baseline]] = CacheFile(
            state_dir / CACHE_FILE,
            dict[str, _Baseline],
            format="safeuninstall-baseline-cache",
            version=2,
            max_bytes=_MAX_CACHE_BYTES,
        )
        self.path = self._file.path

    def get(self, settings: ProbeSettings, env_fingerprint: str) -> list[ProbeResult] | None:
        """The cached passing results of exactly these probes in this environment, or None.
        Never a metric's: its baseline is measured in the operation it judges."""
        if any(p.metric is not None for p in settings.probes):
            return None
        entry = (self._file.read() or {}).get(_key(settings, env_fingerprint))
        probes = settings.probes
        if entry is None or not (
            len(entry.libraries) == len(entry.seconds) == len(entry.candidates) == len(probes)
        ):
            return None
        if any(len(p.candidates) != len(c) for p, c in zip(probes, entry.candidates, strict=True)):
            return None
        return [
            ProbeResult(
                probe=probe,
                passed=True,
                returncode=0,
                timed_out=False,
                seconds=took,
                output="(cached: run in this same environment before)",
                libraries=tuple(libs) if libs is not None else None,
                cached=True,
                candidates=tuple(
                    CandidateResult(c, end.status, end.output)
                    for c, end in zip(probe.candidates, ends, strict=True)
                ),
            )
            for probe, libs, took, ends in zip(
                probes, entry.libraries, entry.seconds, entry.candidates, strict=True
            )
        ]

    def put(
        self, settings: ProbeSettings, env_fingerprint: str, results: Sequence[ProbeResult]
    ) -> None:
        """Keep ``results`` as the baseline of these probes in this environment, when every
        one of them is cacheable: probes that passed, a derived probe every candidate of which
        passed (a failure is run again: what fails before a removal is left out of its
        judgement, which no file decides)."""
        if not results or not all(_cacheable(r) for r in results):
            return
        data = self._file.read() or {}
        key = _key(settings, env_fingerprint)
        data.pop(key, None)
        data[key] = _Baseline(
            libraries=[list(r.libraries) if r.libraries is not None else None for r in results],
            seconds=[r.seconds for r in results],
            candidates=[[_Passed("passed", c.output) for c in r.candidates] for r in results],
        )
        while len(data) > _KEEP:
            data.pop(next(iter(data)))  # oldest first: dicts keep insertion order
        self._file.write(data)


def _cacheable(result: ProbeResult) -> bool:
    if result.probe.metric is not None:
        return False
    if result.probe.kind is not ProbeKind.DERIVED:
        return result.passed
    return bool(result.candidates) and all(c.status == "passed" for c in result.candidates)


def _key(settings: ProbeSettings, env_fingerprint: str) -> str:
    return hashlib.sha256(f"{_probes_key(settings)}\0{env_fingerprint}".encode()).hexdigest()


class Begun(Struct):
    """A baseline under way: a cached pass of these probes in this environment, or the probes
    running in a thread."""

    settings: ProbeSettings
    fingerprint: str  # of the environment it judges
    cached: list[ProbeResult] | None = None
    running: Running | None = None

    def results(self) -> list[ProbeResult]:
        return self.running.results() if self.running is not None else list(self.cached or ())

    def cancel(self) -> None:
        if self.running is not None:
            self.running.cancel()

    def describe(self) -> str:
        labels = ", ".join(p.label for p in self.settings.probes)
        if self.running is None:
            return f"baseline probe: {labels}: passed before in this same environment (cached)"
        return f"baseline probe running: {labels}"


def begin(
    settings: ProbeSettings,
    ctx: Context,
    cache: BaselineCache,
    env_fingerprint: str,
    *,
    fresh: bool,
) -> Begun:
    """The cached pass of ``settings`` in this environment, unless ``fresh``; else the probes,
    started."""
    cached = None if fresh else cache.get(settings, env_fingerprint)
    if cached is not None:
        begun = Begun(settings, env_fingerprint, cached=cached)
    else:
        running = start(settings, ctx.interpreter, ctx.child_env())
        begun = Begun(settings, env_fingerprint, running=running)
    return _announced(ctx, begun)


def _announced(ctx: Context, begun: Begun) -> Begun:
    """``begun``, once the user was told; if telling fails, its probe does not outlive it."""
    try:
        ctx.emit("baseline", begun.describe())
    except BaseException:
        begun.cancel()  # not handed to anyone yet
        raise
    return begun


class HeadStart(Struct, frozen=True):
    """The baseline of an uninstall, begun before the removal reads the environment."""

    python: Path
    baseline: Begun
    latest: str | None  # the newest snapshot then: any operation since has made a newer one


def head_start(
    ctx: Context, settings: ProbeSettings, options: UninstallOptions
) -> HeadStart | None:
    """Begin the baseline before the removal reads the environment.

    The configured probes only: a derived probe comes from the impact report, so its baseline
    begins after it. The uninstall takes the baseline over only if, once it holds the lock, it
    would begin the very same one: the same interpreter and probes, the same environment
    fingerprint, no snapshot made since, and a lock it did not have to wait for. If another
    operation holds the environment, the uninstall cancels the baseline the moment it has to
    wait (just after it began); in every other case it is cancelled and begun again, so a
    head start never judges an environment other than the one the removal changes.

    Nor does it begin when another distribution's Requires-Dist names one to be removed (unless
    ``--allow-unmet``): the removal may then be refused, and a refused removal runs no probe.

    None when there is nothing to begin, and whenever anything fails: the operation then meets
    the same problem and reports it.
    """
    if options.dry_run or options.strict or settings.disabled or not settings.probes:
        return None
    try:
        wanted = (canonicalize_name(name) for name in options.names)
        if not options.allow_unmet and required_elsewhere(ctx.interpreter, wanted):
            return None
        latest = ctx.store.latest_id()
        cache = BaselineCache(ctx.store.root)
        if not options.fresh_baseline:
            return HeadStart(
                ctx.python,
                begin(settings, ctx, cache, fingerprint(ctx.interpreter, ctx.environ), fresh=False),
                latest,
            )
    except Exception:  # an optimisation only: the operation meets the same problem
        return None
    running = start(settings, ctx.interpreter, ctx.child_env())
    # No cache was consulted, so the fingerprint can wait: it is taken while the probe's
    # interpreter is still starting. (A change that another tool makes while a probe runs is
    # seen by no fingerprint, here or in the operation.)
    try:
        env_fingerprint = fingerprint(ctx.interpreter, ctx.environ)
    except BaseException as err:
        running.cancel()
        if isinstance(err, Exception):
            return None  # as above
        raise
    begun = _announced(ctx, Begun(settings, env_fingerprint, running=running))
    return HeadStart(ctx.python, begun, latest)


def take_over(
    early: HeadStart | None,
    ctx: Context,
    settings: ProbeSettings,
    env_fingerprint: str,
    waited: bool,
) -> Begun | None:
    """``early``'s baseline if it is the one to begin now (see ``head_start``); else None, and
    ``early`` is cancelled. Call it holding the lock."""
    if early is None:
        return None
    begun = early.baseline
    if (
        not waited
        and early.latest == ctx.store.latest_id()
        and early.python == ctx.python
        and begun.settings == settings
        and begun.fingerprint == env_fingerprint
    ):
        return begun
    begun.cancel()
    return None
