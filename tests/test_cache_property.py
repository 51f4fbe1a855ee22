"""The caches of the state folder are hints: on the real torch stack, each command's result is
the same whether they are intact, deleted, truncated or forged (a forged file gives the same
result or a refusal, never another verdict)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Venv
from tests.realstack import Stacks

pytestmark = pytest.mark.realstack

# The wheel torch's import needs first: removing it fails the derived probe, and is restored.
CUDNN = "nvidia-cudnn-cu13"

Result = dict[str, Any]


@pytest.fixture(scope="module")
def torch_venv(stacks: Stacks, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    """One copy of the torch stack for the module (hard links into the stack cache: nothing
    here writes into an installed file in place)."""
    yield stacks.venv("torch", tmp_path_factory.mktemp("caches") / "torch")


def _tool(venv: Venv, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "safeuninstall", "--python", str(venv.root), "--json", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "UV_OFFLINE": "1"},
    )
    assert "Traceback" not in done.stderr, done.stderr
    data = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, data


def _results(venv: Venv) -> Result:
    """What each command decided, without what differs from one run to the next (times, ids
    of new snapshots, what the state folder itself weighs)."""
    code, check = _tool(venv, "check", CUDNN)
    results: Result = {"check": (code, check.get("outcome"), check.get("dependents"))}
    code, doctor = _tool(venv, "doctor")
    findings = doctor.get("findings")
    assert isinstance(findings, list)
    results["doctor"] = (
        code,
        doctor.get("healthy"),
        sorted((f["kind"], f["what"]) for f in findings),
    )
    code, audit = _tool(venv, "audit")
    dists = audit.get("distributions")
    assert isinstance(dists, list)
    results["audit"] = (
        code,
        audit.get("orphans"),
        audit.get("owned_bytes"),
        [(d["name"], d["bytes"], d["files"]) for d in dists],
        [d["soname"] for d in audit.get("duplicates", [])],
    )
    code, listing = _tool(venv, "snapshots")
    listed = listing.get("snapshots")
    assert isinstance(listed, list)
    results["snapshots"] = (code, [(s["id"], s["outcome"], s["removed"]) for s in listed])
    code, removal = _tool(venv, "--allow-unmet", CUDNN)
    verification = removal.get("verification") or {}  # none: nothing was restored
    results["removal"] = (
        code,
        removal.get("outcome"),
        removal.get("removed"),
        removal.get("restored"),
        verification.get("ok"),
    )
    return results


def _state(venv: Venv) -> Path:
    return venv.root / ".safe-uninstall"


def _caches(venv: Venv) -> list[Path]:
    state = _state(venv)
    found = [p for p in state.glob("*.json")]
    for folder in (state / "snapshots").iterdir():
        found += [p for p in folder.glob("*.json")]
    return sorted(found)


def _deleted(venv: Venv) -> None:
    for path in _caches(venv):
        path.unlink()


def _truncated(venv: Venv) -> None:
    for path in _caches(venv):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])


def _forged(venv: Venv) -> None:
    """Each file well formed and keyed for the things as they are now, its values false."""
    for path in _caches(venv):
        forge = _FORGERS.get(path.name)
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue  # left truncated by the test before: nothing rewrote it
        if forge is not None:
            path.write_text(json.dumps(forge(data, venv)))


def _data(data: dict[str, object]) -> dict[str, object]:
    """The value a cache file holds (base/cachefile.py: format, version, data)."""
    value = data["data"]
    assert isinstance(value, dict)
    return value


def _forge_records(data: dict[str, object], venv: Venv) -> object:
    for entry in _data(data).values():  # [key, folders, index, names]: lists nothing
        entry[2], entry[3] = [], []
    return data


def _forge_interpreter(data: dict[str, object], venv: Venv) -> object:
    interpreter = _data(data)["interpreter"]
    assert isinstance(interpreter, dict)
    elsewhere = str(venv.root.parent / "elsewhere")
    for key in ("prefix", "purelib", "platlib", "scripts"):
        interpreter[key] = str(interpreter[key]).replace(str(venv.root), elsewhere)
    return data


def _forge_baseline(data: dict[str, object], venv: Venv) -> object:
    for entry in _data(data).values():  # every candidate's output another, the probe slower
        entry["seconds"] = [took * 100 for took in entry["seconds"]]
        entry["candidates"] = [[["passed", "forged"] for _ in c] for c in entry["candidates"]]
    return data


def _forge_verified(data: dict[str, object], venv: Venv) -> object:
    for value in _data(data).values():  # [stamp, sha256]: another sha256
        value[-1] = "0" * 64
    return data


def _forge_head(data: dict[str, object], venv: Venv) -> object:
    _data(data).update(outcome="restored", removed=[], packages=1)  # its key kept
    return data


def _forge_twin(data: dict[str, object], venv: Venv) -> object:
    table = _data(data)["snapshot"]  # without the distributions it stashed: its key kept
    assert isinstance(table, dict)
    table["packages"] = [p for p in table["packages"] if "stash" not in p]
    return data


_FORGERS: dict[str, Callable[[dict[str, object], Venv], object]] = {
    "record-cache.json": _forge_records,
    "interpreter.json": _forge_interpreter,
    "baseline-cache.json": _forge_baseline,
    "stash-verified.json": _forge_verified,
    "head.json": _forge_head,
    "snapshot.json": _forge_twin,
}


@pytest.fixture(scope="module")
def intact(torch_venv: Venv) -> Result:
    _results(torch_venv)  # the caches written
    return _results(torch_venv)


def _same_but_new_snapshots(found: Result, expected: Result) -> None:
    """Each removal adds a snapshot: the listing is compared on the snapshots listed before."""
    code, listed = found["snapshots"]
    expected_code, expected_listed = expected["snapshots"]
    known = {s[0] for s in expected_listed}
    assert (code, [s for s in listed if s[0] in known]) == (expected_code, expected_listed)
    assert {k: v for k, v in found.items() if k != "snapshots"} == {
        k: v for k, v in expected.items() if k != "snapshots"
    }


@pytest.mark.parametrize("change", [_deleted, _truncated], ids=["deleted", "truncated"])
def test_the_caches_deleted_or_truncated_change_no_result(
    torch_venv: Venv, intact: Result, change: Callable[[Venv], None]
) -> None:
    change(torch_venv)
    _same_but_new_snapshots(_results(torch_venv), intact)


def _verdicts(results: Result) -> Result:
    """What each command decided: not audit's figures (bytes and files per distribution), which
    follow what the record cache says each RECORD lists, as they would follow a forged RECORD."""
    audit = results["audit"]
    assert isinstance(audit, tuple)
    return {**results, "audit": (audit[0], audit[1])}


def test_forged_caches_change_no_verdict(torch_venv: Venv, intact: Result) -> None:
    _results(torch_venv)  # every cache written again
    written = {p.name for p in _caches(torch_venv)}
    assert {"record-cache.json", "interpreter.json", "head.json", "snapshot.json"} <= written
    _forged(torch_venv)
    _same_but_new_snapshots(_verdicts(_results(torch_venv)), _verdicts(intact))
