"""The operations, coordinated: each takes a frozen options object and returns a result.

Nothing here prints, exits or knows about click. An expected failure before any change raises a
SafeUninstallError (exit 1, nothing changed); once the environment has been touched, the outcome
is a result whose exit code says what state the environment is in (0, 3, 4 or 5).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from msgspec import Struct, field

from . import __version__, baseline
from .backend import Backend, shell_line
from .baseline import BaselineCache, fingerprint
from .environment import (
    InstalledDistribution,
    Interpreter,
    ensure_writable,
    find_python,
    installed_distributions,
    query_interpreter,
)
from .errors import (
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_PROBE_FAILS_AFTER_ROLLBACK,
    EXIT_RESTORED,
    EXIT_UNCHANGED,
    BackendError,
    BaselineProbeFailed,
    Interrupted,
    InvalidInput,
    SnapshotInvalid,
    SnapshotNotFound,
)
from .impact import ImpactReport, impact_report
from .journal import Entry as JournalEntry
from .journal import Journal
from .libraries import ELF_CACHE_FILE, Drift, LibraryIndex, Ownership, drift, ownership
from .names import parse_requested
from .options import ProbeOptions, PruneOptions, RollbackOptions, TargetOptions, UninstallOptions
from .plan import (
    Installed,
    RemovalPlan,
    RollbackPlan,
    StashCandidate,
    StashKey,
    build_stash_index,
    plan_prune,
    plan_removal,
    plan_rollback,
)
from .probe import (
    ProbeResult,
    ProbeSettings,
    configured_probes,
    default_probes,
    run_all,
)
from .snapshot import PackageEntry, PackageStash, Snapshot, Target
from .stash import (
    StashHasher,
    check_restore_paths,
    relative_to_root,
    stash_distribution,
    stash_folder_name,
)
from .store import Store, state_dir

if TYPE_CHECKING:
    from .doctor import DoctorReport, Finding
    from .transaction import RestoreReport, Verification


class Context(Struct, frozen=True):
    """The opened target environment: its interpreter, state folder and installer."""

    python: Path
    interpreter: Interpreter
    store: Store
    backend: Backend
    environ: Mapping[str, str]
    on_progress: Callable[[str, int, int], None] | None = None


def open_target(options: TargetOptions) -> Context:
    python = find_python(options.python, cwd=options.cwd, environ=options.environ)
    interpreter = query_interpreter(python)
    return Context(
        python=python,
        interpreter=interpreter,
        store=Store(state_dir(options.state_dir, interpreter, options.environ)),
        backend=Backend.for_python(python, options.environ, options.on_installer_output),
        environ=options.environ,
        on_progress=options.on_progress,
    )


# -- probes ---------------------------------------------------------------------------------


def _with_default(
    settings: ProbeSettings,
    installed: Mapping[str, InstalledDistribution],
    affected: Sequence[str] | None,
) -> ProbeSettings:
    if settings.probes or settings.disabled:
        return settings
    probes, note = default_probes(installed, affected)
    return ProbeSettings(probes=probes, timeout=settings.timeout, notes=(note,))


# -- snapshots ------------------------------------------------------------------------------


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def _entry(dist: InstalledDistribution, env_root: Path, stash: PackageStash | None) -> PackageEntry:
    return PackageEntry(
        name=dist.key,
        version=dist.version,
        installer=dist.installer,
        requested=dist.requested,
        source=dist.source,
        dist_info=relative_to_root(dist.dist_info, env_root) or "",
        stash=stash,
    )


def take_snapshot(
    ctx: Context,
    installed: Mapping[str, InstalledDistribution],
    *,
    folder: tuple[str, Path],
    operation: str,
    command: Sequence[str],
    stash: Sequence[str],
    removed: Sequence[str] = (),
    shared: Collection[str] = (),
) -> Snapshot:
    """Write a snapshot of ``installed`` into ``folder``, stashing the ``stash`` ones first.

    On any failure (disk full, Ctrl-C) the half-made folder is deleted and the error raised:
    nothing has been removed yet, so nothing is lost.
    """
    snapshot_id, path = folder
    env_root = Path(ctx.interpreter.prefix)
    on_bytes = _stash_progress(ctx, installed, stash)
    try:
        stashes = {
            name: stash_distribution(
                installed[name],
                env_root=env_root,
                snapshot_dir=path,
                shared=shared,
                on_bytes=on_bytes,
            )
            for name in stash
        }
        snap = Snapshot(
            id=snapshot_id,
            created=_now(),
            tool_version=__version__,
            command=tuple(command),
            operation=operation,
            target=Target(
                python=str(ctx.python),
                prefix=ctx.interpreter.prefix,
                version=ctx.interpreter.version,
            ),
            packages=tuple(
                _entry(dist, env_root, stashes.get(name))
                for name, dist in sorted(installed.items())
            ),
            removed=tuple(removed),
        )
        ctx.store.save(snap)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return snap


def _stash_progress(
    ctx: Context, installed: Mapping[str, InstalledDistribution], stash: Sequence[str]
) -> Callable[[int], None] | None:
    """A byte counter for the progress bar, when someone shows one (RECORD sizes give the
    total; reading them is skipped otherwise)."""
    report = ctx.on_progress
    if report is None or not stash:
        return None
    total = 0
    for name in stash:
        with contextlib.suppress(OSError):
            total += sum(e.size or 0 for e in installed[name].record())
    from .transaction import byte_counter

    return byte_counter(report, "stash", total)


def _stash_index(
    store: Store, entries: Sequence[PackageEntry], first: Sequence[Snapshot], prefix: str
) -> dict[StashKey, list[StashCandidate]]:
    """Where each entry's exact name==version is stashed: ``first`` snapshots, then any other,
    newest first. Only snapshots whose stash folder has that distribution are read (a folder
    check each): parsing every 3000-package snapshot would cost 0.1 s apiece."""
    wanted = {stash_folder_name(e.name, e.version) for e in entries}
    snapshots = list(first)
    loaded = {snap.id for snap in snapshots}
    for snapshot_id in reversed(store.ids()):
        stash_dir = store.folder(snapshot_id) / "stash"
        if snapshot_id in loaded or not any((stash_dir / d).is_dir() for d in wanted):
            continue
        try:
            snapshots.append(store.load(snapshot_id))
        except SnapshotInvalid:
            continue  # an unreadable snapshot can't vouch for its stash
    return build_stash_index(snapshots, prefix=prefix)


def _loadable_snapshots(store: Store) -> list[Snapshot]:
    return [snap for _, snap in store.iter_loadable() if isinstance(snap, Snapshot)]


@contextmanager
def _interrupts_deferred() -> Iterator[list[int]]:
    """While a restore runs, Ctrl-C and SIGTERM are noted, not obeyed: a half-done restore is
    worse than a late exit. (A SIGKILL still stops it; the journal then leads to ``recover``.)"""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def note(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- uninstall ------------------------------------------------------------------------------


class OperationResult(Struct):
    """What an operation did; rendered as text or JSON by the CLI."""

    command: str  # "uninstall", "rollback", ...
    outcome: str
    exit_code: int
    python: str
    snapshot: str | None = None
    removed: list[str] = field(default_factory=list)  # pins
    absent: list[str] = field(default_factory=list)
    dependents: list[str] = field(default_factory=list)
    probe_notes: list[str] = field(default_factory=list)
    baseline: list[ProbeResult] = field(default_factory=list)
    probes: list[ProbeResult] = field(default_factory=list)  # after the change
    final_probes: list[ProbeResult] = field(default_factory=list)  # after a restore
    final_probe_skipped: str | None = None  # why the probe after a restore was not run
    restore: RestoreReport | None = None
    verification: Verification | None = None
    rollback_plan: RollbackPlan | None = None
    impact: ImpactReport | None = None
    drift: list[Drift] = field(default_factory=list)
    diagnosis: list[Finding] = field(default_factory=list)
    next_command: str | None = None
    messages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "command": self.command,
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "python": self.python,
            "snapshot": self.snapshot,
            "removed": self.removed,
            "absent": self.absent,
            "dependents": self.dependents,
            "restored": self.restore.from_stash + self.restore.reinstalled if self.restore else [],
            "restore": self.restore.to_dict() if self.restore else None,
            "verification": self.verification.to_dict() if self.verification else None,
            "probes": {
                "notes": self.probe_notes,
                "baseline": [p.to_dict() for p in self.baseline],
                "after": [p.to_dict() for p in self.probes],
                "after_restore": [p.to_dict() for p in self.final_probes],
                "after_restore_skipped": self.final_probe_skipped,
            },
            "rollback_plan": self.rollback_plan.to_dict() if self.rollback_plan else None,
            "impact": self.impact.to_dict() if self.impact else None,
            "drift": [d.to_dict() for d in self.drift],
            "diagnosis": [f.to_dict() for f in self.diagnosis],
            "next_command": self.next_command,
            "messages": self.messages,
        }


def _probe_failure_text(results: Sequence[ProbeResult]) -> str:
    return "\n".join(
        f"probe {r.probe.label!r}: {r.summary()}\n{r.output}".rstrip()
        for r in results
        if not r.passed
    )


def _recover_command(ctx: Context) -> str:
    return shell_line(["safe-uninstall", "--python", str(ctx.python), "recover"])


def _rollback_command(ctx: Context, snapshot_id: str) -> str:
    return shell_line(["safe-uninstall", "--python", str(ctx.python), "rollback", snapshot_id])


class _Analysis(Struct, frozen=True):
    """The impact report of a removal, with the ownership and library index it was built from."""

    report: ImpactReport
    owned: Ownership
    index: LibraryIndex


def _analyse(
    ctx: Context,
    installed: Mapping[str, InstalledDistribution],
    remove: Sequence[str],
    environ: Mapping[str, str],
) -> _Analysis:
    index = LibraryIndex(environ, cache_file=ctx.store.root / ELF_CACHE_FILE)
    owned = ownership(installed)
    report = impact_report(installed, ctx.interpreter.markers, remove, index, owned)
    index.save()
    return _Analysis(report, owned, index)


def _drift(
    baseline: Sequence[ProbeResult], after: Sequence[ProbeResult], analysis: _Analysis
) -> list[Drift]:
    """Compare what each Python probe loaded before and after (Linux /proc/self/maps)."""
    found: list[Drift] = []
    for old, new in zip(baseline, after, strict=True):
        if old.libraries is None or new.libraries is None or not new.passed:
            continue
        found += drift(old.libraries, new.libraries, analysis.index, analysis.owned)
    return found


def _left_hollow(analysis: _Analysis) -> list[str]:
    """Remaining distributions whose files the removal deleted (shared paths), checked on disk:
    certain breakage, found without a probe."""
    return [
        name
        for name in analysis.report.hollow
        if any(not os.path.lexists(path) for path in analysis.owned.files.get(name, ()))
    ]


def _removal_result(
    command: str,
    outcome: str,
    ctx: Context,
    installed: Mapping[str, InstalledDistribution],
    removal: RemovalPlan,
) -> OperationResult:
    return OperationResult(
        command=command,
        outcome=outcome,
        exit_code=EXIT_OK,
        python=str(ctx.python),
        removed=[f"{n}=={installed[n].version}" for n in removal.remove],
        absent=list(removal.absent),
    )


def uninstall(
    target: TargetOptions,
    probes: ProbeOptions,
    options: UninstallOptions,
    early: baseline.HeadStart | None = None,
) -> OperationResult:
    """Remove ``options.names``, judged by the probes; restore everything if they fail.

    ``early``: the baseline begun by ``baseline.head_start`` before this module was imported.
    It is taken over if it is the one this call would begin, else cancelled.
    """
    requested = parse_requested(list(options.names))
    if not requested:
        raise InvalidInput("no package names given")
    configured = configured_probes(probes, target.cwd, target.environ)
    ctx = open_target(target)

    def waiting(message: str) -> None:
        if early is not None:
            early.baseline.cancel()  # another operation holds the environment: it may change it
        if target.on_wait is not None:
            target.on_wait(message)

    with ctx.store.locked(target.lock_timeout, on_wait=waiting) as waited:
        journal = Journal(ctx.store.root)
        journal.refuse_if_unfinished()
        installed = installed_distributions(ctx.interpreter)
        removal = plan_removal(requested, installed)
        result = _removal_result("uninstall", "nothing-to-do", ctx, installed, removal)
        if not removal.remove:
            result.messages.append("nothing to do: none of the named packages is installed")
            return result
        # Configured probes are known now: their baseline starts before the impact report,
        # so it overlaps the report, the snapshot and the stash.
        baseline_now = bool(configured.probes) and not (options.dry_run or options.strict)
        cache = BaselineCache(ctx.store.root)
        env_print = fingerprint(ctx.interpreter, target.environ) if configured.probes else ""
        begun = baseline.take_over(
            early, ctx.python, configured, env_print, waited=waited, latest=ctx.store.latest_id()
        )
        if baseline_now and begun is None:
            begun = baseline.begin(
                configured, ctx.interpreter, cache, env_print, fresh=options.fresh_baseline
            )
        try:
            analysis = _analyse(ctx, installed, removal.remove, target.environ)
            result.impact = analysis.report
            result.dependents = list(analysis.report.dependents)
            settings = _with_default(configured, installed, analysis.report.affected)
            result.probe_notes = list(settings.notes)
            if options.strict and analysis.report.refused_by_strict:
                result.outcome = "refused-strict"
                result.exit_code = EXIT_UNCHANGED
                result.messages.append("--strict: the impact report finds breakage or drift")
                return result
            if options.dry_run:
                result.outcome = "dry-run"
                return result
            ensure_writable(ctx.interpreter)
            ctx.backend.check_available()
        except BaseException:
            _stop(begun)
            raise
        if begun is None and settings.probes:  # the default probes, known from the report
            env_print = env_print or fingerprint(ctx.interpreter, target.environ)
            begun = baseline.begin(
                settings, ctx.interpreter, cache, env_print, fresh=options.fresh_baseline
            )
        folder: tuple[str, Path] | None = None
        hasher: StashHasher | None = None
        try:
            _import_what_a_restore_needs(ctx)
            folder = ctx.store.new_folder()
            entry = journal.begin("uninstall", folder[0], "stash")
            snap = take_snapshot(
                ctx,
                installed,
                folder=folder,
                operation="uninstall",
                command=target.command,
                stash=removal.remove,
                removed=removal.remove,
                shared=analysis.owned.shared_paths(),
            )
            # Hashes the stash while uv and the probe run: a restore then need not, and a file
            # changed locally before the removal is vouched for (its RECORD hash no longer is).
            hasher = StashHasher(folder[1], [e.stash for e in snap.packages if e.stash])
            result.baseline = begun.results() if begun is not None else []
            if not all(r.passed for r in result.baseline):
                raise BaselineProbeFailed(
                    "the probe already fails before any change, so it cannot judge this removal",
                    detail=_probe_failure_text(result.baseline),
                )
        except BaseException as err:
            # Nothing was removed: undo the snapshot too, so no "pending" one is left behind.
            _stop(begun)
            if hasher is not None:
                hasher.cancel()
            if folder is not None:
                shutil.rmtree(folder[1], ignore_errors=True)
            journal.finish()
            if isinstance(err, KeyboardInterrupt):
                raise Interrupted(
                    "interrupted before anything was removed; nothing was changed"
                ) from None
            raise
        if begun is not None and begun.running is not None:
            cache.put(settings, env_print, result.baseline)
        result.snapshot = snap.id
        return _remove_probe_restore(
            ctx, snap, settings, options, result, journal, entry, analysis, hasher
        )


def _import_what_a_restore_needs(ctx: Context) -> None:
    """Removing from the tool's own environment can take away a module that it imports only
    when needed (tomli on Python 3.10, for reading snapshots): import those first."""
    if os.path.realpath(sys.prefix) != os.path.realpath(ctx.interpreter.prefix):
        return
    from . import doctor, tomlfile, transaction  # noqa: F401 - imported to have them loaded

    tomlfile.loads("")  # the TOML parser


def _stop(begun: baseline.Begun | None) -> None:
    if begun is not None:
        begun.cancel()


def _judge_probes(
    ctx: Context,
    snap: Snapshot,
    settings: ProbeSettings,
    options: UninstallOptions,
    result: OperationResult,
    journal: Journal,
    analysis: _Analysis,
) -> str | None:
    """Probe after the uninstall. None when the removal stands (passed, or kept on request);
    else the reason to restore: ``probe-failed`` or ``drift``."""
    running: baseline.Background | None = None
    try:
        running = baseline.start(settings, ctx.interpreter)
        # A passing probe is cached as the baseline of the environment it ran in: that
        # environment's fingerprint is taken while the probe runs, not after it.
        env_print = fingerprint(ctx.interpreter, ctx.environ)
        result.probes = running.results()
    except BaseException:
        if running is not None:
            running.cancel()
        raise
    result.drift = _drift(result.baseline, result.probes, analysis)
    if any(r.probe.kind == "python" and r.libraries is None for r in result.probes):
        result.messages.append(
            "which libraries the probe loaded is unknown here (no /proc/self/maps): "
            "drift detection is off, only the probe's exit code counts"
        )
    passed = all(r.passed for r in result.probes)
    if not passed:
        from .doctor import diagnose  # only when a probe fails

        result.diagnosis = diagnose(
            (r.output for r in result.probes if not r.passed),
            [snap, *_loadable_snapshots(ctx.store)],
        )
    elif result.drift and not options.allow_drift:
        passed = False
        result.messages.append(
            "the probe passed, but on other copies of libraries (drift); --allow-drift accepts that"
        )
    if passed:
        result.outcome = "removed"
        BaselineCache(ctx.store.root).put(settings, env_print, result.probes)
        ctx.store.set_outcome(snap.id, "removed")
        journal.finish()
        return None
    if options.keep_on_failure:
        result.outcome = "probe-failed-kept"
        result.exit_code = EXIT_INCOMPLETE
        result.next_command = _rollback_command(ctx, snap.id)
        ctx.store.set_outcome(snap.id, "probe-failed-kept")
        journal.finish()
        return None
    return "drift" if all(r.passed for r in result.probes) else "probe-failed"


def _remove_probe_restore(
    ctx: Context,
    snap: Snapshot,
    settings: ProbeSettings,
    options: UninstallOptions,
    result: OperationResult,
    journal: Journal,
    entry: JournalEntry,
    analysis: _Analysis,
    hasher: StashHasher | None,
) -> OperationResult:
    """Uninstall, probe, and restore on failure or interruption. The snapshot is saved."""
    try:
        entry = journal.step(entry, "uninstall")
        try:
            ctx.backend.uninstall(snap.removed)
        except BackendError as err:
            result.messages.append(f"{err.message}\n{err.detail}".strip())
            reason = "uninstall-failed"
        else:
            entry = journal.step(entry, "probe", durable=False)
            hollow = _left_hollow(analysis)
            if hollow:
                result.messages.append(
                    "the removal deleted files that stay listed by "
                    + ", ".join(hollow)
                    + " (shared paths): they are installed but hollow"
                )
                reason = "hollow"
            else:
                judged = _judge_probes(ctx, snap, settings, options, result, journal, analysis)
                if judged is None:
                    return result
                reason = judged
    except KeyboardInterrupt:
        result.messages.append("interrupted: restoring what was removed")
        reason = "interrupted"
    except Exception as err:  # whatever broke, what was removed comes back first
        result.messages.append(f"unexpected error after the uninstall started: {err!r}")
        reason = "error"
    return _restore_after(
        ctx,
        snap,
        settings,
        options,
        result,
        journal,
        entry,
        hasher,
        reason=reason,
        intact=analysis.report.hollow,
    )


def _restore_after(
    ctx: Context,
    snap: Snapshot,
    settings: ProbeSettings,
    options: UninstallOptions,
    result: OperationResult,
    journal: Journal,
    entry: JournalEntry,
    hasher: StashHasher | None,
    *,
    reason: str,
    intact: Sequence[str] = (),
) -> OperationResult:
    """Bring back everything ``snap`` removed in one batch, verify, probe again.

    ``intact``: distributions that share files with what was removed; they must be whole again.
    """
    from .transaction import restore, verify  # a removal that stands never needs them

    entries = [e for name in snap.removed if (e := snap.package(name)) is not None]
    with _interrupts_deferred() as received:
        entry = journal.step(entry, "restore", must_write=False)
        if hasher is not None:
            hasher.wait()  # usually done already: it ran while the probes did
        try:
            result.restore = restore(
                entries,
                index=_stash_index(ctx.store, entries, [snap], ctx.interpreter.prefix),
                store=ctx.store,
                interpreter=ctx.interpreter,
                backend=ctx.backend,
                offline=options.offline,
                displaced_dir=ctx.store.folder(snap.id) / "displaced",
                preferred_snapshot=snap.id,
                checkpoint=lambda step: journal.step(entry, step, must_write=False),
                progress=ctx.on_progress,
            )
            entry = journal.step(entry, "verify", must_write=False)
            verification = verify(snap, ctx.interpreter, result.restore, intact=intact)
        except Exception as err:
            return _restore_stopped(ctx, result, err, snap.id, f"{reason}-incomplete")
        result.verification = verification
        proven = (
            verification.ok
            and not result.restore.reinstalled
            and not options.probe_after_restore
            and all(r.passed and not r.cached for r in result.baseline)
        )
        if proven and settings.probes:
            # Every restored file came from a hash-checked stash and the installed set equals
            # the snapshot: this is, byte for byte, the environment the baseline passed in.
            # Running the probe again would prove nothing more and cost a whole probe run.
            result.final_probe_skipped = (
                f"not run again: the restore is proven identical to the state the baseline "
                f"passed in ({verification.files_checked} files hash-checked, the installed set "
                "equal to the snapshot); --probe-after-restore runs it anyway"
            )
        elif verification.ok:
            result.final_probes = run_all(settings, ctx.interpreter)
        if verification.ok:
            BaselineCache(ctx.store.root).put(
                settings,
                fingerprint(ctx.interpreter, ctx.environ),
                result.final_probes or result.baseline,
            )
        restored_ok = verification.ok and all(r.passed for r in result.final_probes)
        result.outcome = f"{reason}-restored" if restored_ok else f"{reason}-incomplete"
        if not verification.ok:
            # The journal stays, so other commands are refused until this one finishes it.
            result.exit_code = EXIT_INCOMPLETE
            result.next_command = _recover_command(ctx)
        elif not restored_ok:
            result.exit_code = EXIT_INCOMPLETE
            result.messages.append(
                "the environment equals the snapshot again, yet the probe fails after the "
                "restore: it does not judge this environment reliably"
            )
        elif reason in ("uninstall-failed", "error"):
            result.exit_code = EXIT_UNCHANGED  # proven to be as before: nothing changed
        else:
            result.exit_code = EXIT_RESTORED
        ctx.store.set_outcome(snap.id, result.outcome)
        if verification.ok:
            journal.finish()  # else keep it: ``recover`` must finish the job
    if received:
        result.messages.append("an interrupt arrived during the restore; it finished first")
    return result


def _restore_stopped(
    ctx: Context, result: OperationResult, err: Exception, snapshot_id: str, outcome: str
) -> OperationResult:
    """A restore that stopped on an error of its own (a file it cannot bring back is reported,
    not raised): the environment is between two states. The journal stays, so every other
    command is refused until ``recover`` has finished the job."""
    result.outcome = outcome
    result.exit_code = EXIT_INCOMPLETE
    result.next_command = _recover_command(ctx)
    result.messages.append(
        f"the restore stopped on an unexpected error ({err!r}): the environment is only partly "
        "restored"
    )
    with contextlib.suppress(OSError):
        ctx.store.set_outcome(snapshot_id, outcome)
    return result


# -- rollback and recover -------------------------------------------------------------------


def _installed_view(
    installed: Mapping[str, InstalledDistribution], owned: Ownership
) -> dict[str, Installed]:
    from .doctor import hollow_distributions

    hollow = set(hollow_distributions(owned, installed))
    return {
        name: Installed(name=name, version=d.version, source=d.source, intact=name not in hollow)
        for name, d in installed.items()
    }


def rollback(
    target: TargetOptions, probes: ProbeOptions, options: RollbackOptions
) -> OperationResult:
    configured = configured_probes(probes, target.cwd, target.environ)
    ctx = open_target(target)
    with ctx.store.locked(target.lock_timeout, on_wait=target.on_wait):
        journal = Journal(ctx.store.root)
        journal.refuse_if_unfinished()
        snapshot_id = ctx.store.resolve_id(options.snapshot)
        return _rollback_to(
            ctx, ctx.store.load(snapshot_id), configured, options, target, journal, None
        )


def recover(
    target: TargetOptions, probes: ProbeOptions, options: RollbackOptions
) -> OperationResult:
    """Finish what an interrupted operation left: return to the snapshot its journal names."""
    configured = configured_probes(probes, target.cwd, target.environ)
    ctx = open_target(target)
    with ctx.store.locked(target.lock_timeout, on_wait=target.on_wait):
        journal = Journal(ctx.store.root)
        entry = journal.read()
        result = OperationResult(
            command="recover",
            outcome="nothing-to-recover",
            exit_code=EXIT_OK,
            python=str(ctx.python),
        )
        if entry is None:
            result.messages.append("no unfinished operation on this environment")
            return result
        result.messages.append(f"found: {entry.describe()}")
        ctx.store.remove_unsaved()
        snapshot_id = entry.snapshot
        if not snapshot_id or not ctx.store.snapshot_path(snapshot_id).is_file():
            return _recover_without_snapshot(ctx, entry, journal, result)
        wanted = ctx.store.load(snapshot_id)
        entry = journal.step(entry, "recover")
        if entry.operation == "rollback":  # its restore may have begun what ``wanted`` lacks
            from .transaction import remove_half_restored

            remove_half_restored(ctx.store, ctx.interpreter)
        return _rollback_to(ctx, wanted, configured, options, target, journal, entry)


def _recover_without_snapshot(
    ctx: Context, entry: JournalEntry, journal: Journal, result: OperationResult
) -> OperationResult:
    if entry.step == "stash" and entry.snapshot:
        # Killed while stashing: the snapshot was never saved, so nothing was removed yet.
        shutil.rmtree(ctx.store.folder(entry.snapshot), ignore_errors=True)
        journal.finish()
        result.outcome = "recovered"
        result.messages.append(
            "it stopped while stashing, before anything was removed: the environment was "
            "not changed; the partial snapshot folder was deleted"
        )
        return result
    raise SnapshotNotFound(
        f"the journal {journal.path} names no readable snapshot ({entry.describe()}); "
        "pick one with `safe-uninstall snapshots` and run `safe-uninstall rollback ID`, "
        f"then delete {journal.path}"
    )


def _sharing_files(owned: Ownership, removed: Sequence[str]) -> list[str]:
    """Distributions not in ``removed`` that list a file one of ``removed`` lists."""
    gone = set(removed)
    return sorted(
        {
            other
            for name in removed
            for path in owned.files.get(name, ())
            for other in owned.owners.get(path, ())
            if other not in gone
        }
    )


def _same_environment(snap: Snapshot, ctx: Context) -> None:
    """A snapshot of another environment (a shared --state-dir) must not be applied here."""
    if os.path.realpath(snap.target.prefix) != os.path.realpath(ctx.interpreter.prefix):
        raise SnapshotInvalid(
            f"snapshot {snap.id} was taken of {snap.target.prefix}, not of this environment "
            f"({ctx.interpreter.prefix}); refusing to apply it here"
        )


def _rollback_to(
    ctx: Context,
    wanted: Snapshot,
    configured: ProbeSettings,
    options: RollbackOptions,
    target: TargetOptions,
    journal: Journal,
    recovering: JournalEntry | None,
) -> OperationResult:
    """Make the installed set equal ``wanted``'s; the journal entry is reused when recovering."""
    _same_environment(wanted, ctx)
    installed = installed_distributions(ctx.interpreter)
    owned = ownership(installed)
    plan = plan_rollback(wanted, _installed_view(installed, owned))
    command = "recover" if recovering else "rollback"
    result = OperationResult(
        command=command,
        outcome="already-matches",
        exit_code=EXIT_OK,
        python=str(ctx.python),
        snapshot=wanted.id,
        rollback_plan=plan,
        removed=[f"{n}=={installed[n].version}" for n in plan.remove],
    )
    if plan.empty and recovering is None:
        result.messages.append(f"the environment already matches snapshot {wanted.id}")
        return result
    settings = _with_default(configured, installed, None)
    result.probe_notes = list(settings.notes)
    if options.dry_run:
        result.outcome = "dry-run"
        return result
    ensure_writable(ctx.interpreter)
    ctx.backend.check_available()
    check_restore_paths(
        wanted, plan.restore, Path(ctx.interpreter.prefix), ctx.store.snapshot_path(wanted.id)
    )
    # Distributions that stay but share files with what the rollback removes (a cu12 and a
    # cu13 build of one library): the uninstall deletes those files, so they are stashed with
    # the rest and restored after it.
    kept_shared = _sharing_files(owned, plan.remove)
    wanted_by_name = {e.name: e for e in wanted.packages}
    rewhole = [wanted_by_name[n] for n in kept_shared if n in wanted_by_name]
    from .transaction import restore, verify

    with _interrupts_deferred() as received:
        folder = ctx.store.new_folder()
        # The state we leave is itself a snapshot, so a rollback can be rolled back.
        try:
            if recovering is None:
                # An interruption from here on is recovered to the state before the rollback.
                entry = journal.begin("rollback", folder[0], "stash")
            else:
                entry = journal.step(recovering, "recover:stash")
            before = take_snapshot(
                ctx,
                installed,
                folder=folder,
                operation=command,
                command=target.command,
                stash=[*plan.remove, *kept_shared],
                removed=plan.remove,
                shared=owned.shared_paths(),
            )
        except BaseException:
            shutil.rmtree(folder[1], ignore_errors=True)
            if recovering is None:
                journal.finish()  # nothing was changed yet
            raise
        result.messages.append(f"the state before this {command} is snapshot {before.id}")
        prefix = "recover:" if recovering else ""
        if plan.remove:
            entry = journal.step(entry, f"{prefix}uninstall")
            try:
                ctx.backend.uninstall(plan.remove)
            except BackendError as err:
                result.messages.append(f"{err.message}\n{err.detail}".strip())
        # From here a full disk must not stop the restore (see Journal.step).
        entry = journal.step(entry, f"{prefix}restore", must_write=False)
        to_restore = [*plan.restore, *rewhole]
        try:
            result.restore = restore(
                to_restore,
                index=_stash_index(ctx.store, to_restore, [wanted, before], ctx.interpreter.prefix),
                store=ctx.store,
                interpreter=ctx.interpreter,
                backend=ctx.backend,
                offline=options.offline,
                displaced_dir=ctx.store.folder(before.id) / "displaced",
                preferred_snapshot=wanted.id,
                checkpoint=lambda step: journal.step(entry, prefix + step, must_write=False),
                progress=ctx.on_progress,
            )
            entry = journal.step(entry, f"{prefix}verify", must_write=False)
            verification = verify(wanted, ctx.interpreter, result.restore, intact=kept_shared)
        except Exception as err:
            return _restore_stopped(ctx, result, err, before.id, f"{command}-incomplete")
        result.verification = verification
        if not verification.ok:
            result.outcome = "incomplete"
            result.exit_code = EXIT_INCOMPLETE
            result.next_command = (
                _recover_command(ctx) if recovering else _rollback_command(ctx, wanted.id)
            )
            ctx.store.set_outcome(before.id, f"{command}-incomplete")
            if recovering is None:
                journal.finish()  # a rollback that stopped short is retried by running it again
            return result
        ctx.store.set_outcome(before.id, f"{command}-to-{wanted.id}")
        if recovering is not None:
            ctx.store.set_outcome(wanted.id, "recovered")
        journal.finish()
    if received:
        result.messages.append(f"an interrupt arrived during the {command}; it finished first")
    try:
        result.final_probes = run_all(settings, ctx.interpreter)
    except KeyboardInterrupt:
        # The environment already matches the snapshot; only the check is missing.
        result.outcome = f"{'recovered' if recovering else 'rolled-back'}-probe-interrupted"
        result.exit_code = EXIT_PROBE_FAILS_AFTER_ROLLBACK
        result.messages.append(
            "the probe after it was interrupted: the environment matches the snapshot, but "
            "nothing proved it works; run `safe-uninstall probe`"
        )
        return result
    if all(r.passed for r in result.final_probes):
        result.outcome = "recovered" if recovering else "rolled-back"
    else:
        result.outcome = f"{'recovered' if recovering else 'rolled-back'}-probe-fails"
        result.exit_code = EXIT_PROBE_FAILS_AFTER_ROLLBACK
    return result


