"""Reading TOML, with the parser imported on first use.

Most commands read no TOML file at all (no journal, no config file, no snapshot to load), so the
parser's import stays off their start-up. A syntax error is a ``ValueError``
(``tomllib.TOMLDecodeError`` subclasses it).
"""

from __future__ import annotations

import sys
from typing import Any


def loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib.loads(text)
