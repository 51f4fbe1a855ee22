"""The state folder's files: the store, snapshots, the journal, stashes and their index, locks."""
