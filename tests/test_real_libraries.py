"""The library model against the real loader, on environments from the package index.

- ``ldd`` on every ELF object of the torch, scipy and scikit-learn stacks (each loaded as the
  program, the way ldd loads it) names the same file for every name as the model's load of it.
- A real import's load map (``/proc/self/maps``) holds every object the model loads for each
  extension module that import loaded, at the path the model says.
- ``doctor`` on every healthy stack finds nothing; after the bare ``uv pip uninstall`` of the four
  nvidia-*-cu13 wheels it names the four libraries and the four requirements, and its one
  command (an install of the pins torch's Requires-Dist names) repairs it all; a requirement
  whose version only a snapshot recorded is pinned from there.
- A cu12 build's dist-info left over at the paths of its cu13 twin (nothing requires it, torch
  requires the twin): doctor drops it rather than reinstalls it, with the library folder
  deleted under both, and under a bare uninstall of the cu13 wheels; its one line, pasted into
  a shell, leaves doctor clean and torch importing.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess

import pytest

from safeuninstall.environment.installed import installed_distributions
from safeuninstall.environment.interpreter import query_interpreter
from safeuninstall.libraries.elf import ElfInfo, read_elf
from safeuninstall.libraries.index import LibraryIndex, ownership
from safeuninstall.libraries.ldcache import read_ld_cache
from tests.conftest import Venv
from tests.ldd import LDD, disagreement, ldd
from tests.realstack import SMOKE, RealVenv, Stacks

needs_ldd = pytest.mark.skipif(LDD is None, reason="ldd not available")

ELF_STACKS = ["torch", "scipy", "sklearn"]
# At least this many ELF objects per stack: a comparison of nothing must not pass.
AT_LEAST = {"torch": 100, "scipy": 200, "sklearn": 200}
SEED_WHEELS = (
    "nvidia-cudnn-cu13",
    "nvidia-cusparselt-cu13",
    "nvidia-nccl-cu13",
    "nvidia-nvshmem-cu13",
)

# Where the model and ld.so disagree, by stack and file name, with why. None is known: ldd agrees
# with the model on every object of these stacks. (What ldd prints differently by design is
# handled in tests/ldd.py: the dynamic linker, by its path alone, and the vDSO, no file.)
EXCEPTIONS: dict[tuple[str, str], str] = {}


def elf_objects(venv: Venv) -> tuple[LibraryIndex, list[ElfInfo], str]:
    """The index, every ELF library and program the environment's distributions list, and the
    interpreter's path."""
    interpreter = query_interpreter(venv.python, os.environ)
    owned = ownership(installed_distributions(interpreter))
    index = LibraryIndex({})
    found: list[ElfInfo] = []
    for files in owned.files.values():
        libraries, programs = index.scan(files)
        found += libraries + programs
    return index, found, interpreter.executable


@needs_ldd
@pytest.mark.parametrize("stack", ELF_STACKS)
def test_the_model_loads_what_ldd_loads(real_venv: RealVenv, stack: str) -> None:
    index, objects, _ = elf_objects(real_venv(stack))
    loader = index.loader()
    assert len(objects) >= AT_LEAST[stack]
    differences = {}
    for obj in objects:
        if (stack, os.path.basename(obj.path)) in EXCEPTIONS:
            continue
        found = disagreement(loader.load(obj), ldd(obj.path))
        if found:
            differences[obj.path] = found
    assert differences == {}


# The objects of the running process in the order they were loaded (dl_iterate_phdr walks the
# dynamic linker's list), after the stack's smoke import.
LOAD_ORDER = """
import ctypes, json, os
{smoke}
class Info(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_void_p), ("name", ctypes.c_char_p)]
names = []
@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Info), ctypes.c_size_t, ctypes.c_void_p)
def collect(info, size, data):
    names.append(os.fsdecode(info.contents.name or b""))
    return 0
ctypes.CDLL(None).dl_iterate_phdr(collect, None)
print(json.dumps([os.path.realpath(name) for name in names if name.startswith("/")]))
"""


