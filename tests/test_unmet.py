"""Unmet requirements, a verdict of their own: a removal that leaves a requirement of a remaining
distribution unmet is refused before any change, unless --allow-unmet.

Unit tests of impact.unmet_requirements on dist-info folders written here; the command on toy
wheels; then real stacks from the package index (rich, a CUDA torch build).
"""

from __future__ import annotations

import os
import shlex
import string
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safeuninstall.environment.installed import InstalledDistribution, read_distribution
from safeuninstall.reports.impact import Unmet, removal_closure, unmet_requirements
from tests.conftest import UV, MakeVenv, Run, Venv
from tests.realstack import RealVenv
from tests.wheels import build_wheel

# A Linux x86_64 CPython 3.11 target, whatever machine runs the tests.
LINUX = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.9",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_release": "6.1.0",
    "platform_system": "Linux",
    "platform_version": "#1 SMP",
    "python_full_version": "3.11.9",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "sys_platform": "linux",
}
WINDOWS = {**LINUX, "os_name": "nt", "platform_system": "Windows", "sys_platform": "win32"}

Dist = tuple[str, str, Sequence[str]]  # name, version, Requires-Dist lines


def installed(tmp_path: Path, *dists: Dist) -> dict[str, InstalledDistribution]:
    """The installed set of a site folder holding ``dists``' dist-info folders."""
    found = {}
    for name, version, requires in dists:
        folder = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        folder.mkdir()
        header = [
            f"Name: {name}",
            f"Version: {version}",
            *(f"Requires-Dist: {r}" for r in requires),
        ]
        (folder / "METADATA").write_text("\n".join(header) + "\n\nthe long description\n")
        dist = read_distribution(folder)
        assert dist is not None
        found[dist.key] = dist
    return found


def test_a_removed_requirement_is_unmet(tmp_path: Path) -> None:
    env = installed(
        tmp_path,
        ("rich", "15.0.0", ["markdown-it-py>=2.2.0", "pygments<3,>=2.13"]),
        ("markdown-it-py", "4.3.0", ["mdurl~=0.1"]),
        ("mdurl", "0.1.2", []),
        ("pygments", "2.21.0", []),
    )
    assert unmet_requirements(env, LINUX, ["markdown-it-py"]) == (
        Unmet("rich", "markdown-it-py>=2.2.0", "markdown-it-py"),
    )
    # Only the direct requirement: rich's on markdown-it-py is still met by what is installed.
    assert unmet_requirements(env, LINUX, ["mdurl"]) == (
        Unmet("markdown-it-py", "mdurl~=0.1", "mdurl"),
    )
    # Removed together, nothing that stays is left without what it needs.
    assert unmet_requirements(env, LINUX, ["rich", "markdown-it-py", "mdurl", "pygments"]) == ()
    assert unmet_requirements(env, LINUX, ["rich"]) == ()


def test_markers_of_the_target_decide(tmp_path: Path) -> None:
    env = installed(
        tmp_path,
        (
            "app",
            "1",
            [
                'winonly; sys_platform == "win32"',
                'linuxonly; platform_system == "Linux" and python_version >= "3.10"',
                'oldpython; python_version < "3.8"',
            ],
        ),
        ("winonly", "1", []),
        ("linuxonly", "1", []),
        ("oldpython", "1", []),
    )
    everything = ["winonly", "linuxonly", "oldpython"]
    on_linux = unmet_requirements(env, LINUX, everything)
    assert [u.required for u in on_linux] == ["linuxonly"]
    # The target's markers, not those of the interpreter running the tool.
    on_windows = unmet_requirements(env, WINDOWS, everything)
    assert [u.required for u in on_windows] == ["winonly"]


# The shape of torch 2.14.1 and cuda-toolkit 13.0.3: the library wheels are required only
# behind cuda-toolkit's extras, and torch requests the extras.
TOOLKIT = (
    "cuda-toolkit",
    "13.0.3.0",
    [
        "nvidia-cublas==13.1.1.3.*; sys_platform == 'linux' and extra == 'all'",
        "nvidia-cublas==13.1.1.3.*; sys_platform == 'linux' and extra == 'cublas'",
        "nvidia-cublas==13.1.1.3.*; sys_platform == 'linux' and extra == 'cusolver'",
        "nvidia-cufft==12.0.0.61.*; sys_platform == 'linux' and extra == 'cufft'",
        "nvidia-npp==13.0.1.2.*; sys_platform == 'linux' and extra == 'npp'",
    ],
)
CUBLAS = ("nvidia-cublas", "13.1.1.3", [])
CUFFT = ("nvidia-cufft", "12.0.0.61", [])
NPP = ("nvidia-npp", "13.0.1.2", [])
TORCH_TOOLKIT = 'cuda-toolkit[cublas,cufft,cusolver]==13.0.3; platform_system == "Linux"'


