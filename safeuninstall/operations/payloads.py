"""What each command prints with ``--json``: its payload, a type per command over the envelope
every object shares (base/envelope.py).

A payload is filled from the command's result by ``msgspec.convert(..., from_attributes=True)``:
each field reads the result's attribute of the same name (a field or a property; ``name=`` is
the key it is written as), and nested payloads read the values there in turn. So the result
keeps what only the tool needs (hashes, loaded libraries), the payload declares what the
contract publishes, and the published schema is generated from these types
(docs/gen_schema.py). Enumerations are written as their values.

Only the bottom layers and a few enumerations are imported: a command loads this module when
it prints JSON, and a command that only reads loads nothing else for it (no snapshot reader).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec
from msgspec import Struct, field

from safeuninstall.base.envelope import Envelope
from safeuninstall.base.outcome import Outcome
from safeuninstall.probe.kinds import CandidateKind, ProbeKind
from safeuninstall.probe.metric import Verdict

# -- what operations share ---------------------------------------------------------------------


class Event(Struct):
    """A step of an operation, as it was said while it ran."""

    step: str
    text: str
    seconds: float  # since the operation began


class Restore(Struct):
    """What a restore brought back (from a stash, or reinstalled), and what it could not."""

    from_stash: list[str]
    reinstalled: list[str]
    failed: list[str]
    notes: list[str]


class Verification(Struct):
    """The proof, from a re-read of the environment, that it matches the snapshot again."""

    ok: bool
    missing: list[str]
    unexpected: list[str]
    source_mismatches: list[str]  # same version, another build
    hash_mismatches: list[str]  # "name==version: path"
    extra_dist_info: list[str]
    changed_after: list[str]  # what another process changed after the proof
    files_checked: int


class Undo(Struct):
    """A failed rollback put back as it was before it."""

    restored_pins: list[str] = field(name="restored")
    report: Restore = field(name="restore")
    verification: Verification | None


class Candidate(Struct):
    """One thing the derived probe tries on its own."""

    kind: CandidateKind
    target: str
    attrs: list[str]
    distribution: str
    why: str


class CandidateRun(Candidate):
    """How one candidate of a derived probe ended in one run."""

    label: str
    status: Literal["passed", "failed", "unfinished", "not-run", "skipped"]
    judged: bool
    output: str


class MetricRuns(Struct):
    """The numbers one metric probe printed, run after run, and how they were judged."""

    values: list[float]
    median: float | None
    baseline: float | None = field(name="baseline_median")  # once judged against it
    regression_percent: float | None  # percent worse than the baseline (negative: better)
    why: str  # why it fails, for a person; empty when it does not
    # the baseline's runs these were judged against (in a bisect round, the good state's)
    baseline_values: list[float]
    ratio: float | None  # the median over the baseline's
    # the two-sided Mann-Whitney U test's (null: both without spread, compared by medians)
    rounded_p_value: float | None = field(name="p_value")
    # regressed: worse than --max-regression and significant at the 1% level; within-limit:
    # shown within it at the 5% level; inconclusive: neither; null before it is judged
    verdict: Verdict | None
    warmup: float | None  # the warm-up run's number, not counted
    baseline_spread_percent: float | None  # (highest - lowest) of the baseline's runs, in %


class PlannedProbe(Struct):
    """A probe chosen to judge the change."""

    label: str
    kind: ProbeKind
    origin: str
    code: str
    candidates: list[Candidate]


class ProbeRun(Struct):
    """How one probe run ended."""

    label: str = field(name="probe")
    kind: ProbeKind
    origin: str
    passed: bool
    returncode: int | None
    timed_out: bool
    rounded_seconds: float = field(name="seconds")
    cached: bool  # a baseline taken from the cache, not run now
    output: str
    candidates: list[CandidateRun]
    metric: MetricRuns | None


class ProbeRuns(Struct):
    """The probes around a change: what was chosen, and each run's results."""

    notes: list[str]
    planned: list[PlannedProbe]
    baseline: list[ProbeRun]
    after: list[ProbeRun]
    after_restore: list[ProbeRun]
    after_restore_skipped: str | None


