"""Seeing the breakage before it happens: the impact report, library drift caught from what the
probe process loaded, diagnosis of a failing probe, and doctor on an already broken venv."""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from safeuninstall.cli.render.impact import impact_lines
from safeuninstall.libraries.index import LibraryChange
from safeuninstall.reports.impact import ImpactReport, SharedFile
from tests.conftest import SYSTEM_FOO, UV, MakeVenv, Venv
from tests.wheels import build_wheel, compile_shared_library

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")

PROVIDERS = ("nvfoo-cu13", "nvbar-cu13", "nvbaz-cu13")


@pytest.fixture
def system_foo(tmp_path: Path) -> Path:
    """An older libfoo.so.1 in a folder of its own, to be put on LD_LIBRARY_PATH."""
    folder = tmp_path / "system-lib"
    compile_shared_library(folder / "libfoo.so.1", SYSTEM_FOO, soname="libfoo.so.1")
    return folder


# -- the report -----------------------------------------------------------------------------


def test_check_names_every_library_consumer_that_breaks(make_venv: MakeVenv) -> None:
    venv = make_venv("consumer", *PROVIDERS)
    before = venv.file_hashes()

    run = venv.tool("check", "--json", "nvfoo-cu13", "nvbar-cu13")

    data = run.json()
    assert run.returncode == 0, data
    impact = data["impact"]
    assert isinstance(impact, dict)
    breaks = {(b["soname"], b["before_dist"], b["consumer_dist"]) for b in impact["breaks"]}
    assert breaks == {
        ("libfoo.so.1", "nvfoo-cu13", "consumer"),
        ("libbar.so.2", "nvbar-cu13", "consumer"),
    }
    assert all(b["after"] is None for b in impact["breaks"])
    assert impact["dependents"] == []  # metadata alone sees nothing: no Requires-Dist
    assert venv.file_hashes() == before
    text = venv.tool("check", "nvfoo-cu13")
    assert "BREAKS:" in text.stdout and "libconsumer.so (consumer) needs libfoo.so.1" in text.stdout
    strict = venv.tool("check", "--strict", "nvfoo-cu13")
    assert strict.returncode == 1


def test_default_probe_comes_from_the_library_consumers(make_venv: MakeVenv) -> None:
    venv = make_venv("consumer", *PROVIDERS)
    before = venv.file_hashes()
    run = venv.tool("--json", *PROVIDERS)  # no probe configured
    data = run.json()
    assert run.returncode == 3, data
    notes = data["probes"]["notes"]  # type: ignore[index]
    assert "from what the removal affects (consumer): 1 module;" in notes[0]
    assert venv.file_hashes() == before


def test_strict_refuses_before_anything(make_venv: MakeVenv) -> None:
    venv = make_venv("consumer", *PROVIDERS)
    before = venv.file_hashes()
    run = venv.tool("--strict", "--json", "--no-probe", "nvbaz-cu13")
    data = run.json()
    assert run.returncode == 1
    assert data["outcome"] == "refused-strict"
    assert data["snapshot"] is None
    assert venv.file_hashes() == before
    # Not installed: a job's typo under --strict, refused before anything too.
    absent = venv.tool("--strict", "--no-probe", "leftpad")
    assert absent.returncode == 1
    assert "--strict: not installed: leftpad" in absent.stderr


def test_shared_files_name_the_distribution_left_hollow(make_venv: MakeVenv) -> None:
    venv = make_venv("sharedlib-cu12", "sharedlib-cu13")
    data = venv.tool("check", "--json", "sharedlib-cu12").json()
    impact = data["impact"]
    assert isinstance(impact, dict)
    assert impact["hollow"] == ["sharedlib-cu13"]
    assert [Path(s["path"]).name for s in impact["shared_files"]] == ["__init__.py"]
    # A hollow distribution is certain breakage, seen on disk without any probe, and is undone
    # even though `import sharedlib` would still pass (as a namespace package).
    run = venv.tool("--json", "--no-probe", "sharedlib-cu12")
    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "hollow-restored"
    assert venv.run_python("import sharedlib; sharedlib.FLAVOUR").returncode == 0


def _report_with_shared_files() -> ImpactReport:
    nccl = [f"nvidia/nccl/{rel}" for rel in ("include/nccl.h", "lib/libnccl.so.2", "a", "b", "c")]
    return ImpactReport(
        removed=("nvidia-nccl-cu12", "nvidia-nvtx-cu12"),
        dependents=(),
        optional_dependents=(),
        shared_files=(
            *(SharedFile(path, "nvidia-nccl-cu12", "nvidia-nccl-cu13") for path in nccl),
            SharedFile("nvidia/nvtx/x.h", "nvidia-nvtx-cu12", "nvidia-nvtx"),
        ),
        library_changes=(
            LibraryChange("t/libd.so", "torch", "libz.so.1", "s/libz.so.1", "z", "/usr/z", None),
            LibraryChange("t/libc.so", "torch", "libnccl.so.2", "n/libnccl.so.2", "n", None, None),
        ),
        metadata_only=(),
    )


