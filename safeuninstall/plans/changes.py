"""Pure planning: what to remove, what to restore and from where. No I/O here.

The apply steps (stash, uninstall, restore) take these plans as they are; everything that decides
is in this module and unit-tested without an environment.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from msgspec import Struct

from safeuninstall.base.errors import InvalidInput
from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.environment.legacy import DIST_INFO
from safeuninstall.environment.requirements import Wanted, local_path, satisfies
from safeuninstall.environment.source import Source
from safeuninstall.state.holdings import Holdings
from safeuninstall.state.snapshot import PackageEntry, Snapshot


class RemovalPlan(Struct, frozen=True):
    """What was asked for, split into the installed distributions to remove and the rest."""

    remove: tuple[str, ...]  # canonical names, installed
    absent: tuple[str, ...]  # asked for but not installed: reported and skipped, like uv
    notes: tuple[str, ...] = ()  # a version that does not match, a name that may be a typo
    empty_record: tuple[str, ...] = ()  # installed, but a RECORD of no file: uv removes nothing
    # each pattern as given, and the installed names it matched (listed before any change)
    expanded: tuple[tuple[str, tuple[str, ...]], ...] = ()


# What a pattern never matches: the tool and its installer. Named, they are removed as asked.
NEVER_MATCHED = ("safe-uninstall", "uv")


def plan_removal(
    wanted: Sequence[Wanted],
    installed: Mapping[str, InstalledDistribution],
    *,
    commands: Sequence[str] = (),
) -> RemovalPlan:
    """What uv would remove: every installed distribution of a named requirement, whatever its
    version, and the one installed from an unnamed requirement's location (direct_url.json).
    ``commands``: the tool's subcommands, named in a note when an absent name is one edit from
    one (``rollbak``)."""
    by_location = _by_location(installed)
    remove: dict[str, None] = {}
    absent: dict[str, None] = {}
    notes: list[str] = []
    expanded: list[tuple[str, tuple[str, ...]]] = []
    for item in wanted:
        if item.pattern is not None and item.origin and not _matches_any(item.pattern, installed):
            # A pattern in a requirements file that matches nothing is nothing to do, as a
            # name that is not installed is (a cleanup file run where there is nothing to
            # clean); on the command line it stays an error.
            absent.setdefault(item.text, None)
            notes.append(f"{item.origin}: the pattern {item.text!r} matches nothing installed")
            continue
        if item.pattern is not None:
            matched = expand_pattern(item.text, item.pattern, installed)
            expanded.append((item.text, matched))
            left_out = [n for n in NEVER_MATCHED if fnmatch.fnmatchcase(n, item.pattern)]
            notes += [
                f"{item.text!r} leaves out {name} (a pattern never matches it: name it to "
                "remove it)"
                for name in left_out
                if name in installed
            ]
            remove.update(dict.fromkeys(matched))
            continue
        name = item.name if item.name is not None else by_location.get(item.location or "")
        if name is None or name not in installed:
            shown = item.name or item.text
            absent.setdefault(shown, None)
            hint = _did_you_mean(shown, installed, commands) if item.name else None
            if hint:
                notes.append(f"{shown} is not installed: did you mean {hint}?")
            continue
        remove.setdefault(name, None)
        version = installed[name].version
        if item.specifier and not satisfies(item.specifier, version):
            notes.append(
                f"{item.text}: {name} {version} is installed, and is removed all the same "
                "(uv and pip remove by name, whatever the version)"
            )
    return RemovalPlan(
        remove=tuple(remove), absent=tuple(absent), notes=tuple(notes), expanded=tuple(expanded)
    )


def expand_pattern(text: str, pattern: str, installed: Iterable[str]) -> tuple[str, ...]:
    """The installed names ``pattern`` (requirements.pattern_key form) matches, sorted; none is
    an error that names the nearest installed names. Never the tool itself, nor uv."""
    names = sorted(installed)
    matched = tuple(n for n in names if fnmatch.fnmatchcase(n, pattern) and n not in NEVER_MATCHED)
    if matched:
        return matched

    literal = re.sub(r"\[[^\]]*\]|[*?]", "", pattern).strip("-")
    close = difflib.get_close_matches(literal, names, n=3, cutoff=0.6)
    close += [n for n in names if literal and literal in n and n not in close][: 3 - len(close)]
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    only = [n for n in NEVER_MATCHED if n in names and fnmatch.fnmatchcase(n, pattern)]
    if only:
        hint += f"; a pattern never matches {', '.join(only)}: name it to remove it"
    raise InvalidInput(f"the pattern {text!r} matches no installed distribution{hint}")


def _matches_any(pattern: str, installed: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(n, pattern) and n not in NEVER_MATCHED for n in installed)


def _by_location(installed: Mapping[str, InstalledDistribution]) -> dict[str, str]:
    """Where each distribution installed from a path or a URL came from (direct_url.json): a
    local path (normalised) or the URL, as an unnamed requirement gives it."""

    found: dict[str, str] = {}
    for name, dist in installed.items():
        source = dist.source
        if source.kind == "index" or not source.url:
            continue
        path = local_path(source.url)
        if path is not None:
            found.setdefault(path, name)
            continue
        found.setdefault(source.url, name)
        if source.vcs:
            found.setdefault(f"{source.vcs}+{source.url}", name)
    return found


def _did_you_mean(name: str, installed: Iterable[str], commands: Sequence[str]) -> str | None:
    """An installed name close to ``name``, or a subcommand one edit away (a typo)."""

    for command in commands:
        if one_edit(name, command):
            return f"the command `safe-uninstall {command}`"
    # The same name with its CUDA suffix dropped, added or changed is closer than an edit
    # inside the name: nvidia-cusparse-cu13 is nvidia-cusparse, not nvidia-cusparselt-cu13.
    stem = build_stem(name)
    same = [n for n in installed if n != name and build_stem(n) == stem]
    if same:
        # A suffix changed before one dropped: cupy-cuda11x is cupy-cuda12x rather than cupy.
        suffixed = bool(_CUDA_SUFFIX.search(name))
        same.sort(key=lambda n: (bool(_CUDA_SUFFIX.search(n)) != suffixed, n))
        return f"{same[0]} (installed)"
    close = difflib.get_close_matches(name, list(installed), n=1, cutoff=0.75)
    return f"{close[0]} (installed)" if close else None


# The suffix of a CUDA build's wheel name: nvidia-cudnn-cu12, cupy-cuda12x, jax-cuda12-plugin.
_CUDA_SUFFIX = re.compile(r"-cu(?:da)?1[0-9]x?$")


def build_stem(name: str) -> str:
    """The name without its CUDA suffix: two builds of one library (nvidia-nccl-cu12 and
    nvidia-nccl-cu13) have the same stem."""
    return _CUDA_SUFFIX.sub("", name)


def one_edit(a: str, b: str) -> bool:
    """Whether ``a`` becomes ``b`` by one insertion, deletion, substitution or swap of two
    neighbours (and is not ``b``)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(diff) == 1:
            return True
        i = diff[0]
        return len(diff) == 2 and diff[1] == i + 1 and a[i] == b[i + 1] and a[i + 1] == b[i]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((i for i, (x, y) in enumerate(zip(short, long, strict=False)) if x != y), len(short))
    return short[i:] == long[i + 1 :]


