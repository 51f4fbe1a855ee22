"""The operations, one module each. Every one takes an opened Context and a frozen options
record and returns a result; none prints, exits or knows about click, and none imports
another:

- uninstall: remove, probe, restore on failure;
- rollback: ``rollback`` and ``recover``, back to a snapshot;
- snapshots: ``snapshot``, ``snapshots``, ``show``, ``prune``;
- inspect: ``check``, ``probe``, ``doctor``: judge, change nothing;
- audit: ``audit``: the whole environment in one report, read only.
"""
