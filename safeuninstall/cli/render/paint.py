"""Colour, the caller's choice: a renderer that colours takes ``paint(text, tone)`` (the CLI
passes one built on click.style when colour is wanted) and defaults to plain text."""

from __future__ import annotations

from collections.abc import Callable, Mapping

# (text, tone) -> text; tones: "good", "warn", "bad"
Paint = Callable[[str, str], str]


def plain(text: str, tone: str) -> str:
    return text


def use_color(choice: str, *, isatty: bool, environ: Mapping[str, str]) -> bool:
    """``always``/``never`` are obeyed; ``auto`` colours a terminal unless NO_COLOR is set
    (to anything but the empty string, as no-color.org asks) or TERM is ``dumb``."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    return isatty and not environ.get("NO_COLOR") and environ.get("TERM") != "dumb"
