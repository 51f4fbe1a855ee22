"""The torch story's edges, on the real CUDA torch stack: a bisect refused after its run in the
good snapshot's state leaves nothing behind, and the command bisect prints to bring back
nvidia-nccl-cu13 says it fixed torch."""

from __future__ import annotations

from pathlib import Path

from tests.realstack import RealVenv, Stacks
from tests.wheels import build_wheel


def test_a_refused_derived_bisect_leaves_nothing_and_the_next_removal_runs(
    real_venv: RealVenv, tmp_path: Path
) -> None:
    """No probe given: the derived one (torch's own check among them) runs in GOOD's state
    first; torch imports now too, so the bisect is refused after switching there and back."""
    venv = real_venv("torch")
    good = venv.tool("snapshot", "-q")
    assert good.returncode == 0, good.stderr
    house = tmp_path / "house"
    build_wheel(house, "harmless0", "1.0", {"harmless0.py": ""})
    venv.install("harmless0", find_links=house)
    start = venv.installed(), venv.file_hashes()
    snapshots = sorted(venv.state.snapshots_dir.iterdir())

    done = venv.tool("bisect", good.stdout.strip())

    assert done.returncode == 1, done.stdout + done.stderr
    assert "the probe passes now" in done.stderr
    assert "and back: the installed set is the start's again" in done.stderr
    assert "nothing is left behind" in done.stderr
    assert (venv.installed(), venv.file_hashes()) == start
    assert sorted(venv.state.snapshots_dir.iterdir()) == snapshots
    assert not venv.journal.exists()
    assert venv.tool("--dry-run", "--no-probe", "harmless0").returncode == 0
    assert venv.tool("--no-probe", "harmless0").returncode == 0


def test_the_printed_command_that_brings_back_nccl_says_it_fixed_torch(
    real_venv: RealVenv, stacks: Stacks
) -> None:
    venv = real_venv("torch")
    nccl = [line for line in venv.uv("pip", "freeze", "--python", str(venv.python)).stdout.split()]
    (pin,) = [line for line in nccl if line.startswith("nvidia-nccl-cu13==")]
    venv.uv("pip", "uninstall", "--python", str(venv.python), "nvidia-nccl-cu13")
    assert venv.run_python("import torch").returncode != 0

    done = venv.tool("run", "--", "uv", "pip", "install", "--no-deps", pin, **stacks.offline_env())

    assert done.returncode == 0, done.stdout + done.stderr
    assert "run: the command ran; it fixed what the probe found broken: " in done.stdout
    assert "torch" in done.stdout.splitlines()[-1]
    assert "no probe applies" not in done.stdout
    assert venv.run_python("import torch").returncode == 0
