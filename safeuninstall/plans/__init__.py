"""Plans and searches, pure functions of what is installed and what was snapshotted: which
distributions a removal, a rollback, a restore or a prune changes (changes), what differs
between two states (diff), and the halving search that finds what breaks a probe
(bisection, culprits)."""