class OnlyCopy(Struct):
    """A stash kept because it alone holds distributions whose names are not installed now."""

    snapshot: str
    pins: list[str] = field(name="only_copy_of")
    beyond_policy: bool


class Pruned(Struct):
    snapshot: str
    bytes: int


class Kept(Struct):
    """What the snapshots hold on disk after an operation, and what the policy dropped."""

    snapshot: str
    snapshot_bytes: int
    total_bytes: int
    pruned_stashes: list[Pruned] = field(name="pruned")
    policy: str
    protected: list[OnlyCopy]
    over_max_size: int = field(name="over_max_size_bytes")


class Operation(Envelope, kw_only=True):
    """What every operation reports: how it ended, what it changed and put back, the probes
    that judged it, what to run next, and its steps as they happened."""

    # how the operation ended; its exit code is in the exit-code table
    outcome: Outcome  # type: ignore[assignment]  # written as its id (envelope.encode)
    command: str
    python: str
    snapshot: str | None  # the snapshot taken before the change; null: none was
    removed: list[str]  # what the operation removes, as name==version
    restored_pins: list[str] = field(name="restored")  # what a restore brought back
    restore: Restore | None
    verification: Verification | None
    probes: ProbeRuns
    next_command: str | None
    messages: list[str]
    kept: Kept | None
    events: list[Event] = field(default_factory=list)


# -- uninstall, check, probe, try ------------------------------------------------------------------


class LibraryChange(Struct):
    """``consumer`` needs ``soname``; it resolves to ``before`` now and to ``after`` later."""

    consumer: str
    consumer_dist: str | None
    soname: str
    before: str
    before_dist: str | None
    after: str | None
    after_dist: str | None


class Drift(Struct):
    """A library the probe loaded from ``before`` and now loads from ``after`` (or not at all)."""

    library: str
    before: str
    before_dist: str | None
    after: str | None
    after_dist: str | None


class OptionalDependent(Struct):
    dependent: str
    required: str = field(name="requires")
    extra: str | None


class SharedFile(Struct):
    path: str
    removed_dist: str
    other: str


class MetadataOnly(Struct):
    name: str
    provided_by: list[str]


class UnreadableRecord(Struct):
    name: str
    reason: str
    removed: bool


class Unmet(Struct):
    """A requirement of a distribution that stays, which the change leaves unmet."""

    dependent: str
    requirement: str  # the Requires-Dist line as written
    required: str
    extra: str | None
    requested_by: list[str]


class Impact(Struct):
    """What removing some distributions would break, drift or leave behind."""

    removed: list[str]
    dependents: list[str]
    optional_dependents: list[OptionalDependent]
    shared_files: list[SharedFile]
    hollow: list[str]
    breaks: list[LibraryChange]
    drifts: list[LibraryChange]
    metadata_only: list[MetadataOnly]
    unreadable_records: list[UnreadableRecord]
    unmet: list[Unmet]


class Finding(Struct):
    """One thing missing from the environment, and who needs it (doctor.py lists the kinds)."""

    kind: str
    what: str
    needed_by: str
    provider: str | None
    snapshot: str | None
    detail: str
    recorded_in: str | None
    pinned: bool
    expected_with: list[str]
    reinstall: bool
    missing_files: int
    command: str


class Needed(Struct):
    name: str
    why: str
    reasons: list[str]


class Trial(Struct):
    removed: list[str]
    passed: bool
    inconclusive: bool  # a metric's runs could not tell: neither a pass nor a failure
    why: str


class KeepNeeded(Struct):
    """What ``--keep-needed`` did: what it tried, kept (and why), removed, and what it cost."""

    candidates: list[str]
    kept: list[Needed]
    tried: list[str]
    removed: list[str]
    probe_runs: int
    reruns: int
    bound: int
    trials: list[Trial]


class Removal(Operation, kw_only=True):
    """An uninstall, its impact report alone (``check``), a probe, or a ``try`` of a removal."""

    absent: list[str]  # named, but not installed
    patterns: dict[str, list[str]]  # each pattern, and what it matched
    orphans: list[str]  # --with-orphans: the dependencies added
    cleanup: KeepNeeded | None = field(name="keep_needed")
    dependents: list[str]
    impact: Impact | None
    drift: list[Drift]
    diagnosis: list[Finding]  # what a failing probe missed, and who provided it


