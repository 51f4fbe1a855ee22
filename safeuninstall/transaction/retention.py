"""What the snapshots keep on disk, and the retention policy that bounds it.

A stash is hard links: while the files are installed it costs nothing; once they are removed
it holds their bytes. After each operation that ends with the environment in a known state,
the policy (``keep``, ``max-size`` in the configuration) drops the stashes of the oldest
snapshots beyond it. A dropped stash leaves its ``snapshot.toml``: the snapshot can still be
listed, shown, exported and rolled back to, by reinstalling its pins from the index (the
rollback says so). The latest snapshot's stash, and the one the journal names, always stay.

A stash that holds the only copy of a distribution no longer installed (a removal still in
effect: a name==version it stashed whose name the environment lacks now, at any version, and
that no newer stash holds) always stays too: dropping it would leave a rollback nothing but
the index, on a machine that may have none. The old version of an upgrade or a downgrade is
no removal: its stash goes as any other (every routine upgrade would otherwise add a stash the
policy never drops, and ``keep`` and ``max-size`` would bound nothing). The stashes kept for
an only copy are not counted against ``keep``; they are counted against ``max-size``, and when
they alone keep the stashes above it the result says so.

A bisect's own snapshot (its outcome: back where it started) records a state it only passed
through on its way back: it is not counted against ``keep`` of the others, so that bisects run
one after another never push out the good snapshot they all switch to (nor the states before).
The newest ``keep`` of them keep their stash, counted apart.

A snapshot whose change was undone (put back and verified: a failed removal, a refused run)
records nothing new either: the environment is back in its state. Counted against ``keep``, a
run of such failures would push out the stash of an older snapshot that holds something no
other does (the version before an upgrade); so where the stashes are over ``keep``, those of
undone changes go first, oldest first, and only then the oldest of the others.

``prune`` is the explicit command: it deletes whole snapshots, and one whose stash is such an
only copy only when asked (``--drop-only-copies``).
"""

from __future__ import annotations

import datetime
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence

from msgspec import Struct

from safeuninstall.base.errors import SnapshotInvalid
from safeuninstall.base.outcome import Ending, Outcome, parse_note
from safeuninstall.environment.installed import installed_distributions
from safeuninstall.environment.interpreter import Interpreter
from safeuninstall.environment.sizes import size_text
from safeuninstall.plans.changes import build_stash_index, plan_prune
from safeuninstall.state.holdings import Holdings
from safeuninstall.state.layout import stash_folder_name
from safeuninstall.state.store import Store

DEFAULT_KEEP = 10
DEFAULT_MAX_SIZE = 2 * 1024**3


class Policy(Struct, frozen=True):
    """The stashes of the newest ``keep`` snapshots stay, as long as all stashes but the
    latest's hold at most ``max_size`` bytes; None: no bound of that kind."""

    keep: int | None = DEFAULT_KEEP
    max_size: int | None = DEFAULT_MAX_SIZE

    def describe(self) -> str:
        parts = []
        if self.keep is not None:
            parts.append(f"keep {self.keep}")
        if self.max_size is not None:
            parts.append(f"max-size {size_text(self.max_size)}")
        return ", ".join(parts) or "none"


class OnlyCopy(Struct, frozen=True):
    """A stash kept because it alone holds distributions whose names are not installed now."""

    snapshot: str
    pins: tuple[str, ...]  # name==version, sorted
    beyond_policy: bool = False  # keep or max-size alone would have dropped it


class Kept(Struct, frozen=True):
    """What the snapshots hold on disk after an operation, and what the policy dropped."""

    snapshot: str  # the operation's snapshot
    snapshot_bytes: int  # bytes that snapshot alone holds: its stash and its own files
    total_bytes: int  # bytes all of this environment's snapshots hold, stashes and own files
    pruned: tuple[tuple[str, int], ...] = ()  # (snapshot id, bytes freed), by the policy
    policy: str = ""
    # Older stashes kept because each holds the only copy of a removal still in effect.
    protected: tuple[OnlyCopy, ...] = ()
    # Bytes the stashes but the latest's hold beyond max-size, because protected ones stay.
    over_max_size: int = 0
    max_size: int | None = None
    # How a command for this environment and state folder begins (Context.suggest()): what
    # the report's `prune` suggestions start with.
    command: str = "safe-uninstall"

    @property
    def pruned_stashes(self) -> list[dict[str, object]]:
        return [{"snapshot": i, "bytes": size} for i, size in self.pruned]


def installed_pins(interpreter: Interpreter) -> dict[str, str]:
    """{canonical name: version} of every distribution installed in the target now."""

    return {key: dist.version for key, dist in installed_distributions(interpreter).items()}


