"""The tool's own PEP 503 / PEP 508 name rules give packaging.utils' answers."""

from __future__ import annotations

import pytest
from packaging.utils import InvalidName, canonicalize_name

from safeuninstall.environment.names import canonical_name, is_valid_name

NAMES = [
    "Django",
    "oslo.concurrency",
    "zope.interface",
    "nvidia-nccl-cu13",
    "Foo__Bar",
    "a-_.b",
    "a--b",
    "-leading",
    "trailing.",
    "a",
    "A1",
    "",
    ".",
    "_",
    "Ünicode",
    "with space",
    "x/y",
    "1.0",
]


@pytest.mark.parametrize("name", NAMES)
def test_canonical_name_is_packagings(name: str) -> None:
    assert canonical_name(name) == canonicalize_name(name)


@pytest.mark.parametrize("name", NAMES)
def test_a_valid_name_is_one_packaging_validates(name: str) -> None:
    try:
        canonicalize_name(name, validate=True)
    except InvalidName:
        valid = False
    else:
        valid = True
    assert is_valid_name(name) is valid