# -- rollback, recover ---------------------------------------------------------------------


class RollbackPlan(Struct):
    added: list[str]
    changed: list[str]
    missing: list[str]


class Skipped(Struct):
    snapshot: str
    reason: str


class RollbackChoice(Struct):
    """Which snapshot a plain ``rollback`` returns to, why, and the newer ones it passed over."""

    snapshot: str | None
    reason: str
    skipped: list[Skipped]


class Rollback(Operation, kw_only=True):
    """A rollback, or a recover: back to a snapshot's exact set."""

    rollback_plan: RollbackPlan | None
    choice: RollbackChoice | None = field(name="rollback_choice")
    undo: Undo | None
    impact: Impact | None  # of what the rollback uninstalls


# -- run, try -- COMMAND -------------------------------------------------------------------------


class UnmetByRun(Struct):
    """A requirement the command's change left unmet."""

    dependent: str
    requirement: str
    required: str


class CommandRun(Struct):
    """The command run under guard: its exit status and what it changed."""

    argv: list[str]
    exit_status: int | None  # the command's own; negative: the signal that ended it; null: no run
    added: list[str]
    changed: list[str]
    missing: list[str] = field(name="removed")
    unmet: list[UnmetByRun]


class Run(Operation, kw_only=True):
    """``run -- COMMAND`` (and ``try -- COMMAND``)."""

    run: CommandRun


# -- try --state FILE ----------------------------------------------------------------------------


class StateChange(Struct):
    """A distribution the file's state has otherwise."""

    name: str
    here: str | None  # its version here, at the start; null: not installed here
    there: str | None  # its version in the file; null: the file does not have it


class TriedState(Struct):
    file: str  # the file that describes the state
    changes: list[StateChange]
    not_compared: list[str]  # same version, other files: no stash tells them apart, not switched


class TryState(Operation, kw_only=True):
    """``try --state FILE``: the verdict is the outcome and ``probes.after``; ``state`` says
    what differed."""

    state: TriedState


# -- bisect --------------------------------------------------------------------------------------


class Culprit(Struct):
    names: list[str]
    good: list[str]  # name==version in the good snapshot
    bad: list[str]  # name==version now


class Round(Struct):
    """One round: the units left as they are now, and its verdict."""

    bad: list[str]
    passed: bool
    verdict: Literal["passed", "failed", "inconclusive"]
    metric: MetricRuns | None
    confirming: str | None = field(name="confirms")  # the culprit it tries on its own, if any


class Bisection(Struct):
    good: str
    units: list[list[str]]
    rounds: list[Round]
    culprits: list[Culprit]
    # units the search found that do not fail on their own: not named as culprits
    not_confirmed: list[Culprit]
    confirmed: bool  # a round with only the culprits brought back passed
    failure: str  # the probe's output where it fails (the environment as it was)
    not_bisected: list[str]  # same version, other files: no stash tells them apart


class Bisect(Operation, kw_only=True):
    """``bisect GOOD``: the units, each round, the culprits."""

    bisect: Bisection


# -- snapshot, show, snapshots, prune ------------------------------------------------------------


class Target(Struct):
    python: str
    prefix: str
    version: str


class Source(Struct, omit_defaults=True):
    kind: str
    url: str | None = None
    vcs: str | None = None
    commit: str | None = None
    requested_revision: str | None = None
    subdirectory: str | None = None


class StashedFile(Struct, omit_defaults=True):
    path: str
    sha256: str
    size: int
    link: str | None = None
    swept: bool = False


class PthLine(Struct):
    path: str
    line: str
    sha256: str
    size: int


class Stash(Struct, omit_defaults=True):
    folder: str
    complete: bool
    files: list[StashedFile]
    lines: list[PthLine] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)


# The keys a snapshot.toml leaves out when they hold their default are left out here too.
class Package(Struct, omit_defaults=True):
    name: str
    version: str
    installer: str
    requested: bool
    dist_info: str
    source: Source
    stash: Stash | None = None
    legacy_layout: str | None = field(name="layout", default=None)  # how a legacy one was