def test_shared_files_are_summarised_per_pair_after_what_breaks() -> None:
    """check on the torchdup stack printed 113 `shared file:` lines and, after them, the 4
    `BREAKS:` lines. Now: what breaks first, then one line per pair (a count and 3 paths);
    every path with -v."""
    report = _report_with_shared_files()
    lines = impact_lines(report)
    assert lines == [
        "BREAKS: t/libc.so (torch) needs libnccl.so.2, now n/libnccl.so.2 (n), afterwards nothing",
        "DRIFTS: t/libd.so (torch) needs libz.so.1, now s/libz.so.1 (z), afterwards /usr/z "
        "(owned by no distribution)",
        "shared files: 5 that nvidia-nccl-cu12 lists are also listed by nvidia-nccl-cu13, which "
        "removing nvidia-nccl-cu12 leaves hollow; under nvidia/nccl/: lib/libnccl.so.2, "
        "include/nccl.h, a, ... (2 more, -v lists them)",
        "shared file: nvidia/nvtx/x.h is also listed by nvidia-nvtx, which removing "
        "nvidia-nvtx-cu12 leaves hollow",
    ]
    every = impact_lines(report, verbose=True)
    assert every[:2] == lines[:2]
    assert [line for line in every if line.startswith("shared file: ")] == [
        f"shared file: nvidia/nccl/{rel} is also listed by nvidia-nccl-cu13, which removing "
        "nvidia-nccl-cu12 leaves hollow"
        for rel in ("include/nccl.h", "lib/libnccl.so.2", "a", "b", "c")
    ] + [lines[-1]]


def test_metadata_only_distribution_is_named_with_its_real_source(make_venv: MakeVenv) -> None:
    venv = make_venv("nvfoo-cu13", "nvfoo-meta")
    run = venv.tool("check", "nvfoo-meta")
    assert "metadata-only: nvfoo-meta has no files besides its metadata" in run.stdout
    assert "comes from: nvfoo-cu13" in run.stdout


def other_python() -> str | None:
    """An interpreter of another minor version than the tool's, for marker evaluation."""
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    patterns = ["/root/.pyenv/versions/3.*/bin/python3.*", "/usr/bin/python3.*"]
    for pattern in patterns:
        for candidate in sorted(glob.glob(pattern)):
            name = Path(candidate).name
            if name.count(".") != 1 or not name[len("python") :].replace(".", "").isdigit():
                continue
            version = name[len("python") :]
            if version != mine and tuple(map(int, version.split("."))) >= (3, 8):
                return candidate
    return shutil.which("python3.12") or shutil.which("python3.10")


