"""Ctrl-C, SIGTERM and a hang-up: where they stop the command, and where they wait.

They all take one path: KeyboardInterrupt, which the core turns into a restore of whatever it
changed, and the CLI into "interrupted before any change" (exit 1) when nothing was.

Three stretches must not be cut, and hold them back instead:

- Start-up, from the entry point's first line to the moment the command's core begins
  (``hold``, then ``release``): importing the tool and parsing the command line. Nothing can
  have changed yet, and these steps are short and never wait on anything, so an interrupt
  there is noted and raised once the CLI can say so in one line (not a traceback from
  whatever import it hit).
- A step that must not be cut in two (``deferred``): the write test creates a file in the
  environment and deletes it (an interrupt between the two left it there); uv's uninstall
  runs to its end before the restore starts; a restore finishes before the command exits.
- The end, from the moment the outcome is decided to the exit (``settle``): the report is
  printed whole and the exit code is the command's.

A SIGKILL stops any of them; nothing in the environment is then left half done by them but,
in the write test, one empty hidden file.
"""

from __future__ import annotations

# Imported first by __main__, which holds interrupts by then with a handler of its own: so
# little is imported here (not typing, nor collections.abc) because every command pays for it.
# mypy reads the block below as typing's own.
import contextlib
import signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_held: set[int] = set()  # the signals held now
_noted: list[int] = []  # what arrived while held


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _note(signum: int, frame: FrameType | None) -> None:
    _noted.append(signum)


def hold(noted: list[int] | None = None) -> None:
    """From here until ``release``, an interrupt is only noted. A signal the command was
    started with ignored (a hang-up under nohup, Ctrl-C for ``cmd &`` in a script) stays
    ignored, as Python leaves an ignored SIGINT. ``noted``: what the handler in place noted
    (the entry point's, set before this module could be imported), taken over once this one
    is in place."""
    for signum in SIGNALS:
        if signum in _held or signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _note)
            _held.add(signum)
    if noted:
        _noted.extend(noted)


def _drop(signum: int, frame: FrameType | None) -> None:
    pass


def settle() -> None:
    """The command's outcome is decided (its result returned, or its error raised): from here
    to the exit an interrupt changes nothing. Its report is printed whole and its exit code
    stands, instead of a traceback and the signal's status. A signal the command was started
    with ignored stays ignored."""
    for signum in SIGNALS:
        if signum in _held or signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _drop)
            _held.add(signum)


def release() -> None:
    """From here every one held raises KeyboardInterrupt (SIGTERM and a hang-up, an SSH
    session that drops, take Ctrl-C's path); one noted while held is raised now. Nothing
    if none was held (the CLI called in-process, by a test)."""
    for signum in _held:
        signal.signal(signum, _interrupt)
    _held.clear()
    if _noted:
        _noted.clear()
        raise KeyboardInterrupt


@contextlib.contextmanager
def deferred(*, obey: bool = True) -> Iterator[list[int]]:
    """Inside, an interrupt is noted, in the list yielded. On the way out, with ``obey``, the
    first noted goes to the handler in place before (KeyboardInterrupt, or an outer block's
    note: blocks nest); without, it stays noted and the caller says what it did with it. A
    signal ignored when the block begins is left ignored, and never noted.

    Only the main thread can set a handler; elsewhere (where no handler runs either) the block
    runs as it is."""
    import threading  # loaded long before any caller gets here

    noted: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return
    # A signal ignored now (a hang-up under nohup) stays ignored: noted, it would be raised on
    # the way out into its SIG_IGN, and hide a Ctrl-C noted after it.
    previous = {
        signum: signal.signal(signum, lambda s, f: noted.append(s))
        for signum in SIGNALS
        if signal.getsignal(signum) is not signal.SIG_IGN
    }
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if noted and obey:
            signal.raise_signal(noted[0])
