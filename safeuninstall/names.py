"""Distribution names as the user types them and as packaging compares them.

PEP 503 normalisation and the PEP 508 name grammar, one regular expression each: the same
answers as ``packaging.utils.canonicalize_name`` (a test holds them equal), without importing
``packaging.utils``, which pulls in ``packaging.tags`` and ``logging`` (5 ms on every command).
"""

from __future__ import annotations

import re

from .errors import InvalidInput

_SEPARATORS = re.compile(r"[-_.]+")
_VALID = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE)


def canonical(name: str) -> str:
    return _SEPARATORS.sub("-", name).lower()


def is_valid(name: str) -> bool:
    return _VALID.fullmatch(name) is not None


def parse_requested(names: list[str]) -> list[str]:
    """Canonical names, de-duplicated in order; an invalid name is refused."""
    seen: dict[str, None] = {}
    for raw in names:
        name = raw.strip()
        if not is_valid(name):
            raise InvalidInput(f"{raw!r} is not a valid distribution name")
        seen.setdefault(canonical(name), None)
    return list(seen)
