"""safe-uninstall: remove Python packages without breaking the environment."""

from __future__ import annotations

__version__ = "0.2.0"
