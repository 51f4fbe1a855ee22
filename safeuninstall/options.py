"""What the user asked for: each command's options, parsed by the CLI into frozen records.

A module of its own, light to import, so the command line can build them (and start the
baseline probe, see baseline.head_start) before the core and all it needs are imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import Struct

if TYPE_CHECKING:  # an annotation only: the requirement parser is loaded by what reads one
    from safeuninstall.environment.requirements import Request

# The subcommands: a package named like one is removed with ``safe-uninstall uninstall NAME``
# (the CLI's commands; a test keeps them equal).
COMMANDS = (
    "uninstall",
    "rollback",
    "snapshot",
    "snapshots",
    "show",
    "probe",
    "check",
    "doctor",
    "recover",
    "prune",
    "config",
    "export",
    "run",
    "audit",
    "diff",
    "bisect",
    "try",
)

# What ``export --format`` writes (operations/export.py), named here for the command line.
EXPORT_FORMATS = ("requirements", "pylock")


class TargetOptions(Struct, frozen=True):
    """Options every command takes: which environment, where its state is, how long to wait."""

    python: str | None
    cwd: Path
    environ: Mapping[str, str]
    command: tuple[str, ...] = ()
    state_dir: str | None = None
    lock_timeout: float = 60.0
    # receives uv's (or pip's) own output as it comes (-v)
    on_installer_output: Callable[[str], None] | None = None
    # told how far a long file step is: (step, bytes done, bytes in all)
    on_progress: Callable[[str, int, int], None] | None = None
    # a dry run: nothing is written anywhere (no lock, no cache, no bytecode of the query)
    read_only: bool = False
    # --system: the first interpreter on PATH, as uv finds it; None: not given, and then
    # UV_SYSTEM_PYTHON or uv's configuration decides, as for uv (environment/uvsettings.py)
    system: bool | None = None
    target: str | None = None  # --target DIR: the packages in DIR, as uv removes them there
    prefix: str | None = None  # --prefix DIR
    # uv may change an EXTERNALLY-MANAGED interpreter; None: as UV_BREAK_SYSTEM_PACKAGES or
    # uv's configuration says
    break_system_packages: bool | None = None


class UninstallOptions(Struct, frozen=True):
    """What to remove, and how careful to be about it."""

    # As typed: names, requirements (``rich==15.0.0``), paths and URLs (requirements.py).
    names: tuple[str, ...]
    requirement_files: tuple[str, ...] = ()  # -r FILE, "-" for standard input
    request: Request | None = None  # names and files read already (requirements.read_request)
    dry_run: bool = False
    keep_on_failure: bool = False
    offline: bool = False
    strict: bool = False  # refuse when a name is not installed or the impact report finds
    # breakage or drift
    fresh_baseline: bool = False  # run the baseline even when a cached pass is valid
    probe_after_restore: bool = False  # re-probe even a restore proven byte-identical
    allow_drift: bool = False  # a probe that passes on another copy of a library still passes
    allow_unmet: bool = False  # go ahead although a requirement is left unmet; the probe judges
    keep_needed: bool = False  # remove only the named ones nothing needs (needs.py, bisection.py)
    with_orphans: bool = False  # also the dependencies that the removal leaves unrequired
    always_undo: bool = False  # try: undone whatever the verdict, which is the outcome


class RollbackOptions(Struct, frozen=True):
    """Which snapshot to return to, and whether only to show the plan."""

    snapshot: str | None = None
    dry_run: bool = False
    offline: bool = False
    allow_unmet: bool = False  # uninstall although a requirement is left unmet; the probe judges


class BisectOptions(Struct, frozen=True):
    """The state where the probe passes (a snapshot, or a file that describes one), and where
    a good version no stash holds may come from."""

    good: str
    offline: bool = False
    find_links: tuple[str, ...] = ()  # folders of wheels the installs also look in
    dry_run: bool = False  # print the plan: the units, where each version comes from, the bound


class PruneOptions(Struct, frozen=True):
    """How many snapshots, or how many bytes of them, to keep."""

    keep: int | None = None  # keep the newest N snapshots
    max_size: int | None = None  # bytes the remaining snapshots may hold at most
    dry_run: bool = False
    # Also delete a snapshot whose stash holds the only copy of a distribution whose name is
    # not installed now (a removal still in effect): its rollback then needs the index.
    drop_only_copies: bool = False


class RunOptions(Struct, frozen=True):
    """The command to guard, and what to do when it fails."""

    argv: tuple[str, ...]  # the command and its arguments, as given after ``--``
    dry_run: bool = False
    keep_on_failure: bool = False
    offline: bool = False  # a restore that must reinstall uses no network
    fresh_baseline: bool = False
    allow_unmet: bool = False  # a change that leaves requirements unmet is judged by the probe
    output_to_stderr: bool = False  # the command's standard output goes to stderr (--json)
    always_undo: bool = False  # try: undone whatever the verdict, which is the outcome
