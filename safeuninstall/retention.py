"""What the snapshots keep on disk, and the retention policy that bounds it.

A stash is hard links: while the files are installed it costs nothing; once they are removed
it holds their bytes. After each operation that ends with the environment in a known state,
the policy (``keep``, ``max-size`` in the configuration) drops the stashes of the oldest
snapshots beyond it. A dropped stash leaves its ``snapshot.toml``: the snapshot can still be
listed, shown, exported and rolled back to, by reinstalling its pins from the index (the
rollback says so). The latest snapshot's stash, and the one the journal names, always stay.

``prune`` is the explicit command: it deletes whole snapshots.
"""

from __future__ import annotations

import datetime
import os
from typing import TYPE_CHECKING

from msgspec import Struct

from .bounded import open_regular
from .errors import SnapshotInvalid
from .report import size_text
from .store import Store

if TYPE_CHECKING:
    from .stashindex import Holdings

PRUNED_MARK = "stash-pruned"  # in a snapshot folder: its stash was dropped, and why
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


class Kept(Struct, frozen=True):
    """What the snapshots hold on disk after an operation, and what the policy dropped."""

    snapshot: str  # the operation's snapshot
    snapshot_bytes: int  # bytes that snapshot's stash alone holds
    total_bytes: int  # bytes all of this environment's stashes hold
    pruned: tuple[tuple[str, int], ...] = ()  # (snapshot id, bytes freed), by the policy
    policy: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "snapshot": self.snapshot,
            "snapshot_bytes": self.snapshot_bytes,
            "total_bytes": self.total_bytes,
            "pruned": [{"snapshot": i, "bytes": size} for i, size in self.pruned],
            "policy": self.policy,
        }


def stash_pruned(store: Store, snapshot_id: str) -> str | None:
    """Why the snapshot's stash was dropped (the mark's text), or None when it was not (or
    the mark is no regular file: a FIFO there must not stop the command)."""
    try:
        with open_regular(store.folder(snapshot_id) / PRUNED_MARK) as mark:
            return mark.read(500).decode("utf-8", "replace").strip() or "pruned"
    except OSError:
        return None


def alone(holdings: Holdings, snapshot_id: str) -> int:
    """Bytes only this snapshot's stash keeps: linked from nowhere else (neither the
    environment nor another snapshot)."""
    return holdings.alone.get(snapshot_id, 0)


def settle(store: Store, policy: Policy) -> Kept | None:
    """Apply the policy to this environment's snapshots and measure what stays; None when it
    has none. The latest (the operation's own) is measured and never loses its stash. Under
    the environment's lock, with no operation unfinished (the caller checks the journal: the
    snapshot an unfinished one names must not lose its stash)."""
    # Not at the top: listing snapshots imports this module, and the plans' module imports
    # the distribution model. A removal has it loaded (Context.load_what_a_restore_needs).
    from .plan import plan_prune

    ids = [i for i, snap in store.iter_heads() if not isinstance(snap, SnapshotInvalid)]
    if not ids:
        return None
    ids.reverse()  # oldest first
    latest = ids[-1]
    ids = [i for i in ids if (store.folder(i) / "stash").is_dir()]
    protected = {latest, *ids[-1:]}
    holdings = store.holdings(ids)
    pruned = []
    current = list(ids)
    # The latest's stash, protected, is not counted against max-size: it always stays.
    doomed_ids = plan_prune(
        ids,
        holdings,
        protected,
        keep=policy.keep,
        max_size=policy.max_size,
        count_protected=False,
    )
    for doomed in doomed_ids:
        before = holdings.held(current)
        current.remove(doomed)
        _drop_stash(store, doomed, policy)
        pruned.append((doomed, before - holdings.held(current)))
    return Kept(
        snapshot=latest,
        snapshot_bytes=alone(holdings, latest),
        total_bytes=holdings.held(current),
        pruned=tuple(pruned),
        policy=policy.describe(),
    )


def _drop_stash(store: Store, snapshot_id: str, policy: Policy) -> None:
    """The mark first: a stash half deleted is never taken for a whole one."""
    import shutil  # here: listing snapshots imports this module, and drops no stash

    folder = store.folder(snapshot_id)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    mark = folder / PRUNED_MARK
    with open(mark.with_suffix(".part"), "w", encoding="utf-8") as out:
        out.write(f"pruned by the retention policy ({policy.describe()}) on {when}\n")
    os.replace(mark.with_suffix(".part"), mark)
    shutil.rmtree(folder / "stash", ignore_errors=True)
    (folder / "stash-verified.json").unlink(missing_ok=True)
