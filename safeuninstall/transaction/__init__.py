"""A change that can be undone: the transaction, the one-batch restore and its proof, and
what the snapshots keep on disk."""
