"""One spelling per file of an environment, whichever path led to it.

RECORD lists a file relative to its site folder (``../../bin/x``), the loader model finds a
library through ``$ORIGIN/../lib``, a folder may be reached through a symlink: whoever
compares such paths (who owns a file, which files a removal deletes, which ones are shared)
compares them normalised.
"""

from __future__ import annotations

import functools
import os


@functools.cache  # the folders of one environment: thousands of strings
def _real_dir(folder: str) -> str:
    """``os.path.realpath(folder)``, built on its parent's: one lstat per folder instead of one
    per component of its path (a 3000-distribution environment has 6000 folders)."""
    parent, name = os.path.split(folder)
    if name in ("", ".", "..") or not parent or os.path.islink(folder):
        return os.path.realpath(folder)
    return os.path.join(_real_dir(parent), name)


def normalise(path: str) -> str:
    """The folder's real path plus the name (cheap: folders are few)."""
    folder, name = os.path.split(os.path.normpath(path))
    return os.path.join(_real_dir(folder), name)


def real_folder(folder: str) -> str:
    """The real path of ``folder`` as ``normalise`` resolves a file's folder: a file named
    ``name`` in it normalises to this joined with ``name``."""
    return _real_dir(os.path.normpath(folder))