@pytest.mark.parametrize("stack", ELF_STACKS)
def test_the_model_loads_what_an_import_loads(real_venv: RealVenv, stack: str) -> None:
    """The process's own sequence replayed: each object the import brought in that no earlier
    load of the model explains (an extension module, a library loaded with ctypes) is loaded
    by the model into the interpreter, in the process's order, with what is loaded so far.
    Every object the model then loads is one the process loaded, from the same file: the
    DT_RPATH chain, the names already loaded (numpy's libgfortran-040039e1... serves scipy's
    modules, scipy.libs has its own copy), the search order, all as ld.so did them."""
    venv = real_venv(stack)
    done = venv.run_python(LOAD_ORDER.format(smoke=SMOKE[stack]))
    assert done.returncode == 0, done.stderr
    sequence = json.loads(done.stdout.splitlines()[-1])
    index, _, executable = elf_objects(venv)
    loader = index.loader()
    python = read_elf(os.path.realpath(executable))
    assert python is not None
    first = loader.load(python)
    names = dict(first.names)
    explained = {os.path.realpath(o.path) for o in first.objects}
    replayed = 0
    for path in sequence:
        if path in explained:
            continue
        info = index.cache.get(path)
        assert info is not None, path
        load = loader.load(info, loaded=names, chain=[python])
        assert not load.missing, (path, load.missing)
        brought = {os.path.realpath(o.path) for o in load.objects}
        assert brought <= set(sequence), (path, sorted(brought - set(sequence)))
        explained |= brought
        names.update({k: v for k, v in load.names.items() if k not in names})
        replayed += info.python_extension
    assert replayed >= 5


# -- doctor ------------------------------------------------------------------------------------


def without_the_driver() -> bool:
    return "libcuda.so.1" not in read_ld_cache()


@pytest.mark.parametrize("stack", sorted(SMOKE))
def test_doctor_finds_nothing_in_a_healthy_environment(real_venv: RealVenv, stack: str) -> None:
    venv = real_venv(stack)
    run = venv.tool("doctor", "--json")
    data = run.json()
    assert (run.returncode, data["findings"]) == (0, []), data
    text = venv.tool("doctor")
    assert text.returncode == 0
    assert text.stdout.startswith("doctor: no missing library, unmet requirement"), text.stdout
    if stack in ("torch", "torchdup"):
        notes = {(n["kind"], n["what"]) for n in data["notes"]}  # type: ignore[union-attr]
        if without_the_driver():
            # The driver's library: needed by libcaffe2_nvrtc.so, never in a wheel.
            assert ("driver", "libcuda.so.1") in notes
        # Plugins that nothing loads at start (nvshmem's transports, cufile's RDMA): what they
        # need from the system is information, named apart from the findings.
        assert {kind for kind, _ in notes} <= {"driver", "on-demand"}
    else:
        assert data["notes"] == []


def run_printed(command: str, stacks: Stacks, venv: Venv) -> subprocess.CompletedProcess[str]:
    """The repair line doctor printed, as the user would paste it, offline from the stacks'
    cache (the machine's indexes configured, as the stacks were installed)."""
    return subprocess.run(
        shlex.split(command),
        env={**venv.env(), **stacks.offline_env()},
        capture_output=True,
        text=True,
    )


def test_doctor_after_the_seeds_bare_uninstall(real_venv: RealVenv, stacks: Stacks) -> None:
    """The four wheels removed behind the tool's back, no snapshot: doctor names exactly the
    four libraries torch can't load and the four requirements, and one install of torch's
    pins repairs it all."""
    venv = real_venv("torch")
    venv.uv("pip", "uninstall", "--python", str(venv.python), *SEED_WHEELS)

    run = venv.tool("doctor", "--json")

    data = run.json()
    assert run.returncode == 1
    found = {(f["kind"], f["what"], f["needed_by"]) for f in data["findings"]}  # type: ignore[union-attr]
    pins = {
        "nvidia-cudnn-cu13==9.24.0.43",
        "nvidia-cusparselt-cu13==0.8.1",
        "nvidia-nccl-cu13==2.30.7",
        "nvidia-nvshmem-cu13==3.4.5",
    }
    assert found == {
        ("library", "libcudnn.so.9", "torch"),
        ("library", "libcusparseLt.so.0", "torch"),
        ("library", "libnccl.so.2", "torch"),
        ("library", "libnvshmem_host.so.3", "torch"),
        *(("requirement", f'{pin}; platform_system == "Linux"', "torch") for pin in pins),
    }
    command = str(data["repair_command"])
    assert data["repair_snapshot"] is None
    assert shlex.split(command)[-4:] == sorted(pins)
    text = venv.tool("doctor").stdout
    assert text.count("to repair, run: ") == 1
    assert f"to repair, run: {command}\n" in text

    repaired = run_printed(command, stacks, venv)

    assert repaired.returncode == 0, repaired.stderr
    assert venv.tool("doctor").returncode == 0
    assert venv.run_python(SMOKE["torch"]).returncode == 0


