"""The operations, coordinated: each takes a frozen options object and returns a result.

Nothing here prints, exits or knows about click. An expected failure before any change raises a
SafeUninstallError (exit 1, nothing changed); once the environment has been touched, the outcome
is a result whose exit code says what state the environment is in (0, 3, 4 or 5).
"""

from __future__ import annotations

import datetime
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__, impact
from . import config as config_file
from .backend import Backend, shell_line
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
    BackendError,
    BaselineProbeFailed,
    SafeUninstallError,
    SnapshotInvalid,
)
from .names import parse_requested
from .plan import Installed, RollbackPlan, build_stash_index, plan_removal, plan_rollback
from .probe import (
    DEFAULT_TIMEOUT,
    Probe,
    ProbeResult,
    ProbeSettings,
    command_probe,
    default_probes,
    python_probe,
    run_all,
)
from .snapshot import PackageEntry, PackageStash, Snapshot, Target
from .stash import relative_to_root, stash_distribution
from .store import Store, default_state_dir
from .transaction import RestoreReport, Verification, restore, verify


@dataclass(frozen=True)
class TargetOptions:
    """Options every command takes: which environment, where its state is, how long to wait."""

    python: str | None
    cwd: Path
    environ: Mapping[str, str]
    command: tuple[str, ...] = ()
    state_dir: str | None = None
    lock_timeout: float = 60.0


@dataclass(frozen=True)
class ProbeOptions:
    probes: tuple[str, ...] = ()
    probe_cmds: tuple[str, ...] = ()
    timeout: float | None = None
    disabled: bool = False


@dataclass(frozen=True)
class Context:
    python: Path
    interpreter: Interpreter
    store: Store
    backend: Backend


def open_target(options: TargetOptions) -> Context:
    python = find_python(options.python, cwd=options.cwd, environ=options.environ)
    interpreter = query_interpreter(python)
    state = (
        Path(options.state_dir).expanduser().absolute()
        if options.state_dir
        else default_state_dir(interpreter, options.environ)
    )
    return Context(
        python=python,
        interpreter=interpreter,
        store=Store(state),
        backend=Backend.for_python(python),
    )


# -- probes ---------------------------------------------------------------------------------


def configured_probes(
    options: ProbeOptions, cwd: Path, environ: Mapping[str, str]
) -> ProbeSettings:
    """Probes from the CLI, else the environment, else pyproject.toml. May be empty."""
    layers = config_file.load_layers(cwd, environ)
    timeout = options.timeout
    if timeout is None:
        timeout = next((lay.timeout for lay in layers if lay.timeout is not None), DEFAULT_TIMEOUT)
    if options.disabled:
        return ProbeSettings(
            timeout=timeout, disabled=True, notes=("probes disabled (--no-probe)",)
        )
    if options.probes or options.probe_cmds:
        probes = [python_probe(code, "--probe") for code in options.probes]
        probes += [command_probe(line, "--probe-cmd") for line in options.probe_cmds]
        return ProbeSettings(probes=tuple(probes), timeout=timeout)
    for layer in layers:
        if layer.probes or layer.probe_cmds:
            probes = [python_probe(code, layer.origin) for code in layer.probes]
            probes += [command_probe(line, layer.origin) for line in layer.probe_cmds]
            return ProbeSettings(probes=tuple(probes), timeout=timeout)
    return ProbeSettings(timeout=timeout)


def _with_default(
    settings: ProbeSettings,
    installed: Mapping[str, InstalledDistribution],
    dependents: Sequence[str] | None,
) -> ProbeSettings:
    if settings.probes or settings.disabled:
        return settings
    probes, note = default_probes(installed, dependents)
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
    operation: str,
    command: Sequence[str],
    stash: Sequence[str],
    removed: Sequence[str] = (),
) -> Snapshot:
    """Write a snapshot of ``installed``, stashing the distributions named in ``stash`` first.

    On any failure the half-made snapshot folder is deleted and the error raised: nothing has
    been removed yet, so nothing is lost.
    """
    snapshot_id, folder = ctx.store.new_folder()
    env_root = Path(ctx.interpreter.prefix)
    try:
        stashes = {
            name: stash_distribution(installed[name], env_root=env_root, snapshot_dir=folder)
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
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return snap


def _loadable_snapshots(store: Store) -> list[Snapshot]:
    return [snap for _, snap in store.iter_loadable() if isinstance(snap, Snapshot)]


# -- uninstall ------------------------------------------------------------------------------


@dataclass(frozen=True)
class UninstallOptions:
    names: tuple[str, ...]
    dry_run: bool = False
    keep_on_failure: bool = False
    offline: bool = False


@dataclass
class OperationResult:
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
    restore: RestoreReport | None = None
    verification: Verification | None = None
    rollback_plan: RollbackPlan | None = None
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
            },
            "rollback_plan": _rollback_plan_dict(self.rollback_plan),
            "next_command": self.next_command,
            "messages": self.messages,
        }


