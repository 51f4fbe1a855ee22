"""What an operation tells while it works: one event per step, as it happens.

The core never prints. It hands each event to the callback its Context was opened with; the CLI
writes them live on a terminal and collects them for ``--json``. An event is one line for a
person (``text``) under a fixed step name (``step``) that a program can match on.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from msgspec import Struct

# The steps, in the order an uninstall meets them.
STEPS = (
    "environment",  # the target was opened: which interpreter
    "waiting",  # another operation holds the environment
    "plan",  # what is to be removed: a pattern's expansion, what --keep-needed keeps
    "baseline",  # the baseline probe began, was taken from the cache, or finished
    "impact",  # the impact report is done
    "snapshot",  # the snapshot and its stash are written
    "command",  # a guarded command (run) began or ended
    "removing",  # the installer was started
    "probe",  # the probe after the change began or finished
    "restoring",  # a restore began
    "restored",  # a restore ended (verified or not)
    "bisect",  # --keep-needed: a subset is tried, or the search ended
)


# Steps whose event opens a wait (the installer, a restore), and texts that say a probe is
# running: a terminal shows their elapsed time until the next event.
_ONGOING_STEPS = frozenset({"removing", "restoring"})


class Event(Struct, frozen=True):
    step: str
    text: str
    at: float  # seconds since the operation began

    @property
    def ongoing(self) -> bool:
        """Whether the step goes on after the event (the next event ends it)."""
        return self.step in _ONGOING_STEPS or "probe running" in self.text

    @property
    def seconds(self) -> float:
        return round(self.at, 3)


Listener = Callable[[Event], None]


class Events:
    """Hands events to a listener, stamped with the time since this object was made."""

    def __init__(self, listener: Listener | None = None) -> None:
        self._listener = listener
        self._started = time.monotonic()

    def __call__(self, step: str, text: str) -> None:
        assert step in STEPS, step
        if self._listener is not None:
            self._listener(Event(step, text, time.monotonic() - self._started))
