"""Results as text for a person. Every function returns a string; the CLI prints it once.

Colour is the caller's choice: a function that colours takes ``paint(text, tone)`` (the CLI
passes one built on click.style when colour is wanted) and defaults to plain text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from safeuninstall.environment.sizes import count_text, size_text
from safeuninstall.probe.kinds import CandidateKind, ProbeKind
from safeuninstall.probe.metric import MetricRuns, change_text, number_text, ratio

if TYPE_CHECKING:  # annotations only: a command loads what it renders, no more
    from safeuninstall.config import Settings
    from safeuninstall.libraries.index import LibraryChange
    from safeuninstall.operations.results import (
        BisectResult,
        DiffResult,
        PruneResult,
        RemovalResult,
        Result,
        RollbackResult,
        ShownSnapshot,
        SnapshotList,
        SnapshotSummary,
    )
    from safeuninstall.plans.diff import ChangeKind
    from safeuninstall.probe.runner import Candidate, Probe, ProbeResult
    from safeuninstall.reports.audit import AuditReport, DistributionAudit, DuplicateLibrary
    from safeuninstall.reports.doctor import DoctorReport
    from safeuninstall.reports.impact import ImpactReport, SharedFile
    from safeuninstall.reports.needs import Cleanup
    from safeuninstall.state.snapshot import Snapshot
    from safeuninstall.transaction.retention import Kept
    from safeuninstall.transaction.transaction import Restored

# (text, tone) -> text; tones: "good", "warn", "bad"
Paint = Callable[[str, str], str]


def plain(text: str, tone: str) -> str:
    return text


def use_color(choice: str, *, isatty: bool, environ: Mapping[str, str]) -> bool:
    """``always``/``never`` are obeyed; ``auto`` colours a terminal unless NO_COLOR is set
    (to anything but the empty string, as no-color.org asks) or TERM is ``dumb``."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    return isatty and not environ.get("NO_COLOR") and environ.get("TERM") != "dumb"


def _tone(exit_code: int) -> str:
    return "good" if exit_code == 0 else "warn" if exit_code == 3 else "bad"


def _probe_lines(
    title: str,
    results: Sequence[ProbeResult],
    verbose: bool,
    paint: Paint = plain,
    *,
    every: bool = False,
) -> list[str]:
    """A line per run (a block for a multi-line probe). Of a derived probe, the candidates
    that failed and count; ``every``: each candidate and how it ended."""
    lines = []
    for r in results:
        summary = paint(r.summary(), "good" if r.passed else "bad")
        if "\n" in r.probe.label:  # a block, and its result on a line of its own
            lines.append(f"{title}:")
            lines += ["    " + line for line in r.probe.label.splitlines()]
            lines.append(f"  -- {summary}")
        else:
            lines.append(f"{title}: {r.probe.label} -- {summary}")
        if r.probe.kind is ProbeKind.DERIVED:
            lines += _candidate_results(r, verbose=verbose, every=every, paint=paint)
            if not verbose:
                continue
        if r.output and (verbose or not r.passed):
            lines.extend("    " + line for line in _tail(r.output, 0 if verbose else 12))
    return lines


_SHOWN_FAILURES = 10  # regressions listed without -v


def _candidate_results(r: ProbeResult, *, verbose: bool, every: bool, paint: Paint) -> list[str]:
    """The candidates of a derived probe's run that count and failed (``every`` or -v: all of
    them), each failure with the end of its traceback."""
    shown = r.candidates if verbose or every else r.regressed
    limit = None if verbose or every else _SHOWN_FAILURES
    lines = []
    for c in shown[:limit]:
        what = f"{c.candidate.label}  # {_whose(c.candidate)}"
        if c.passed:
            lines.append(f"    {paint('passed', 'good')}: {what}")
            continue
        if c.skipped:
            lines.append(f"    {paint('not tried', 'warn')}: {what}: {c.reason}")
            continue
        state = "FAILED" if c.judged else f"{c.status}, not judged"
        lines.append(f"    {paint(state, 'bad' if c.judged else 'warn')}: {what}: {c.reason}")
        if verbose:
            lines += ["        " + line for line in _tail(c.output, 0)]
    if limit is not None and len(shown) > limit:
        lines.append(f"    ... and {len(shown) - limit} more (-v lists them all)")
    return lines