def test_an_extra_that_a_remaining_distribution_requests_counts(tmp_path: Path) -> None:
    env = installed(tmp_path, ("torch", "2.14.1", [TORCH_TOOLKIT]), TOOLKIT, CUBLAS, CUFFT, NPP)

    found = unmet_requirements(env, LINUX, ["nvidia-cublas"])

    lines = TOOLKIT[2]
    assert found == (
        Unmet("cuda-toolkit", lines[1], "nvidia-cublas", "cublas", ("torch",)),
        Unmet("cuda-toolkit", lines[2], "nvidia-cublas", "cusolver", ("torch",)),
    )
    assert found[0].describe() == (
        "cuda-toolkit[cublas] requires nvidia-cublas==13.1.1.3.*, an extra requested by torch"
    )
    # The fix names torch, who requests the extra: cuda-toolkit itself may stay.
    assert removal_closure(env, LINUX, ["nvidia-cublas"]) == ("nvidia-cublas", "torch")
    # npp is behind an extra no one requests; "all" is requested by no one either.
    assert unmet_requirements(env, LINUX, ["nvidia-npp"]) == ()


def test_an_extra_requested_by_no_one_that_stays_does_not_count(tmp_path: Path) -> None:
    env = installed(
        tmp_path,
        ("torch", "2.14.1", [TORCH_TOOLKIT]),
        ("other", "1", ["cuda-toolkit[npp]; platform_machine == 'aarch64'"]),  # not on x86_64
        TOOLKIT,
        CUBLAS,
        NPP,
    )
    assert unmet_requirements(env, LINUX, ["nvidia-npp"]) == ()
    # torch's request goes with torch.
    assert unmet_requirements(env, LINUX, ["nvidia-cublas", "torch"]) == ()
    arm = {**LINUX, "platform_machine": "aarch64"}
    assert unmet_requirements(env, arm, ["nvidia-npp"]) == (
        Unmet("cuda-toolkit", TOOLKIT[2][4], "nvidia-npp", "npp", ("other",)),
    )


def test_extras_requested_through_extras(tmp_path: Path) -> None:
    """app requests mid[gpu]; mid[gpu] requests cuda-toolkit[all]; cuda-toolkit[all] requests
    its own [cublas] (an extra that names others of its own, as many do)."""
    toolkit = (
        "cuda-toolkit",
        "13.0.3.0",
        [
            "cuda-toolkit[cublas]; extra == 'all'",
            "nvidia-cublas>=13; extra == 'cublas'",
        ],
    )
    mid = ("mid", "1", ['cuda-toolkit[all]; extra == "gpu"'])
    env = installed(tmp_path, ("app", "1", ["mid[gpu]"]), mid, toolkit, CUBLAS)

    (found,) = unmet_requirements(env, LINUX, ["nvidia-cublas"])

    assert (found.dependent, found.extra, found.requested_by) == (
        "cuda-toolkit",
        "cublas",
        ("mid",),
    )
    assert removal_closure(env, LINUX, ["nvidia-cublas"]) == ("nvidia-cublas", "mid", "app")
    # Without app, no one asks for mid[gpu]: the chain of extras is off.
    without_app = {k: v for k, v in env.items() if k != "app"}
    assert unmet_requirements(without_app, LINUX, ["nvidia-cublas"]) == ()


