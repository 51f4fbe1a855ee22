"""Counts in the text agree with their number: one file, two files; one passes, two pass."""

from __future__ import annotations

import pytest

from safeuninstall.cli.render.audit import _uses_text
from safeuninstall.libraries.index import Ownership
from safeuninstall.probe.runner import Probe
from safeuninstall.reports.audit import DistributionAudit, LibraryUse
from safeuninstall.reports.doctor import Finding
from safeuninstall.reports.needs import _needed_by_shared_files
from tests.test_derived_probe import PROBE, A, B, C, ran


@pytest.mark.parametrize(
    ("missing", "text"),
    [
        (1, "a 1.0 is installed but 1 of its files is missing: a reinstall of a==1.0 brings it"),
        (2, "a 1.0 is installed but 2 of its files are missing: a reinstall of a==1.0 brings them"),
    ],
)
def test_a_hollow_distributions_missing_files(missing: int, text: str) -> None:
    finding = Finding("hollow", "a==1.0", "", "a==1.0", reinstall=True, missing_files=missing)
    assert finding.describe() == f"{text} back"


@pytest.mark.parametrize(
    ("shared", "text"),
    [
        (["x/one"], "1 of its files is listed by b too (x/one): removing it would delete it "),
        (
            ["x/one", "x/two"],
            "2 of its files are listed by b too (such as x/one): removing it would delete them ",
        ),
    ],
)
def test_the_files_a_candidate_shares(shared: list[str], text: str) -> None:
    owners = {path: ("a", "b") for path in shared}
    owned = Ownership(owners, {"a": tuple(shared), "b": tuple(shared)})
    (reason,) = _needed_by_shared_files(owned, ["a"], {})["a"].reasons
    assert reason == text + "and leave b hollow"


@pytest.mark.parametrize(
    ("ends", "counts"),
    [
        (((A, "passed"),), "1 of 1 candidate passes"),
        (((A, "passed"), (B, "passed")), "2 of 2 candidates pass"),
        (((A, "passed"), (B, "failed"), (C, "passed")), "2 of 3 candidates pass, 1 fails"),
        (((A, "failed"), (B, "failed"), (C, "passed")), "1 of 3 candidates passes, 2 fail"),
    ],
)
def test_the_derived_probes_candidates(ends: tuple[tuple[object, str], ...], counts: str) -> None:
    result = ran(*ends)  # type: ignore[arg-type]
    assert result.summary().split("; ")[1] == counts


@pytest.mark.parametrize(("n", "label"), [(1, "1 candidate"), (3, "3 candidates")])
def test_the_derived_probes_label(n: int, label: str) -> None:
    probe = Probe(PROBE.kind, "...", "derived", candidates=(A, B, C)[:n])
    assert probe.label == f"the derived probe ({label})"


@pytest.mark.parametrize(
    ("count", "more"), [(2, "; and 1 more object"), (3, "; and 2 more objects")]
)
def test_the_objects_an_audit_does_not_name(count: int, more: str) -> None:
    use = LibraryUse("/v/lib/a.so", "a", "libb.so.1", "/v/lib/libb.so.1")
    dist = DistributionAudit(
        name="b", version="1", installer="uv", requested=False, bytes=0, files=1,
        loaded_by=(use,), loaded_by_count=count,
    )  # fmt: skip
    assert _uses_text(dist, "/v", verbose=False) == f"libb.so.1 by lib/a.so{more}"