class StashCandidate(Struct, frozen=True):
    """A stash of name==version held by some snapshot."""

    snapshot_id: str
    entry: PackageEntry


# (name, version, source): a stash restores exactly that build, nothing that merely shares
# its version number (a +cu128 wheel and a local build can both be "2.11.0").
StashKey = tuple[str, str, Source]
StashIndex = Mapping[StashKey, Sequence[StashCandidate]]


def stash_key(entry: PackageEntry) -> StashKey:
    return (entry.name, entry.version, entry.source)


def build_stash_index(
    snapshots: Iterable[Snapshot], *, of_this_environment: Callable[[str], bool] | None = None
) -> dict[StashKey, list[StashCandidate]]:
    """Every complete stash by (name, version, source); snapshots given newest first keep that
    order. With ``of_this_environment`` (a test of a snapshot's prefix), only snapshots taken of
    that environment count: files stashed from another venv (a shared --state-dir) have other
    paths and another interpreter."""
    index: dict[StashKey, list[StashCandidate]] = {}
    seen: set[str] = set()
    for snap in snapshots:
        if snap.id in seen:
            continue
        if of_this_environment is not None and not of_this_environment(snap.target.prefix):
            continue
        seen.add(snap.id)
        for entry in snap.packages:
            if entry.stash is not None and entry.stash.complete:
                index.setdefault(stash_key(entry), []).append(StashCandidate(snap.id, entry))
    return index


