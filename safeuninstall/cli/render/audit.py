"""``audit``: the whole environment, a line per distribution, largest first, then what several
share, what no distribution lists, what the stashes hold and the orphans."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from safeuninstall.environment.sizes import count_text, size_text

if TYPE_CHECKING:
    from safeuninstall.reports.audit import AuditReport, DistributionAudit, DuplicateLibrary


def audit_report(found: AuditReport, *, quiet: bool = False, verbose: bool = False) -> str:
    """A line per distribution, largest first; then the sonames several distributions provide,
    the files no distribution lists, the stashes, the orphans. -q: the summary and orphans."""
    dists = found.distributions
    lines = [
        f"audit of {found.environment or found.python}: {count_text(len(dists), 'distribution')}, "
        f"{size_text(found.total_bytes)} "
        f"({size_text(found.owned_bytes)} their own, {size_text(found.shared_bytes)} shared "
        f"by several, {size_text(found.unowned_bytes)} listed by none)"
    ]
    if not quiet:
        base = found.site_dirs[0] if found.site_dirs else ""
        lines += _distribution_table(dists, base, verbose)
        lines += _duplicate_lines(found.duplicates, base)
        lines += _unlisted_and_stashed(found, base)
        for run in found.probe or ():
            mapped = (
                f"the process mapped {count_text(len(run.libraries), 'shared object')}"
                if run.libraries is not None
                else "what it mapped is unknown"
            )
            lines.append(f"--load: {run.probe.label}: {run.summary()}; {mapped}")
        lines += [f"note: {note}" for note in found.notes]
    orphans = found.orphans
    if orphans:
        lines.append(
            f"orphans (not requested, nothing requires them, nothing loads them): "
            f"{', '.join(orphans)}"
        )
    else:
        lines.append("orphans: none")
    if found.top_level:
        lines.append(
            "top level (nothing requires them, nothing loads them; uv records no request, so "
            f"each is one you installed or a leftover): {', '.join(found.top_level)}"
        )
    return "\n".join(lines)


def _distribution_table(dists: Sequence[DistributionAudit], base: str, verbose: bool) -> list[str]:
    """Each distribution's own size and what is said of it; then how much of that removing
    them would not free."""
    lines = []
    width = max((len(size_text(d.bytes)) for d in dists), default=0)
    for dist in dists:
        lines.append(f"  {size_text(dist.bytes):>{width}}  {_dist_head(dist)}")
        lines += [f"  {'':>{width}}    {text}" for text in _dist_lines(dist, base, verbose)]
    elsewhere = sum(d.linked_elsewhere_bytes for d in dists)
    if elsewhere:
        lines.append(
            f"{size_text(elsewhere)} of the distributions' own files are also linked from "
            "outside the environment (a uv cache, a snapshot's stash): removing them does "
            "not free that much"
        )
    return lines


def _unlisted_and_stashed(found: AuditReport, base: str) -> list[str]:
    """The bytes no distribution's own: the files no RECORD lists, what the stashes hold."""
    lines = []
    if found.unowned_files:
        groups = ", ".join(
            f"{_short_path(u.path, base)} {size_text(u.bytes)}" for u in found.unowned
        )
        lines.append(
            f"files no distribution lists: {size_text(found.unowned_bytes)} in "
            f"{count_text(found.unowned_files, 'file')} (largest: {groups})"
        )
    if found.stashes:
        each = ", ".join(f"{s.snapshot}: {size_text(s.bytes)}" for s in found.stashes[:5])
        lines.append(
            f"snapshots hold {size_text(found.stash_bytes)} the environment does not, "
            f"their stashes and their own files ({each}{', ...' if len(found.stashes) > 5 else ''})"
        )
    else:
        lines.append("snapshots hold nothing (no snapshot of this environment)")
    return lines


