"""The --json contract (docs/reference/json.md): every command's object carries the format
version and is what docs/reference/json-schema.json describes, shown on real outputs of every
command on a real venv."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from jsonschema import Draft202012Validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

import safeuninstall
from safeuninstall.base.envelope import JSON_VERSION
from safeuninstall.base.outcome import Outcome
from safeuninstall.cli.commands import JSON_SCHEMA, cli
from tests.conftest import MakeVenv, Run, run_tool

SCHEMA_FILE = Path(__file__).parent.parent / "docs" / "reference" / "json-schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def validator(name: str) -> Draft202012Validator:
    """The schema of one command's object (a ``$defs`` entry), with every part it refers to."""
    return Draft202012Validator({"$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{name}"})


def problems(name: str, data: object) -> list[str]:
    """What is wrong with ``data`` as the object of ``name``, against its entry and against the
    whole schema (any command's object)."""
    found = [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:200]}"
        for e in validator(name).iter_errors(data)
    ]
    if not Draft202012Validator(SCHEMA).is_valid(data):
        found.append("not valid against the schema as a whole")
    return found


def required_keys(name: str) -> list[str]:
    """The keys the entry of ``name`` requires at the top, its own and those of what it
    refers to (an operation's envelope, a snapshot's keys)."""
    entry = SCHEMA["$defs"][name]
    keys = list(entry.get("required", ()))
    if "$ref" in entry:
        keys += required_keys(entry["$ref"].rpartition("/")[2])
    return keys


# -- the schema itself ---------------------------------------------------------------------


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_schema_has_the_version_the_tool_prints() -> None:
    """Every command's object (each extends the envelope) has the version the tool prints."""

    def objects(entry: dict[str, Any]) -> list[dict[str, Any]]:
        if "$ref" in entry:
            return objects(SCHEMA["$defs"][entry["$ref"].rpartition("/")[2]])
        if "anyOf" in entry:
            return [o for e in entry["anyOf"] for o in objects(e)]
        return [entry]

    found = objects(SCHEMA)
    assert len(found) >= len(SCHEMA["anyOf"])
    assert all(o["properties"]["json_version"]["enum"] == [JSON_VERSION] for o in found)


def test_the_schema_s_id_names_the_version() -> None:
    """A new version of the contract is a new schema: its $id changes with json_version."""
    assert SCHEMA["$id"] == f"urn:safe-uninstall:json-schema:{JSON_VERSION}"


def test_the_wheel_ships_the_schema_every_output_names() -> None:
    """The schema is package data (the wheel holds the package alone), and it is the file
    ``--json`` output names."""
    pyproject = tomllib.loads((SCHEMA_FILE.parent.parent.parent / "pyproject.toml").read_text())
    shipped = pyproject["tool"]["setuptools"]["package-data"]["safeuninstall"]
    package = Path(safeuninstall.__file__).parent
    assert JSON_SCHEMA.relative_to(package).as_posix() in shipped
    assert json.loads(JSON_SCHEMA.read_text()) == SCHEMA


def test_every_command_has_its_object_in_the_schema() -> None:
    """A command added to the CLI has its ``$defs`` entry, named as the command, listed in the
    top-level ``anyOf`` (what any output is) beside the error object."""
    commands = set(cli.list_commands(click.Context(cli)))
    listed = {item["$ref"].rpartition("/")[2] for item in SCHEMA["anyOf"]}
    assert listed == commands | {"error"}
    assert listed <= set(SCHEMA["$defs"])


def test_the_outcomes_in_the_schema_are_the_tool_s() -> None:
    assert sorted(SCHEMA["$defs"]["Outcome"]["enum"]) == sorted(o.id for o in Outcome)


def test_an_object_without_a_required_key_or_with_a_wrong_type_is_refused() -> None:
    """The check below is not vacuous: the schema refuses the error object without its
    version, with another version, or with an exit code that is not a number."""
    good = {"json_version": JSON_VERSION, "json_schema": "s", "outcome": "error", "exit_code": 2}
    good |= {"error": "e", "detail": ""}
    assert problems("error", good) == []
    assert problems("error", {k: v for k, v in good.items() if k != "json_version"})
    assert problems("error", {**good, "json_version": "0"})
    assert problems("error", {**good, "exit_code": "2"})
    assert problems("error", {**good, "new_key": [1]}) == []  # a key added is not a break


# -- real outputs of every command -----------------------------------------------------------


