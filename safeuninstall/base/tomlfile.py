"""Reading TOML: tomllib, or tomli on Python 3.10. A syntax error is a ``ValueError``
(``tomllib.TOMLDecodeError`` subclasses it).
"""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def loads(text: str) -> dict[str, Any]:
    return tomllib.loads(text)
