"""A change that can be undone: the guarded change every change-making operation goes through
(guard), the transaction under it (journal, snapshot, stash), the one-batch restore and its
proof (restore), the one check that no other process changed the environment (others), and
what the snapshots keep on disk (retention)."""