class RestorePlan(Struct, frozen=True):
    """How to bring back each missing distribution: from which stashes, else reinstalled."""

    # (entry to bring back, stashes that hold it in the order to try them)
    from_stash: tuple[tuple[PackageEntry, tuple[StashCandidate, ...]], ...]
    reinstall: tuple[PackageEntry, ...]  # no stash holds them: one pinned install


def plan_restore(
    entries: Sequence[PackageEntry], index: StashIndex, *, preferred_snapshot: str | None = None
) -> RestorePlan:
    """Stash first (the given snapshot's own stash before others), pinned reinstall for the rest."""
    from_stash = []
    reinstall = []
    for entry in entries:
        candidates = list(index.get(stash_key(entry), ()))
        candidates.sort(key=lambda c: c.snapshot_id != preferred_snapshot)  # stable: keeps order
        if candidates:
            from_stash.append((entry, tuple(candidates)))
        else:
            reinstall.append(entry)
    return RestorePlan(from_stash=tuple(from_stash), reinstall=tuple(reinstall))


class Installed(Struct, frozen=True):
    """What the rollback planner needs to know of one installed distribution."""

    name: str
    version: str
    source: Source
    intact: bool = True  # every file its RECORD lists is on disk
    layout: str = DIST_INFO


class RollbackPlan(Struct, frozen=True):
    """What a rollback removes and brings back to match a snapshot."""

    remove: tuple[str, ...]  # added since the snapshot, or changed: stashed, then uninstalled
    restore: tuple[PackageEntry, ...]  # missing or changed: brought back as the snapshot has them
    added: tuple[str, ...]
    changed: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.remove and not self.restore


def _same_build(entry: PackageEntry, current: Installed) -> bool:
    return (
        entry.version == current.version
        and entry.source == current.source
        and entry.layout == current.layout
    )


def _same_install(entry: PackageEntry, current: Installed) -> bool:
    """A hollow install (files gone behind its metadata) counts as changed: it is replaced."""
    return _same_build(entry, current) and current.intact


def plan_rollback(target: Snapshot, installed: Mapping[str, Installed]) -> RollbackPlan:
    """A changed distribution is removed and brought back; a legacy install that is the
    snapshot's but lost files (its removal killed half way) is only brought back, its stash
    linked over what is left: uv may stop on a half-removed one, and has nothing to add."""
    wanted = {entry.name: entry for entry in target.packages}
    added = sorted(set(installed) - set(wanted))
    missing = sorted(set(wanted) - set(installed))
    changed = sorted(
        name
        for name in set(wanted) & set(installed)
        if not _same_install(wanted[name], installed[name])
    )
    repaired = {
        name
        for name in changed
        if installed[name].layout != DIST_INFO and _same_build(wanted[name], installed[name])
    }
    return RollbackPlan(
        remove=tuple(sorted([*added, *(name for name in changed if name not in repaired)])),
        restore=tuple(wanted[name] for name in sorted([*missing, *changed])),
        added=tuple(added),
        changed=tuple(changed),
        missing=tuple(missing),
    )


