"""What the user asked for: each command's options, parsed by the CLI into frozen dataclasses.

A module of its own, light to import, so the command line can build them (and start the
baseline probe, see baseline.head_start) before the core and all it needs are imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TargetOptions:
    """Options every command takes: which environment, where its state is, how long to wait."""

    python: str | None
    cwd: Path
    environ: Mapping[str, str]
    command: tuple[str, ...] = ()
    state_dir: str | None = None
    lock_timeout: float = 60.0
    # told when the environment is busy and this call starts to wait for it
    on_wait: Callable[[str], None] | None = None
    # receives uv's (or pip's) own output as it comes (-v)
    on_installer_output: Callable[[str], None] | None = None
    # told how far a long file step is: (step, bytes done, bytes in all)
    on_progress: Callable[[str, int, int], None] | None = None


@dataclass(frozen=True)
class ProbeOptions:
    """The probes asked for on the command line, and their time limit."""

    probes: tuple[str, ...] = ()
    probe_cmds: tuple[str, ...] = ()
    timeout: float | None = None
    disabled: bool = False


@dataclass(frozen=True)
class UninstallOptions:
    """What to remove, and how careful to be about it."""

    names: tuple[str, ...]
    dry_run: bool = False
    keep_on_failure: bool = False
    offline: bool = False
    strict: bool = False  # refuse when the impact report finds breakage or drift
    fresh_baseline: bool = False  # run the baseline even when a cached pass is valid
    probe_after_restore: bool = False  # re-probe even a restore proven byte-identical
    allow_drift: bool = False  # a probe that passes on another copy of a library still passes


@dataclass(frozen=True)
class RollbackOptions:
    """Which snapshot to return to, and whether only to show the plan."""

    snapshot: str | None = None
    dry_run: bool = False
    offline: bool = False


@dataclass(frozen=True)
class PruneOptions:
    """How many snapshots, or how many bytes of them, to keep."""

    keep: int | None = None  # keep the newest N snapshots
    max_size: int | None = None  # bytes the remaining snapshots may hold at most
    dry_run: bool = False
