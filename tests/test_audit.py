"""``safe-uninstall audit``: sizes that add up, who requires and who loads each distribution, the
orphans, duplicated sonames and which copy loads; a RECORD or METADATA that lies must neither
crash it nor make it lie silently; and it locks nothing and writes nothing.

Distributions are installed by hand into a site folder (as in test_derived_probe), the shared
libraries compiled with gcc; the command itself runs on real venvs of the wheelhouse.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from safeuninstall.cli.render.audit import audit_report
from safeuninstall.environment.installed import InstalledDistribution, read_distribution
from safeuninstall.environment.sizes import Weighing
from safeuninstall.libraries.index import LibraryIndex, ownership
from safeuninstall.reports.audit import AuditReport, DistributionAudit, audit_environment
from safeuninstall.state.locks import hold
from safeuninstall.state.store import VENV_LOCK
from tests.conftest import UV, MakeVenv, run_tool, tagged_processes, tree, wait_for
from tests.wheels import compile_shared_library

MARKERS = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.7",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_release": "",
    "platform_system": "Linux",
    "platform_version": "",
    "python_full_version": "3.11.7",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "sys_platform": "linux",
}


def install(
    site: Path,
    name: str,
    files: Mapping[str, str | bytes],
    *,
    record: list[str] | None = None,
    requires: tuple[str, ...] = (),
    requested: bool = False,
) -> InstalledDistribution:
    """A distribution installed into ``site`` by hand: its files, METADATA, a RECORD that
    lists them (or ``record``, as written), REQUESTED if ``requested``."""
    for relative, content in files.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    dist_info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    dist_info.mkdir(parents=True)
    metadata = [f"Name: {name}", "Version: 1.0", *(f"Requires-Dist: {r}" for r in requires)]
    (dist_info / "METADATA").write_text("\n".join(metadata) + "\n\n")
    (dist_info / "INSTALLER").write_text("uv\n")
    if requested:
        (dist_info / "REQUESTED").write_text("")
    info = f"{dist_info.name}"
    lines = record if record is not None else [f"{path},," for path in files]
    lines += [f"{info}/METADATA,,", f"{info}/INSTALLER,,", f"{info}/RECORD,,"]
    (dist_info / "RECORD").write_text("\n".join(lines) + "\n")
    dist = read_distribution(dist_info)
    assert dist is not None
    return dist


def audit(site: Path, *dists: InstalledDistribution, **kwargs: object) -> AuditReport:
    """The audit with its sizes counted here, and again by the command's child process
    (sizes.Weighing): the two must agree to the byte."""
    installed = {d.key: d for d in dists}
    reports = []
    for weighing in (None, Weighing([str(site)])):
        with weighing or contextlib.nullcontext():
            reports.append(
                audit_environment(
                    installed,
                    MARKERS,
                    (LibraryIndex({}), ownership(installed), sys.executable),
                    python=sys.executable,
                    prefix=str(site.parent),
                    site_dirs=[str(site)],
                    weighing=weighing,
                    **kwargs,  # type: ignore[arg-type]
                )
            )
        assert weighing is None or weighing.failure is None
    here, child = reports
    assert child == here
    return here


def by_name(report: AuditReport) -> dict[str, DistributionAudit]:
    return {d.name: d for d in report.distributions}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "env" / "site-packages"
    folder.mkdir(parents=True)
    return folder


def _metadata_bytes(dist: InstalledDistribution) -> int:
    return sum(p.stat().st_size for p in dist.dist_info.iterdir())


# -- sizes -----------------------------------------------------------------------------------


def test_sizes_count_each_file_once_and_shared_files_in_no_one_s_own(site: Path) -> None:
    a = install(site, "a", {"a/big.bin": "x" * 1000})
    os.link(site / "a/big.bin", site / "a/same.bin")  # a hard link: the same 1000 bytes
    listed = ["a/big.bin", "a/same.bin", "a/big.bin"]  # twice: counted once all the same
    listed += [f"a-1.0.dist-info/{name},," for name in ("METADATA", "INSTALLER", "RECORD")]
    (site / "a-1.0.dist-info/RECORD").write_text("\n".join(listed) + "\n")
    twin12 = install(site, "twin-cu12", {"twin/lib.so.1": "y" * 300, "twin/cu12.txt": "1"})
    twin13 = install(site, "twin-cu13", {"twin/lib.so.1": "y" * 300, "twin/cu13.txt": "22"})
    (site / "stray.txt").write_text("z" * 50)  # listed by no RECORD
    report = audit(site, a, twin12, twin13)
    found = by_name(report)
    assert found["a"].bytes == 1000 + _metadata_bytes(a)
    assert found["twin-cu12"].bytes == 1 + _metadata_bytes(twin12)
    assert found["twin-cu13"].bytes == 2 + _metadata_bytes(twin13)
    assert found["twin-cu12"].shared_bytes == found["twin-cu13"].shared_bytes == 300
    assert found["twin-cu12"].shared_with == ("twin-cu13",)
    assert report.shared_bytes == 300
    assert report.unowned_bytes == 50
    # Every byte of the site folder once: what a walk counting each inode once finds.
    inodes = {}
    for folder, _, names in os.walk(site):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            inodes[(info.st_dev, info.st_ino)] = info.st_size
    assert report.total_bytes == sum(inodes.values())
    own = sum(d.bytes for d in report.distributions)
    assert report.total_bytes == own + report.shared_bytes + report.unowned_bytes


def test_a_hard_link_between_two_distributions_is_shared(site: Path) -> None:
    one = install(site, "one", {"one/data.bin": "d" * 4000})
    (site / "two").mkdir()
    os.link(site / "one/data.bin", site / "two/data.bin")
    two = install(site, "two", {}, record=["two/data.bin,,"])
    report = audit(site, one, two)
    found = by_name(report)
    assert found["one"].shared_bytes == found["two"].shared_bytes == 4000
    assert found["one"].bytes == _metadata_bytes(one)
    assert report.shared_bytes == 4000


def test_files_linked_from_outside_are_said(site: Path, tmp_path: Path) -> None:
    dist = install(site, "cached", {"cached/lib.bin": "c" * 2000})
    os.link(site / "cached/lib.bin", tmp_path / "uv-cache-copy")
    report = audit(site, dist)
    found = by_name(report)
    assert found["cached"].linked_elsewhere_bytes == 2000


def test_an_unlisted_link_of_a_listed_file_is_neither_unowned_nor_elsewhere(site: Path) -> None:
    """A second path to a listed file inside the environment: its bytes are the listing
    distribution's, once; the link is no sign of a copy outside it."""
    dist = install(site, "linked", {"linked/lib.bin": "l" * 3000})
    os.link(site / "linked/lib.bin", site / "linked-copy.bin")  # listed by no RECORD
    outside = install(site, "cached", {"cached/lib.bin": "c" * 700})
    os.link(site / "cached/lib.bin", site / "cached-copy.bin")
    os.link(site / "cached/lib.bin", site.parent / "uv-cache-copy")  # inside the prefix too
    os.link(site / "cached/lib.bin", site.parent.parent / "outside-copy")
    report = audit(site, dist, outside)
    found = by_name(report)
    assert found["linked"].bytes == 3000 + _metadata_bytes(dist)
    assert found["linked"].linked_elsewhere_bytes == 0
    assert found["cached"].linked_elsewhere_bytes == 700  # the link outside the site folder
    assert report.unowned_bytes == 0
    assert report.unowned_files == 0


