"""What to remove, read as ``uv pip uninstall`` reads it: each argument form and each
requirement-file form, parsed and planned without an environment."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest

from safeuninstall.base.errors import InvalidInput, NotRestorable
from safeuninstall.context.context import Context
from safeuninstall.environment.interpreter import Interpreter, with_layout
from safeuninstall.environment.requirements import Wanted, collect
from safeuninstall.plans.changes import one_edit, plan_removal
from tests.conftest import MakeVenv, run_tool
from tests.test_units import installed_dist


def _argument(text: str, cwd: Path) -> Wanted:
    """One package argument, read as the command line's are (collect)."""
    (wanted,) = collect([text], [], cwd).wanted
    return wanted


# -- arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "specifier"),
    [
        ("Requests", "requests", ""),
        ("nvidia_cudnn.cu13", "nvidia-cudnn-cu13", ""),
        ("rich==15.0.0", "rich", "==15.0.0"),
        ("rich[jupyter]", "rich", ""),
        ("rich>=13", "rich", ">=13"),
        ("rich; python_version < '3'", "rich", ""),
        ("rich @ https://example.com/rich-13.0-py3-none-any.whl", "rich", ""),
    ],
)
def test_a_requirement_names_a_distribution(text: str, name: str, specifier: str) -> None:
    wanted = _argument(text, Path("/work"))
    assert (wanted.name, wanted.specifier, wanted.location) == (name, specifier, None)


@pytest.mark.parametrize(
    ("text", "location"),
    [
        ("./project", "/work/project"),
        ("../other/project/", "/other/project"),
        ("/abs/project", "/abs/project"),
        ("file:///abs/project", "/abs/project"),
        ("GTrolls.tar.gz", "/work/GTrolls.tar.gz"),  # an archive's name is a file, for uv
        ("dist/x-1.0-py3-none-any.whl", "/work/dist/x-1.0-py3-none-any.whl"),
        ("./project[extra]", "/work/project"),
        ("${UNSET_IN_THIS_TEST}/project", "/work/${UNSET_IN_THIS_TEST}/project"),  # as uv
        ("https://example.com/x-1.0.tar.gz", "https://example.com/x-1.0.tar.gz"),
        ("git+https://example.com/x.git", "git+https://example.com/x.git"),
    ],
)
def test_a_path_or_url_is_an_unnamed_requirement(text: str, location: str) -> None:
    wanted = _argument(text, Path("/work"))
    assert (wanted.name, wanted.location) == (None, location)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("flask==1.0.x", "not a requirement: 'flask==1.0.x'"),
        ("https://guyto.com/archives/", "must end in a supported file extension"),
        ("", "an empty package argument"),
        ("-foo", "not a requirement"),
        # uv: "Expected package name starting with an alphanumeric character, found `$`"
        ("$$$", "not a requirement: '\\$\\$\\$'"),
        ("${FOO}", "not a requirement: '\\$\\{FOO\\}'"),
    ],
)
def test_what_uv_cannot_parse_is_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        _argument(text, Path("/work"))


# -- requirement files ----------------------------------------------------------------------


def read(tmp_path: Path, files: dict[str, str], *names: str) -> tuple[list[str], list[str]]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    request = collect((), names, tmp_path, environ={"PROJECT": "proj"})
    shown = [w.name or f"@{w.location}" for w in request.wanted]
    return shown, list(request.notes)


def test_options_are_ignored_with_a_note(tmp_path: Path) -> None:
    text = (
        "--index-url https://download.pytorch.org/whl/cu128\n"
        "--extra-index-url=https://example.com/simple\n"
        "-f https://example.com/wheels\n--no-index\n--trusted-host example.com\n"
        "torch==2.8.0+cu128 --hash=sha256:abc \\\n    --hash=sha256:def\n"
        "numpy  # the array library\n"
    )
    names, notes = read(tmp_path, {"req.txt": text}, "req.txt")
    assert names == ["torch", "numpy"]
    assert len(notes) == 5 and all("ignored" in note for note in notes)
    assert notes[0].startswith("req.txt:1: '--index-url")


def test_nested_files_are_followed_relative_to_their_folder(tmp_path: Path) -> None:
    files = {
        "req.txt": "-r sub/base.txt\nrich\n",
        "sub/base.txt": "--requirement=more.txt\nsix\n-r more.txt\n",  # twice: read once
        "sub/more.txt": "attrs\n",
    }
    names, _ = read(tmp_path, files, "req.txt")
    assert names == ["attrs", "six", "rich"]


def test_a_cycle_of_files_is_refused(tmp_path: Path) -> None:
    files = {"a.txt": "-r b.txt\n", "b.txt": "-r a.txt\n"}
    with pytest.raises(InvalidInput, match=r"include each other: .*a\.txt -> .*b\.txt -> .*a\.txt"):
        read(tmp_path, files, "a.txt")


