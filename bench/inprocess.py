"""The tool's own functions called in this process, so that start-up and work can be told apart.

Every call into safeuninstall's internals is here, in one place: when the core's functions
change, this module is the one to follow them.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from safeuninstall.context.context import Context, open_context
from safeuninstall.environment.installed import installed_distributions
from safeuninstall.options import TargetOptions
from safeuninstall.plans.changes import build_stash_index
from safeuninstall.state.stash import (
    StashHasher,
    check_stash,
    read_verified,
    restore_files,
)
from safeuninstall.transaction.restore import RestoreJob, restore, verify
from safeuninstall.transaction.transaction import SnapshotSpec, take_snapshot

from .envs import Venv
from .measure import BenchError


def open_venv(venv: Venv) -> Context:
    """The tool's context for ``venv`` (asks its interpreter once, as every command does)."""
    return open_context(TargetOptions(python=str(venv.root), cwd=venv.root, environ={}))


@dataclass(frozen=True)
class SnapshotWork:
    read_seconds: float  # installed_distributions()
    write_seconds: float  # take_snapshot(), no stash: build the model, write the TOML
    distributions: int


def snapshot_work(ctx: Context) -> SnapshotWork:
    started = time.perf_counter()
    installed = installed_distributions(ctx.interpreter)
    read = time.perf_counter()
    take_snapshot(ctx, installed, ctx.store.new_folder(), SnapshotSpec(operation="snapshot"))
    written = time.perf_counter()
    return SnapshotWork(read - started, written - read, len(installed))


def snapshot_traced_peak(ctx: Context) -> int:
    """Peak bytes allocated by Python (tracemalloc) during one in-process snapshot."""
    tracemalloc.start()
    try:
        snapshot_work(ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


@dataclass(frozen=True)
class RestoreWork:
    restore_seconds: float  # restore.restore(): check each stash's sha256, link back
    verify_seconds: float  # restore.verify(): installed set, RECORD hashes not yet proven


def restore_from_stash(ctx: Context, snapshot_id: str, names: Sequence[str]) -> RestoreWork:
    """Bring ``names`` back from snapshot ``snapshot_id``'s stash as a failed removal does."""
    snap = ctx.store.load(snapshot_id)
    entries = [entry for name in names if (entry := snap.package(name)) is not None]
    index = build_stash_index([snap])
    started = time.perf_counter()
    job = RestoreJob(
        entries=entries,
        index=index,
        displaced_dir=ctx.store.folder(snap.id).displaced_dir,
        preferred_snapshot=snap.id,
        offline=True,
    )
    report = restore(ctx, job)
    restored = time.perf_counter()
    verification = verify(snap, ctx.interpreter, report)
    verified = time.perf_counter()
    if len(report.from_stash) != len(entries) or not verification.ok:
        raise BenchError(
            f"in-process restore did not restore {list(names)}: failed {report.failed}, "
            f"notes {report.notes}"
        )
    return RestoreWork(restored - started, verified - restored)


def link_back_only(ctx: Context, snapshot_id: str, names: Sequence[str]) -> float:
    """Seconds to link ``names`` back from the stash with stash.restore_files() alone: its
    check (against stash-verified.json, so no hashing if it is complete) is made before the
    clock starts, no verification after. What a restore costs without hashing."""
    snap = ctx.store.load(snapshot_id)
    stashes = [
        entry.stash
        for name in names
        if (entry := snap.package(name)) is not None and entry.stash is not None
    ]
    if len(stashes) != len(names):
        raise BenchError(f"snapshot {snapshot_id} has no stash of every one of {list(names)}")
    folder = ctx.store.folder(snap.id)
    verified = read_verified(folder)
    checks = [check_stash(stash, folder, verified) for stash in stashes]
    started = time.perf_counter()
    for stash, checked in zip(stashes, checks, strict=True):
        restore_files(
            stash,
            snapshot=folder,
            env_root=Path(ctx.interpreter.prefix),
            displaced_dir=folder.displaced_dir,
            checked=checked,
        )
    return time.perf_counter() - started


def prove_stash(ctx: Context, snapshot_id: str) -> int:
    """Hash snapshot ``snapshot_id``'s stash with the tool's StashHasher, as it does while the
    probes run, and wait for it: a complete stash-verified.json. Returns the files it lists."""
    snap = ctx.store.load(snapshot_id)
    stashes = [entry.stash for entry in snap.packages if entry.stash is not None]
    folder = ctx.store.folder(snapshot_id)
    with StashHasher(folder, stashes):
        pass
    proven = len(read_verified(folder))
    expected = sum(len(stash.files) for stash in stashes)
    if proven != expected:
        raise BenchError(f"the stash hasher proved {proven} of {expected} files")
    return proven


def forget_proof(ctx: Context, snapshot_id: str) -> bool:
    """Delete stash-verified.json, so that the next restore hashes every byte again.
    True when there was one (a hasher that finished before its process exited)."""
    path = ctx.store.folder(snapshot_id).verified_file
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed


def probe_argv(python: str, planned: dict[str, Any], workdir: Path) -> list[str]:
    """What the tool runs for one planned probe (``--json``'s ``probes.planned[i]``): the
    probe driver in the target interpreter, as probe._run_in starts it."""
    from safeuninstall.probe import runner as probe

    workdir.mkdir(parents=True, exist_ok=True)
    maps, results = str(workdir / "maps.txt"), str(workdir / "candidates.txt")
    if planned["kind"] == "python":
        return [python, "-c", probe._DRIVER, planned["code"], maps]
    if planned["kind"] == "derived":
        tries = [
            msgspec.convert(candidate, probe.Candidate).argument()
            for candidate in planned["candidates"]
        ]
        return [python, "-c", probe._CANDIDATES_DRIVER, maps, results, *tries]
    raise BenchError(f"a {planned['kind']} probe is not measured here")
