"""What every ``--json`` object begins with: the contract's version, where its schema is, and
how the command ended. Each command's payload extends it (operations/payloads.py); both are
encoded from their types, and the published schema is generated from the same types
(docs/gen_schema.py)."""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import Struct

from safeuninstall.base.outcome import Outcome

# The version of the --json contract (docs/reference/json.md and json-schema.json beside it):
# raised when a key is removed or renamed or its type changes; keys are added without it.
JSON_VERSION: Literal["2"] = "2"


class Envelope(Struct, kw_only=True):
    """The keys every object has: the contract's version (first), where its schema is, the
    outcome (null for a command that only reads) and the exit code."""

    # the version of this contract: it changes when a key is removed or renamed or changes
    # type, never when one is added
    json_version: Literal["2"] = JSON_VERSION
    # where this schema is, as the installed tool ships it (its $id names the version)
    json_schema: str = ""
    outcome: str | None = None  # how the command ended; null: a command that only reads
    exit_code: int = 0  # the tool's exit status (the exit-code table)


class Failure(Envelope, kw_only=True):
    """An error (the command did not get to an outcome of its own): one line for a person, and
    what more is known."""

    outcome: Literal["error"] = "error"
    error: str
    detail: str = ""


def encode(data: Envelope) -> str:
    """One --json object as printed: indented, the contract's version first (enumerations as
    their values, an outcome as its id)."""
    return msgspec.json.format(msgspec.json.encode(data, enc_hook=_id), indent=2).decode()


def _id(value: object) -> str:
    if isinstance(value, Outcome):
        return value.id
    raise NotImplementedError(f"cannot encode {type(value).__name__}")
