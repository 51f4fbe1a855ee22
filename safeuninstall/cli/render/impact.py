"""What a removal breaks or changes, as lines: libraries that break or drift, requirements,
metadata, files shared with what stays."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from safeuninstall.libraries.index import LibraryChange
    from safeuninstall.reports.impact import ImpactReport, SharedFile


_SHARED_EXAMPLES = 3  # paths shown per pair of distributions that share files, without -v


def impact_lines(report: ImpactReport, *, verbose: bool = False) -> list[str]:
    """Libraries that break or drift first (the breakage a removal must not hide), then
    metadata, then shared files: one line per pair of distributions (a count and a few paths;
    every path with ``verbose``)."""
    changes = sorted(report.library_changes, key=lambda c: c.after is not None)
    lines = [_change_line(c) for c in changes]
    if report.dependents:
        lines.append(f"depend on it (Requires-Dist): {', '.join(report.dependents)}")
    lines += [f"unmet requirement: {unmet.describe()}" for unmet in report.unmet]
    for dep in report.optional_dependents:
        lines.append(f"optional dependent: {dep.dependent} needs {dep.required} for [{dep.extra}]")
    lines += _shared_lines(report.shared_files, verbose=verbose)
    for meta in report.metadata_only:
        source = ", ".join(meta.provided_by) or "nowhere that could be found"
        lines.append(
            f"metadata-only: {meta.name} has no files besides its metadata; "
            f"what it stands for comes from: {source}"
        )
    for unreadable in report.unreadable_records:
        consequence = (
            "its files cannot be kept, so removing it is refused"
            if unreadable.removed
            else f"which files {unreadable.name} shares with the removal is unknown"
        )
        lines.append(f"RECORD unreadable: {unreadable.reason}: {consequence}")
    if not lines:
        lines.append("impact: nothing installed depends on it, by metadata or by library")
    return lines


def _change_line(change: LibraryChange) -> str:
    consumer = f"{change.consumer} ({change.consumer_dist or 'no distribution'})"
    before = f"{change.before} ({change.before_dist or 'no distribution'})"
    if change.after is None:
        return f"BREAKS: {consumer} needs {change.soname}, now {before}, afterwards nothing"
    after = f"{change.after} ({change.after_dist or 'owned by no distribution'})"
    return f"DRIFTS: {consumer} needs {change.soname}, now {before}, afterwards {after}"


def _shared_lines(shared: Sequence[SharedFile], *, verbose: bool) -> list[str]:
    """A line per file with ``verbose`` or where a pair shares one; else a line per pair."""
    by_pair: dict[tuple[str, str], list[str]] = {}
    for item in shared:
        by_pair.setdefault((item.removed_dist, item.other), []).append(item.path)
    lines = []
    for (removed, other), paths in by_pair.items():
        if verbose or len(paths) == 1:
            lines += [
                f"shared file: {path} is also listed by {other}, which removing {removed} "
                "leaves hollow"
                for path in paths
            ]
            continue
        # Shared libraries first: what a loader may miss, the rest are headers, licences...
        examples = sorted(paths, key=lambda path: ".so" not in os.path.basename(path))
        under = os.path.commonpath(paths)
        shown = ", ".join(os.path.relpath(path, under) for path in examples[:_SHARED_EXAMPLES])
        more = f", ... ({len(paths) - _SHARED_EXAMPLES} more, -v lists them)"
        lines.append(
            f"shared files: {len(paths)} that {removed} lists are also listed by {other}, "
            f"which removing {removed} leaves hollow; under {under}/: {shown}"
            + (more if len(paths) > _SHARED_EXAMPLES else "")
        )
    return lines