# -- requirements ----------------------------------------------------------------------------


def test_requirers_follow_markers_and_requested_extras(site: Path) -> None:
    top = install(
        site,
        "top",
        {"top.py": ""},
        requires=("mid[x]", "never; python_version < '3'", "missing>=1", "mid>=2"),
        requested=True,
    )
    mid = install(site, "mid", {"mid.py": ""}, requires=("leaf; extra == 'x'", "opt; extra == 'y'"))
    leaf = install(site, "leaf", {"leaf.py": ""})
    opt = install(site, "opt", {"opt.py": ""})
    never = install(site, "never", {"never.py": ""})
    report = audit(site, top, mid, leaf, opt, never)
    found = by_name(report)
    assert [(r.dependent, r.extra) for r in found["mid"].required_by] == [
        ("top", None),
        ("top", None),
    ]
    assert [(r.dependent, r.extra) for r in found["leaf"].required_by] == [("mid", "x")]
    assert found["opt"].required_by == ()
    assert [(r.dependent, r.extra) for r in found["opt"].optional_for] == [("mid", "y")]
    assert set(report.orphans) == {"opt", "never"}
    assert sorted(u.requirement for u in found["top"].unmet) == ["mid>=2", "missing>=1"]
    assert found["mid"].unmet == ()


def test_metadata_only(site: Path) -> None:
    meta = install(site, "meta", {})
    real = install(site, "real", {"real.py": ""})
    report = audit(site, meta, real)
    found = by_name(report)
    assert found["meta"].metadata_only
    assert not found["real"].metadata_only