def test_every_command_s_real_output_is_what_the_schema_describes(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Each command run with --json for real, down the paths that fill its optional parts (a
    refusal, a failing probe and its restore, --keep-needed, a rollback, an error, a usage
    error), each output checked against its command's entry, and against the entry without
    each key it requires."""
    venv = make_venv("requests", "leftpad")
    probe = ("--probe", "import requests")
    outputs: list[tuple[str, tuple[str, ...], int, Run]] = []

    def tool(name: str, exit_code: int, *args: str) -> None:
        outputs.append((name, args, exit_code, venv.tool(*args)))

    tool("uninstall", 0, "--json", "--dry-run", *probe, "leftpad")
    tool("check", 0, "check", "--json", "urllib3")
    tool("probe", 0, "probe", "--json", *probe)
    tool("uninstall", 1, "--json", *probe, "urllib3")  # refused: requests requires it
    tool("uninstall", 3, "uninstall", "--json", "--allow-unmet", *probe, "urllib3")
    tool("uninstall", 0, "--json", "--keep-needed", *probe, "urllib3", "leftpad")
    good = outputs[-1][3].json()["snapshot"]  # leftpad still there
    assert isinstance(good, str)
    tool("diff", 0, "diff", "--json", good)
    tool("bisect", 0, "bisect", "--json", "--dry-run", good, "--probe", "import leftpad")
    described = tmp_path / "other-node.txt"  # another environment's set, as a file
    described.write_text("requests==2.32.3\nurllib3==2.2.1\n-e file:///src/project\n")
    tool("diff", 0, "diff", "--json", str(described))
    tool("bisect", 0, "bisect", "--json", good, "--probe", "import leftpad")
    tool("rollback", 0, "rollback", "--json")  # the bisect's snapshot is now: back to ``good``
    tool("run", 0, "run", "--json", "--", "true")
    tool("try", 7, "try", "--json", "--allow-unmet", *probe, "urllib3")  # breaks, undone
    tool("try", 0, "try", "--json", *probe, "--", "true")
    tool("snapshot", 0, "snapshot", "--json")
    tool("snapshots", 0, "snapshots", "--json")
    tool("show", 0, "show", "--json")
    tool("audit", 0, "audit", "--json")
    tool("recover", 0, "recover", "--json")  # nothing to recover
    tool("prune", 0, "prune", "--json", "--keep", "1")
    tool("export", 0, "export", "--json")
    tool("doctor", 0, "doctor", "--json")
    (venv.site_packages / "leftpad.py").unlink()  # hollow: a finding and its repair
    tool("doctor", 1, "doctor", "--json")
    outputs.append(("config", ("config", "--json"), 0, run_tool("config", "--json", cwd=tmp_path)))
    missing = ("uninstall", "--json", "--python", str(tmp_path / "missing"), "leftpad")
    outputs.append(("error", missing, 1, run_tool(*missing)))
    usage = ("--json", "--bogus")
    outputs.append(("error", usage, 2, run_tool(*usage)))

    wrong: dict[str, list[str]] = {}
    for name, args, exit_code, done in outputs:
        where = f"{name}: {' '.join(args)}"
        assert done.returncode == exit_code, (where, done.stdout[-2000:], done.stderr[-2000:])
        data = done.json()
        assert next(iter(data)) == "json_version", where  # first, as pip's reports have it
        assert data["json_schema"] == str(JSON_SCHEMA), where
        if found := problems(name, data):
            wrong[where] = found
        for key in required_keys(name):
            if not problems(name, {k: v for k, v in data.items() if k != key}):
                wrong.setdefault(where, []).append(f"{key}: required, but not missed")
    assert wrong == {}
    # the paths that fill an operation's optional parts were taken
    removals = [done.json()["outcome"] for name, _, _, done in outputs if name == "uninstall"]
    assert removals == ["dry-run", "refused-unmet", "probe-failed-restored", "removed-kept-needed"]
    (bisected,) = [
        done.json()
        for name, args, _, done in outputs
        if name == "bisect" and "--dry-run" not in args
    ]
    assert bisected["bisect"]["culprits"][0]["names"] == ["leftpad"]  # type: ignore[index]
    (rolled_back,) = [done.json() for name, _, _, done in outputs if name == "rollback"]
    assert rolled_back["outcome"] == "rolled-back"
    assert {name for name, *_ in outputs} == set(SCHEMA["$defs"]) & {
        item["$ref"].rpartition("/")[2] for item in SCHEMA["anyOf"]
    }


@pytest.mark.parametrize("args", [("--json", "--bogus"), ("snapshots", "--json", "--bogus")])
def test_a_usage_error_carries_the_version_too(args: tuple[str, ...], tmp_path: Path) -> None:
    done = run_tool(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.json()["json_version"] == JSON_VERSION
    assert done.json()["json_schema"] == str(JSON_SCHEMA)
    assert problems("error", done.json()) == []