# -- snapshot, snapshots, show, probe -------------------------------------------------------


def snapshot_now(target: TargetOptions, *, stash: bool) -> Snapshot:
    ctx = open_target(target)
    with ctx.store.locked(target.lock_timeout, on_wait=target.on_wait):
        installed = installed_distributions(ctx.interpreter)
        snap = take_snapshot(
            ctx,
            installed,
            folder=ctx.store.new_folder(),
            operation="snapshot",
            command=target.command,
            stash=sorted(installed) if stash else (),
            shared=ownership(installed).shared_paths() if stash else (),
        )
        ctx.store.set_outcome(snap.id, "taken")
        return snap.with_outcome("taken")


class SnapshotSummary(Struct, frozen=True):
    """One line of ``snapshots``: a saved snapshot and how its operation ended."""

    id: str
    created: str
    command: str
    operation: str
    removed: tuple[str, ...]
    outcome: str
    packages: int
    error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return msgspec.structs.asdict(self)


def list_snapshots(target: TargetOptions) -> list[SnapshotSummary]:
    ctx = open_target(target)
    summaries = []
    for snapshot_id, snap in ctx.store.iter_loadable():
        if isinstance(snap, SnapshotInvalid):
            summaries.append(
                SnapshotSummary(snapshot_id, "", "", "", (), "unreadable", 0, error=snap.message)
            )
            continue
        summaries.append(
            SnapshotSummary(
                id=snap.id,
                created=snap.created,
                command=shell_line(snap.command),
                operation=snap.operation,
                removed=snap.removed,
                outcome=snap.outcome,
                packages=len(snap.packages),
            )
        )
    return summaries