# -- libraries -------------------------------------------------------------------------------

PYINIT = "void *PyInit__ext(void) { return 0; }\nint dup_version(void);\n"


@pytest.fixture
def dup_site(site: Path, tmp_path: Path) -> tuple[Path, list[InstalledDistribution]]:
    """libdup.so.1 from two distributions at two paths; an extension module whose RUNPATH
    finds dupb's; liblone.so.1 of "lone", needed by nothing."""
    build = tmp_path / "build"
    for name, value in (("dupa", 1), ("dupb", 2)):
        compile_shared_library(
            site / name / "lib" / "libdup.so.1",
            f"int dup_version(void) {{ return {value}; }}\n",
            soname="libdup.so.1",
        )
    compile_shared_library(
        site / "user" / "_ext.so",
        PYINIT + "int use(void) { return dup_version(); }\n",
        link=[site / "dupb" / "lib" / "libdup.so.1"],
        rpath="$ORIGIN/../dupb/lib",
    )
    compile_shared_library(
        build / "liblone.so.1", "int lone(void) { return 3; }\n", soname="liblone.so.1"
    )
    (site / "lone").mkdir()
    os.replace(build / "liblone.so.1", site / "lone" / "liblone.so.1")
    dists = [
        install(site, "dupa", {}, record=["dupa/lib/libdup.so.1,,"]),
        install(site, "dupb", {}, record=["dupb/lib/libdup.so.1,,"]),
        install(site, "user", {}, record=["user/_ext.so,,"], requested=True),
        install(site, "lone", {}, record=["lone/liblone.so.1,,"]),
    ]
    return site, dists


def test_who_loads_a_distribution_and_which_copy_of_a_duplicated_soname(
    dup_site: tuple[Path, list[InstalledDistribution]],
) -> None:
    site, dists = dup_site
    report = audit(site, *dists)
    found = by_name(report)
    (use,) = found["dupb"].loaded_by
    assert (use.consumer, use.consumer_dist, use.soname) == (
        str(site / "user" / "_ext.so"),
        "user",
        "libdup.so.1",
    )
    assert found["dupa"].loaded_by == () and found["dupa"].orphan
    assert not found["dupb"].orphan
    assert found["lone"].loaded_by == () and found["lone"].orphan
    (duplicate,) = report.duplicates
    assert duplicate.soname == "libdup.so.1"
    assert {c.path: c.loaded for c in duplicate.copies} == {
        str(site / "dupa/lib/libdup.so.1"): False,
        str(site / "dupb/lib/libdup.so.1"): True,
    }


def test_a_probe_load_map_decides_loaded_by_probe(
    dup_site: tuple[Path, list[InstalledDistribution]],
) -> None:
    site, dists = dup_site
    mapped = {os.path.realpath(site / "dupa/lib/libdup.so.1")}
    report = audit(site, *dists, probe_paths=mapped)
    found = by_name(report)
    assert found["dupa"].loaded_by_probe is True
    assert not found["dupa"].orphan  # the process loaded it, whatever the static model says
    assert found["dupb"].loaded_by_probe is False
    (duplicate,) = report.duplicates
    assert {Path(c.path).parent.parent.name: c.loaded_by_probe for c in duplicate.copies} == {
        "dupa": True,
        "dupb": False,
    }


def test_the_text_report_names_what_loads_and_which_copy(
    dup_site: tuple[Path, list[InstalledDistribution]],
) -> None:
    site, dists = dup_site
    text = audit_report(audit(site, *dists))
    lines = [line.strip() for line in text.splitlines()]
    orphan = "dupa 1.0  pulled in, ORPHAN (not requested, nothing requires it, nothing loads it)"
    assert any(line.endswith(orphan) for line in lines), text
    assert "loaded: libdup.so.1 by user/_ext.so" in lines
    assert "libdup.so.1 (dupa, dupb):" in lines
    assert "dupa/lib/libdup.so.1 [dupa]: loaded by nothing" in lines
    assert "dupb/lib/libdup.so.1 [dupb]: loaded" in lines
    assert lines[-1] == (
        "orphans (not requested, nothing requires them, nothing loads them): dupa, lone"
    )


# -- hostile input ---------------------------------------------------------------------------