@pytest.mark.parametrize("reverse", [False, True])
def test_every_requester_of_an_extra_is_named(tmp_path: Path, reverse: bool) -> None:
    """toolkit[all] is requested by app1 directly and by mid through its extra gpu, which
    app2 requests: both are named, whichever order the lines are met in."""
    toolkit = ("toolkit", "1", ["toolkit[blas]; extra == 'all'", "blas; extra == 'blas'"])
    dists: list[Dist] = [
        ("app2", "1", ["mid[gpu]"]),
        ("app1", "1", ["toolkit[all]"]),
        ("mid", "1", ["toolkit[all]; extra == 'gpu'"]),
        toolkit,
        ("blas", "1", []),
    ]
    env = installed(tmp_path, *(reversed(dists) if reverse else dists))

    (found,) = unmet_requirements(env, LINUX, ["blas"])

    assert (found.extra, found.requested_by) == ("blas", ("app1", "mid"))
    assert removal_closure(env, LINUX, ["blas"]) == ("blas", "app1", "mid", "app2")


def test_cycles_end(tmp_path: Path) -> None:
    env = installed(
        tmp_path,
        ("a", "1", ["b"]),
        ("b", "1", ["a"]),
        # Extras in a circle that no one outside requests: none is on.
        ("x", "1", ["y[p]; extra == 'q'", "leaf; extra == 'q'"]),
        ("y", "1", ["x[q]; extra == 'p'"]),
        ("leaf", "1", []),
    )
    assert unmet_requirements(env, LINUX, ["a"]) == (Unmet("b", "a", "a"),)
    assert removal_closure(env, LINUX, ["a"]) == ("a", "b")
    assert unmet_requirements(env, LINUX, ["leaf"]) == ()


def test_requirements_unmet_before_do_not_count(tmp_path: Path) -> None:
    env = installed(
        tmp_path,
        ("app", "1", ["old>=2", "missing", "fine"]),
        ("old", "1.0", []),
        ("fine", "1", []),
    )
    # old 1.0 never satisfied old>=2, and missing was never installed.
    assert unmet_requirements(env, LINUX, ["old"]) == ()
    assert unmet_requirements(env, LINUX, ["missing"]) == ()
    assert unmet_requirements(env, LINUX, ["fine"]) == (Unmet("app", "fine", "fine"),)


def test_names_are_compared_in_canonical_form(tmp_path: Path) -> None:
    env = installed(
        tmp_path,
        ("rich", "15.0.0", ["Markdown_It.PY (>=2.2.0)"]),
        ("Markdown-It-Py", "4.3.0", []),
    )
    expected = (Unmet("rich", "Markdown_It.PY (>=2.2.0)", "markdown-it-py"),)
    assert unmet_requirements(env, LINUX, ["markdown-it-py"]) == expected
    assert unmet_requirements(env, LINUX, ["markdown_it.py"]) == expected


def test_what_cannot_be_parsed_or_compared(tmp_path: Path) -> None:
    """A line that is no PEP 508 requirement says nothing the tool can judge: it is skipped (the
    probe judges the removal as any other). A version that is no PEP 440 version can't be
    compared: the line names what is removed, so it counts."""
    env = installed(
        tmp_path,
        (
            "app",
            "1",
            [
                "victim >= = 1 ;;; (",
                "victim; python_version >",
                "victim; " + "(" * 300 + 'os_name == "posix"' + ")" * 300,
                "victim[" + "x," * 5000,
                "custom>=1",
                "viaurl @ file:///wheels/viaurl-1-py3-none-any.whl",
            ],
        ),
        ("victim", "1", []),
        ("custom", "1.0-custom build", []),
        ("viaurl", "1", []),
    )
    assert unmet_requirements(env, LINUX, ["victim"]) == ()
    assert [u.required for u in unmet_requirements(env, LINUX, ["custom", "viaurl"])] == [
        "custom",
        "viaurl",
    ]


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.text(string.printable.replace("\n", "").replace("\r", "")), max_size=6))
def test_any_requires_dist_text_is_judged_without_a_crash(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str]
) -> None:
    folder = tmp_path_factory.mktemp("site")
    env = installed(folder, ("app", "1", ["victim[x]", *lines]), ("victim", "1", lines))
    for removed in (["victim"], ["app"], ["victim", "nothing"]):
        for unmet in unmet_requirements(env, LINUX, removed):
            assert unmet.required in removed
        removal_closure(env, LINUX, removed)


# -- the command, on toy wheels ----------------------------------------------------------------

needs_uv = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def state_untouched(venv: Venv) -> None:
    """No snapshot, no journal: nothing of a removal was begun."""
    snapshots = venv.state.snapshots_dir
    assert not snapshots.exists() or not any(snapshots.iterdir())
    assert not venv.journal.exists()


