"""doctor and another build of a library installed at the same paths (a cu12 and a cu13 wheel):
the build nothing requires is a leftover, and reinstalling it would overwrite the files of the
build that is required. The one command doctor gives drops the leftover first, then puts the
required build back, and run as printed it leaves the consumer loading the required build.

toy wheels: ``twin-cu12`` and ``twin-cu13`` both install ``twin/lib/libtwin.so.1`` (returning 12
and 13); cu12 also lists a file of its own. ``twinapp`` requires ``twin-cu13==1.0`` and its
library needs ``libtwin.so.1`` through its RUNPATH, as torch needs ``libcudnn.so.9``.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.conftest import CONSUMER_INIT, LIB_TEMPLATE, MakeVenv, Venv
from tests.wheels import build_wheel, compile_shared_library

APP_VALUE = "import twinapp; print(twinapp.CHECK)"


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    house = tmp_path_factory.mktemp("twins")
    build = tmp_path_factory.mktemp("twins-build")
    built = {}
    for flavour, value in (("cu12", 12), ("cu13", 13)):
        lib = compile_shared_library(
            build / flavour / "libtwin.so.1",
            LIB_TEMPLATE.format(func="twin_version", value=value),
            soname="libtwin.so.1",
        )
        built[flavour] = lib
        files: dict[str, bytes | str] = {"twin/lib/libtwin.so.1": lib.read_bytes()}
        if flavour == "cu12":
            files["twin/lib/libtwin_cu12_only.so.1"] = lib.read_bytes()
        build_wheel(house, f"twin-{flavour}", "1.0", files, tag="py3-none-linux_x86_64")
    app = compile_shared_library(
        build / "app" / "libtwinapp.so",
        "int twin_version(void);\nint app_check(void) { return twin_version(); }\n",
        link=[built["cu13"]],
        rpath="$ORIGIN/../../twin/lib",
    )
    init = CONSUMER_INIT.replace("libconsumer.so", "libtwinapp.so").replace(
        "consumer_check", "app_check"
    )
    build_wheel(
        house,
        "twinapp",
        "1.0",
        {"twinapp/__init__.py": init, "twinapp/lib/libtwinapp.so": app.read_bytes()},
        requires=["twin-cu13==1.0"],
        tag="py3-none-linux_x86_64",
    )
    return house


def _app_value(venv: Venv) -> str:
    done = venv.run_python(APP_VALUE)
    return done.stdout.strip() if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def _stale_dist_info(venv: Venv, house: Path) -> None:
    """twin-cu12's dist-info alone, without its files: what an install of cu13 over cu12 (or
    a cleanup that deleted cu12's folder) leaves behind."""
    (wheel,) = house.glob("twin_cu12-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if ".dist-info/" in member:
                archive.extract(member, venv.site_packages)


def _run_printed(command: str, venv: Venv, house: Path) -> subprocess.CompletedProcess[str]:
    """The repair line as a user pastes it into a shell, offline from the toy wheels."""
    env = {**venv.env(), "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(house), "UV_OFFLINE": "1"}
    return subprocess.run(command, shell=True, env=env, capture_output=True, text=True)


def _doctor_repairs(venv: Venv, house: Path, dropped: str, kept: str) -> None:
    """doctor names ``dropped`` as another build's leftover, gives one line that uninstalls
    it before it installs ``kept``, and that line leaves doctor clean and the app on cu13."""
    run = venv.tool("doctor", "--json")
    data = run.json()
    assert run.returncode == 1, data
    stale = [f for f in data["findings"] if f["kind"] == "stale"]  # type: ignore[union-attr]
    assert [(f["what"], f["provider"]) for f in stale] == [(dropped, kept)], data
    command = str(data["repair_command"])
    uninstall, _, install = command.partition(" && ")
    assert "uninstall" in uninstall and "twin-cu12" in uninstall, command
    assert install.split()[-1] == kept and "--reinstall" in install.split(), command
    assert "twin-cu12" not in install, command  # reinstalling cu12 overwrites cu13's library
    text = venv.tool("doctor").stdout
    assert text.count("to repair, run: ") == 1, text
    assert f"to repair, run: {command}\n" in text
    assert "nothing requires it" in text and f"reinstall {kept}" in text, text

    repaired = _run_printed(command, venv, house)

    assert repaired.returncode == 0, repaired.stderr
    after = venv.tool("doctor")
    assert after.returncode == 0, after.stdout
    assert "twin-cu12" not in venv.installed()
    assert _app_value(venv) == "13"


def test_a_stale_build_under_the_required_one_is_dropped_not_reinstalled(
    make_venv: MakeVenv, twins: Path
) -> None:
    venv = make_venv()
    venv.install("twinapp", find_links=twins, copies=True)
    _stale_dist_info(venv, twins)  # cu12's own library is gone: cu12 is hollow
    assert _app_value(venv) == "13"

    _doctor_repairs(venv, twins, "twin-cu12==1.0", "twin-cu13==1.0")


def test_the_shared_folder_deleted_under_both_builds(make_venv: MakeVenv, twins: Path) -> None:
    """The seed's state: the library folder deleted, both dist-infos left: both are hollow,
    only cu13 is required."""
    venv = make_venv()
    venv.install("twinapp", find_links=twins, copies=True)
    _stale_dist_info(venv, twins)
    shutil.rmtree(venv.site_packages / "twin" / "lib")
    assert "libtwin.so.1" in _app_value(venv)

    _doctor_repairs(venv, twins, "twin-cu12==1.0", "twin-cu13==1.0")


def test_a_stray_build_under_a_bare_uninstall_of_the_required_one(
    make_venv: MakeVenv, twins: Path
) -> None:
    """cu12 installed beside cu13, then cu13 removed behind the tool's back: its shared
    library went with it, cu12 is hollow, cu13 is an unmet requirement of the app."""
    venv = make_venv()
    venv.install("twin-cu12", find_links=twins, copies=True)
    venv.install("twinapp", find_links=twins, copies=True)  # cu13 over cu12's library
    assert _app_value(venv) == "13"
    venv.uv("pip", "uninstall", "--python", str(venv.python), "twin-cu13")
    assert "libtwin.so.1" in _app_value(venv)

    _doctor_repairs(venv, twins, "twin-cu12==1.0", "twin-cu13==1.0")


def test_a_hollow_build_that_something_requires_is_reinstalled(
    make_venv: MakeVenv, twins: Path
) -> None:
    """The leftover is the one nothing requires: with both required, or the other build
    sharing nothing, a hollow distribution is reinstalled as before."""
    venv = make_venv()
    venv.install("twin-cu12", find_links=twins, copies=True)
    (venv.site_packages / "twin" / "lib" / "libtwin_cu12_only.so.1").unlink()

    data = venv.tool("doctor", "--json").json()

    assert [f["kind"] for f in data["findings"]] == ["hollow"]  # type: ignore[union-attr]
    assert "uninstall" not in str(data["repair_command"])


def test_a_missing_twin_counts_only_for_a_library_a_load_cannot_find(
    make_venv: MakeVenv, twins: Path
) -> None:
    """cu12 beside an app that requires cu13 (not installed): cu12 is dropped for cu13 only
    when what it lost is a library the app cannot load; a file of its own lost is a hollow
    cu12, reinstalled."""
    venv = make_venv()
    venv.install("twin-cu12", find_links=twins, copies=True)
    venv.uv("pip", "install", "--python", str(venv.python), "--no-index", "--no-deps",
            "--find-links", str(twins), "twinapp")  # fmt: skip
    own = venv.site_packages / "twin" / "lib" / "libtwin_cu12_only.so.1"
    own.rename(own.with_name("elsewhere"))

    data = venv.tool("doctor", "--json").json()

    kinds = sorted(f["kind"] for f in data["findings"])  # type: ignore[union-attr]
    assert kinds == ["hollow", "requirement"], data
    (venv.site_packages / "twin" / "lib" / "libtwin.so.1").unlink()

    _doctor_repairs(venv, twins, "twin-cu12==1.0", "twin-cu13==1.0")