def test_record_paths_outside_the_environment_are_not_counted(site: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_text("s" * 9000)
    (site / "door").symlink_to(tmp_path)  # a folder inside that leads outside
    dist = install(
        site,
        "liar",
        {"liar.py": "x"},
        record=[
            "liar.py,,",
            "../../secret.bin,,",
            "/etc/hostname,,",
            "../../../../../etc/passwd,,",
            "door/secret.bin,,",
        ],
    )
    report = audit(site, dist)
    found = by_name(report)
    assert found["liar"].outside_files == 3  # secret.bin by two paths: one file
    assert found["liar"].bytes == 1 + _metadata_bytes(dist)


def test_a_record_that_claims_another_s_files_makes_them_shared_not_its_own(site: Path) -> None:
    victim = install(site, "victim", {"victim/big.bin": "v" * 5000})
    thief = install(site, "thief", {}, record=["victim/big.bin,,"])
    report = audit(site, victim, thief)
    found = by_name(report)
    assert found["victim"].shared_with == ("thief",)
    assert found["thief"].shared_with == ("victim",)
    assert found["thief"].bytes == _metadata_bytes(thief)


def test_odd_record_entries_neither_block_nor_count_twice(site: Path) -> None:
    (site / "odd").mkdir()
    os.mkfifo(site / "odd" / "fifo")  # never opened: an open would block
    (site / "odd" / "folder").mkdir()
    (site / "odd" / "data.bin").write_text("d" * 100)
    (site / "odd" / "link").symlink_to("/dev/zero")
    dist = install(
        site,
        "odd",
        {},
        record=[
            "odd/fifo,,",
            "odd/folder,,",
            "odd/link,,",
            "odd/gone.py,,",
            "odd/gone.pyc,,",
            "odd//data.bin,,",
            *["odd/data.bin,,"] * 1000,
            "odd/./data.bin,sha256=bogus,999999999",
        ],
    )
    report = audit(site, dist)
    found = by_name(report)
    link_size = os.lstat(site / "odd" / "link").st_size
    assert found["odd"].bytes == 100 + link_size + _metadata_bytes(dist)
    assert found["odd"].missing_files == 1  # gone.py; a compiled cache is no loss


def test_an_unreadable_record_makes_files_unknown_never_an_orphan(site: Path) -> None:
    dist = install(site, "broken", {"broken.py": ""})
    (dist.dist_info / "RECORD").write_bytes(b"\xff\xfe not utf-8\n")
    fifo = install(site, "fifo-record", {"f.py": ""})
    (fifo.dist_info / "RECORD").unlink()
    os.mkfifo(fifo.dist_info / "RECORD")
    report = audit(site, dist, fifo)
    found = by_name(report)
    for name in ("broken", "fifo-record"):
        assert found[name].record_problem
        assert not found[name].orphan
        assert not found[name].metadata_only


def test_hostile_metadata_names_nothing(site: Path) -> None:
    target = install(site, "target", {"target.py": ""})
    liar = install(
        site,
        "liar",
        {"liar.py": ""},
        requires=(
            "!!!",
            "target; python_version <<< '3'",
            "target; extra ==",
            "target; os_name == 'posix' and unknown_marker == '1'",
            "liar",  # itself
            "x" * 5000,
            "target @ file:///etc/passwd ; extra == 'nope'",
        ),
        requested=True,
    )
    report = audit(site, target, liar)
    found = by_name(report)
    assert found["target"].required_by == ()
    assert found["target"].orphan
    assert found["liar"].required_by == ()


# -- the command -----------------------------------------------------------------------------


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_audit_of_a_venv_json_locks_nothing_and_writes_nothing(make_venv: MakeVenv) -> None:
    venv = make_venv(
        "consumer",
        "nvfoo-cu13",
        "nvbar-cu13",
        "nvbaz-cu13",
        "leftpad",
        "nvfoo-meta",
        "requests",
        "sharedlib-cu12",
        "sharedlib-cu13",
    )
    for info in venv.site_packages.glob("*.dist-info"):
        if not info.name.startswith(("consumer-", "requests-")):
            (info / "REQUESTED").unlink()
    before = tree(venv.root)
    lock = venv.root / VENV_LOCK
    lock.touch()
    with hold(lock, 0, busy="held by the test"):
        done = venv.tool("audit", "--json", "--lock-timeout", "0")
        text = venv.tool("audit", "--lock-timeout", "0")
        loaded = venv.tool("audit", "--json", "--load", "--probe", "import consumer")
    assert done.returncode == text.returncode == loaded.returncode == 0, done.stderr
    lock.unlink()
    assert tree(venv.root) == before  # no state folder, no cache, no bytecode
    data: Any = done.json()
    assert set(data) == {
        "json_version",
        "json_schema",
        "command",
        "outcome",
        "exit_code",
        "python",
        "site_dirs",
        "total_bytes",
        "owned_bytes",
        "shared_bytes",
        "unowned_bytes",
        "unowned_files",
        "unowned",
        "stash_bytes",
        "stashes",
        "orphans",
        "top_level",
        "distributions",
        "duplicates",
        "load",
        "mapped",
        "notes",
    }
    dists = {d["name"]: d for d in data["distributions"]}
    assert data["orphans"] == ["leftpad", "nvfoo-meta", "sharedlib-cu12", "sharedlib-cu13"]
    assert dists["nvfoo-meta"]["metadata_only"] is True
    assert [u["soname"] for u in dists["nvfoo-cu13"]["loaded_by"]] == ["libfoo.so.1"]
    assert dists["nvfoo-cu13"]["loaded_by"][0]["consumer_dist"] == "consumer"
    assert [r["dependent"] for r in dists["urllib3"]["required_by"]] == ["requests"]
    assert dists["sharedlib-cu12"]["shared_with"] == ["sharedlib-cu13"]
    assert dists["requests"]["requested"] is True and dists["urllib3"]["requested"] is False
    sizes = [d["bytes"] + d["shared_bytes"] for d in data["distributions"]]
    assert sizes == sorted(sizes, reverse=True)
    assert "orphans (not requested, nothing requires them, nothing loads them): leftpad" in (
        text.stdout
    )
    with_load: Any = loaded.json()
    probed = {d["name"]: d["loaded_by_probe"] for d in with_load["distributions"]}
    assert probed["nvbaz-cu13"] is True and probed["leftpad"] is False
    assert with_load["load"][0]["passed"] is True
    libfoo = venv.site_packages / "nvfoo" / "lib" / "libfoo.so.1"
    assert str(libfoo.resolve()) in with_load["mapped"]
    assert data["load"] is None and data["mapped"] is None


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_audit_counts_what_only_the_stashes_hold(make_venv: MakeVenv) -> None:
    """A snapshot of everything (hard links of files still installed: no space of its own),
    then a removal of leftpad (its stash now alone holds leftpad's files)."""
    venv = make_venv("leftpad", "toolpkg")
    assert venv.tool("snapshot").returncode == 0
    assert venv.tool("--no-probe", "leftpad").returncode == 0
    data: Any = venv.tool("audit", "--json").json()
    snapshots = venv.state.snapshots_dir
    links: dict[tuple[int, int], list[os.stat_result]] = {}
    for folder, _, names in os.walk(snapshots):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            links.setdefault((info.st_dev, info.st_ino), []).append(info)
    alone = sum(found[0].st_size for found in links.values() if found[0].st_nlink == len(found))
    leftpad = len(b"def pad(s): return ' ' + s\n")
    assert data["stash_bytes"] == alone
    assert data["stash_bytes"] >= leftpad
    toolpkg = venv.site_packages / "toolpkg" / "__init__.py"
    info = toolpkg.stat()  # stashed by the first snapshot, and still installed: not counted
    stashed = links[(info.st_dev, info.st_ino)]
    assert stashed[0].st_nlink > len(stashed)
    assert [s["snapshot"] for s in data["stashes"]] == ["0002", "0001"]


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_an_audit_of_a_target_folder_names_the_folder(make_venv: MakeVenv, tmp_path: Path) -> None:
    """The interpreter's venv holds other distributions than the --target folder: the audit's
    first line names the folder it counted, as every other command names a --target."""
    venv = make_venv("leftpad")
    folder = tmp_path / "tgt"
    house = str(venv.wheelhouse)
    venv.uv("pip", "install", "--target", str(folder), "--no-index", "-f", house, "requests")

    done = run_tool("--python", str(venv.root), "--target", str(folder), "audit")

    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"audit of {folder}: 2 distributions, "), first  # requests, urllib3


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
def test_a_hostile_environment_is_audited_in_bounded_time_and_said(make_venv: MakeVenv) -> None:
    """Metadata that can't be read, a RECORD that names FIFOs, /etc and one path ten thousand
    times, METADATA whose requirements are garbage: the audit ends, says each, changes
    nothing. Files are replaced, never edited in place (their inodes are uv's cache's)."""
    from tests.test_hostile_input import run_bounded

    venv = make_venv("leftpad", "requests")
    site = venv.site_packages
    ghost = site / "ghost-1.0.dist-info"
    ghost.mkdir()
    os.mkfifo(ghost / "METADATA")
    os.mkfifo(site / "leftpad.fifo")
    (record,) = site.glob("leftpad-*.dist-info/RECORD")
    lines = record.read_text().splitlines()
    record.unlink()
    lines += ["leftpad.fifo,,", "../../../../../../etc/passwd,,", *["leftpad.py,,"] * 10_000]
    record.write_text("\n".join(lines) + "\n")
    (metadata,) = site.glob("requests-*.dist-info/METADATA")
    text = metadata.read_text().replace(
        "Requires-Dist:",
        "Requires-Dist: !!!\nRequires-Dist: urllib3; python_version <<< '3'\nRequires-Dist:",
        1,
    )
    metadata.unlink()
    metadata.write_text(text)
    before = tree(venv.root)
    run = run_bounded(venv, "audit", "--json")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    data: Any = run.json()
    assert tree(venv.root) == before
    dists = {d["name"]: d for d in data["distributions"]}
    assert dists["leftpad"]["outside_files"] == 1
    own = [site / "leftpad.py", *record.parent.iterdir()]  # leftpad.py once, not 10,000 times
    assert dists["leftpad"]["bytes"] == sum(path.stat().st_size for path in own)
    assert [r["dependent"] for r in dists["urllib3"]["required_by"]] == ["requests"]
    assert any("ghost-1.0.dist-info" in note for note in data["notes"]), data["notes"]


