"""--keep-needed on real stacks: the torchdup stack, where the cu12 copies of nccl,
cusparselt and nvshmem install the same paths as their cu13 twins (so their files are what
torch loads), and a scipy stack where only the probe sees a need.

What the static verdicts say is checked against what a process really loads (/proc/self/maps
after the probe's imports)."""

from __future__ import annotations

import json

from safeuninstall.plans.bisection import bound
from safeuninstall.probe.derived import TORCH_PROBE
from tests.realstack import RealVenv

LOAD_MAP = """
import json
{probe}
print(json.dumps(sorted({{l.split()[-1] for l in open("/proc/self/maps") if ".so" in l}})))
"""


def _loaded(venv, probe: str) -> list[str]:  # type: ignore[no-untyped-def]
    done = venv.run_python(LOAD_MAP.format(probe=probe))
    assert done.returncode == 0, done.stderr
    site = str(venv.site_packages.resolve()) + "/"
    return [p.removeprefix(site) for p in json.loads(done.stdout.splitlines()[-1])]


def test_torchdup_keep_needed_removes_what_nothing_needs(real_venv: RealVenv) -> None:
    venv = real_venv("torchdup")
    before = venv.file_hashes()
    loaded_before = _loaded(venv, TORCH_PROBE)
    done = venv.tool("--json", "--keep-needed", "--probe", TORCH_PROBE, "nvidia-*")
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "removed-kept-needed"
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    kept = {k["name"]: (k["why"], k["reasons"][0]) for k in cleanup["kept"]}
    nvidia = {n for n in venv.installed() if n.startswith("nvidia-")} | {"nvidia-nvtx-cu12"}
    assert set(kept) == nvidia - {"nvidia-nvtx-cu12"}
    assert cleanup["removed"] == ["nvidia-nvtx-cu12"]
    assert cleanup["probe_runs"] == 1
    # The reasons: the shared files torch loads, the metadata, the probe's load map.
    assert kept["nvidia-nccl-cu12"] == (
        "library",
        "torch/lib/libtorch_cuda.so needs libnccl.so.2 from it (nvidia/nccl/lib/libnccl.so.2, "
        "which nvidia-nccl-cu13 lists too)",
    )
    assert kept["nvidia-cusparselt-cu12"][0] == "library"
    assert "needs libcusparseLt.so.0 from it" in kept["nvidia-cusparselt-cu12"][1]
    assert kept["nvidia-nvshmem-cu12"][0] == "library"
    assert "needs libnvshmem_host.so.3 from it" in kept["nvidia-nvshmem-cu12"][1]
    assert kept["nvidia-nccl-cu13"] == ("metadata", "torch requires nvidia-nccl-cu13==2.30.7")
    assert kept["nvidia-cuda-cccl-cu12"] == (
        "metadata",
        "nvidia-nvshmem-cu12 (kept) requires nvidia-cuda-cccl-cu12",
    )
    # No ELF object needs libcudart.so.12, yet torch/__init__.py's _preload_cuda_deps loads
    # nvidia/cuda_runtime/lib/libcudart.so.* from sys.path with ctypes: the load map sees it.
    assert "nvidia/cuda_runtime/lib/libcudart.so.12" in loaded_before
    assert kept["nvidia-cuda-runtime-cu12"][0] == "loaded"
    assert (
        "loads nvidia/cuda_runtime/lib/libcudart.so.12 from it"
        in (kept["nvidia-cuda-runtime-cu12"][1])
    )
    # The static verdicts agree with the load map: what they keep by library is loaded, and
    # nothing the removed one holds was.
    for path in ("nvidia/nccl/lib/libnccl.so.2", "nvidia/cusparselt/lib/libcusparseLt.so.0"):
        assert path in loaded_before
    assert "nvidia/nvshmem/lib/libnvshmem_host.so.3" in loaded_before
    assert not [p for p in loaded_before if p.startswith("nvidia/nvtx/")]
    assert venv.run_python("import torch").returncode == 0
    assert _loaded(venv, TORCH_PROBE) == loaded_before
    assert "nvidia-nvtx-cu12" not in venv.installed()
    back = venv.tool("rollback")
    assert back.returncode == 0, back.stderr
    assert venv.file_hashes() == before


