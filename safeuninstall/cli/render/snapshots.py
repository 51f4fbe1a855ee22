"""The snapshots as text: ``snapshots`` (a table), ``show``, ``prune``, and what the retention
policy dropped or kept, which ``snapshot`` and every change-making operation say too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from safeuninstall.environment.sizes import count_text, size_text

if TYPE_CHECKING:
    from safeuninstall.operations.results import (
        PruneResult,
        ShownSnapshot,
        SnapshotList,
        SnapshotSummary,
    )
    from safeuninstall.state.snapshot import Snapshot
    from safeuninstall.transaction.retention import Kept


def snapshots_table(listed: SnapshotList, *, quiet: bool = False, width: int = 0) -> str:
    """One row per snapshot, its columns apart by two spaces at least. ``width``: the
    terminal's (0: unknown), which the rows fit, the removed list and the command cut."""
    summaries = listed.snapshots
    if quiet:
        return "\n".join(s.id for s in summaries)
    if not summaries:
        return listed.none_because or "no snapshots"
    header = ("id", "created", "outcome", "kept", "removed", "command")
    rows = {s.id: _snapshot_row(s) for s in summaries if not s.error}
    cells = [header, *rows.values()]
    widths = [max(len(row[i]) for row in cells) for i in range(4)]
    removed, command = _last_columns([row[4:] for row in cells], widths, width)

    def line(row: tuple[str, ...]) -> str:
        first = "  ".join(f"{cell:<{w}}" for cell, w in zip(row[:3], widths, strict=False))
        text = f"{first}  {row[3]:>{widths[3]}}  {_cut(row[4], command and removed):<{removed}}"
        return f"{text}  {_cut(row[5], command)}".rstrip()

    lines = [line(header)]
    for s in summaries:
        error = f"{s.id}  unreadable: {s.error}"
        lines.append(line(rows[s.id]) if s.id in rows else _cut(error, width - 1))
    lines.append(
        f"the stashes keep {size_text(listed.total_bytes)} on disk in all (kept: what a "
        f"snapshot's stash alone holds); `{listed.command} prune --keep N` frees it"
    )
    return "\n".join(lines)


def _snapshot_row(s: SnapshotSummary) -> tuple[str, ...]:
    kept = "pruned" if s.stash_pruned else size_text(s.stash_bytes)
    return (s.id, s.created[:19], s.outcome, kept, ", ".join(s.removed) or "-", s.command)


