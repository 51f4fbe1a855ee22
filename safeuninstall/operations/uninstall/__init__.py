"""``safe-uninstall PACKAGE...``: the plan (command), one removal with its probe and its
restore (removal), and ``--keep-needed``'s search for what the probe needs (keep_needed)."""