def test_nesting_is_bounded(tmp_path: Path) -> None:
    files = {f"{i}.txt": f"-r {i + 1}.txt\n" for i in range(20)}
    with pytest.raises(InvalidInput, match="more than 16 nested requirement files"):
        read(tmp_path, files, "0.txt")


def test_editable_lines_name_a_location(tmp_path: Path) -> None:
    text = f"-e ./proj\n-e file://{tmp_path}/other\n--editable=${{PROJECT}}\n-e ./proj#egg=x\n"
    names, _ = read(tmp_path, {"req.txt": text}, "req.txt")
    assert names == [f"@{tmp_path}/{n}" for n in ("proj", "other", "proj", "proj")]


def test_constraints_remove_nothing(tmp_path: Path) -> None:
    names, notes = read(tmp_path, {"req.txt": "-c constraints.txt\nsix\n"}, "req.txt")
    assert names == ["six"] and "constraints name nothing to remove" in notes[0]


def test_uv_pip_freeze_output(tmp_path: Path) -> None:
    text = (
        f"-e file://{tmp_path}/proj\n"
        "local @ file:///wheels/local-1.0-py3-none-any.whl\n"
        "torch==2.8.0+cu128\n"
        "vcs @ git+https://example.com/vcs.git@0123abcd\n"
    )
    names, notes = read(tmp_path, {"frozen.txt": text}, "frozen.txt")
    assert names == [f"@{tmp_path}/proj", "local", "torch", "vcs"] and notes == []


def test_script_with_inline_metadata(tmp_path: Path) -> None:
    text = '# /// script\n# dependencies = [\n#   "rich",\n#   "six>1",\n# ]\n# ///\nprint(1)\n'
    names, _ = read(tmp_path, {"tool.py": text}, "tool.py")
    assert names == ["rich", "six"]


@pytest.mark.parametrize("name", ["setup.py", "setup.cfg", "pyproject.toml", "pylock.toml"])
def test_a_file_uv_reads_no_requirement_from_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidInput, match="uv pip uninstall reads no requirement from"):
        read(tmp_path, {name: ""}, name)


def test_a_remote_file_is_not_fetched(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not fetched"):
        read(tmp_path, {}, "https://example.com/req.txt")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("flask==1.0.x\n", "req.txt:1: not a requirement"),
        ("[x]\n", "req.txt:1: not a requirement"),
        ("${UNSET_IN_THIS_TEST}\n", "req.txt:1: not a requirement"),  # as uv: no name, no path
        ("-e ${UNSET_IN_THIS_TEST}\n", "req.txt:1: not a requirement"),  # as uv
    ],
)
def test_a_bad_line_names_file_and_line(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        read(tmp_path, {"req.txt": text}, "req.txt")


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"-r requirements\.txt: file not found"):
        read(tmp_path, {}, "requirements.txt")


# -- the plan -------------------------------------------------------------------------------


def test_a_version_that_does_not_match_is_removed_with_a_note() -> None:
    installed = {"rich": installed_dist("rich", "13.7.1")}
    plan = plan_removal([_argument("rich==15.0.0", Path("/"))], installed)
    assert plan.remove == ("rich",)
    assert plan.notes == (
        "rich==15.0.0: rich 13.7.1 is installed, and is removed all the same (uv and pip "
        "remove by name, whatever the version)",
    )
    matching = plan_removal([_argument("rich>=13", Path("/"))], installed)
    assert matching.remove == ("rich",) and matching.notes == ()


def test_a_location_names_what_was_installed_from_there() -> None:
    installed = {
        "proj": installed_dist("proj", url="file:///work/proj"),
        "other": installed_dist("other", url="file:///work/other/"),
    }
    wanted = [
        _argument("./proj", Path("/work")),
        _argument("/work/other", Path("/")),
        _argument("proj", Path("/")),  # by name too: removed once
        _argument("./missing", Path("/work")),
    ]
    plan = plan_removal(wanted, installed)
    assert plan.remove == ("proj", "other")
    assert plan.absent == ("./missing",)


def test_typos_get_a_suggestion() -> None:
    installed = {"requests": installed_dist("requests"), "rich": installed_dist("rich")}
    wanted = [Wanted(text=n, name=n) for n in ("reqeusts", "rollbak", "zzz")]
    plan = plan_removal(wanted, installed, commands=("rollback", "snapshots"))
    assert plan.absent == ("reqeusts", "rollbak", "zzz")
    assert plan.notes == (
        "reqeusts is not installed: did you mean requests (installed)?",
        "rollbak is not installed: did you mean the command `safe-uninstall rollback`?",
    )


