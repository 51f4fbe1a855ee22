"""The stress loops of tests/stress.py in a short form: a few iterations of each, so that they
cannot rot; `python -m tests.stress` runs 50 of each (the figures are in the closing notes)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests import stress
from tests.conftest import UV

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


@pytest.mark.parametrize("kind", stress.KINDS)
def test_the_invariant_holds_at_random_moments(kind: str, tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    try:
        seen = stress.run(kind, iterations=6, seed=seed, root=tmp_path)
    except stress.StressFailure as err:
        pytest.fail(f"{err} (python -m tests.stress --only {kind} --seed {seed})")
    assert sum(seen.values()) == 6
