"""``bisect`` on a CUDA torch venv: the story the tool comes from, where the slow (here: broken)
state lacks nvidia-nccl-cu13 among harmless changes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.realstack import RealVenv
from tests.wheels import build_wheel

PROBE = "import torch; torch.cuda.device_count()"


@pytest.mark.parametrize("probe", [("--probe", PROBE), ()], ids=["given", "derived"])
def test_bisect_names_nvidia_nccl_among_harmless_changes_and_ends_where_it_started(
    real_venv: RealVenv, tmp_path: Path, probe: tuple[str, ...]
) -> None:
    venv = real_venv("torch")
    good = venv.tool("snapshot", "-q")
    assert good.returncode == 0, good.stderr
    house = tmp_path / "house"
    harmless = [f"harmless{i}" for i in range(5)]
    for name in harmless:
        build_wheel(house, name, "1.0", {f"{name}.py": ""})
    venv.install(*harmless, find_links=house)
    venv.uv("pip", "uninstall", "--python", str(venv.python), "nvidia-nccl-cu13")
    start = venv.installed(), venv.file_hashes()

    done = venv.tool("--json", "bisect", good.stdout.strip(), *probe)

    data = done.json()
    assert done.returncode == 0, data
    found = data["bisect"]
    assert found["culprits"] == [  # type: ignore[index]
        {"names": ["nvidia-nccl-cu13"], "good": ["nvidia-nccl-cu13==2.30.7"], "bad": []}
    ]
    rounds = found["rounds"]  # type: ignore[index]
    # The search's rounds; then nccl on its own, unless the search ran exactly that state.
    assert len([r for r in rounds if not r["confirms"]]) <= 2 + math.ceil(math.log2(6))
    assert [r["bad"] for r in rounds if r["confirms"]] in ([], [["nvidia-nccl-cu13"]])
    assert found["not_confirmed"] == []  # type: ignore[index]
    if not probe:  # derived: torch's own check, judged against its run in GOOD's state
        assert any("torch's CUDA" in n for n in data["probes"]["notes"])  # type: ignore[index]
        assert data["probes"]["baseline"][0]["passed"]  # type: ignore[index]
    assert "libnccl.so.2" in found["failure"]  # type: ignore[index]
    assert data["next_command"].endswith(  # type: ignore[union-attr]
        "run -- uv pip install --no-deps nvidia-nccl-cu13==2.30.7"
    )
    assert (venv.installed(), venv.file_hashes()) == start
