"""The documentation cannot drift from the code: the reference pages are generated, and the
checked-in ones must equal what the generator writes now."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from safeuninstall.base import errors

ROOT = Path(__file__).parent.parent


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = load_generator()


@pytest.mark.parametrize("page", sorted(GENERATOR.PAGES))
def test_checked_in_reference_page_is_what_the_generator_writes(page: str) -> None:
    checked_in = (ROOT / "docs" / "reference" / page).read_text(encoding="utf-8")
    assert checked_in == GENERATOR.PAGES[page](), (
        f"docs/reference/{page} is out of date: run python docs/gen_reference.py"
    )


@pytest.mark.parametrize("copy", sorted(GENERATOR.SHIPPED), ids=lambda p: p.name)
def test_a_file_the_package_ships_is_the_one_the_docs_keep(copy: Path) -> None:
    assert copy.read_bytes() == GENERATOR.SHIPPED[copy].read_bytes(), (
        f"{copy} is out of date: run python docs/gen_reference.py"
    )


def test_cli_reference_has_every_command_and_option() -> None:
    import click

    from safeuninstall.cli.commands import cli

    text = GENERATOR.cli_reference()
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        assert f"\n## {name}\n" in text
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}" in text or f", {opt}" in text, (name, opt)


def test_every_exit_code_has_a_meaning_and_the_reference_shows_the_same_table() -> None:
    constants = {v for k, v in vars(errors).items() if k.startswith("EXIT_") and k != "EXIT_CODES"}
    assert constants == set(errors.EXIT_CODES)
    page = (ROOT / "docs" / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    for code, meaning in errors.EXIT_CODES.items():
        assert f"| {code} | {meaning} |" in page


def test_exit_0_does_not_claim_a_probe_that_never_ran() -> None:
    """The README's own example ends `--no-probe ... exit 0`: exit 0 says a probe passed only
    where one ran."""
    meaning = errors.EXIT_CODES[errors.EXIT_OK]
    assert "every probe passed" not in meaning
    assert "--no-probe" in meaning
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "--no-probe urllib3   # removed without a check, exit 0" in readme


def test_readme_links_lead_to_files_that_exist() -> None:
    """mkdocs checks the links of the site; README.md is not part of it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert targets
    missing = [t for t in targets if "://" not in t and not (ROOT / t).is_file()]
    assert missing == []


def test_readme_and_home_page_lead_to_every_how_to_and_command() -> None:
    """A how-to no one links to is not read: the README and the site's home page name each,
    and the README names every command a user meets first."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs" / "how-to").glob("*.md")):
        assert f"(docs/how-to/{page.name})" in readme, page.name
        assert f"(how-to/{page.name})" in home, page.name
    for command in ("rollback", "doctor", "diff", "bisect", "run", "audit", "export", "try"):
        assert re.search(rf"(`|safe-uninstall ){command}\b", readme), command
    assert 'pip install -e ".[test]"\npython -m pytest\n' in readme  # the set-up lines


def test_generator_check_mode_agrees(capsys: pytest.CaptureFixture[str]) -> None:
    assert GENERATOR.main(["--check"]) == 0
    assert capsys.readouterr().out == ""