def derived_block(probe: Probe) -> list[str]:
    """What a derived probe contains: a candidate a line, with whose it is and why."""
    count = count_text(len(probe.candidates), "candidate")
    lines = [f"derived probe, {count}, each tried on its own:"]
    width = min(48, max(len(c.label) for c in probe.candidates))
    for c in probe.candidates:
        if c.kind is CandidateKind.CODE:
            lines.append(f"    # {c.distribution}: {c.why}")
            lines += ["    " + line for line in c.target.splitlines()]
            continue
        lines.append(f"    {c.label:<{width}}  # {_whose(c)}")
    return lines


def _whose(candidate: Candidate) -> str:
    """Whose a candidate is, and why it is one (a code candidate's label says why)."""
    if candidate.kind is CandidateKind.CODE or not candidate.why:
        return candidate.distribution
    return f"{candidate.distribution}: {candidate.why}"


def _tail(text: str, count: int) -> list[str]:
    lines = text.rstrip().splitlines()
    return lines if count == 0 or len(lines) <= count else ["...", *lines[-count:]]


def operation(
    result: Result, *, verbose: bool, quiet: bool, paint: Paint = plain, brief: bool = False
) -> str:
    """The report of an operation; ``brief`` (a terminal, without -v): a plain removal that
    went well in a few lines, as uv says it (anything else is reported whole)."""
    outcome = paint(result.outcome_text, _tone(result.exit_code))
    headline = f"{result.command}: {outcome}"
    if quiet:
        lines = [headline]
        if result.next_command:
            lines.append(f"to finish: {result.next_command}")
        return "\n".join(lines)
    summary = _plain_removal(result, headline) if brief else None
    if summary is not None:
        return summary
    removal, rollback = _removal(result), _rollback(result)
    runs, impact = result.probes, result.impact_report()
    lines = [f"environment: {result.environment or result.python}", *_plan_lines(result)]
    if impact is not None:
        lines += impact_lines(impact, verbose=verbose)
    lines += _probes_around_the_change(result, verbose, paint)
    if removal is not None:
        lines += [f"drift: {d.describe()}" for d in removal.drift]
        lines += [f"diagnosis: {f.describe()}" for f in removal.diagnosis]
    lines += _restore_lines(result.restored, paint)
    if rollback is not None and rollback.undo is not None:
        lines.append("putting the environment back as it was before:")
        lines += ["  " + line for line in _restore_lines(rollback.undo, paint)]
    lines += _probe_lines("probe after the restore", runs.after_restore, verbose, paint)
    if runs.after_restore_skipped:
        lines.append(f"probe after the restore: {runs.after_restore_skipped}")
    lines += cleanup_lines(removal.cleanup if removal is not None else None)
    lines += result.messages
    lines += kept_lines(result.kept)
    lines.append(headline)
    if result.next_command:
        said = "to finish the job, run"
        if result.outcome.value == "bisected":
            said = "to bring back the good versions of the culprits, keeping the rest"
        lines.append(f"{said}: {result.next_command}")
    return "\n".join(lines)


def _removal(result: Result) -> RemovalResult | None:
    from safeuninstall.operations.results import RemovalResult  # loaded with any result

    return result if isinstance(result, RemovalResult) else None


def _rollback(result: Result) -> RollbackResult | None:
    from safeuninstall.operations.results import RollbackResult

    return result if isinstance(result, RollbackResult) else None


def _plan_lines(result: Result) -> list[str]:
    """What the operation set out to change: the snapshot, the one a plain rollback chose and
    those it passed over, what the names given matched, and what is removed or restored."""
    lines = [f"snapshot: {result.snapshot}"] if result.snapshot else []
    removal, rollback = _removal(result), _rollback(result)
    choice = rollback.choice if rollback is not None else None
    if choice is not None:
        lines += [f"passed over: {s.snapshot}: {s.reason}" for s in choice.skipped]
        if choice.snapshot is not None:
            lines.append(f"chosen: {choice.snapshot}: {choice.reason}")
        else:
            lines.append(choice.reason)
    if removal is not None:
        lines += [f"pattern {text!r} matches: {', '.join(ns)}" for text, ns in removal.expanded]
        lines += [f"not installed, skipped: {name}" for name in removal.absent]
        if removal.orphans:
            lines.append(f"orphans, removed too (--with-orphans): {', '.join(removal.orphans)}")
    plan = rollback.rollback_plan if rollback is not None else None
    if plan is not None:
        lines += [f"added since the snapshot, to remove: {name}" for name in plan.added]
        lines += [f"changed since the snapshot, to replace: {name}" for name in plan.changed]
        lines += [f"missing, to restore: {name}" for name in plan.missing]
    elif result.removed:
        # Nothing is removed when the removal is only shown, checked or refused.
        verb = "removing" if result.snapshot else "would remove"
        lines.append(f"{verb}: {', '.join(result.removed)}")
    return lines


