"""Distribution names as the user types them (PEP 508 names, compared in their PEP 503 form),
and the names and versions the tool can record of what is installed."""

from __future__ import annotations

import re

# What an installed distribution may be called, and its version: what the tool records of it.
# Not PEP 508 / PEP 440: a snapshot records what IS installed, and an old or hand-made
# distribution ("1.0-custom build") must not make the tool's own snapshots unreadable. What is
# refused is what could act as something else: a path separator, a requirement's marker or URL
# syntax (";", "@", quotes), control characters, a name not in its canonical form, or a
# version that does not begin with a number (as every PEP 440 and legacy release does).
_SAFE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9 +-]{0,198}[a-z0-9])?")
_SAFE_VERSION = re.compile(r"[vV]?[0-9](?:[A-Za-z0-9 .+!_-]{0,126}[A-Za-z0-9])?")


# PEP 508's distribution name, and PEP 503's normal form: packaging.utils' rules, written here
# because packaging.utils imports packaging.tags (the platform and manylinux probes), which
# reading a snapshot does not need (docs/performance.md).
_VALID_NAME = re.compile(r"[a-z0-9]|[a-z0-9][a-z0-9._-]*[a-z0-9]", re.IGNORECASE | re.ASCII)
_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(value: str) -> str:
    """``value`` in PEP 503's normal form, as ``packaging.utils.canonicalize_name`` gives it."""
    return _SEPARATORS.sub("-", value).lower()


def is_valid_name(value: str) -> bool:
    """Whether ``value`` is a PEP 508 distribution name (``canonicalize_name``'s validate)."""
    return _VALID_NAME.fullmatch(value) is not None


def unsafe_name(value: str) -> str | None:
    """Why ``value`` can't be a recorded distribution name (canonical), or None when it can."""
    if canonical_name(value) != value:
        return f"is not in canonical form ({canonical_name(value)!r})"
    if not _SAFE_NAME.fullmatch(value):
        return "is not a distribution name this tool can record"
    return None


def unsafe_version(value: str) -> str | None:
    """Why ``value`` can't be a recorded version, or None when it can."""
    if not _SAFE_VERSION.fullmatch(value):
        return "is not a version this tool can record"
    return None