class Skipped(Struct, frozen=True):
    """A snapshot a plain rollback passed over, and why."""

    snapshot: str
    reason: str


class SnapshotChoice(Struct, frozen=True):
    """Which snapshot a plain ``rollback`` returns to, why, and the newer ones it passed over."""

    snapshot: str | None  # None: nothing to return to (see ``blocked``)
    reason: str
    skipped: tuple[Skipped, ...] = ()
    # The walk met a snapshot it cannot see past (unreadable, or a rollback whose target is
    # gone): no choice is safe, the user names the snapshot.
    blocked: bool = False


RETURNING = ("rollback", "recover")  # operations that return to a snapshot


def returned_to(snap: Snapshot) -> str | None:
    """The snapshot a rollback or recover returned to: recorded in the snapshot, else (one taken
    before the field existed) in its outcome note ``rollback-to-0007``."""
    if snap.operation not in RETURNING:
        return None
    return snap.returns_to or snap.note.returned_to


def undone(snap: Snapshot) -> bool:
    """The operation's change was put back: by itself (``probe-failed-restored``,
    ``rollback-probe-failed-restored``...) or by a recover that returned to it."""
    return snap.note.undone


def _change_of(snap: Snapshot) -> str:
    if snap.operation == "uninstall" and snap.removed:
        return f"the removal of {', '.join(snap.removed)} ({snap.outcome})"
    if snap.operation == "snapshot":
        return "what changed since this snapshot, taken on request"
    if snap.operation == "run" and "--" in snap.command:
        guarded = snap.command[snap.command.index("--") + 1 :]
        return f"the command run under guard, {' '.join(guarded)} ({snap.outcome})"
    return f"the {snap.operation} ({snap.outcome})"


def choose_snapshot(
    history: Iterable[tuple[str, Snapshot | str]],
    matches: Callable[[Snapshot], bool],
    find: Callable[[str], Snapshot | None],
) -> SnapshotChoice:
    """The snapshot a plain ``rollback`` returns to: the state before the latest change that is
    still in effect. ``history``: this environment's snapshots newest first, each a snapshot or
    why it cannot be read (read only as far as needed); ``matches(snap)``: the environment
    equals that snapshot now; ``find(id)``: this environment's snapshot of that id, if readable.

    Newest first, a snapshot is passed over when
    - a rollback or recover took it: returning there would redo what that rollback undid
      (_past_return);
    - its operation was undone: a removal whose probe failed and that was restored
      (``*-restored``), one a recover returned to (``recovered``), a rollback undone;
    - the environment already matches it: its change is no longer in effect.
    The first snapshot not passed over is chosen. An unreadable snapshot, or a rollback whose
    target is unknown or gone, stops the walk: nothing is chosen past what cannot be read.
    """
    skipped: list[Skipped] = []
    undone_after: int | None = None  # the target of a rollback whose state is still there
    undone_by = ""
    for snapshot_id, snap in history:
        if isinstance(snap, str):
            return SnapshotChoice(None, snap, tuple(skipped), blocked=True)
        op = snap.operation
        if undone_after is not None and int(snapshot_id) > undone_after:
            skipped.append(Skipped(snapshot_id, f"undone by {undone_by}"))
        elif undone(snap):
            skipped.append(Skipped(snapshot_id, f"its {op} was undone ({snap.outcome})"))
        elif op in RETURNING:
            choice = _past_return(snapshot_id, snap, matches, find, skipped)
            if isinstance(choice, SnapshotChoice):
                return choice
            undone_after, undone_by = int(choice), f"{op} {snapshot_id}"
        elif matches(snap):
            why = (
                f"{undone_by} returned to it"
                if undone_after is not None and int(snapshot_id) == undone_after
                else "the environment already matches it"
            )
            skipped.append(Skipped(snapshot_id, why))
        else:
            return SnapshotChoice(
                snapshot_id, f"the state before {_change_of(snap)}, still in effect", tuple(skipped)
            )
    return SnapshotChoice(
        None,
        "no change made since a snapshot of this environment is still in effect",
        tuple(skipped),
    )


