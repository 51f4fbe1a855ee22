"""One command's session: its target opened once (the Context), and the judgement run with
the state folder's caches (analysis, baseline)."""
