"""What the tool checks before it believes a folder of its own: that no one else can change it.

Whatever a state folder holds decides what is deleted (prune, recover) and what is linked back
into an environment (restore): a folder another user owns, or one that others may write to,
would let them choose both, and a root that uses it would run their code. So a folder the tool
keeps its state in must be owned by the user running it and not writable by group or others.
The folder may be reached through a symbolic link (``~/.local/state`` on another disk), if the
link is the user's own (or root's); a folder inside it must be a folder, not a link.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

from safeuninstall.base.errors import StateDirError

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def problem(folder: Path, what: str, *, link_allowed: bool = False) -> str | None:
    """Why ``folder`` (which exists) can't be trusted, or None."""
    me = os.geteuid()
    try:
        info = os.lstat(folder)
        if stat.S_ISLNK(info.st_mode):
            if not link_allowed:
                return f"the {what} {folder} is a symbolic link, not a folder"
            if info.st_uid not in (me, 0):
                return _not_yours(f"the {what} {folder} is a symbolic link that", folder, info)
            info = os.stat(folder)
    except OSError as err:
        return f"cannot examine the {what} {folder}: {err.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        return f"the {what} {folder} is not a folder"
    if info.st_uid != me:
        return _not_yours(f"the {what} {folder}", folder, info)
    if info.st_mode & _OTHERS_WRITE:
        return (
            f"the {what} {folder} is writable by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): they could change what is restored from it. "
            f"If nothing in it is theirs: {_command('chmod', 'go-w', str(folder))}"
        )
    return None


def _not_yours(subject: str, folder: Path, info: os.stat_result) -> str:
    me = os.geteuid()
    return (
        f"{subject} belongs to uid {info.st_uid}, not to you (uid {me}): that user could change "
        "what is restored from it. Use a state folder of your own (--state-dir), or, if the "
        f"folder is yours: {_command('chown', '-R', str(me), str(folder))}"
    )


def _command(*argv: str) -> str:
    return shlex.join(argv)


def refuse_unless_private(folder: Path, what: str, *, link_allowed: bool = False) -> None:
    """Raise StateDirError, naming the fix, unless ``folder`` passes ``problem``."""
    found = problem(folder, what, link_allowed=link_allowed)
    if found is not None:
        raise StateDirError(found)