def _probes_around_the_change(result: Result, verbose: bool, paint: Paint) -> list[str]:
    """Why these probes, a derived probe's candidates, and the runs before and after."""
    runs = result.probes
    lines = [f"probe: {note}" for note in runs.notes]
    for probe in runs.planned if result.command != "probe" or not runs.after else ():
        if probe.kind is ProbeKind.DERIVED:  # the probe command lists them with their results
            lines += derived_block(probe)
    lines += _probe_lines("baseline probe", runs.baseline, verbose, paint)
    after = "probe" if result.command == "probe" else "probe after the change"
    lines += _probe_lines(after, runs.after, verbose, paint, every=result.command == "probe")
    return lines


def _plain_removal(result: Result, headline: str) -> str | None:
    """What was removed in uv's form, the probe's verdict, the snapshot and how to undo it,
    the outcome; None where there is more to say (what breaks, a restore, a pattern's
    expansion, orphans, a cleanup): the whole report then."""
    removal = _removal(result)
    impact = removal.impact if removal is not None else None
    if (
        removal is None
        or result.command != "uninstall"
        or result.exit_code != 0
        or not (result.removed and result.snapshot)
        or result.restored is not None
        or removal.drift
        or removal.diagnosis
        or removal.cleanup is not None
        or removal.orphans
        or removal.expanded
        or (impact is not None and (impact.library_changes or impact.unmet))
    ):
        return None
    lines = [f"Uninstalled {count_text(len(result.removed), 'package')}"]
    lines += [f" - {pin}" for pin in result.removed]
    lines += [f"not installed, skipped: {name}" for name in removal.absent]
    lines += [f"probe: {r.probe.label} -- {r.summary()}" for r in result.probes.after]
    lines += result.messages
    start = result.kept.command if result.kept is not None else "safe-uninstall"
    lines.append(f"snapshot {result.snapshot}: `{start} rollback` puts it back")
    lines.append(headline)
    return "\n".join(lines)


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


def _restore_lines(restored: Restored | None, paint: Paint) -> list[str]:
    if restored is None:
        return []
    lines = []
    r = restored.report
    if r.from_stash:
        lines.append(f"restored from the stash: {', '.join(r.from_stash)}")
    if r.reinstalled:
        lines.append(f"reinstalled: {', '.join(r.reinstalled)}")
    if r.failed:
        lines.append(paint(f"could NOT be restored: {', '.join(r.failed)}", "bad"))
    lines += [f"note: {note}" for note in r.notes]
    v = restored.verification
    if v is not None and v.ok:
        lines.append(
            "verified: the installed set equals the snapshot; "
            + (
                "1 restored file matches its recorded sha256"
                if v.files_checked == 1
                else f"{v.files_checked} restored files match their recorded sha256"
            )
        )
    elif v is not None:
        lines.append(paint("verification FAILED: the environment differs from the snapshot", "bad"))
        lines += ["  " + line for line in v.describe()]
    return lines


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
    text = snapshot_details(shown.snapshot, quiet=quiet)
    if quiet:
        return text
    held = f"on disk: {size_text(shown.stash_bytes)} that nothing else links"
    if shown.stash_pruned:
        return (
            f"{text}\n{held}\nstash: dropped, {shown.stash_pruned}; a rollback to it "
            "reinstalls from the index"
        )
    return f"{text}\n{held}"


def snapshot_details(snap: Snapshot, *, quiet: bool = False) -> str:
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


_DIFF_MARKS = {
    "added": "+",
    "removed": "-",
    "upgraded": "^",
    "downgraded": "v",
    "changed": "*",
    "files-differ": "~",
}
_SHOWN_FILES = 5  # differing files listed per distribution without -v


