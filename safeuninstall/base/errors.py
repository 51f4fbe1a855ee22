"""Every failure the tool expects, each with the exit code the CLI returns for it.

Exit codes (EXIT_CODES below; generated from it, docs/reference/exit-codes.md, which README.md
links to):

==== =====================================================================
code meaning
==== =====================================================================
0    done, and every probe that ran passed (none runs with --no-probe)
1    error before any change: the environment was not changed
2    command-line usage error, malformed configuration
3    the removal (or a rollback) failed; everything was put back and verified
4    restore incomplete: the environment differs from the snapshot
5    a restore (rollback, recover, after a failed removal, or try PACKAGE's return) done and
     verified, but the probe fails in the restored state
6    inconclusive: a metric's runs could not tell whether a state is worse than allowed;
     nothing named (bisect) or the change undone, verified
7    ``try``: the change breaks (a probe fails, a requirement is left unmet); undone, verified
8    ``try``: the change makes the metric worse than allowed; undone, verified
==== =====================================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_UNCHANGED = 1
EXIT_USAGE = 2
EXIT_RESTORED = 3
EXIT_INCOMPLETE = 4
EXIT_PROBE_FAILS_AFTER_ROLLBACK = 5
EXIT_INCONCLUSIVE = 6
EXIT_BREAKS = 7
EXIT_SLOWER = 8

# What each code means, for the documentation (tests check README.md's table against it).
EXIT_CODES = {
    EXIT_OK: "done, and every probe that ran passed (none runs with `--no-probe`, nor when "
    "no probe applies: the output says which); or nothing to do",
    EXIT_UNCHANGED: "error before any change: the environment was not changed",
    EXIT_USAGE: "command-line usage error (unknown option, bad option value) or malformed "
    "configuration",
    EXIT_RESTORED: "the probe failed after the removal, or a rollback failed (its probe, or a "
    "restore it could not complete), or a command run under guard (`run`) failed; everything "
    "was put back and verified",
    EXIT_INCOMPLETE: "restore incomplete, or `--keep-on-failure`: the environment differs from "
    "the snapshot; the output names each difference and the one command that finishes the job",
    EXIT_PROBE_FAILS_AFTER_ROLLBACK: "a restore done and verified (`rollback`, `recover`, "
    "after a failed removal, or the return of `try PACKAGE`), but the probe fails in "
    "that state",
    EXIT_INCONCLUSIVE: "inconclusive: a `--probe-metric`'s runs could not tell whether a state "
    "is worse than `--max-regression` allows, or no culprit `bisect` found fails on its own; so "
    "nothing is named (`bisect`) or the change was undone (a removal, `run`, `rollback`); the "
    "installed set is back where it started, verified",
    EXIT_BREAKS: "`try`: the change would break the environment (a probe fails, the command "
    "fails, a requirement is left unmet); the installed set is back where it started, verified "
    "(or, for a requirement left unmet without `--allow-unmet`, was not changed)",
    EXIT_SLOWER: "`try`: the change would make the `--probe-metric` worse than "
    "`--max-regression` allows, significantly; it was undone, back where it started, verified",
}


class SafeUninstallError(Exception):
    """Base of every expected failure; ``str(err)`` is written for the user."""

    exit_code = EXIT_UNCHANGED
    # What the CLI says of the environment after the message, with exit code 1.
    state = "the environment was not changed"

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class UsageError(SafeUninstallError):
    """The command line or a configuration file is malformed."""

    exit_code = EXIT_USAGE


class InvalidInput(SafeUninstallError):
    """A value the user gave can't be used: a distribution name, a probe, a requirements file."""


class CommandNotStarted(SafeUninstallError):
    """The command ``run`` guards could not be started (its program or interpreter missing,
    not executable): it never ran."""


class InsideGuardedRun(SafeUninstallError):
    """This safe-uninstall was started by the command a ``run`` guards on the same
    environment: that run holds the environment's lock until its command ends."""


class EnvironmentNotFound(SafeUninstallError):
    """No target environment could be found, or it is not a Python environment."""


class EnvironmentNotWritable(SafeUninstallError):
    """The target's site-packages or bin folder can't be written (read-only, permissions)."""


class SnapshotInvalid(SafeUninstallError):
    """A snapshot file is corrupt, of an unknown format, or names something unsafe."""


class SnapshotNotFound(SafeUninstallError):
    pass


class StateDirError(SafeUninstallError):
    """The folder for snapshots and stashes can't be created or written."""


class LockBusy(SafeUninstallError):
    """Another safe-uninstall operation holds this environment."""


class BaselineProbeFailed(SafeUninstallError):
    """The probe already fails before any change, so it cannot judge a removal."""


class BackendError(SafeUninstallError):
    """uv (or pip) could not be found or exited non-zero."""


class StashError(SafeUninstallError):
    """Files could not be preserved; raised before anything is removed."""


class NotRestorable(SafeUninstallError):
    """What the operation would remove could not be brought back: in no stash and not
    installable (a rollback), or with no RECORD to say which files to keep (a legacy install)."""


class UnfinishedTransaction(SafeUninstallError):
    """A previous operation on this environment was interrupted and must be recovered."""


class JournalUnreadable(UnfinishedTransaction):
    """The journal of an interrupted operation is not one this tool wrote (damaged, edited,
    replaced): what that operation changed is unknown, and nothing it names is acted on."""

    state = "the state of the environment is unknown: an operation on it did not finish"


class Interrupted(SafeUninstallError):
    """Ctrl-C or SIGTERM arrived before anything was changed."""


class InterruptedAfterChange(SafeUninstallError):
    """An interrupt escaped after the environment was changed (a window the core does not
    defer): what state it is in is not proven here."""

    exit_code = EXIT_INCOMPLETE
    state = (
        "the environment may differ from its snapshot: `safe-uninstall snapshots` shows the "
        "last operation's outcome, and `safe-uninstall recover` finishes one that did not finish"
    )