def only_copies(
    store: Store, ids: Sequence[str], installed: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """Snapshot id -> the pins its stash alone could bring back: of ``ids`` (this
    environment's, oldest first), for each distribution whose name is not in ``installed`` (at
    no version: an upgrade's old version is no removal) whose complete stash some of them
    keep, the newest that keeps it (the one a rollback tries first). A
    stash whose folders are all of installed distributions is not read (one listing each):
    parsing a 3000-package snapshot costs 0.1 s."""

    here = {stash_folder_name(name, version) for name, version in installed.items()}
    newest_first = []
    for snapshot_id in reversed(ids):
        try:
            folders = os.listdir(store.folder(snapshot_id).stash_dir)
        except OSError:
            continue
        if here.issuperset(folders) or store.stash_pruned(snapshot_id) is not None:
            continue
        try:
            newest_first.append(store.load(snapshot_id))
        except SnapshotInvalid:
            continue  # an unreadable snapshot can't vouch for its stash
    found: dict[str, list[str]] = {}
    for (name, version, _), candidates in build_stash_index(newest_first).items():
        if name not in installed:
            found.setdefault(candidates[0].snapshot_id, []).append(f"{name}=={version}")
    return {snapshot_id: tuple(sorted(pins)) for snapshot_id, pins in found.items()}


def settle(store: Store, policy: Policy, installed: Callable[[], Mapping[str, str]]) -> Kept | None:
    """Apply the policy to this environment's snapshots and measure what stays; None when it
    has none. The latest (the operation's own) is measured and never loses its stash, nor
    does the only copy of a distribution whose name is not in ``installed()`` (what is
    installed now: read only when a stash other than the protected ones could hold one, not
    after every removal of an environment with one snapshot). Under the environment's lock,
    with no operation unfinished (the caller checks the journal: the snapshot an unfinished
    one names must not lose its stash)."""
    heads = [(i, h) for i, h in store.iter_heads() if not isinstance(h, SnapshotInvalid)]
    if not heads:
        return None
    ids = [i for i, _ in heads]
    returned = {i for i, head in heads if _returned(head.outcome)}
    undone = {i for i, head in heads if _undone(head.outcome)}
    every = ids[::-1]  # oldest first, measured whole: their own files (snapshot.toml...) too
    latest = every[-1]
    ids = [i for i in every if store.folder(i).stash_dir.is_dir()]  # what may lose its stash
    protected = {latest, *ids[-1:]}
    # The protected stay anyway: none of them is named as kept for its only copies.
    copies = (
        {i: pins for i, pins in only_copies(store, ids, installed()).items() if i not in protected}
        if any(i not in protected for i in ids)
        else {}
    )
    holdings = store.holdings(every)

    def plan_keeping(only: Iterable[str]) -> list[str]:
        return _plan(ids, (returned, undone), holdings, protected, policy, set(only))

    doomed_ids = plan_keeping(copies)
    unguarded = plan_keeping(())  # what the bounds alone would drop: did a copy's guard count?
    pruned = []
    current = list(ids)
    for doomed in doomed_ids:
        before = holdings.held(current)
        current.remove(doomed)
        _drop_stash(store, doomed, policy)
        pruned.append((doomed, before - holdings.held(current)))
    over = 0
    if policy.max_size is not None and copies:
        over = max(holdings.held(i for i in current if i not in protected) - policy.max_size, 0)
    holdings = store.holdings(every) if pruned else holdings  # the pruned keep their own files
    return Kept(
        snapshot=latest,
        snapshot_bytes=holdings.alone.get(latest, 0),
        total_bytes=holdings.held(every),
        pruned=tuple(pruned),
        policy=policy.describe(),
        protected=tuple(
            OnlyCopy(i, copies[i], beyond_policy=i in unguarded) for i in ids if i in copies
        ),
        over_max_size=over,
        max_size=policy.max_size,
    )


def _returned(outcome: str) -> bool:
    """Whether a snapshot's note says its operation ended back where it started (a bisect)."""
    try:
        note = parse_note(outcome)
    except ValueError:
        return False
    return isinstance(note, Outcome) and note.ending is Ending.RETURNED


def _undone(outcome: str) -> bool:
    """Whether a snapshot's note says its change was put back and verified (by the operation
    itself, or by a recover that returned to it)."""
    try:
        return parse_note(outcome).undone
    except ValueError:
        return False


def _plan(
    ids: Sequence[str],
    apart: tuple[set[str], set[str]],
    holdings: Holdings,
    protected: set[str],
    policy: Policy,
    copies: set[str],
) -> list[str]:
    """The stashes to drop, oldest first: beyond the newest ``keep`` of the snapshots but the
    returned ones (``apart``: returned, undone), those of undone changes first, and of the
    returned ones apart; then the oldest until the rest hold at most ``max-size``. The
    latest's stash, protected, is not counted against max-size: it always stays."""
    returned, undone = apart
    counted = [i for i in ids if i not in returned]
    # plan_prune drops from the front: the undone ones first, then the others, oldest first;
    # the protected last, as the newest (they stay, and count among the newest ``keep``).
    ranked = sorted(counted, key=lambda i: (i in protected, i not in undone, ids.index(i)))
    doomed = plan_prune(
        ranked, holdings, protected, keep=policy.keep, max_size=None, only_copies=copies
    )
    bisects = [i for i in ids if i in returned and i not in copies]  # with the latest
    if policy.keep is not None:
        doomed += [i for i in bisects[: max(len(bisects) - policy.keep, 0)] if i not in protected]
    rest = [i for i in ids if i not in doomed]
    doomed += plan_prune(
        rest,
        holdings,
        protected,
        keep=None,
        max_size=policy.max_size,
        count_protected=False,
        only_copies=copies,
    )
    return sorted(doomed, key=ids.index)


def _drop_stash(store: Store, snapshot_id: str, policy: Policy) -> None:
    """The mark first: a stash half deleted is never taken for a whole one."""

    folder = store.folder(snapshot_id)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    mark = folder.pruned_mark
    with open(mark.with_suffix(".part"), "w", encoding="utf-8") as out:
        out.write(f"pruned by the retention policy ({policy.describe()}) on {when}\n")
    os.replace(mark.with_suffix(".part"), mark)
    shutil.rmtree(folder.stash_dir, ignore_errors=True)
    folder.verified_file.unlink(missing_ok=True)