def test_doctor_pins_a_requirement_from_what_snapshots_recorded(
    real_venv: RealVenv, stacks: Stacks
) -> None:
    """Every snapshot records idna==3.20, none kept its files: the pin comes from there."""
    venv = real_venv("requests")
    assert venv.tool("--no-probe", "requests").returncode == 0  # snapshot 0001
    assert venv.tool("--no-probe", "rollback").returncode == 0  # snapshot 0002
    venv.uv("pip", "uninstall", "--python", str(venv.python), "idna")

    data = venv.tool("doctor", "--json").json()

    (finding,) = data["findings"]  # type: ignore[misc]
    assert finding["kind"] == "requirement"
    assert finding["what"].startswith("idna")
    assert finding["provider"] == "idna==3.20"
    assert finding["snapshot"] is None  # no stash holds it: no rollback can bring it
    assert finding["recorded_in"] is not None
    command = str(data["repair_command"])
    assert shlex.split(command)[-1] == "idna==3.20"
    assert run_printed(command, stacks, venv).returncode == 0
    assert venv.tool("doctor").returncode == 0
    assert venv.run_python(SMOKE["requests"]).returncode == 0


def test_a_removals_ownership_answers_as_the_whole_one(real_venv: RealVenv) -> None:
    """torchdup: nccl, cusparselt and nvshmem cu12 install to their cu13 twins' paths. The
    ownership a removal works out where it asks (libraries.ownership_on_demand) answers every
    path as the whole ownership does, the RECORD cache cold and warm, and finds the twins."""
    from safeuninstall.environment.recordcache import RecordCache
    from safeuninstall.libraries.index import ownership_on_demand

    venv = real_venv("torchdup")
    installed = installed_distributions(query_interpreter(venv.python, os.environ))
    expected = ownership(installed)
    cache_file = venv.root / "record-cache.json"
    for _ in ("cold", "warm"):
        cache = RecordCache(cache_file)
        owned = ownership_on_demand(installed, cache)
        for path, owners in expected.owners.items():
            assert owned.owners.get(path) == owners, path
        for name in installed:
            assert owned.libraries(name) == expected.libraries(name), name
            assert owned.shared_paths(of=[name]) == expected.shared_paths(of=[name]), name
        cache.save()
    assert cache.hits == len(installed)
    shared = owned.shared_paths(of=["nvidia-nccl-cu12"])
    assert any(path.endswith("/nvidia/nccl/lib/libnccl.so.2") for path in shared)


@pytest.mark.parametrize(
    ("stack", "folder", "owner", "consumer"),
    [
        ("torch", "nvidia/cudnn/lib", "nvidia-cudnn-cu13", "torch"),
        ("scipy", "scipy.libs", "scipy", "scipy"),
    ],
)
def test_doctor_repairs_libraries_deleted_behind_their_metadata(
    real_venv: RealVenv, stacks: Stacks, stack: str, folder: str, owner: str, consumer: str
) -> None:
    """The story's own state: a library folder deleted, the dist-info that lists it left in
    place (hollow), no snapshot. doctor says what is missing in words, gives one command, and
    that command, run as printed (split without a shell), leaves doctor clean."""
    venv = real_venv(stack)
    gone = venv.site_packages / folder
    count = sum(1 for path in gone.rglob("*") if not path.is_dir())
    assert count
    shutil.rmtree(gone)
    version = venv.installed()[owner]

    run = venv.tool("doctor", "--json")

    data = run.json()
    assert run.returncode == 1, data
    hollow = [f for f in data["findings"] if f["kind"] == "hollow"]  # type: ignore[union-attr]
    assert [f["what"] for f in hollow] == [f"{owner}=={version}"]
    text = venv.tool("doctor").stdout
    assert f"{owner} {version} is installed but {count} of its files are missing" in text, text
    assert "missing hollow" not in text
    command = str(data["repair_command"])
    assert text.count("to repair, run: ") == 1, text
    assert f"to repair, run: {command}\n" in text
    assert f"{owner}=={version}" in shlex.split(command)

    repaired = run_printed(command, stacks, venv)

    assert repaired.returncode == 0, repaired.stderr
    after = venv.tool("doctor")
    assert after.returncode == 0, after.stdout
    assert venv.run_python(SMOKE[stack]).returncode == 0
    assert (venv.site_packages / folder).is_dir()