def test_audit_and_with_orphans_share_what_requested_means(make_venv: MakeVenv) -> None:
    # uv writes REQUESTED for every distribution it installs (astral-sh/uv#13278): while all of
    # them have it, it says nothing, for both; once some lack it, it is read, by both.
    venv = make_venv("requests", "leftpad")
    audited: Any = venv.tool("audit", "--json").json()
    # What the user installed is no orphan: where uv's REQUESTED can't tell, it is top level.
    assert audited["orphans"] == []
    assert audited["top_level"] == ["leftpad", "requests"]
    assert any("REQUESTED disregarded" in n for n in audited["notes"])
    assert not any(d["requested_known"] for d in audited["distributions"])
    # Where it is not known, the text says neither "requested" nor "pulled in".
    text = venv.tool("audit").stdout
    assert "pulled in" not in text and "  requested" not in text, text
    assert "ORPHAN" not in text, text
    assert "requests 2.32.3  top level (nothing requires it, nothing loads it)" in text, text
    assert "orphans: none" in text
    assert "uv records no request, so each is one you installed or a leftover): leftpad, " in text
    dry: Any = venv.tool("--json", "--dry-run", "--with-orphans", "requests").json()
    assert dry["orphans"] == ["urllib3"]
    (info,) = venv.site_packages.glob("requests-*.dist-info")
    (info / "REQUESTED").unlink()  # urllib3 and leftpad keep theirs: asked for, by name
    audited = venv.tool("audit", "--json").json()
    assert audited["orphans"] == ["requests"]
    assert audited["top_level"] == []
    assert not any("REQUESTED disregarded" in n for n in audited["notes"])
    assert all(d["requested_known"] for d in audited["distributions"])
    text = venv.tool("audit").stdout
    assert "pulled in, ORPHAN (not requested, nothing requires it, nothing loads it)" in text
    assert "urllib3 2.3.0  requested" in text, text
    dry = venv.tool("--json", "--dry-run", "--with-orphans", "requests").json()
    assert dry["orphans"] == []


@pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool")
@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_audit_leaves_no_walker_behind(
    make_venv: MakeVenv, tmp_path: Path, process_tag: dict[str, str], signal_number: int
) -> None:
    """The sizes' walk runs in a child process from the start of the command (sizes.py);
    with --load the probe runs meanwhile: signalled there, the command stops both."""
    venv = make_venv("leftpad")
    started = tmp_path / "started"
    probe = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(600)\n"
    argv = [sys.executable, "-m", "safeuninstall", "-p", str(venv.root), "audit", "--json"]
    env = {**os.environ, **process_tag}
    proc = subprocess.Popen(
        [*argv, "--load", "--probe", probe],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    wait_for(started)
    walkers = [
        pid
        for pid in tagged_processes(process_tag)
        if b"sizes.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(walkers) == 1, "the walker should be waiting for the ownership now"
    proc.send_signal(signal_number)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, out + err
    assert json.loads(out)["outcome"] == "error" and "interrupted" in out
    assert "Traceback" not in err
    assert tagged_processes(process_tag) == [], "a child outlived the command"
