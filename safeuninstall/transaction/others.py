"""Another process changed the environment: the one check, and what it means everywhere.

An operation expects an installed set: the census (installed.census: every dist-info folder,
.egg-info and .egg-link) it read before it began, then what its own steps left (the
transaction keeps it up to date as it uninstalls and restores, see Transaction.expect). Before
its next step, and before it claims anything, it compares that with what is installed now.
A difference is another process's work. Wherever it is found it means the same: the operation
stops where it is, names the change, and undoes nothing of that process's work (what it undoes
of its own is its own business: a removal still puts back what it removed).
"""

from __future__ import annotations

from collections.abc import Sequence

from safeuninstall.base.errors import SafeUninstallError
from safeuninstall.environment.installed import census_changes


class ChangedByOthers(SafeUninstallError):
    """Another process changed the environment: ``changes`` names each folder that appeared
    or went (``appeared: leftpad-2.0.dist-info``). Escaping before any change it is an error
    like any other (exit 1: nothing was changed); after one, the operation ends on it."""

    def __init__(self, changes: Sequence[str], *, during: str, then: str = "") -> None:
        self.changes = tuple(changes)
        self.change = "; ".join(self.changes)
        said = f"another process changed the environment {during} ({self.change})"
        super().__init__(f"{said}; {then}" if then else said)


def differences(expected: frozenset[str], changed: frozenset[str]) -> tuple[str, ...]:
    """Each entry of ``changed`` (those of the census now that differ from the one an operation
    expects), said as it changed: ``appeared: x-1.0.dist-info`` or ``went: ...``."""
    return tuple(census_changes(expected, expected ^ changed))
