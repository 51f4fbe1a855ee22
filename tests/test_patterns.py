"""Shell-style patterns in package arguments, -r files and ``check``: expanded over
canonical names, listed before anything happens, an error when they match nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from safeuninstall.base.errors import EXIT_USAGE, InvalidInput, UsageError
from safeuninstall.environment.requirements import Wanted, collect
from safeuninstall.plans.changes import plan_removal
from tests.conftest import MakeVenv, error_line, run_tool
from tests.test_units import installed_dist


def _argument(text: str, cwd: Path) -> Wanted:
    """One package argument, read as the command line's are (collect)."""
    (wanted,) = collect([text], [], cwd).wanted
    return wanted


NAMES = (
    "nvidia-cublas",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "nvidia-nvtx-cu12",
    "torch",
    "safe-uninstall",
    "uv",
)
INSTALLED = {name: installed_dist(name) for name in NAMES}


@pytest.mark.parametrize(
    ("text", "matched"),
    [
        ("nvidia-*-cu12", ("nvidia-nccl-cu12", "nvidia-nvtx-cu12")),
        ("NVIDIA_*_CU12", ("nvidia-nccl-cu12", "nvidia-nvtx-cu12")),  # as a name is normalised
        ("nvidia.nccl.cu1?", ("nvidia-nccl-cu12", "nvidia-nccl-cu13")),
        ("nvidia-nccl-cu1[!2]*", ("nvidia-nccl-cu13",)),
        (
            "*",
            ("nvidia-cublas", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nvtx-cu12", "torch"),
        ),
    ],
)
def test_a_pattern_expands_over_canonical_names(text: str, matched: tuple[str, ...]) -> None:
    wanted = _argument(text, Path("/work"))
    plan = plan_removal([wanted], INSTALLED)
    assert plan.remove == matched
    assert plan.expanded == ((text, matched),)
    assert plan.absent == ()


def test_brackets_alone_are_extras_not_a_pattern() -> None:
    wanted = _argument("nvidia-nccl-cu1[3]", Path("/"))
    assert (wanted.name, wanted.pattern) == ("nvidia-nccl-cu1", None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [("[", "an unclosed '['"), ("nvidia-*[", "an unclosed '['"), ("torch]", "a ']' without")],
)
def test_broken_brackets_are_a_usage_error(text: str, problem: str) -> None:
    with pytest.raises(UsageError, match=re.escape(problem)):
        _argument(text, Path("/"))
    # In a -r file it is a line that can't be used, as any other (exit 1).
    with pytest.raises(InvalidInput, match=re.escape(problem)) as err:
        _from_file(text)
    assert not isinstance(err.value, UsageError)


def _from_file(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "req.txt").write_text(text + "\n")
        collect([], ["req.txt"], Path(folder))


def test_broken_brackets_on_the_command_line_exit_2() -> None:
    run = run_tool("--python", "/nonexistent-python", "[")
    assert run.returncode == EXIT_USAGE, run.stdout + run.stderr
    assert error_line(run.stderr) == (
        "safe-uninstall: error: '[' is neither a package name nor a valid pattern (an unclosed "
        "'['); a pattern is a name with * or ?, and [...] sets (quote it from the shell)"
    )
    assert "Traceback" not in run.stderr


def test_a_pattern_never_matches_the_tool_or_uv_and_says_so() -> None:
    plan = plan_removal([_argument("*", Path("/"))], INSTALLED)
    assert "safe-uninstall" not in plan.remove and "uv" not in plan.remove
    assert "'*' leaves out safe-uninstall (a pattern never matches it: name it to remove it)" in (
        plan.notes
    )
    named = plan_removal([_argument("uv", Path("/"))], INSTALLED)
    assert named.remove == ("uv",)  # named, it is removed as asked


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("torhc*", "did you mean torch?"),
        ("nvidia-*-cu11", "did you mean"),
        ("uv*", "a pattern never matches uv"),
    ],
)
def test_a_pattern_that_matches_nothing_is_an_error(text: str, hint: str) -> None:
    with pytest.raises(
        InvalidInput, match=re.escape(f"the pattern '{text}' matches no installed")
    ) as err:
        plan_removal([_argument(text, Path("/"))], INSTALLED)
    assert hint in err.value.message


def test_patterns_in_a_requirements_file(tmp_path: Path) -> None:
    (tmp_path / "leftovers.txt").write_text("nvidia-*-cu12  # the cu12 copies\ntorch\n")
    request = collect((), ("leftovers.txt",), tmp_path)
    plan = plan_removal(request.wanted, INSTALLED)
    assert plan.remove == ("nvidia-nccl-cu12", "nvidia-nvtx-cu12", "torch")
    assert plan.expanded == (("nvidia-*-cu12", ("nvidia-nccl-cu12", "nvidia-nvtx-cu12")),)


def test_the_expansion_is_listed_before_anything_happens(make_venv: MakeVenv) -> None:
    venv = make_venv("nvfoo-cu13", "nvbar-cu13", "leftpad")
    before = venv.file_hashes()
    dry = venv.tool("--dry-run", "--json", "NVFOO*", "nv?ar-*")
    data = dry.json()
    assert data["patterns"] == {"NVFOO*": ["nvfoo-cu13"], "nv?ar-*": ["nvbar-cu13"]}
    assert data["removed"] == ["nvfoo-cu13==1.0", "nvbar-cu13==1.0"]
    assert data["outcome"] == "dry-run"
    events = [e["text"] for e in data["events"]]  # type: ignore[index]
    assert "pattern 'NVFOO*' matches: nvfoo-cu13" in events
    checked = venv.tool("check", "nv*-cu13")
    assert "pattern 'nv*-cu13' matches: nvbar-cu13, nvfoo-cu13" in checked.stdout
    missing = venv.tool("nvfo-*")
    assert missing.returncode == 1, missing.stderr  # nothing was changed
    assert "the pattern 'nvfo-*' matches no installed distribution" in missing.stderr
    assert venv.file_hashes() == before
    removed = venv.tool("--no-probe", "LeftPad*")
    assert removed.returncode == 0, removed.stderr
    assert "pattern 'LeftPad*' matches: leftpad" in removed.stderr
    assert "leftpad" not in venv.installed()


def test_a_pattern_in_a_requirements_file_that_matches_nothing_is_nothing_to_do(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """The CI hygiene job: a cleanup file run on a node that never had the cu12 wheels, or a
    second time after the cleanup, ends as a name that is not installed does: exit 0."""
    venv = make_venv("nvfoo-cu13", "leftpad")
    cleanup = tmp_path / "cleanup.txt"
    cleanup.write_text("nvidia-*-cu12\nleftpad\n")

    first = venv.tool("--no-probe", "-r", str(cleanup))
    again = venv.tool("--no-probe", "-r", str(cleanup))

    assert first.returncode == 0, first.stdout + first.stderr
    assert "leftpad" not in venv.installed()
    assert again.returncode == 0, again.stdout + again.stderr
    said = f"{cleanup}:1: the pattern 'nvidia-*-cu12' matches nothing installed"
    assert said in again.stdout + again.stderr
    assert venv.installed() == {"nvfoo-cu13": "1.0"}
    # On the command line a pattern stays strict.
    assert venv.tool("--no-probe", "nvidia-*-cu12").returncode == 1
