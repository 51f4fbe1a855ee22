"""``safe-uninstall audit`` on environments from the package index.

- Sizes add up: the distributions' own bytes, the shared and the unowned ones make the bytes of
  a walk of the venv that counts each inode once, less what only files outside site-packages
  that no RECORD lists hold (bin/python, activate, pyvenv.cfg).
- Orphans are truly unrequired: removed round after round with ``uv pip uninstall``, each
  round leaves ``uv pip check`` passing and ``doctor`` finding no missing library (the library
  model: nothing loaded them), and what stays requested still imports.
- torchdup (torch with nvidia-*-cu12 wheels beside its cu13 ones): the sonames two wheels
  install at one path are reported with the copy on disk and loaded, statically and by a real
  probe's load map; the cu12 wheels nothing links are reported as loaded by nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Venv
from tests.realstack import RealVenv

STRAY = 1_234_567  # a file no RECORD lists, dropped into site-packages


def keep_requested(venv: Venv, *names: str) -> None:
    """REQUESTED only for ``names`` (a uv install of a pins file marks every pin requested)."""
    for info in venv.site_packages.glob("*.dist-info"):
        name = info.name.removesuffix(".dist-info").rpartition("-")[0]
        name = name.replace("_", "-").lower()
        if name not in names:
            (info / "REQUESTED").unlink(missing_ok=True)


def walk_bytes(root: Path, *, skip: Path | None = None) -> int:
    """Every file under ``root`` (not following links), each inode once; files under ``skip``
    left out."""
    seen: dict[tuple[int, int], int] = {}
    for folder, dirs, files in os.walk(root):
        if skip is not None and Path(folder) == skip:
            dirs.clear()
            continue
        for name in files:
            info = os.lstat(os.path.join(folder, name))
            seen[(info.st_dev, info.st_ino)] = info.st_size
    return sum(seen.values())


def audit(venv: Venv, *args: str) -> Any:
    run = venv.tool("audit", "--json", *args)
    assert run.returncode == 0, run.stderr
    return run.json()


@pytest.mark.parametrize("stack", ["jupyterlab", "torch", "torchdup"])
def test_sizes_add_up_to_the_venv(real_venv: RealVenv, stack: str) -> None:
    venv = real_venv(stack)
    (venv.site_packages / "stray.bin").write_bytes(b"\0" * STRAY)
    started = time.monotonic()
    data = audit(venv)
    print(f"audit of {stack}: {time.monotonic() - started:.2f} s (command, with start-up)")
    venv_bytes = walk_bytes(venv.root)
    outside_site = venv_bytes - walk_bytes(venv.root, skip=venv.site_packages)
    dists = data["distributions"]
    assert data["total_bytes"] == (
        sum(d["bytes"] for d in dists) + data["shared_bytes"] + data["unowned_bytes"]
    )
    # The stray file is the only one in site-packages no RECORD lists (uv compiles no bytecode).
    assert (data["unowned_bytes"], data["unowned_files"]) == (STRAY, 1)
    # Nothing counted twice (the venv's files share inodes with uv's cache, torchdup's shared
    # paths are listed by two wheels), nothing missed but what lies outside site-packages.
    assert 0 <= venv_bytes - data["total_bytes"] <= venv_bytes - outside_site
    if stack == "torchdup":
        assert data["shared_bytes"] > 900 * 2**20  # nccl, cusparselt, nvshmem: one copy each


@pytest.mark.parametrize(
    ("stack", "requested"), [("jupyterlab", "ipykernel"), ("torch", ""), ("torchdup", "torch")]
)
def test_orphans_are_truly_unrequired(real_venv: RealVenv, stack: str, requested: str) -> None:
    """Round after round, what audit calls an orphan is removed, and nothing breaks."""
    venv = real_venv(stack)
    keep_requested(venv, requested)
    removed: list[list[str]] = []
    while orphans := audit(venv)["orphans"]:
        assert not set(orphans) & {requested}
        venv.uv("pip", "uninstall", "--python", str(venv.python), *orphans)
        check = venv.uv("pip", "check", "--python", str(venv.python), check=False)
        assert check.returncode == 0, (orphans, check.stdout, check.stderr)
        assert unmet_extras(venv.site_packages) == [], orphans  # what uv pip check skips
        doctor = venv.tool("doctor", "--json")
        libraries = [f for f in doctor.json()["findings"] if f["kind"] == "library"]  # type: ignore[union-attr, index]
        assert libraries == [], (orphans, libraries)
        removed.append(orphans)
    print(f"{stack}: orphans removed round by round: {removed}")
    if stack == "torch":
        # While torch is there, every nvidia wheel is required by it or loaded by it: torch
        # alone goes first, not the libraries it loads.
        assert removed[0] == ["torch"]
        assert venv.installed() == {}  # nothing requested: the cascade ends with nothing
    elif stack == "torchdup":
        # The cu12 twins that share torch's library paths are loaded by torch: they stay.
        assert removed == [["nvidia-cuda-runtime-cu12", "nvidia-nvtx-cu12"]]
        smoke = venv.run_python("import torch; torch.cuda.device_count()")
        assert smoke.returncode == 0, smoke.stderr
    else:
        assert "jupyterlab" in removed[0]
        assert len(removed) > 1  # what jupyterlab alone required went next
        assert requested in venv.installed()
        smoke = venv.run_python("import ipykernel.kernelapp, zmq, tornado")
        assert smoke.returncode == 0, smoke.stderr


def test_torchdup_duplicates_and_what_nothing_loads(real_venv: RealVenv) -> None:
    venv = real_venv("torchdup")
    keep_requested(venv, "torch")
    static = audit(venv)
    loaded = audit(venv, "--load")
    shared_paths = {
        "libnccl.so.2": ("nccl", "nvidia-nccl"),
        "libcusparseLt.so.0": ("cusparselt", "nvidia-cusparselt"),
        "libnvshmem_host.so.3": ("nvshmem", "nvidia-nvshmem"),
    }
    for data in (static, loaded):
        duplicates = {d["soname"]: d for d in data["duplicates"]}
        for soname, (folder, dist) in shared_paths.items():
            (copy,) = duplicates[soname]["copies"]
            path = venv.site_packages / "nvidia" / folder / "lib" / soname
            assert copy["path"] == str(path)
            assert copy["owners"] == [f"{dist}-cu12", f"{dist}-cu13"]
            assert copy["loaded"] is True
            assert copy["content_of"] == [whose_copy(venv, path, dist)]
            assert copy["loaded_by_probe"] is (True if data is loaded else None)
        dists = {d["name"]: d for d in data["distributions"]}
        for name in ("nvidia-cuda-runtime-cu12", "nvidia-nvtx-cu12"):
            assert dists[name]["loaded_by"] == [] and dists[name]["loaded_by_count"] == 0
        assert [r["dependent"] for r in dists["nvidia-cuda-cccl-cu12"]["required_by"]] == [
            "nvidia-nvshmem-cu12"
        ]
        for twin in ("nvidia-nccl-cu12", "nvidia-cusparselt-cu12", "nvidia-nvshmem-cu12"):
            assert dists[twin]["loaded_by_count"] > 0  # torch loads the shared file
            assert "torch" in {u["consumer_dist"] for u in dists[twin]["loaded_by"]}
    assert static["orphans"] == ["nvidia-cuda-runtime-cu12", "nvidia-nvtx-cu12"]
    probed = {d["name"]: d["loaded_by_probe"] for d in loaded["distributions"]}
    assert probed["nvidia-nvtx-cu12"] is False
    # torch's own _preload_cuda_deps globs nvidia/cuda_runtime/lib/libcudart.so.*: the probe
    # process maps the cu12 runtime that nothing links, and --load says so.
    assert probed["nvidia-cuda-runtime-cu12"] is True
    assert loaded["orphans"] == ["nvidia-nvtx-cu12"]
    assert static["load"] is None and loaded["load"][0]["kind"] == "derived"


def unmet_extras(site: Path) -> list[str]:
    """Requirements with extras (``jsonschema[format-nongpl]``) whose extra's own requirements
    are not installed: ``uv pip check`` does not look at them. One level deep, markers
    evaluated for this interpreter (the stacks' venvs are made with it)."""
    from importlib.metadata import distributions

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    installed = {canonicalize_name(d.metadata["Name"]): d for d in distributions(path=[str(site)])}
    problems = []
    for name, dist in installed.items():
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue
            target = installed.get(canonicalize_name(requirement.name))
            for extra in requirement.extras if target is not None else ():
                for sub in map(Requirement, target.requires or []):  # type: ignore[union-attr]
                    if not sub.marker or sub.marker.evaluate({"extra": ""}):
                        continue  # not behind the extra: uv pip check's
                    if sub.marker.evaluate({"extra": extra}) and (
                        canonicalize_name(sub.name) not in installed
                    ):
                        problems.append(f"{name} requires {requirement}, which needs {sub}")
    return problems


def whose_copy(venv: Venv, path: Path, dist: str) -> str:
    """Which of the two wheels' files is on disk, by the sizes their RECORDs give."""
    size = path.stat().st_size
    relative = str(path.relative_to(venv.site_packages))
    found = []
    for flavour in ("cu12", "cu13"):
        (info,) = venv.site_packages.glob(f"{dist.replace('-', '_')}_{flavour}-*.dist-info")
        for line in (info / "RECORD").read_text().splitlines():
            name, _, rest = line.partition(",")
            if name == relative and rest.rpartition(",")[2] == str(size):
                found.append(f"{dist}-{flavour}")
    (whose,) = found
    return whose
