"""Distribution names as the user types them: PEP 508 names, compared in their PEP 503 form."""

from __future__ import annotations

from packaging.utils import InvalidName, canonicalize_name

from .errors import InvalidInput


def parse_requested(names: list[str]) -> list[str]:
    """Canonical names, de-duplicated in order; an invalid name is refused."""
    seen: dict[str, None] = {}
    for raw in names:
        try:
            name = canonicalize_name(raw.strip(), validate=True)
        except InvalidName:
            raise InvalidInput(f"{raw!r} is not a valid distribution name") from None
        seen.setdefault(name, None)
    return list(seen)