class SnapshotFile(Envelope, kw_only=True):
    """A snapshot's keys, as its snapshot.toml holds them (``outcome``: its note)."""

    outcome: str
    format: int
    id: str
    created: str
    tool_version: str
    command: list[str]
    operation: str
    removed: list[str]
    returns_to: str
    target: Target
    packages: list[Package]


class Show(SnapshotFile, kw_only=True):
    """``show``: a snapshot, with what its stash alone keeps on disk."""

    stash_bytes: int
    stash_pruned: str | None  # why the retention policy dropped its stash


class Taken(SnapshotFile, kw_only=True):
    """``snapshot``: the snapshot taken, and what the retention policy did after it."""

    kept: Kept | None
    messages: list[str]


class SnapshotSummary(Struct):
    """One line of ``snapshots``."""

    id: str
    created: str
    command: str
    operation: str
    removed: list[str]
    outcome: str
    packages: int
    error: str | None
    stash_bytes: int  # bytes only this snapshot's stash keeps
    stash_pruned: str | None


class Snapshots(Envelope, kw_only=True):
    """``snapshots``: every snapshot of this environment, and the bytes their stashes keep."""

    snapshots: list[SnapshotSummary]
    total_bytes: int  # what all these stashes keep on disk, each file counted once
    # no snapshot is this environment's but the state folder holds another's: why none is
    none_because: str | None


class SnapshotBytes(Struct):
    id: str
    bytes: int


class OnlyCopies(Struct):
    id: str
    pins: list[str]


class Prune(Envelope, kw_only=True):
    """``prune``: the snapshots removed and kept, with the bytes each held on its own."""

    removed_snapshots: list[SnapshotBytes] = field(name="removed")
    kept_snapshots: list[SnapshotBytes] = field(name="kept")
    protected: list[str]
    freed: int = field(name="freed_bytes")
    held_after: int = field(name="held_after_bytes")
    only_copy_snapshots: list[OnlyCopies] = field(name="only_copies")
    over_max_size: int = field(name="over_max_size_bytes")
    dry_run: bool


# -- diff, doctor, audit, export, config -------------------------------------------------------


class Change(Struct):
    name: str
    # its kind (judgement.diff.ChangeKind's values: a test keeps the two the same)
    change: Literal["added", "removed", "upgraded", "downgraded", "changed", "files-differ"]
    before: str | None
    after: str | None
    size_before: int | None
    size_after: int | None
    files: list[str]


class Diff(Envelope, kw_only=True):
    """``diff A B``: the two sides and what changed from one to the other."""

    before: str
    after: str
    before_kind: Literal["now", "snapshot", "file"]
    after_kind: Literal["now", "snapshot", "file"]
    changes: list[Change]
    counts: dict[str, int]  # per kind of change
    unchanged: int
    not_compared: list[str] = field(name="files_not_compared")
    set_aside: list[str]  # what a file side said that was left out


class Doctor(Envelope, kw_only=True):
    """``doctor``: every finding, the notes that are not breakage, and the repair."""

    healthy: bool
    findings: list[Finding]
    notes: list[Finding]
    repair_command: str | None
    repair_snapshot: str | None
    repair_also: list[str]


class Requirer(Struct):
    dependent: str
    requirement: str
    extra: str | None
    active: bool


class LibraryUse(Struct):
    consumer: str
    consumer_dist: str | None
    soname: str
    library: str


class DistributionAudit(Struct):
    name: str
    version: str
    installer: str
    requested: bool
    requested_known: bool
    bytes: int
    files: int
    shared_bytes: int
    shared_with: list[str]
    linked_elsewhere_bytes: int
    missing_files: int
    outside_files: int
    record_problem: str | None
    metadata_only: bool
    orphan: bool
    top_level: bool
    required_by: list[Requirer]
    optional_for: list[Requirer]
    loaded_by: list[LibraryUse]
    loaded_by_count: int
    loaded_by_probe: bool | None
    unmet: list[Unmet]


class LibraryCopy(Struct):
    path: str
    owners: list[str]
    content_of: list[str]
    loaded: bool
    needed_by: list[str]
    loaded_by_probe: bool | None


