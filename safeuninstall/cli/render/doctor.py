"""``doctor``: what is broken already and the command that repairs it, then the notes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from safeuninstall.environment.sizes import count_text

if TYPE_CHECKING:
    from safeuninstall.reports.doctor import DoctorReport


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