def _rollback_plan_dict(plan: RollbackPlan | None) -> dict[str, object] | None:
    if plan is None:
        return None
    return {
        "added": list(plan.added),
        "changed": list(plan.changed),
        "missing": list(plan.missing),
    }


def _probe_failure_text(results: Sequence[ProbeResult]) -> str:
    return "\n".join(
        f"probe {r.probe.label!r}: {r.summary()}\n{r.output}".rstrip()
        for r in results
        if not r.passed
    )


def uninstall(
    target: TargetOptions, probes: ProbeOptions, options: UninstallOptions
) -> OperationResult:
    requested = parse_requested(list(options.names))
    if not requested:
        raise SafeUninstallError("no package names given")
    configured = configured_probes(probes, target.cwd, target.environ)
    ctx = open_target(target)
    with ctx.store.locked(target.lock_timeout):
        installed = installed_distributions(ctx.interpreter)
        removal = plan_removal(requested, installed)
        result = OperationResult(
            command="uninstall",
            outcome="nothing-to-do",
            exit_code=EXIT_OK,
            python=str(ctx.python),
            removed=[f"{n}=={installed[n].version}" for n in removal.remove],
            absent=list(removal.absent),
        )
        if not removal.remove:
            result.messages.append("nothing to do: none of the named packages is installed")
            return result
        edges = impact.dependencies(installed, ctx.interpreter.markers)
        result.dependents = impact.dependents_of(removal.remove, edges)
        settings = _with_default(configured, installed, result.dependents)
        result.probe_notes = list(settings.notes)
        if options.dry_run:
            result.outcome = "dry-run"
            result.baseline = []
            return result
        ensure_writable(ctx.interpreter)
        ctx.backend.check_available()
        result.baseline = run_all(settings, ctx.interpreter)
        if not all(r.passed for r in result.baseline):
            raise BaselineProbeFailed(
                "the probe already fails before any change, so it cannot judge this removal; "
                "nothing was changed",
                detail=_probe_failure_text(result.baseline),
            )
        snap = take_snapshot(
            ctx,
            installed,
            operation="uninstall",
            command=target.command,
            stash=removal.remove,
            removed=removal.remove,
        )
        result.snapshot = snap.id
        return _remove_probe_restore(ctx, snap, settings, options, result)


def _remove_probe_restore(
    ctx: Context,
    snap: Snapshot,
    settings: ProbeSettings,
    options: UninstallOptions,
    result: OperationResult,
) -> OperationResult:
    """Uninstall, probe, and restore on failure or interruption. The snapshot is already saved."""
    try:
        try:
            ctx.backend.uninstall(snap.removed)
        except BackendError as err:
            result.messages.append(f"{err.message}\n{err.detail}".strip())
            return _restore_after(ctx, snap, settings, options, result, reason="uninstall-failed")
        result.probes = run_all(settings, ctx.interpreter)
    except KeyboardInterrupt:
        result.messages.append("interrupted: restoring what was removed")
        return _restore_after(ctx, snap, settings, options, result, reason="interrupted")
    if all(r.passed for r in result.probes):
        result.outcome = "removed"
        ctx.store.save(snap.with_outcome("removed"))
        return result
    if options.keep_on_failure:
        result.outcome = "probe-failed-kept"
        result.exit_code = EXIT_INCOMPLETE
        result.next_command = f"safe-uninstall --python {ctx.python} rollback {snap.id}"
        ctx.store.save(snap.with_outcome("probe-failed-kept"))
        return result
    return _restore_after(ctx, snap, settings, options, result, reason="probe-failed")


def _restore_after(
    ctx: Context,
    snap: Snapshot,
    settings: ProbeSettings,
    options: UninstallOptions,
    result: OperationResult,
    *,
    reason: str,
) -> OperationResult:
    """Bring back everything ``snap`` removed in one batch, verify, probe again."""
    entries = [entry for name in snap.removed if (entry := snap.package(name)) is not None]
    index = build_stash_index([snap, *_loadable_snapshots(ctx.store)])
    report = restore(
        entries,
        index=index,
        store=ctx.store,
        interpreter=ctx.interpreter,
        backend=ctx.backend,
        offline=options.offline,
        displaced_dir=ctx.store.folder(snap.id) / "displaced",
        preferred_snapshot=snap.id,
    )
    result.restore = report
    verification, _ = verify(
        snap,
        ctx.interpreter,
        restored=[e.name for e in entries],
        verified_inodes=report.verified_inodes,
    )
    result.verification = verification
    if verification.ok:
        result.final_probes = run_all(settings, ctx.interpreter)
    restored_ok = verification.ok and all(r.passed for r in result.final_probes)
    result.outcome = f"{reason}-restored" if restored_ok else f"{reason}-incomplete"
    if restored_ok:
        result.exit_code = EXIT_RESTORED
    else:
        result.exit_code = EXIT_INCOMPLETE
        result.next_command = f"safe-uninstall --python {ctx.python} rollback {snap.id}"
    ctx.store.save(snap.with_outcome(result.outcome))
    return result