def diff_report(found: DiffResult, *, quiet: bool = False, verbose: bool = False) -> str:
    """``diff``: a headline with the counts, then a line per changed distribution."""
    d = found.diff
    counts = [
        f"{len(changes)} {kind.value.replace('-', ' ')}"
        for kind in _diff_kinds()
        if (changes := d.of_kind(kind))
    ]
    said = ", ".join(counts) if counts else "no change"
    lines = [f"{found.before} -> {found.after}: {said}; {d.unchanged} unchanged"]
    if quiet:
        return lines[0]
    for change in d.changes:
        kind = change.kind.value
        mark = _DIFF_MARKS[kind]
        # None: absent on that side, or present with no version (a file's source tree)
        before, after = change.before or "(no version)", change.after or "(no version)"
        if kind == "added":
            what = f"{change.name} {after}"
        elif kind == "removed" or before == after:
            what = f"{change.name} {before}"
        else:
            what = f"{change.name} {before} -> {after}"
        sizes = _diff_sizes(change.size_before, change.size_after)
        lines.append(f"  {mark} {what}  ({kind}{sizes})")
        shown = change.files if verbose else change.files[:_SHOWN_FILES]
        lines += [f"      {path}" for path in shown]
        if len(shown) < len(change.files):
            lines.append(f"      ... and {len(change.files) - len(shown)} more (-v lists them)")
    files = [
        side
        for side, kind in ((found.before, found.before_kind), (found.after, found.after_kind))
        if kind == "file"
    ]
    if files:
        verb = "give" if len(files) > 1 else "gives"
        lines.append(f"files not compared: {' and '.join(files)} {verb} versions only")
    elif d.not_compared:
        names = ", ".join(d.not_compared[:5]) + (" ..." if len(d.not_compared) > 5 else "")
        lines.append(
            f"files not compared for {count_text(len(d.not_compared), 'distribution')} of the same "
            f"version (a snapshot without their stash): {names}"
        )
    lines += [f"not compared: {line}" for line in found.set_aside]
    return "\n".join(lines)


def _diff_kinds() -> list[ChangeKind]:
    # Imported here: the diff command has it loaded; every other command's start-up would
    # load the snapshot file format and the installed-distribution reader with it.
    from safeuninstall.plans.diff import ChangeKind

    return list(ChangeKind)


def _diff_sizes(before: int | None, after: int | None) -> str:
    if before is not None and after is not None and before != after:
        return f", {size_text(before)} -> {size_text(after)}"
    size = after if after is not None else before
    return "" if size is None else f", {size_text(size)}"


def bisect_lines(result: BisectResult) -> list[str]:
    """``bisect``: the units, each round, the culprits, and the failure they cause."""
    # Imported here, as _diff_kinds does: bisect has it loaded, other commands need not.
    from safeuninstall.state.described import is_file_reference

    units = result.units
    kind = "the file" if is_file_reference(result.good) else "snapshot"
    good = f"{kind} {result.good}"
    lines = [
        f"good: {good}; {count_text(len(units), 'unit')} of change since "
        f"({', '.join('+'.join(u) for u in units)})"
    ]
    for number, round_ in enumerate(result.rounds, 1):
        left = ", ".join(round_.bad) if round_.bad else "none (as the good snapshot)"
        verdict = "passed" if round_.passed else round_.verdict.upper()
        said = f" (confirming {round_.confirms} on its own)" if round_.confirms else ""
        lines.append(f"round {number}: as now: {left}{said} -- {verdict}")
        if round_.metric is not None:
            lines.append(f"    {_round_numbers(round_.metric)}")
    for culprit in result.culprits:
        was = ", ".join(culprit.good) or "absent"
        now = ", ".join(culprit.bad) or "absent"
        lines.append(f"culprit: {'+'.join(culprit.names)}: good {was}; now {now}")
    if result.culprits and result.failure:
        lines.append("the probe, as the environment was:")
        lines += ["    " + line for line in _tail(result.failure, 12)]
    if result.culprits and result.confirmed:
        lines.append("with only the culprits brought back, the probe passed")
    return lines


def _round_numbers(runs: MetricRuns) -> str:
    """A bisect round's metric: each run of both states, the medians, the ratio, p, why."""
    values = ", ".join(number_text(v) for v in runs.values) or "none"
    text = f"runs as now: {values}"
    if runs.baseline_values:
        good = ", ".join(number_text(v) for v in runs.baseline_values)
        text += f"; in the good state: {good}"
    if runs.median is not None and runs.baseline is not None and runs.regression is not None:
        text += f"; medians {number_text(runs.baseline)} -> {number_text(runs.median)}"
        shown = ratio(runs.baseline, runs.median)
        if shown is not None:
            text += f" (x{shown:.3g}, {change_text(runs.regression)})"
    if runs.p_value is not None:
        text += f", p = {runs.p_value:.2g}"
    if runs.warmup is not None:
        text += f"; warm-up {number_text(runs.warmup)} not counted"
    return text + (
        f": {runs.why}" if runs.why else f": {runs.verdict.value}" if runs.verdict else ""
    )


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