def show_snapshot(target: TargetOptions, reference: str | None) -> Snapshot:
    ctx = open_target(target)
    return ctx.store.load(ctx.store.resolve_id(reference))


def probe_now(target: TargetOptions, probes: ProbeOptions) -> OperationResult:
    configured = configured_probes(probes, target.cwd, target.environ)
    ctx = open_target(target)
    installed = installed_distributions(ctx.interpreter)
    settings = _with_default(configured, installed, None)
    results = run_all(settings, ctx.interpreter)
    passed = all(r.passed for r in results)
    return OperationResult(
        command="probe",
        outcome="passed" if passed else "failed",
        exit_code=EXIT_OK if passed else 1,
        python=str(ctx.python),
        probe_notes=list(settings.notes),
        probes=results,
    )


# -- prune ----------------------------------------------------------------------------------


class PruneResult(Struct, frozen=True):
    """Snapshots removed and kept by ``prune``, with the bytes each held on its own."""

    removed: tuple[tuple[str, int], ...]  # (snapshot id, bytes it held on its own)
    kept: tuple[tuple[str, int], ...]
    protected: tuple[str, ...]  # never removed: the latest, the journal's
    dry_run: bool
    held_before: int = 0  # bytes all snapshots kept on disk
    held_after: int = 0  # bytes the remaining snapshots keep on disk

    @property
    def freed(self) -> int:
        return self.held_before - self.held_after

    def to_dict(self) -> dict[str, object]:
        return {
            "removed": [{"id": i, "bytes": b} for i, b in self.removed],
            "kept": [{"id": i, "bytes": b} for i, b in self.kept],
            "protected": list(self.protected),
            "freed_bytes": self.freed,
            "held_after_bytes": self.held_after,
            "dry_run": self.dry_run,
        }