def leftover_build(venv: Venv, of: str, name: str, version: str) -> None:
    """A dist-info of ``name`` ``version`` whose RECORD lists the files of ``of``'s (installed):
    another build of one library at the same paths, its own files long overwritten. Written
    as new files: the stack cache's are hard links of the venv's."""
    (source,) = venv.site_packages.glob(f"{of.replace('-', '_')}-*.dist-info")
    folder = f"{name.replace('-', '_')}-{version}.dist-info"
    target = venv.site_packages / folder
    target.mkdir()
    lines = [line.split(",")[0] for line in (source / "RECORD").read_text().splitlines()]
    kept = [line for line in lines if line and not line.startswith(source.name + "/")]
    (target / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (target / "INSTALLER").write_text("uv\n")
    record = [f"{path},," for path in kept]
    record += [f"{folder}/{f},," for f in ("METADATA", "INSTALLER", "RECORD")]
    (target / "RECORD").write_text("\n".join(record) + "\n")


def run_printed_line(command: str, stacks: Stacks, venv: Venv) -> subprocess.CompletedProcess[str]:
    """A repair line of two commands (``a && b``), pasted into a shell as printed."""
    env = {**venv.env(), **stacks.offline_env()}
    return subprocess.run(command, shell=True, env=env, capture_output=True, text=True)


def assert_drops_the_leftover(venv: Venv, stacks: Stacks, leftover: str, twin: str) -> None:
    data = venv.tool("doctor", "--json").json()
    stale = [(f["what"], f["provider"]) for f in data["findings"] if f["kind"] == "stale"]  # type: ignore[union-attr]
    assert stale == [(leftover, twin)], data
    command = str(data["repair_command"])
    drop, _, install = command.partition(" && ")
    assert shlex.split(drop)[-1] == leftover.partition("==")[0], command
    assert twin in shlex.split(install) and "--reinstall" in shlex.split(install), command
    assert leftover.partition("==")[0] not in install, command

    repaired = run_printed_line(command, stacks, venv)

    assert repaired.returncode == 0, repaired.stderr
    after = venv.tool("doctor")
    assert after.returncode == 0, after.stdout
    assert leftover.partition("==")[0] not in venv.installed()
    assert venv.run_python(SMOKE["torch"]).returncode == 0


def test_doctor_drops_the_seeds_leftover_cu12_dist_info(
    real_venv: RealVenv, stacks: Stacks
) -> None:
    """The seed's own state: nvidia-cudnn-cu12's dist-info listing nvidia/cudnn/lib, where
    cu13's files are, and that folder deleted: both hollow, only cu13 required (by torch). A
    reinstall of both would leave cu12's cuDNN, or cu13's, whichever came last."""
    venv = real_venv("torch")
    leftover_build(venv, "nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "9.10.2.21")
    shutil.rmtree(venv.site_packages / "nvidia" / "cudnn" / "lib")

    assert_drops_the_leftover(
        venv, stacks, "nvidia-cudnn-cu12==9.10.2.21", "nvidia-cudnn-cu13==9.24.0.43"
    )


def test_doctor_drops_a_cu12_stray_under_a_bare_uninstall_of_the_cu13_wheels(
    real_venv: RealVenv, stacks: Stacks
) -> None:
    """nvidia-nccl-cu12 at nccl-cu13's paths, then the four cu13 wheels removed behind the
    tool's back: cu12 is hollow and torch's pins are unmet. One line drops cu12 and installs
    the four pins."""
    venv = real_venv("torch")
    leftover_build(venv, "nvidia-nccl-cu13", "nvidia-nccl-cu12", "2.27.3")
    venv.uv("pip", "uninstall", "--python", str(venv.python), *SEED_WHEELS)

    assert_drops_the_leftover(venv, stacks, "nvidia-nccl-cu12==2.27.3", "nvidia-nccl-cu13==2.30.7")