def _last_columns(cells: list[tuple[str, ...]], widths: list[int], width: int) -> tuple[int, int]:
    """The widths of the removed and command columns: in a terminal ``width`` wide, what is
    left after the others, the removed list taking no more than it needs and at most half
    when the command needs more; else (command 0) nothing is cut, each column as wide as
    its longest cell."""
    removed_needs = max(len(c[0]) for c in cells)
    command_needs = max(len(c[1]) for c in cells)
    if width <= 0:
        return removed_needs, 0
    room = width - 1 - sum(widths) - 2 * 5
    if room < 20:  # too narrow to cut to anything readable
        return removed_needs, 0
    removed = min(removed_needs, max(room - command_needs, room // 2))
    return removed, room - removed


def _cut(text: str, width: int) -> str:
    """``text`` in ``width`` columns at most (0: as it is), cut with "..."."""
    if width <= 0 or len(text) <= width:
        return text
    return text[: max(width - 3, 0)] + "..."


def shown_snapshot(shown: ShownSnapshot, *, quiet: bool = False) -> str:
    """``show``: the snapshot, then what its stash keeps on disk."""
    text = _snapshot_details(shown.snapshot, quiet=quiet)
    if quiet:
        return text
    held = f"on disk: {size_text(shown.stash_bytes)} that nothing else links"
    if shown.stash_pruned:
        return (
            f"{text}\n{held}\nstash: dropped, {shown.stash_pruned}; a rollback to it "
            "reinstalls from the index"
        )
    return f"{text}\n{held}"


def _snapshot_details(snap: Snapshot, *, quiet: bool = False) -> str:
    headline = f"snapshot {snap.id} ({snap.operation}, {snap.outcome})"
    if quiet:
        return headline
    lines = [
        headline,
        f"created: {snap.created}",
        f"python: {snap.target.python} ({snap.target.version})",
        f"command: {' '.join(snap.command)}",
    ]
    if snap.removed:
        lines.append(f"removed: {', '.join(snap.removed)}")
    lines.append(f"packages: {len(snap.packages)}")
    for entry in snap.packages:
        extra = []
        if entry.legacy:
            extra.append(f"legacy {entry.layout}")
        if entry.source.kind != "index":
            extra.append(f"{entry.source.kind} {entry.source.url or ''}".strip())
        if entry.stash is not None:
            state = "stashed" if entry.stash.complete else "partly stashed"
            extra.append(f"{state}, {count_text(len(entry.stash.files), 'file')}")
        suffix = f"  [{'; '.join(extra)}]" if extra else ""
        lines.append(f"  {entry.pin}{suffix}")
    return "\n".join(lines)


def prune_summary(result: PruneResult, *, quiet: bool = False) -> str:
    verb = "would delete" if result.dry_run else "deleted"
    lines = [] if quiet else _prune_lines(result, verb)
    lines.append(
        f"{verb} {count_text(len(result.removed), 'snapshot')}, {size_text(result.freed)} freed; "
        f"{len(result.kept)} kept (never deleted: {', '.join(result.protected) or '-'})"
    )
    return "\n".join(lines)


def _prune_lines(result: PruneResult, verb: str) -> list[str]:
    """Each snapshot deleted, and each kept (or deleted on request) for its only copies."""
    lines = [f"{verb} snapshot {i} ({size_text(b)})" for i, b in result.removed]
    removed = {i for i, _ in result.removed}
    for snapshot_id, pins in result.only_copies:
        if snapshot_id in removed:
            lines.append(
                f"{verb} the only copy of {', '.join(pins)} with snapshot {snapshot_id} "
                "(--drop-only-copies): a rollback needs the index for it now"
            )
        else:
            lines.append(
                f"kept snapshot {snapshot_id}: its stash holds the only copy of "
                f"{', '.join(pins)}, removed and not reinstalled (--drop-only-copies deletes it)"
            )
    if result.over_max_size:
        kept = [i for i, _ in result.only_copies if i not in removed]
        why = f"those never deleted, and {', '.join(kept)} for their only copies"
        lines.append(
            f"the snapshots kept hold {size_text(result.over_max_size)} over --max-size: "
            + (why if kept else "those never deleted")
        )
    return lines


def policy_lines(kept: Kept | None) -> list[str]:
    """What the retention policy dropped, and what it kept beyond its bounds and why."""
    if kept is None:
        return []
    lines = [
        f"stash of snapshot {snapshot_id} dropped by the retention policy ({kept.policy}), "
        f"{size_text(size)} freed; its snapshot stays (a rollback to it reinstalls from the "
        "index)"
        for snapshot_id, size in kept.pruned
    ]
    lines += [
        f"stash of snapshot {copy.snapshot} kept: it holds the only copy of "
        f"{', '.join(copy.pins)}, removed and not reinstalled (the retention policy never "
        f"drops it; `{kept.command} prune --drop-only-copies` can)"
        for copy in kept.protected
        if copy.beyond_policy
    ]
    if kept.over_max_size and kept.max_size is not None:
        held = ", ".join(f"{c.snapshot} ({', '.join(c.pins)})" for c in kept.protected)
        lines.append(
            f"the retention policy cannot get under max-size {size_text(kept.max_size)} "
            f"({size_text(kept.over_max_size)} over): the stashes of {held} hold the only "
            "copies of removals still in effect"
        )
    return lines


def kept_lines(kept: Kept | None) -> list[str]:
    """What the snapshots keep on disk after an operation, and what the policy dropped."""
    if kept is None:
        return []
    lines = policy_lines(kept)
    if kept.snapshot_bytes:
        lines.append(
            f"kept for rollback: {size_text(kept.snapshot_bytes)} (all snapshots: "
            f"{size_text(kept.total_bytes)}); `{kept.command} prune --keep N` frees it"
        )
    return lines
