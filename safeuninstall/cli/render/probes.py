"""Probe runs as lines: each run and its verdict, a derived probe's candidates, the end of a
failing run's output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from safeuninstall.cli.render.paint import Paint, plain
from safeuninstall.environment.sizes import count_text
from safeuninstall.probe.kinds import CandidateKind, ProbeKind

if TYPE_CHECKING:
    from safeuninstall.probe.runner import Candidate, Probe, ProbeResult


def probe_lines(
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
            lines.extend("    " + line for line in tail(r.output, 0 if verbose else 12))
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
            lines += ["        " + line for line in tail(c.output, 0)]
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


def tail(text: str, count: int) -> list[str]:
    """The last ``count`` lines of ``text`` (0: all of them), "..." first where some are cut."""
    lines = text.rstrip().splitlines()
    return lines if count == 0 or len(lines) <= count else ["...", *lines[-count:]]