@pytest.mark.parametrize(
    ("typed", "installed", "meant"),
    [
        # the torch stack's own names: a suffix dropped is nearer than an edit inside the name
        ("nvidia-cusparse-cu13", ["nvidia-cusparse", "nvidia-cusparselt-cu13"], "nvidia-cusparse"),
        ("nvidia-curand-cu13", ["nvidia-curand", "nvidia-cudnn-cu13"], "nvidia-curand"),
        ("nvidia-nccl-cu12", ["nvidia-nccl-cu13", "nvidia-nvtx-cu12"], "nvidia-nccl-cu13"),
        ("nvidia-cudnn", ["nvidia-cudnn-cu13", "nvidia-cufft"], "nvidia-cudnn-cu13"),
        ("cupy-cuda11x", ["cupy-cuda12x", "cupy"], "cupy-cuda12x"),
        ("nvidia-cusparselt-cu13", ["nvidia-cusparse-cu13"], "nvidia-cusparse-cu13"),  # an edit
    ],
)
def test_a_cuda_suffix_dropped_or_changed_is_the_nearest(
    typed: str, installed: list[str], meant: str
) -> None:
    plan = plan_removal([Wanted(text=typed, name=typed)], {n: installed_dist(n) for n in installed})
    assert plan.notes == (f"{typed} is not installed: did you mean {meant} (installed)?",)


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [
        ("rollbak", "rollback", True),
        ("rolback", "rollback", True),
        ("rollbakc", "rollback", True),
        ("rollbcak", "rollback", True),
        ("snapshot", "snapshots", True),
        ("rollback", "rollback", False),
        ("rlbk", "rollback", False),
        ("prun", "probe", False),
    ],
)
def test_one_edit(a: str, b: str, near: bool) -> None:
    assert one_edit(a, b) is near
    assert one_edit(b, a) is near


def test_standard_input(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"six\n-r sub.txt\n")
    os.close(write_end)
    (tmp_path / "sub.txt").write_text("rich\n")
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        request = collect((), ("-",), tmp_path)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    assert [w.name for w in request.wanted] == ["six", "rich"]


# -- on the command line --------------------------------------------------------------------


def test_strict_makes_not_installed_an_error(make_venv: MakeVenv) -> None:
    venv = make_venv("leftpad", "requests")
    hashes = venv.file_hashes()
    run = venv.tool("--strict", "--no-probe", "leftpad", "reqeusts")
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        "--strict: not installed: reqeusts; reqeusts is not installed: did you mean " in run.stderr
    )
    assert "requests (installed)" in run.stderr
    assert venv.file_hashes() == hashes
    assert venv.tool("--no-probe", "leftpad", "reqeusts").returncode == 0  # without: skipped


def test_the_top_level_help_lists_the_removal_options() -> None:
    shown = run_tool("--help").stdout
    assert "Usage: safe-uninstall [OPTIONS] PACKAGE... | COMMAND [ARGS]..." in shown
    removal = shown.split("Removal options", 1)[1].split("Commands:", 1)[0]
    for option in ("--dry-run", "-r, --requirements", "--no-probe", "--target", "-y, --yes"):
        assert option in removal, removal


def test_an_externally_managed_interpreter(tmp_path: Path) -> None:
    """PEP 668: uv changes such an interpreter only with --break-system-packages; never a
    venv, a --target or a --prefix folder."""
    (tmp_path / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=use apt\n")
    system = Interpreter(
        "/usr/bin/python3",
        "/usr",
        "/usr",
        "3.11.2",
        "/usr/lib",
        "/usr/lib",
        "/usr/bin",
        {},
        stdlib=str(tmp_path),
    )
    assert system.externally_managed() == "[externally-managed]\nError=use apt\n"
    venv = msgspec.structs.replace(system, prefix="/v")
    assert venv.is_venv and venv.externally_managed() is None
    target = with_layout(system, target=str(tmp_path), prefix=None)
    assert not target.is_venv and target.layout == "target"
    assert target.externally_managed() is None
    assert target.site_dirs == (tmp_path,) and target.scripts == str(tmp_path / "bin")
    prefix = with_layout(system, target=None, prefix=str(tmp_path))
    assert prefix.site_dirs == (tmp_path / "lib" / "python3.11" / "site-packages",)


def test_an_externally_managed_interpreter_is_refused_unless_asked(tmp_path: Path) -> None:
    (tmp_path / "EXTERNALLY-MANAGED").write_text(
        "[externally-managed]\nError=To install Python packages system-wide, use apt.\n"
    )
    system = Interpreter(
        "/usr/bin/python3",
        "/usr",
        "/usr",
        "3.11.2",
        "/usr/lib",
        "/usr/lib",
        "/usr/bin",
        {},
        stdlib=str(tmp_path),
    )
    refuse = Context.refuse_externally_managed
    with pytest.raises(NotRestorable, match="indicates the following: To install Python packages"):
        refuse(SimpleNamespace(interpreter=system, break_system_packages=False))  # type: ignore[arg-type]
    refuse(SimpleNamespace(interpreter=system, break_system_packages=True))  # type: ignore[arg-type]
