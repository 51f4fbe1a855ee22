"""Distribution names as the user types them and as packaging compares them."""

from __future__ import annotations

from packaging.utils import InvalidName, canonicalize_name

from .errors import InvalidInput


def canonical(name: str) -> str:
    return str(canonicalize_name(name))


def parse_requested(names: list[str]) -> list[str]:
    """Canonical names, de-duplicated in order; an invalid name is a usage error."""
    seen: dict[str, None] = {}
    for raw in names:
        name = raw.strip()
        try:
            key = str(canonicalize_name(name, validate=True))
        except InvalidName:
            raise InvalidInput(f"{raw!r} is not a valid distribution name") from None
        seen.setdefault(key, None)
    return list(seen)