def _past_return(
    snapshot_id: str,
    snap: Snapshot,
    matches: Callable[[Snapshot], bool],
    find: Callable[[str], Snapshot | None],
    skipped: list[Skipped],
) -> SnapshotChoice | str:
    """A snapshot a rollback or recover took, passed over (added to ``skipped``). When the
    rollback ran to the end, the environment it left is its target's: if the environment
    differs from that target now (changed since, outside the tool), the target is the state
    before that change, and is chosen; else the rollback is the latest change, and its target
    is returned: the snapshots it undid (newer than its target) are passed over too. A target
    unknown or gone stops the walk (a choice that is ``blocked``)."""
    op, target = snap.operation, returned_to(snap)
    if target is None:
        reason = f"{op} {snapshot_id} does not say which snapshot it returned to"
        return SnapshotChoice(None, reason, tuple(skipped), blocked=True)
    back = find(target)
    if back is None:
        reason = (
            f"{op} {snapshot_id} returned to snapshot {target}, which is gone or cannot be read"
        )
        return SnapshotChoice(None, reason, tuple(skipped), blocked=True)
    if not matches(back):
        skipped.append(Skipped(snapshot_id, f"taken by a {op} (to {target})"))
        return SnapshotChoice(
            target,
            f"the state {op} {snapshot_id} returned to; the environment changed since",
            tuple(skipped),
        )
    skipped.append(Skipped(snapshot_id, f"taken by a {op} (to {target}), the latest change"))
    return target


class SetDifference(Struct, frozen=True):
    """How an environment's name==version set differs from a snapshot's."""

    missing: tuple[str, ...]  # pins the snapshot has and the environment lacks
    unexpected: tuple[str, ...]  # pins the environment has and the snapshot lacks

    @property
    def equal(self) -> bool:
        return not self.missing and not self.unexpected


def compare_sets(expected: Mapping[str, str], actual: Mapping[str, str]) -> SetDifference:
    """Compare {name: version} maps; differences are given as name==version pins."""
    want = {f"{n}=={v}" for n, v in expected.items()}
    have = {f"{n}=={v}" for n, v in actual.items()}
    return SetDifference(missing=tuple(sorted(want - have)), unexpected=tuple(sorted(have - want)))


def plan_prune(
    ids: Sequence[str],
    holdings: Holdings,
    protected: Iterable[str],
    *,
    keep: int | None,
    max_size: int | None,
    count_protected: bool = True,
    only_copies: Iterable[str] = (),
) -> list[str]:
    """Snapshots to delete, oldest first: beyond the newest ``keep``, then oldest first until
    the rest hold at most ``max_size`` (the protected ones counted in that rest, unless not
    ``count_protected``). Protected ones (the latest, the journal's) always stay. So do
    ``only_copies`` (stashes that alone hold a distribution no longer installed): not counted
    among the newest ``keep``, counted against ``max_size``, which they may keep out of reach."""
    always = set(protected)
    copies = set(only_copies) - always  # a protected one counts among the newest as before
    safe = always | copies
    doomed: list[str] = []
    if keep is not None:
        ranked = [i for i in ids if i not in copies]
        doomed = [i for i in ranked[: max(len(ranked) - keep, 0)] if i not in safe]
    if max_size is not None:
        counted = ids if count_protected else [i for i in ids if i not in always]
        for snapshot_id in ids:
            if holdings.held(i for i in counted if i not in doomed) <= max_size:
                break
            if snapshot_id not in safe and snapshot_id not in doomed:
                doomed.append(snapshot_id)
    return sorted(doomed, key=ids.index)