def suggested(run: Run, venv: Venv, lead: str) -> list[str]:
    """The arguments after ``--python <venv>`` of the command on the line starting ``lead``."""

    (line,) = [line for line in run.stdout.splitlines() if line.startswith(lead)]
    argv = shlex.split(line[len(lead) :])
    assert argv[:3] == ["safe-uninstall", "--python", str(venv.python)]
    return argv[3:]


@needs_uv
def test_refused_before_any_change_with_the_two_ways_ahead(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    before = venv.file_hashes()

    run = venv.tool("urllib3")

    assert run.returncode == 1, run.stdout + run.stderr
    assert "unmet requirement: requests requires urllib3>=2\n" in run.stdout
    # The refusal is said once, on the outcome's line, and exactly.
    assert run.stdout.count("refused:") == 1, run.stdout
    assert run.stdout.count("nothing was") == 1, run.stdout
    assert run.stdout.rstrip().endswith(
        "uninstall: refused: it would leave 1 requirement of requests unmet; nothing was changed"
    )
    assert venv.file_hashes() == before
    state_untouched(venv)
    # The first way: the dependents go too, and nothing is left without what it needs.
    together = suggested(run, venv, "to remove the dependents too: ")
    assert together == ["urllib3", "requests"]
    assert venv.tool(*together).returncode == 0
    assert venv.installed() == {}


@needs_uv
def test_allow_unmet_lets_the_probe_judge(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    before = venv.file_hashes()
    refused = venv.tool("--probe", "import requests", "urllib3")
    anyway = suggested(refused, venv, "to remove only urllib3, the probe judging it: ")
    assert anyway == ["--allow-unmet", "urllib3"]

    run = venv.tool("--probe", "import requests", *anyway)

    assert run.returncode == 3, run.stdout + run.stderr
    assert "--allow-unmet: 1 requirement left unmet; the probe judges the removal" in run.stdout
    assert "restored from the stash: urllib3==2.3.0" in run.stdout
    assert venv.file_hashes() == before
    # A probe that does not exercise the requirement passes: the removal stands.
    kept = venv.tool("--probe", "import sys", "--allow-unmet", "urllib3")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert set(venv.installed()) == {"requests"}


@needs_uv
def test_allow_unmet_without_a_probe_says_nothing_judges(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")

    run = venv.tool("--no-probe", "--allow-unmet", "urllib3")

    assert run.returncode == 0, run.stdout + run.stderr
    assert (
        "--allow-unmet: 1 requirement left unmet; nothing judges the removal (--no-probe)"
        in run.stdout
    )
    assert "the probe judges" not in run.stdout
    assert set(venv.installed()) == {"requests"}


@needs_uv
def test_json_dry_run_and_strict(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    before = venv.file_hashes()

    data = venv.tool("--json", "urllib3").json()
    dry = venv.tool("--dry-run", "urllib3")
    strict = venv.tool("--json", "--strict", "urllib3").json()

    assert data["outcome"] == "refused-unmet"
    assert data["exit_code"] == 1
    assert data["snapshot"] is None
    impact = data["impact"]
    assert isinstance(impact, dict)
    assert impact["unmet"] == [
        {
            "dependent": "requests",
            "requirement": "urllib3>=2",
            "required": "urllib3",
            "extra": None,
            "requested_by": [],
        }
    ]
    assert dry.returncode == 1
    assert "would remove: urllib3==2.3.0" in dry.stdout
    assert dry.stdout.count("refused:") == 1, dry.stdout
    assert "uninstall: refused: it would leave 1 requirement of requests unmet" in dry.stdout
    assert strict["outcome"] == "refused-strict"  # --strict keeps its meaning
    assert venv.file_hashes() == before
    state_untouched(venv)


@needs_uv
def test_no_probe_begins_for_a_refused_removal(make_venv: MakeVenv, tmp_path: Path) -> None:
    """Not even the baseline that a configured probe begins while the tool starts up."""
    venv = make_venv("requests")
    mark = tmp_path / "the-probe-ran"
    probe = f"open({str(mark)!r}, 'w').close(); import requests"

    refused = venv.tool("--probe", probe, "urllib3")

    assert refused.returncode == 1
    assert not mark.exists()
    allowed = venv.tool("--probe", probe, "--allow-unmet", "urllib3")
    assert allowed.returncode == 3
    assert mark.exists()


@needs_uv
def test_an_extra_requested_by_a_remaining_distribution(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    house = tmp_path / "house"
    build_wheel(house, "blaslib", "13.1", {"blaslib/__init__.py": ""})
    build_wheel(
        house,
        "toolkit",
        "13.0",
        {"toolkit/__init__.py": ""},
        requires=['blaslib==13.1.*; extra == "blas"'],
    )
    build_wheel(house, "app", "1.0", {"app/__init__.py": ""}, requires=["toolkit[blas]==13.0"])
    venv = make_venv()
    venv.install("app", find_links=house)
    before = venv.file_hashes()

    run = venv.tool("--json", "blaslib")

    data = run.json()
    assert data["outcome"] == "refused-unmet"
    assert data["impact"]["unmet"] == [  # type: ignore[index]
        {
            "dependent": "toolkit",
            "requirement": 'blaslib==13.1.*; extra == "blas"',
            "required": "blaslib",
            "extra": "blas",
            "requested_by": ["app"],
        }
    ]
    text = venv.tool("blaslib")
    assert (
        "unmet requirement: toolkit[blas] requires blaslib==13.1.*, an extra requested by app"
        in text.stdout
    )
    assert suggested(text, venv, "to remove the dependents too: ") == ["blaslib", "app"]
    assert venv.file_hashes() == before
    # Once app is gone no one requests toolkit[blas]: blaslib goes.
    assert venv.tool("--no-probe", "app").returncode == 0
    assert venv.tool("--no-probe", "blaslib").returncode == 0
    assert set(venv.installed()) == {"toolkit"}


@needs_uv
def test_a_package_named_like_a_subcommand(make_venv: MakeVenv, tmp_path: Path) -> None:
    house = tmp_path / "house"
    build_wheel(house, "check", "1.0", {"check/__init__.py": ""})
    build_wheel(house, "linter", "1.0", {"linter/__init__.py": ""}, requires=["check"])
    venv = make_venv()
    venv.install("linter", find_links=house)

    run = venv.tool("uninstall", "check")

    assert run.returncode == 1
    assert suggested(run, venv, "to remove the dependents too: ") == [
        "uninstall",
        "check",
        "linter",
    ]
    anyway = suggested(run, venv, "to remove only check, the probe judging it: ")
    assert anyway == ["uninstall", "--allow-unmet", "check"]
    assert venv.tool(*anyway).returncode == 0  # linter imports without check
    assert set(venv.installed()) == {"linter"}


def test_the_subcommands_are_known_to_the_core() -> None:
    import click

    from safeuninstall import options
    from safeuninstall.cli import commands as cli

    group = cli.cli  # type: ignore[attr-defined]
    assert set(options.COMMANDS) == set(group.list_commands(click.Context(group)))


@needs_uv
def test_check_says_the_removal_would_be_refused(make_venv: MakeVenv) -> None:
    venv = make_venv("requests")
    run = venv.tool("check", "urllib3")
    assert run.returncode == 0
    assert "unmet requirement: requests requires urllib3>=2" in run.stdout
    assert "safe-uninstall would refuse this removal" in run.stdout
    assert venv.tool("check", "--strict", "urllib3").returncode == 1


# -- real stacks from the package index -------------------------------------------------------


def listing(venv: Venv) -> dict[str, tuple[int, int, int]]:
    """Every file of the venv's site-packages and bin: (inode, size, mtime). For a stack of
    gigabytes, a cheaper proof than hashes that nothing was removed, replaced or added (the
    tests never edit a file in place)."""
    found = {}
    for base in (venv.site_packages, venv.root / "bin"):
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                st = os.lstat(os.path.join(folder, name))
                found[os.path.join(folder, name)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return found


def unmet_of(run: Run) -> list[tuple[str, str, str | None, list[str]]]:
    """(dependent, required, extra, requested_by) of each unmet requirement in the JSON."""
    data = run.json()
    assert data["outcome"] == "refused-unmet", data
    impact = data["impact"]
    assert isinstance(impact, dict)
    return [(u["dependent"], u["required"], u["extra"], u["requested_by"]) for u in impact["unmet"]]


def test_rich_without_markdown_it_py(real_venv: RealVenv) -> None:
    """Rich imports without markdown-it-py; rich.markdown does not."""
    venv = real_venv("rich")
    before = venv.file_hashes()

    refused = venv.tool("markdown-it-py")

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "unmet requirement: rich requires markdown-it-py (>=2.2.0)\n" in refused.stdout
    assert suggested(refused, venv, "to remove the dependents too: ") == ["markdown-it-py", "rich"]
    assert venv.file_hashes() == before
    state_untouched(venv)
    # --allow-unmet: remove, probe, restore all in one batch when the probe fails.
    probe = "from rich.markdown import Markdown"
    restored = venv.tool("--json", "--allow-unmet", "--probe", probe, "markdown-it-py").json()
    assert restored["outcome"] == "probe-failed-restored", restored
    assert restored["restored"] == ["markdown-it-py==4.3.0"]
    assert venv.file_hashes() == before
    assert venv.run_python(probe).returncode == 0


def test_torch_requirements_refused(real_venv: RealVenv) -> None:
    """Torch imports without sympy, networkx, jinja2, triton or setuptools
    (torch.compile needs them); and the seed's four CUDA wheels, which torch pins."""
    venv = real_venv("torch")
    before = listing(venv)
    for name in ("sympy", "networkx", "jinja2", "triton", "setuptools"):
        run = venv.tool("--json", name)
        assert unmet_of(run) == [("torch", name, None, [])], name
    seeds = (
        "nvidia-cudnn-cu13",
        "nvidia-cusparselt-cu13",
        "nvidia-nccl-cu13",
        "nvidia-nvshmem-cu13",
    )

    text = venv.tool("--dry-run", *seeds)

    assert text.returncode == 1, text.stdout + text.stderr
    pins = [line for line in text.stdout.splitlines() if line.startswith("unmet requirement:")]
    assert pins == [
        "unmet requirement: torch requires nvidia-cudnn-cu13==9.24.0.43",
        "unmet requirement: torch requires nvidia-cusparselt-cu13==0.8.1",
        "unmet requirement: torch requires nvidia-nccl-cu13==2.30.7",
        "unmet requirement: torch requires nvidia-nvshmem-cu13==3.4.5",
    ]
    assert "refused: it would leave 4 requirements of torch unmet" in text.stdout
    assert listing(venv) == before
    state_untouched(venv)


def test_torch_nvidia_cublas_through_the_cuda_toolkit_extra(real_venv: RealVenv) -> None:
    """torch requires cuda-toolkit[cublas,...]; only that extra of cuda-toolkit requires
    nvidia-cublas."""
    venv = real_venv("torch")
    before = listing(venv)

    text = venv.tool("--dry-run", "nvidia-cublas")

    assert text.returncode == 1, text.stdout + text.stderr
    assert (
        "unmet requirement: cuda-toolkit[cublas] requires nvidia-cublas==13.1.1.3.*, an extra "
        "requested by torch\n" in text.stdout
    )
    assert "torch" in suggested(text, venv, "to remove the dependents too: ")
    assert listing(venv) == before
    state_untouched(venv)


def test_the_glance_that_decides_the_head_start(tmp_path: Path) -> None:
    """environment.required_elsewhere: any spelling of the name, in the header only, not in a
    distribution's own METADATA."""
    from safeuninstall.environment.installed import required_elsewhere
    from safeuninstall.environment.interpreter import Interpreter

    installed(
        tmp_path,
        ("rich", "15.0.0", ["Markdown_It.PY (>=2.2.0)"]),
        ("cuda-toolkit", "13.0.3", ["cuda-toolkit[cublas]; extra == 'all'"]),
        ("plugins", "1", ["markdown-it-py-plugins"]),
    )
    readme = tmp_path / "readme-1.dist-info"
    readme.mkdir()
    (readme / "METADATA").write_text("Name: readme\nVersion: 1\n\nRequires-Dist: leftpad\n")
    site = str(tmp_path)
    target = Interpreter("python", "/venv", "/usr", "3.11", site, site, "/venv/bin", LINUX)

    assert required_elsewhere(target, ["markdown-it-py"])
    assert not required_elsewhere(target, ["cuda-toolkit"])  # its own extra
    assert required_elsewhere(target, ["markdown-it-py-plugins", "leftpad"])
    assert not required_elsewhere(target, ["leftpad"])  # named in a long description only
    assert not required_elsewhere(target, ["markdown-it"])
    assert not required_elsewhere(target, [])
