"""``diff``: what changed between two snapshots, or between a snapshot and the environment now;
either side may also be a file that describes another environment (state/described.py): a
snapshot.toml from elsewhere, a pylock.toml, a pinned requirements file. A file gives versions,
not files: with one on a side, distributions of the same version count as unchanged and are
listed as not compared.

A snapshot's files are known from its stash (each file's sha256 as kept); the environment's
now from the installed RECORDs (the hashes each install wrote down), so nothing is hashed here.
Bytecode and the metadata folder (RECORD, INSTALLER, REQUESTED, direct_url.json, an installer's
own notes) are left out: they differ whenever anything is recompiled or installed again from
elsewhere, and the version already says what the metadata would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path

from safeuninstall.context.analysis import installed_sides
from safeuninstall.context.context import Context
from safeuninstall.environment.installed import Source, installed_distributions
from safeuninstall.operations.results import DiffResult, SideKind
from safeuninstall.plans.diff import Side, compare, snapshot_sides
from safeuninstall.state import described

NOW = "now"


def diff(target: Callable[[], Context], first: str | None, second: str | None) -> DiffResult:
    """No reference: the latest snapshot against now; one: that snapshot against now; two:
    the first against the second (either may be ``now``). A reference that is not a snapshot
    number, ``latest`` or ``now`` is a file's path. ``target`` opens the environment, when a
    side needs it: two files compare without one."""
    before_ref = first if first is not None else "latest"
    after_ref = second if second is not None else NOW
    files = {
        ref: described.read(Path(ref))
        for ref in (before_ref, after_ref)
        if described.is_file_reference(ref)
    }
    context = functools.cache(target)
    # A file's markers are evaluated for the environment compared with it, if there is one.
    markers = context().interpreter.markers if len(files) < 2 else None
    # What is installed tells which distributions a file's unnamed editable lines are.
    installed = _sources(context()) if files and markers is not None else None
    before_label, before_kind, before, said = _side(context, before_ref, files, markers, installed)
    after_label, after_kind, after, said_after = _side(
        context, after_ref, files, markers, installed
    )
    set_aside = said + said_after
    return DiffResult(
        before_label,
        after_label,
        compare(before, after),
        before_kind=before_kind,
        after_kind=after_kind,
        set_aside=set_aside,
    )


def _sources(ctx: Context) -> dict[str, Source]:
    return {name: dist.source for name, dist in installed_distributions(ctx.interpreter).items()}


def _side(
    context: Callable[[], Context],
    reference: str,
    files: dict[str, described.DescribedState],
    markers: Mapping[str, str] | None,
    installed: Mapping[str, Source] | None,
) -> tuple[str, SideKind, dict[str, Side], tuple[str, ...]]:
    """A side's label, kind and distributions; for a file, what of it is not compared."""
    if reference in files:
        state = files[reference]
        chosen = state.select(markers, installed)
        unversioned = state.unversioned(chosen, "not compared", here=installed is not None)
        said = (*state.set_aside, *unversioned)
        return state.path, "file", {name: Side(p.version) for name, p in chosen.items()}, said
    if reference == NOW:
        return NOW, "now", installed_sides(context()), ()
    snap = context().store.resolve(reference)
    return snap.id, "snapshot", snapshot_sides(snap), ()