def test_a_need_only_the_probe_sees_is_bisected_on_a_real_stack(real_venv: RealVenv) -> None:
    # pandas plots through matplotlib, which it does not require; nothing needs scipy here.
    venv = real_venv("scipy")
    before = venv.file_hashes()
    probe = 'import pandas; pandas.DataFrame({"a": [1, 2]}).plot()'
    # --allow-drift: the load map would keep matplotlib untried (it loads its extensions).
    done = venv.tool(
        "--json", "--keep-needed", "--allow-drift", "--probe", probe, "matplotlib", "scipy"
    )
    assert done.returncode == 0, done.stderr
    cleanup = done.json()["keep_needed"]
    assert isinstance(cleanup, dict)
    assert cleanup["tried"] == ["matplotlib", "scipy"]
    assert cleanup["removed"] == ["scipy"]
    (matplotlib,) = cleanup["kept"]
    assert matplotlib["name"] == "matplotlib" and matplotlib["why"] == "probe"
    assert "matplotlib is required for plotting" in matplotlib["reasons"][0]
    assert cleanup["probe_runs"] <= bound(2, 1) == 3
    assert venv.run_python(probe).returncode == 0
    assert venv.tool("rollback").returncode == 0
    assert venv.file_hashes() == before


def test_torchdup_check_shows_what_breaks_before_a_line_per_pair_of_shared_files(
    real_venv: RealVenv,
) -> None:
    """check printed 113 `shared file:` lines, and after them the 4 `BREAKS:` lines."""
    venv = real_venv("torchdup")

    text = venv.tool("check", "nvidia-*-cu12").stdout.splitlines()
    every = venv.tool("check", "-v", "nvidia-*-cu12").stdout.splitlines()
    data = venv.tool("check", "--json", "nvidia-*-cu12").json()

    impact = data["impact"]
    assert isinstance(impact, dict)
    breaks = [i for i, line in enumerate(text) if line.startswith("BREAKS: ")]
    shared = [i for i, line in enumerate(text) if line.startswith("shared file")]
    assert len(breaks) == len(impact["breaks"]) == 4
    assert len(shared) == 3  # nccl, cusparselt, nvshmem: cu12 beside cu13
    assert max(breaks) < min(shared)
    assert any("57 that nvidia-nccl-cu12 lists" in text[i] for i in shared)
    assert len(impact["shared_files"]) == 113  # --json keeps every file
    assert len([line for line in every if line.startswith("shared file: ")]) == 113


def test_rich_keep_needed_keeps_what_the_kept_rich_requires(real_venv: RealVenv) -> None:
    # `import rich` passes without markdown-it-py (rich imports it to render Markdown only):
    # the search found rich needed, and removed markdown-it-py and mdurl, which rich requires;
    # doctor then found markdown-it-py>=2.2.0 missing.
    venv = real_venv("rich")
    before = venv.file_hashes()
    done = venv.tool(
        "--json", "--keep-needed", "--probe", "import rich", "rich", "markdown-it-py", "mdurl"
    )
    assert done.returncode == 0, done.stderr
    data = done.json()
    assert data["outcome"] == "needed-restored", data["messages"]
    cleanup = data["keep_needed"]
    assert isinstance(cleanup, dict)
    kept = {k["name"]: (k["why"], k["reasons"][0]) for k in cleanup["kept"]}
    assert kept["rich"][0] == "probe"
    assert "ModuleNotFoundError: No module named 'rich'" in kept["rich"][1]
    assert kept["markdown-it-py"] == ("metadata", "rich (kept) requires markdown-it-py (>=2.2.0)")
    assert kept["mdurl"] == ("metadata", "markdown-it-py (kept) requires mdurl~=0.1")
    assert cleanup["removed"] == []
    assert venv.file_hashes() == before
    doctor = venv.tool("doctor")
    assert doctor.returncode == 0, doctor.stdout
    assert "missing requirement" not in doctor.stdout
    assert venv.run_python("from rich.markdown import Markdown").returncode == 0
