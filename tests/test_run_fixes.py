"""``run`` whose command makes a failing probe pass: the best news a guarded change can give,
said as such (torch importing again once the nvidia wheel it loads is back, on toy wheels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import UV, MakeVenv
from tests.wheels import build_wheel

pytestmark = pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")


def test_a_command_that_makes_the_failing_derived_probe_pass_says_it_fixed_it(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """torchlike loads ncclx's library, which was uninstalled: the derived probe fails before
    the command (torchlike's candidate), and passes after `uv pip install --no-deps
    ncclx==1.0`, which has nothing of its own to import."""
    house = tmp_path / "house"
    # As nvidia-nccl-cu13: a library in a namespace folder, no module of its own to import.
    build_wheel(house, "ncclx", "1.0", {"nvidialike/nccl/lib/libncclx.so.2": "ELF"})
    loads = (
        "import pathlib\n"
        "lib = pathlib.Path(__file__).parent.parent / 'nvidialike/nccl/lib/libncclx.so.2'\n"
        "if not lib.exists(): raise ImportError('libncclx.so.2: cannot open shared object file')\n"
    )
    build_wheel(
        house, "torchlike", "1.0", {"torchlike/__init__.py": loads}, requires=["ncclx==1.0"]
    )
    venv = make_venv("leftpad")
    venv.install("torchlike==1.0", find_links=house)
    venv.uv("pip", "uninstall", "--python", str(venv.python), "ncclx")
    assert venv.run_python("import torchlike").returncode == 1
    install = ["uv", "pip", "install", "--offline", "--no-index", "--find-links", str(house)]

    done = venv.tool(
        "run", "--", *install, "--no-deps", "ncclx==1.0", UV_CACHE_DIR=str(venv.uv_cache)
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "run: the command ran; it fixed what the probe found broken: torchlike failed before "
        "the change and passes now"
    ) in done.stdout
    assert "no probe applies" not in done.stdout
    assert venv.installed()["ncclx"] == "1.0"  # the change is kept
    assert venv.run_python("import torchlike").returncode == 0
    assert not venv.journal.exists()
