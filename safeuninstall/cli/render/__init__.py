"""Results as text for a person, a module per command family; every function returns a string
(or its lines) and the CLI prints it once.

- ``paint``: colour, the caller's choice (shared by every renderer that colours);
- ``operation``: the report of an operation that may change the environment (uninstall, try,
  run, rollback, recover) or looks at one (probe, check); ``probes``, ``impact`` and the
  retention lines of ``snapshots`` are parts of it;
- ``bisect``: bisect's rounds and culprits, before its operation's report;
- ``snapshots``: snapshot, snapshots, show and prune; ``diff``, ``doctor``, ``audit``,
  ``settings`` (config): one command each.

A command imports its renderer where it runs (cli/commands.py), and a renderer the parts it is
built of: only ``paint`` is loaded at start-up, and no command loads one it does not use.
"""