def prune(target: TargetOptions, options: PruneOptions) -> PruneResult:
    if options.keep is None and options.max_size is None:
        raise InvalidInput("prune needs --keep N and/or --max-size SIZE")
    ctx = open_target(target)
    with ctx.store.locked(target.lock_timeout, on_wait=target.on_wait):
        entry = Journal(ctx.store.root).read()
        if not options.dry_run and entry is None:
            ctx.store.remove_unsaved()  # folders of operations that died while stashing
        ids = ctx.store.ids()
        saved = [i for i in ids if ctx.store.snapshot_path(i).is_file()]
        protected = {saved[-1]} if saved else set()  # the latest that is a snapshot at all
        if entry is not None and entry.snapshot:
            protected.add(entry.snapshot)
        holdings = ctx.store.holdings(ids)
        plan = plan_prune(ids, holdings, protected, keep=options.keep, max_size=options.max_size)
        if not options.dry_run:
            for snapshot_id in plan:
                shutil.rmtree(ctx.store.folder(snapshot_id))
        rest = [i for i in ids if i not in plan]
        return PruneResult(
            removed=tuple((i, holdings.held([i])) for i in plan),
            kept=tuple((i, holdings.held([i])) for i in rest),
            protected=tuple(sorted(protected)),
            dry_run=options.dry_run,
            held_before=holdings.held(ids),
            held_after=holdings.held(rest),
        )