class DuplicateLibrary(Struct):
    soname: str
    distributions: list[str]
    copies: list[LibraryCopy]


class UnownedFolder(Struct):
    path: str
    bytes: int
    files: int


class StashHolding(Struct):
    snapshot: str
    bytes: int


class Audit(Envelope, kw_only=True):
    """``audit``: where the bytes of the environment are, and who needs each distribution."""

    outcome: Literal["audited"] = "audited"
    command: Literal["audit"] = "audit"
    python: str
    site_dirs: list[str]
    total_bytes: int
    owned_bytes: int
    shared_bytes: int
    unowned_bytes: int
    unowned_files: int
    unowned: list[UnownedFolder]
    stash_bytes: int
    stashes: list[StashHolding]
    orphans: list[str]
    top_level: list[str]
    distributions: list[DistributionAudit]
    duplicates: list[DuplicateLibrary]
    probe: list[ProbeRun] | None = field(name="load")  # the runs of --load
    mapped: list[str] | None  # the files those processes mapped
    notes: list[str]


class Export(Envelope, kw_only=True):
    """``export``: the exported set, and the format it ended up in."""

    snapshot: str | None  # None: what is installed now
    requested: Literal["requirements", "pylock"]
    format: Literal["requirements", "pylock"]
    packages: int
    output_path: str | None = field(name="output")  # where it was written (-o)
    shown_text: str | None = field(name="text")  # the text, when it was written nowhere else


class Setting(Struct):
    value: str | int | float | bool | list[str] | None
    origin: str  # "command line", a variable name, a file, or "default"
    env: str  # the variable that sets it


class ConfigFiles(Struct):
    project: str | None
    user: str
    user_exists: bool


class Config(Envelope, kw_only=True):
    """``config``: every setting's value and where it came from; with a target option, the
    environment and its state folder."""

    by_key: dict[str, Setting] = field(name="settings")
    files: ConfigFiles
    ignored_variables: list[str]  # SAFE_UNINSTALL_* variables that name no setting
    # with -p, --system, --target or --prefix: the environment, as other commands name it
    environment: str | None
    state_dir: str | None  # with a target option: the state folder its commands use


# Each result's payload, by the name of the result's type.
PAYLOADS: dict[str, type[Envelope]] = {
    "Result": Operation,
    "RemovalResult": Removal,
    "RollbackResult": Rollback,
    "RunResult": Run,
    "BisectResult": Bisect,
    "StateTried": TryState,
    "SnapshotList": Snapshots,
    "ShownSnapshot": Show,
    "SnapshotTaken": Taken,
    "PruneResult": Prune,
    "DiffResult": Diff,
    "DoctorReport": Doctor,
    "AuditReport": Audit,
    "ExportResult": Export,
    "_ConfigShown": Config,
}

# The published schema's entry of each command: its payload (try: a removal's, a run's or a
# state's).
COMMANDS: dict[str, tuple[type[Envelope], ...]] = {
    "uninstall": (Removal,),
    "check": (Removal,),
    "probe": (Operation,),
    "rollback": (Rollback,),
    "recover": (Rollback,),
    "run": (Run,),
    "try": (Removal, Run, TryState),
    "bisect": (Bisect,),
    "snapshot": (Taken,),
    "snapshots": (Snapshots,),
    "show": (Show,),
    "diff": (Diff,),
    "doctor": (Doctor,),
    "audit": (Audit,),
    "prune": (Prune,),
    "export": (Export,),
    "config": (Config,),
}


def payload(result: object, schema: str, events: Sequence[object] = ()) -> Envelope:
    """The payload of ``result``, read from its attributes; ``schema``: where the schema is;
    ``events``: an operation's steps (base.events.Event), for an operation's payload."""
    kind = PAYLOADS[type(result).__name__]
    found = msgspec.convert(result, kind, from_attributes=True)
    if events:
        steps = msgspec.convert(events, list[Event], from_attributes=True)
        return msgspec.structs.replace(found, json_schema=schema, events=steps)
    return msgspec.structs.replace(found, json_schema=schema)
