"""The context one command works in: its target environment opened once with the state folder
and the installer (context), what it judges a change with (analysis), and the probe's
baseline begun early (baseline)."""