# -- check and doctor -----------------------------------------------------------------------


def check(target: TargetOptions, names: Sequence[str], *, strict: bool) -> OperationResult:
    """The impact report of removing ``names``, changing nothing."""
    requested = parse_requested(list(names))
    ctx = open_target(target)
    installed = installed_distributions(ctx.interpreter)
    removal = plan_removal(requested, installed)
    result = _removal_result("check", "checked", ctx, installed, removal)
    if not removal.remove:
        result.messages.append("none of the named packages is installed")
        return result
    report = _analyse(ctx, installed, removal.remove, target.environ).report
    result.impact = report
    result.dependents = list(report.dependents)
    if strict and report.refused_by_strict:
        result.outcome = "refused-strict"
        result.exit_code = EXIT_UNCHANGED
    return result


def doctor(target: TargetOptions) -> DoctorReport:
    """Everything broken in the environment at once, and the one command that repairs it."""
    from .doctor import DoctorReport, examine

    ctx = open_target(target)
    installed = installed_distributions(ctx.interpreter)
    index = LibraryIndex(target.environ, cache_file=ctx.store.root / ELF_CACHE_FILE)
    owned = ownership(installed)
    snapshots = _loadable_snapshots(ctx.store)  # newest first
    report = DoctorReport(examine(installed, ctx.interpreter.markers, index, owned, snapshots))
    index.save()
    if report.healthy:
        return report
    view = _installed_view(installed, owned)
    wanted = {f.provider for f in report.findings}
    for snap in snapshots:
        plan = plan_rollback(snap, view)
        pins = {e.pin for e in plan.restore}
        # A rollback is the repair when it brings back every missing piece and takes nothing
        # away that is installed and intact now.
        takes_nothing = not plan.added and all(not view[n].intact for n in plan.changed)
        if None not in wanted and wanted <= pins and takes_nothing:
            report.repair_snapshot = snap.id
            report.repair_command = _rollback_command(ctx, snap.id)
            # Said, not hidden: a rollback also brings back what was removed since on purpose.
            report.repair_also = sorted(p for p in pins - wanted if p is not None)
            return report
    pinned = sorted(p for p in wanted if p is not None)
    if pinned and None not in wanted:
        entries = [_entry_for_pin(snapshots, pin) for pin in pinned]
        report.repair_command = shell_line(
            ctx.backend.install_argv([e for e in entries if e is not None], offline=False)
        )
    return report


def _entry_for_pin(snapshots: Sequence[Snapshot], pin: str) -> PackageEntry | None:
    for snap in snapshots:
        for entry in snap.packages:
            if entry.pin == pin:
                return entry
    return None