def cleanup_lines(cleanup: Cleanup | None) -> list[str]:
    """--keep-needed: what was kept and why, what was removed, what it cost."""
    if cleanup is None:
        return []
    # A candidate kept as inconclusive is not said to be needed: its reason says what it is.
    lines = [
        f"kept{'' if k.why == 'inconclusive' else ', needed'}: {k.name}: {k.reason}"
        for k in cleanup.kept
    ]
    if not (cleanup.trials or cleanup.removed):  # a dry run, or nothing left to try
        lines.append(f"to try: {', '.join(cleanup.tried) or 'nothing'}")
        return lines
    removed = ", ".join(cleanup.removed) or "nothing"
    lines.append(f"removed, nothing needs it: {removed}")
    n, runs = len(cleanup.tried), cleanup.probe_runs
    if n:
        again = f"; {cleanup.reruns} more to confirm a failure" if cleanup.reruns else ""
        lines.append(
            f"probe runs: {runs} for {n} tried (at most {cleanup.bound}; one by one: {n}){again}"
        )
    return lines


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


def doctor_report(report: DoctorReport, *, quiet: bool = False, verbose: bool = False) -> str:
    """The findings, then the command that repairs them; then the notes (not breakage): one
    line each for a driver's library, one line in all for plugins' libraries (each with -v)."""
    if report.healthy:
        lines = ["doctor: no missing library, unmet requirement or hollow distribution found"]
    elif quiet:
        lines = [f"doctor: {count_text(len(report.findings), 'problem')} found"]
    else:
        lines = [f.describe() for f in report.findings]
    if report.healthy:
        pass
    elif report.repair_command:
        lines.append(f"to repair, run: {report.repair_command}")
        if report.repair_also:
            lines.append(f"  (it also brings back: {', '.join(report.repair_also)})")
    elif not any(f.kind == "running" for f in report.findings):
        lines.append("no snapshot or pinned install can repair all of it; see the lines above")
    if quiet:
        return "\n".join(lines)
    plugins = [n for n in report.notes if n.kind == "on-demand"]
    lines += [f"note: {n.describe()}" for n in report.notes if n.kind != "on-demand"]
    if verbose:
        lines += [f"note: {n.describe()}" for n in plugins]
    elif plugins:
        names = ", ".join(n.what for n in plugins)
        lines.append(
            f"note: not found, needed only by plugins that nothing loads at start (loaded on "
            f"demand, if at all; not breakage): {names} (-v says which)"
        )
    return "\n".join(lines)


def _toml_value(value: object) -> str:
    # JSON's strings, numbers, booleans and arrays are valid TOML values too.
    return json.dumps(list(value) if isinstance(value, tuple) else value)


_UNSET = {
    "probe": "(unset: the default probe)",
    "probe-cmd": "(unset)",
    "state-dir": "(unset: <venv>/.safe-uninstall)",
}


def settings(config: Settings, *, verbose: bool, quiet: bool) -> str:
    """``key = value  # origin`` per key; quiet: the effective values as TOML, unset keys out."""
    lines = []
    for name, setting in config.by_key.items():
        unset = setting.value is None or setting.value == ()
        if quiet:
            if not unset:
                lines.append(f"{name} = {_toml_value(setting.value)}")
            continue
        shown = _UNSET.get(name, "(unset)") if unset else _toml_value(setting.value)
        lines.append(f"{name:<13} = {shown:<34} # {setting.origin}")
    if quiet:
        return "\n".join(lines)
    lines += [f"ignored: {var} is not a safe-uninstall setting" for var in config.ignored_variables]
    if verbose:
        project = config.project_file or "none found from the current folder up"
        state = "" if config.user_file_exists else " (no such file)"
        lines += [f"project file: {project}", f"user file: {config.user_file}{state}"]
    return "\n".join(lines)


# -- audit -------------------------------------------------------------------------------------


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