def test_markers_are_evaluated_for_the_target_interpreter(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    python = other_python()
    if python is None:
        pytest.skip("needs a second Python version on this machine")
    target_version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    venv = make_venv("leftpad", python=python)
    wheels = tmp_path / "markers"
    build_wheel(
        wheels,
        "needs-on-target",
        "1.0",
        {"needs_on_target.py": "import leftpad\n"},
        requires=[f'leftpad; python_version == "{target_version}"'],
    )
    build_wheel(
        wheels,
        "needs-on-tool",
        "1.0",
        {"needs_on_tool.py": ""},
        requires=[f'leftpad; python_version == "{sys.version_info[0]}.{sys.version_info[1]}"'],
    )
    build_wheel(
        wheels,
        "needs-for-extra",
        "1.0",
        {"needs_for_extra.py": ""},
        requires=['leftpad; extra == "pad"'],
    )
    venv.install("needs-on-target", "needs-on-tool", "needs-for-extra", find_links=wheels)
    data = venv.tool("check", "--json", "leftpad").json()
    impact = data["impact"]
    assert isinstance(impact, dict)
    assert impact["dependents"] == ["needs-on-target"]
    assert impact["optional_dependents"] == [
        {"dependent": "needs-for-extra", "requires": "leftpad", "extra": "pad"}
    ]


# -- drift: the removal that "passes" on another copy of a library --------------------------


def test_drift_to_a_system_copy_is_reported_and_restored(
    make_venv: MakeVenv, system_foo: Path
) -> None:
    venv = make_venv("driftconsumer", "nvfoo-cu13")
    before = venv.file_hashes()
    env = {"LD_LIBRARY_PATH": str(system_foo)}
    probe = "import driftconsumer"
    # Bare facts first: after a removal the import would still pass, on the other copy.
    check = venv.tool("check", "--json", "nvfoo-cu13", **env).json()
    drifts = check["impact"]["drifts"]  # type: ignore[index]
    assert len(drifts) == 1
    assert drifts[0]["after"] == str(system_foo / "libfoo.so.1")
    assert drifts[0]["after_dist"] is None
    assert drifts[0]["before_dist"] == "nvfoo-cu13"

    run = venv.tool("--json", "--probe", probe, "nvfoo-cu13", **env)

    data = run.json()
    assert run.returncode == 3, data
    assert data["outcome"] == "drift-restored"
    assert [p["passed"] for p in data["probes"]["after"]] == [True]  # type: ignore[index]
    (moved,) = data["drift"]  # type: ignore[misc]
    assert moved["library"] == "libfoo.so.1"
    assert moved["before_dist"] == "nvfoo-cu13"
    assert moved["after"] == str(system_foo / "libfoo.so.1")
    assert venv.file_hashes() == before


def test_allow_drift_accepts_it(make_venv: MakeVenv, system_foo: Path) -> None:
    venv = make_venv("driftconsumer", "nvfoo-cu13")
    env = {"LD_LIBRARY_PATH": str(system_foo)}
    run = venv.tool("--allow-drift", "--probe", "import driftconsumer", "nvfoo-cu13", **env)
    assert run.returncode == 0, run.stdout
    assert "drift: libfoo.so.1: was" in run.stdout
    assert "nvfoo-cu13" not in venv.installed()
    strict = make_venv("driftconsumer", "nvfoo-cu13")
    refused = strict.tool("--strict", "--probe", "import driftconsumer", "nvfoo-cu13", **env)
    assert refused.returncode == 1
    assert "DRIFTS:" in refused.stdout


# -- diagnosis and doctor -------------------------------------------------------------------


def test_failing_probe_is_mapped_to_the_removed_provider(make_venv: MakeVenv) -> None:
    venv = make_venv("consumer", "requests", *PROVIDERS)
    data = venv.tool(
        "--json",
        "--allow-unmet",
        "--probe",
        "import consumer",
        "--probe",
        "import requests",
        *PROVIDERS,
        "urllib3",
    ).json()
    found = {(d["kind"], d["what"], d["provider"], d["snapshot"]) for d in data["diagnosis"]}  # type: ignore[union-attr]
    assert ("library", "libfoo.so.1", "nvfoo-cu13==1.0", "0001") in found
    assert ("module", "urllib3", "urllib3==2.3.0", "0001") in found


def bare_uninstall(venv: Venv, *names: str) -> None:
    venv.uv("pip", "uninstall", "--python", str(venv.python), *names)


def test_doctor_lists_every_missing_library_in_one_run(make_venv: MakeVenv) -> None:
    venv = make_venv("consumer", "requests", *PROVIDERS)
    before = venv.file_hashes()
    assert venv.tool("snapshot").returncode == 0
    bare_uninstall(venv, *PROVIDERS, "urllib3")  # someone else's cleanup, without the tool

    run = venv.tool("doctor", "--json")

    data = run.json()
    assert run.returncode == 1
    found = {(f["kind"], f["what"], f["provider"]) for f in data["findings"]}  # type: ignore[union-attr]
    assert found == {
        ("library", "libfoo.so.1", "nvfoo-cu13==1.0"),
        ("library", "libbar.so.2", "nvbar-cu13==1.0"),
        ("library", "libbaz.so.3", "nvbaz-cu13==1.0"),
        ("requirement", "urllib3>=2", "urllib3==2.3.0"),
    }
    assert data["repair_snapshot"] == "0001"
    command = str(data["repair_command"])
    assert command.endswith("rollback 0001")
    # The one command repairs it all, offline, from the snapshot's hard-linked stash.
    repaired = venv.tool(*command.split()[1:], "--no-probe")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert venv.file_hashes() == before
    healthy = venv.tool("doctor")
    assert healthy.returncode == 0
    assert "no missing library" in healthy.stdout


def test_doctor_finds_a_hollow_distribution(make_venv: MakeVenv) -> None:
    venv = make_venv("sharedlib-cu12", "sharedlib-cu13")
    assert venv.tool("snapshot").returncode == 0
    bare_uninstall(venv, "sharedlib-cu12")  # deletes sharedlib/__init__.py, cu13's too
    data = venv.tool("doctor", "--json").json()
    kinds = {(f["kind"], f["what"]) for f in data["findings"]}  # type: ignore[union-attr]
    assert ("hollow", "sharedlib-cu13==1.0") in kinds
    assert data["repair_also"] == ["sharedlib-cu12==1.0"]  # said, since it was removed
    assert venv.tool(*str(data["repair_command"]).split()[1:], "--no-probe").returncode == 0
    assert venv.run_python("import sharedlib").returncode == 0
