"""The operations, one module per command (or family of commands). Every one takes an opened
Context and a frozen options record and returns a result (results.py); none prints, exits or
knows about click, and none imports another (they share results.py and trial.py):

- uninstall (a package): ``safe-uninstall PACKAGE...``: plan, then hand over to removal (one
  removal: remove, probe, restore on failure) or keep_needed (``--keep-needed``: its trials);
- run: ``run -- COMMAND``, any change guarded like a removal;
- rollback: ``rollback`` and ``recover``, back to a snapshot;
- bisect: ``bisect GOOD``, which changes since a snapshot make the probe fail;
- snapshots: ``snapshot``, ``snapshots``, ``show``, ``prune``;
- diff: ``diff``, what changed between two snapshots, or since one;
- export: ``export``, a snapshot's set as a requirements file or a pylock.toml;
- inspect: ``check``, ``probe``, ``doctor``: judge, change nothing;
- audit: ``audit``: the whole environment in one report, read only.

Beneath them: the results and their JSON payloads, the trial verdict, and each operation's
outcomes (endings/).
"""

from __future__ import annotations

# Every operation's outcomes, registered before any operation runs: a snapshot's note, read by
# any command, may name any of them.
import safeuninstall.operations.endings  # noqa: F401
