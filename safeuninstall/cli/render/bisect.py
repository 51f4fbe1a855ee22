"""``bisect``: the units, each round, the culprits, then the operation's report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from safeuninstall.cli.render.operation import operation
from safeuninstall.cli.render.paint import Paint, plain
from safeuninstall.cli.render.probes import tail
from safeuninstall.environment.sizes import count_text
from safeuninstall.probe.metric import MetricRuns, change_text, number_text, ratio
from safeuninstall.state.described import is_file_reference

if TYPE_CHECKING:
    from safeuninstall.operations.results import BisectResult


def bisect_report(result: BisectResult, *, verbose: bool, quiet: bool, paint: Paint = plain) -> str:
    """The search (not with ``quiet``), then the report of the operation."""
    text = operation(result, verbose=verbose, quiet=quiet, paint=paint)
    return text if quiet else "\n".join([*_bisect_lines(result), text])


def _bisect_lines(result: BisectResult) -> list[str]:
    """``bisect``: the units, each round, the culprits, and the failure they cause."""
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
        lines += ["    " + line for line in tail(result.failure, 12)]
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