def _dist_head(dist: DistributionAudit) -> str:
    """``name version  requested``, and what stands out: orphan, metadata only. Where its
    REQUESTED file says nothing (uv's), neither "requested" nor "pulled in" is said."""
    marks = []
    if dist.requested_known:
        marks.append("requested" if dist.requested else "pulled in")
    if dist.orphan:
        marks.append("ORPHAN (not requested, nothing requires it, nothing loads it)")
    if dist.top_level:
        marks.append("top level (nothing requires it, nothing loads it)")
    if dist.metadata_only:
        marks.append("metadata only (no file outside its own metadata folder)")
    return "  ".join([f"{dist.name} {dist.version}", *([", ".join(marks)] if marks else [])])


def _dist_lines(dist: DistributionAudit, base: str, verbose: bool) -> list[str]:
    said = []
    if dist.required_by:
        said.append(
            "required by "
            + ", ".join(
                dict.fromkeys(
                    r.dependent + (f"[{r.extra}]" if r.extra else "") for r in dist.required_by
                )
            )
        )
    if dist.optional_for and verbose:
        said.append(
            "optional for (an extra no one requests) "
            + ", ".join(dict.fromkeys(f"{r.dependent}[{r.extra}]" for r in dist.optional_for))
        )
    if dist.loaded_by:
        said.append("loaded: " + _uses_text(dist, base, verbose))
    if dist.loaded_by_probe:
        said.append("the probe process mapped its files")
    if dist.shared_bytes:
        said.append(
            f"{size_text(dist.shared_bytes)} of files shared with {', '.join(dist.shared_with)}"
        )
    if dist.linked_elsewhere_bytes and verbose:
        said.append(f"{size_text(dist.linked_elsewhere_bytes)} of it also linked from outside")
    if dist.missing_files:
        said.append(f"{count_text(dist.missing_files, 'file')} its RECORD lists missing")
    if dist.outside_files:
        said.append(
            f"its RECORD lists {count_text(dist.outside_files, 'path')} outside the environment "
            "(not counted)"
        )
    if dist.record_problem:
        said.append(f"its files are unknown: {dist.record_problem}")
    said += [f"unmet: {u.describe()}" for u in dist.unmet]
    return said


def _uses_text(dist: DistributionAudit, base: str, verbose: bool) -> str:
    """``libcudnn.so.9 by torch/lib/libtorch_cuda.so, torch/lib/libtorch_python.so``: by
    soname, two objects each (every one with -v)."""
    by_soname: dict[str, list[str]] = {}
    for use in dist.loaded_by:
        by_soname.setdefault(use.soname, []).append(_short_path(use.consumer, base))
    parts = []
    for soname, consumers in by_soname.items():
        shown = consumers if verbose else consumers[:2]
        more = len(consumers) - len(shown)
        parts.append(f"{soname} by {', '.join(shown)}" + (f" (+{more})" if more else ""))
    text = "; ".join(parts)
    unlisted = dist.loaded_by_count - len({use.consumer for use in dist.loaded_by})
    return text + (f"; and {count_text(unlisted, 'more object')}" if unlisted > 0 else "")


def _duplicate_lines(duplicates: Sequence[DuplicateLibrary], base: str) -> list[str]:
    if not duplicates:
        return []
    lines = ["sonames that several distributions provide:"]
    for dup in duplicates:
        lines.append(f"  {dup.soname} ({', '.join(dup.distributions)}):")
        for copy in dup.copies:
            listed = ", ".join(copy.owners) or "no distribution"
            content = ""
            if len(copy.owners) > 1:
                content = (
                    f"; on disk: the copy of {', '.join(copy.content_of)}"
                    if copy.content_of
                    else "; on disk: no owner's RECORD gives its size"
                )
            if copy.loaded:
                state = "loaded"
            elif copy.needed_by:
                state = f"needed by {_short_path(copy.needed_by[0], base)}"
                state += f" (+{len(copy.needed_by) - 1})" if len(copy.needed_by) > 1 else ""
                state += ", which nothing loads at start"
            else:
                state = "loaded by nothing"
            if copy.loaded_by_probe is not None:
                state += f"; the probe {'mapped' if copy.loaded_by_probe else 'did not map'} it"
            lines.append(f"    {_short_path(copy.path, base)} [{listed}{content}]: {state}")
    return lines


def _short_path(path: str, base: str) -> str:
    prefix = base.rstrip("/") + "/"
    return path[len(prefix) :] if base and path.startswith(prefix) else path