# -- rollback -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RollbackOptions:
    snapshot: str | None = None
    dry_run: bool = False
    offline: bool = False


def _installed_view(installed: Mapping[str, InstalledDistribution]) -> dict[str, Installed]:
    return {
        name: Installed(name=name, version=d.version, source=d.source)
        for name, d in installed.items()
    }


def rollback(
    target: TargetOptions, probes: ProbeOptions, options: RollbackOptions
) -> OperationResult:
    configured = configured_probes(probes, target.cwd, target.environ)
    ctx = open_target(target)
    with ctx.store.locked(target.lock_timeout):
        snapshot_id = ctx.store.resolve_id(options.snapshot)
        wanted = ctx.store.load(snapshot_id)
        installed = installed_distributions(ctx.interpreter)
        plan = plan_rollback(wanted, _installed_view(installed))
        result = OperationResult(
            command="rollback",
            outcome="already-matches",
            exit_code=EXIT_OK,
            python=str(ctx.python),
            snapshot=snapshot_id,
            rollback_plan=plan,
            removed=[f"{n}=={installed[n].version}" for n in plan.remove],
        )
        if plan.empty:
            result.messages.append(f"the environment already matches snapshot {snapshot_id}")
            return result
        settings = _with_default(configured, installed, None)
        result.probe_notes = list(settings.notes)
        if options.dry_run:
            result.outcome = "dry-run"
            return result
        ensure_writable(ctx.interpreter)
        ctx.backend.check_available()
        # The state we leave is itself a snapshot, so a rollback can be rolled back.
        before = take_snapshot(
            ctx,
            installed,
            operation="rollback",
            command=target.command,
            stash=plan.remove,
            removed=plan.remove,
        )
        result.messages.append(f"the state before this rollback is snapshot {before.id}")
        if plan.remove:
            try:
                ctx.backend.uninstall(plan.remove)
            except BackendError as err:
                result.messages.append(f"{err.message}\n{err.detail}".strip())
        index = build_stash_index([wanted, *_loadable_snapshots(ctx.store)])
        report = restore(
            list(plan.restore),
            index=index,
            store=ctx.store,
            interpreter=ctx.interpreter,
            backend=ctx.backend,
            offline=options.offline,
            displaced_dir=ctx.store.folder(before.id) / "displaced",
            preferred_snapshot=snapshot_id,
        )
        result.restore = report
        verification, _ = verify(
            wanted,
            ctx.interpreter,
            restored=[e.name for e in plan.restore],
            verified_inodes=report.verified_inodes,
        )
        result.verification = verification
        if not verification.ok:
            result.outcome = "incomplete"
            result.exit_code = EXIT_INCOMPLETE
            result.next_command = f"safe-uninstall --python {ctx.python} rollback {snapshot_id}"
            ctx.store.save(before.with_outcome("rollback-incomplete"))
            return result
        result.final_probes = run_all(settings, ctx.interpreter)
        if all(r.passed for r in result.final_probes):
            result.outcome = "rolled-back"
        else:
            result.outcome = "rolled-back-probe-fails"
            result.exit_code = EXIT_PROBE_FAILS_AFTER_ROLLBACK
        ctx.store.save(before.with_outcome(f"rolled-back-to-{snapshot_id}"))
        return result


# -- snapshot, snapshots, show, probe -------------------------------------------------------


def snapshot_now(target: TargetOptions, *, stash: bool) -> Snapshot:
    ctx = open_target(target)
    with ctx.store.locked(target.lock_timeout):
        installed = installed_distributions(ctx.interpreter)
        snap = take_snapshot(
            ctx,
            installed,
            operation="snapshot",
            command=target.command,
            stash=sorted(installed) if stash else (),
        )
        ctx.store.save(snap.with_outcome("taken"))
        return snap.with_outcome("taken")


@dataclass(frozen=True)
class SnapshotSummary:
    id: str
    created: str
    command: str
    operation: str
    removed: tuple[str, ...]
    outcome: str
    packages: int
    error: str | None = None


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


def describe_probe(probe: Probe) -> str:
    return f"{probe.label}  ({probe.origin})"
