"""The derived probe: candidates found from a distribution's files,
namespace-aware, its entry points, each tried on its own; judged as a regression.

Units on hand-built folder trees and files first, then the driver run for real with this
interpreter, then the command on toy environments.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from safeuninstall.cli.render.operation import operation
from safeuninstall.context.baseline import BaselineCache
from safeuninstall.environment.installed import InstalledDistribution, read_distribution
from safeuninstall.environment.interpreter import Interpreter
from safeuninstall.operations.endings.uninstall import DRY_RUN, PASSED
from safeuninstall.operations.results import ProbeRuns, Result
from safeuninstall.probe import derived, importables
from safeuninstall.probe.kinds import CandidateKind, ProbeKind
from safeuninstall.probe.runner import (
    Candidate,
    CandidateResult,
    Probe,
    ProbeResult,
    ProbeSettings,
    RunSettings,
    _read_candidates,
    run_probe,
)
from tests.conftest import MakeVenv
from tests.wheels import build_wheel

PKGUTIL_INIT = "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n"
PKG_RESOURCES_INIT = (
    "try:\n    __import__('pkg_resources').declare_namespace(__name__)\n"
    "except ImportError:\n    from pkgutil import extend_path\n"
    "    __path__ = extend_path(__path__, __name__)\n"
)


def make_dist(
    site: Path,
    name: str,
    files: Mapping[str, str],
    *,
    record: list[str] | None = None,
    requires: tuple[str, ...] = (),
    entry_points: str | None = None,
) -> InstalledDistribution:
    """A distribution installed into ``site`` by hand: its files, a METADATA and a RECORD that
    lists them (or ``record``, as written)."""
    for relative, text in files.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    dist_info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    dist_info.mkdir(parents=True)
    metadata = [f"Name: {name}", "Version: 1.0", *(f"Requires-Dist: {r}" for r in requires)]
    (dist_info / "METADATA").write_text("\n".join(metadata) + "\n\n")
    lines = record if record is not None else [f"{path},," for path in files]
    (dist_info / "RECORD").write_text("\n".join(lines) + "\n")
    if entry_points is not None:
        (dist_info / "entry_points.txt").write_text(entry_points)
    dist = read_distribution(dist_info)
    assert dist is not None
    return dist


# -- modules, namespace-aware ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(  # PEP 420: no __init__.py in google/ nor google/cloud/
            {"google/cloud/storage/__init__.py": "X = 1\n", "google/cloud/storage/blob.py": ""},
            ["google.cloud.storage"],
            id="pep420",
        ),
        pytest.param(
            {"azure/__init__.py": PKGUTIL_INIT, "azure/core/__init__.py": "X = 1\n"},
            ["azure.core"],
            id="pkgutil-style",
        ),
        pytest.param(
            {
                "zope/__init__.py": PKG_RESOURCES_INIT,
                "zope/interface/__init__.py": "X = 1\n",
                "zope/interface/declarations.py": "",
            },
            ["zope.interface"],
            id="pkg_resources-style",
        ),
        pytest.param(  # an empty __init__ over subpackages only: importing it proves nothing
            {
                "nvidia/__init__.py": '"""NVIDIA."""\n# nothing else\n',
                "nvidia/cu13/__init__.py": "X = 1\n",
                "nvidia/cudnn/__init__.py": "X = 1\n",
            },
            ["nvidia.cu13", "nvidia.cudnn"],
            id="empty-init-over-subpackages",
        ),
        pytest.param(  # an empty __init__ beside modules: a regular package all the same
            {"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n", "pkg/sub/__init__.py": "Y = 2\n"},
            ["pkg"],
            id="empty-init-beside-modules",
        ),
        pytest.param(  # a namespace that holds modules itself: they are the candidates
            {
                "google/cloud/client.py": "",
                "google/cloud/_helpers.py": "",
                "google/cloud/tests/test_client.py": "",
            },
            ["google.cloud.client"],
            id="namespace-of-modules",
        ),
        pytest.param(  # top-level modules and extension modules; private ones left out
            {
                "six.py": "",
                "fast.abi3.so": "",
                "_cffi_backend.cpython-311-x86_64-linux-gnu.so": "",
                "typed.pyi": "",
            },
            ["fast", "six"],
            id="modules-and-extensions",
        ),
        pytest.param(  # nothing importable, or nothing to import on its own
            {
                "jsonpointer-stubs/__init__.pyi": "",
                "bad-name/__init__.py": "",
                "setup.py": "raise SystemExit('never imported')\n",
                "conftest.py": "",
                "tests/__init__.py": "",
                "docs/conf.py": "",
                "pkg/__main__.py": "",
                "x.dist-info/y.py": "",
                "data/readme.txt": "",
                "libcheckpoint.so": "",  # a shared library (nvidia-cuda-cupti), no module
                "nvidia_like/lib/libnvperf_host.so": "",
            },
            [],
            id="nothing-importable",
        ),
    ],
)
def test_modules_are_taken_at_their_first_level_that_is_not_a_namespace(
    tmp_path: Path, files: dict[str, str], expected: list[str]
) -> None:
    dist = make_dist(tmp_path / "site", "dist", files)
    assert importables.top_modules(dist) == expected


def test_private_modules_are_roots_to_search_for(tmp_path: Path) -> None:
    files = {"_cffi_backend.cpython-311-x86_64-linux-gnu.so": "", "cffi/__init__.py": "X = 1"}
    dist = make_dist(tmp_path / "site", "cffi", files)
    assert importables.top_modules(dist, public=False) == ["_cffi_backend", "cffi"]


def test_record_paths_outside_the_site_folder_are_no_modules(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (tmp_path / "evil.py").write_text("")
    dist = make_dist(
        site,
        "hostile",
        {"ok/__init__.py": "X = 1\n"},
        record=[
            "ok/__init__.py,,",
            "../evil.py,,",
            "/etc/passwd.py,,",
            "ok/../../evil.py,,",
            "ok//double.py,,",
            "./ok/x.py,,",
            "ok\\win.py,,",
            '"quoted,comma.py",,',
            "ok/__pycache__/x.cpython-311.pyc,,",
        ],
    )
    assert importables.top_modules(dist) == ["ok"]


def test_without_a_readable_record_top_level_names_that_are_real_packages(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist = make_dist(
        site,
        "old",
        {
            "google/__init__.py": PKGUTIL_INIT,
            "google/thing/__init__.py": "",
            "real/__init__.py": "X = 1\n",
            "single.py": "",
        },
    )
    (dist.dist_info / "RECORD").unlink()
    (dist.dist_info / "top_level.txt").write_text("google\nreal\nsingle\nmissing\nnot-a-name\n")
    assert importables.top_modules(dist) == ["real", "single"]


# -- entry points: an untrusted file -----------------------------------------------------------


def test_entry_points_are_parsed_as_importlib_metadata_does() -> None:
    text = (
        "# a comment\n"
        "[console_scripts]\n"
        "jupyter-lab = jupyterlab.labapp:main\n"
        "tool=pkg.cli:App.launch_instance [extra1, extra2]\n"
        "; another comment\n"
        "[ pygments.lexers ]\n"
        "ipython = ipython_pygments_lexers:IPythonLexer\n"
        "[opentelemetry_environment_variables]\n"
        "api = opentelemetry.environment_variables\n"
    )
    found = importables.parse_entry_points(text)
    assert [(e.group, e.name, e.value) for e in found] == [
        ("console_scripts", "jupyter-lab", "jupyterlab.labapp:main"),
        ("console_scripts", "tool", "pkg.cli:App.launch_instance"),
        ("pygments.lexers", "ipython", "ipython_pygments_lexers:IPythonLexer"),
        ("opentelemetry_environment_variables", "api", "opentelemetry.environment_variables"),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "x = os; import evil",
        "x = os:system; rm -rf /",
        "x = a-b:c",
        "x = 1abc:d",
        "x = a:b c",
        "x = class:main",
        "x = a:def",
        "x = a.:b",
        "x = .a:b",
        "x = :attr",
        "x = a::b",
        "x = __import__('os').system('x')",
        "x = %(here)s:main",
        "x",
        "= a:b",
        "na\x1bme = a:b",
        "x = a\x00b:c",
        "x = " + "a" * 300 + ":b",
        "x = a:" + ".b" * 200,
        "x = a:b\u200b",
    ],
)
def test_an_entry_point_that_is_not_one_is_dropped(line: str) -> None:
    text = f"[console_scripts]\n{line}\nok = good.module:main\n"
    found = importables.parse_entry_points(text)
    assert [e.value for e in found] == ["good.module:main"]


@pytest.mark.parametrize(
    "text",
    [
        "before = any.group:main\n[console_scripts\nx = a:b\n",  # outside a group, then no group
        "[]\nx = a:b\n",
        "[\x1b[31mred]\nx = a:b\n",
        "\x00\xff\xfe" * 1000,
        "[g]\n" + "x\n" * 10000,
    ],
)
def test_entry_points_outside_a_valid_group_are_none(text: str) -> None:
    assert importables.parse_entry_points(text) == []


def test_an_entry_points_file_that_is_not_a_small_text_file_gives_none(tmp_path: Path) -> None:
    dist = make_dist(tmp_path / "site", "big", {"big/__init__.py": "X = 1\n"})
    huge = "[console_scripts]\n" + "x = a:b\n" * 200_000  # over 1 MiB
    (dist.dist_info / "entry_points.txt").write_text(huge)
    assert importables.entry_points(dist) == []
    (dist.dist_info / "entry_points.txt").unlink()
    os.mkfifo(dist.dist_info / "entry_points.txt")  # a FIFO no one writes to: never waited on
    assert importables.entry_points(dist) == []
    (dist.dist_info / "entry_points.txt").unlink()
    (dist.dist_info / "entry_points.txt").write_bytes(b"[console_scripts]\nx = a:b\n\xff\xfe\n")
    assert [e.value for e in importables.entry_points(dist)] == ["a:b"]


def test_entry_points_a_build_tool_loads_or_that_point_at_tests_are_left_out(
    tmp_path: Path,
) -> None:
    dist = make_dist(
        tmp_path / "site",
        "plug",
        {"plug/__init__.py": "X = 1\n"},
        entry_points=(
            "[distutils.setup_keywords]\ncffi_modules = plug.setuptools_ext:cffi_modules\n"
            "[setuptools.finalize_distribution_options]\nx = plug.build:f\n"
            "[console_scripts]\nplug = plug.__main__:main\nplug-test = plug.tests.run:main\n"
            "plug-ok = plug.cli:main\n"
            "[pytest11]\nplug = plug.pytest_plugin\n"
        ),
    )
    values = [e.value for e in importables.entry_points(dist)]
    assert values == ["plug.cli:main", "plug.pytest_plugin"]


# -- modules that import a removed one --------------------------------------------------------


def test_importers_are_modules_that_import_it_at_module_level(tmp_path: Path) -> None:
    dist = make_dist(
        tmp_path / "site",
        "rich",
        {
            "rich/__init__.py": "X = 1\n",
            "rich/markdown.py": "from markdown_it import MarkdownIt\n",
            "rich/deep/__init__.py": "",
            "rich/deep/er.py": "import os, markdown_it.token as tok  # a comment\n",
            "rich/lazy.py": "def f():\n    import markdown_it\n",
            "rich/optional.py": "try:\n    import markdown_it\nexcept ImportError:\n    pass\n",
            "rich/_private.py": "import markdown_it\n",
            "rich/similar.py": "import markdown_it_plugins\n",
            "rich/mention.py": "# markdown_it is great\n",
        },
    )
    assert importables.importers(dist, ["markdown_it"], limit=3) == [
        ("rich.markdown", "markdown_it"),
        ("rich.deep.er", "markdown_it"),
    ]
    assert importables.importers(dist, ["markdown_it"], limit=1) == [
        ("rich.markdown", "markdown_it")
    ]
    assert importables.importers(dist, ["google.api_core"], limit=3) == []


# -- what the derived probe contains ------------------------------------------------------------


def test_the_derived_probe_of_a_namespace_stack(tmp_path: Path) -> None:
    site = tmp_path / "site"
    installed = {
        "google-api-core": make_dist(
            site, "google-api-core", {"google/api_core/__init__.py": "X = 1\n"}
        ),
        "google-cloud-storage": make_dist(
            site,
            "google-cloud-storage",
            {
                "google/cloud/storage/__init__.py": "from google.cloud.storage.client import C\n",
                "google/cloud/storage/client.py": "from google.api_core import X\nC = 1\n",
            },
            requires=("google-api-core>=1; python_version >= '3'",),
            entry_points="[console_scripts]\ngcs = google.cloud.storage.client:C\n",
        ),
    }
    probes, notes = derived.derive(installed, ["google-cloud-storage"], ["google-api-core"])
    (probe,) = probes
    assert probe.kind is ProbeKind.DERIVED
    assert [(c.kind.value, c.target, c.attrs, c.why) for c in probe.candidates] == [
        ("module", "google.cloud.storage", (), ""),
        ("entry-point", "google.cloud.storage.client", ("C",), "console_scripts: gcs"),
        ("module", "google.cloud.storage.client", (), "imports google.api_core"),
    ]
    assert "import google\n" not in probe.code + "\n"
    assert notes[0].startswith(
        "derived (no probe is configured): from what the removal affects (google-cloud-storage): "
        "1 module, 1 module of entry points, 1 module importing what is removed;"
    )


def test_many_modules_are_spread_over_their_packages(tmp_path: Path) -> None:
    files = {f"google/api/m{i:02d}_pb2.py": "" for i in range(40)}
    files |= {"google/rpc/code_pb2.py": "", "google/type/date_pb2.py": ""}
    installed = {"protos": make_dist(tmp_path / "site", "protos", files)}
    (probe,), notes = derived.derive(installed, ["protos"])
    targets = [c.target for c in probe.candidates]
    assert len(targets) == derived.MODULES_PER_DISTRIBUTION
    assert {"google.rpc.code_pb2", "google.type.date_pb2"} <= set(targets)
    assert "protos: 8 of its 42 modules are tried, one package after another" in notes


def test_torch_adds_its_check_and_of_its_own_modules_only_importers(tmp_path: Path) -> None:
    site = tmp_path / "site"
    installed = {
        "torch": make_dist(
            site,
            "torch",
            {
                "torch/__init__.py": "X = 1\n",
                "torch/fx/__init__.py": "",
                "torch/fx/shapes.py": "import sympy\n",
            },
            requires=("sympy>=1.13",),
            entry_points="[console_scripts]\ntorchrun = torch.distributed.run:main\n",
        ),
        "sympy": make_dist(site, "sympy", {"sympy/__init__.py": "X = 1\n"}),
        "user": make_dist(site, "user", {"user/__init__.py": "X = 1\n"}),
    }
    (probe,), notes = derived.derive(installed, ["torch", "user"])
    assert [(c.kind.value, c.distribution) for c in probe.candidates] == [
        ("module", "user"),
        ("code", "torch"),
    ]
    assert probe.candidates[-1].target == derived.TORCH_PROBE
    assert "torch's CUDA initialisation" in notes[0]
    (with_sympy,), _ = derived.derive(installed, ["torch"], ["sympy"])
    assert [(c.kind.value, c.target, c.why) for c in with_sympy.candidates] == [
        ("code", derived.TORCH_PROBE, derived.TORCH_WHY),  # torch's import, first
        ("module", "torch.fx.shapes", "imports sympy"),
    ]
    assert derived.derive(installed, None)[0][0].candidates == (probe.candidates[-1],)
    assert derived.derive({}, None) == (
        (),
        ("no probe configured and torch is not installed: no probe to run",),
    )


@pytest.mark.parametrize(
    ("line", "module", "listed"),
    [
        ("pkg/mod.py,sha256=x,1", "pkg.mod", True),
        ("pkg/__init__.py,,", "pkg", True),
        ("pkg/fast.cpython-312-x86_64-linux-gnu.so,,", "pkg.fast", True),
        ("pkg/sub/__init__.cpython-312-x86_64-linux-gnu.so,,", "pkg.sub", True),
        ("pkg/mod.pyi,,", "pkg.mod", False),  # not a module file
        ("pkg/mod/data.py,,", "pkg.mod", False),  # a module below it, not it
        ("pkg/libfoo.so,,", "pkg.libfoo", False),  # a library for the linker
        ("./pkg/mod.py,,", "pkg.mod", False),  # not a module as _module_file reads it
        ("pkg/mod.py.orig,,", "pkg.mod", False),
        ("pkg/modx.py,,", "pkg.mod", False),
        ("../pkg/mod.py,,", "pkg.mod", False),
    ],
)
def test_a_record_line_names_a_module_as_the_derivation_reads_it(
    tmp_path: Path, line: str, module: str, listed: bool
) -> None:
    record = ["other/a.py,,", line, "pkg/z.txt,,"]
    for lines in (record, [line], [f"{x}\r" for x in record]):  # first line; CRLF
        dist = make_dist(
            tmp_path / str(len(lines)) / str(lines[-1].endswith("\r")), "d", {}, record=lines
        )
        files = importables._module_files(dist) or []
        assert (tuple(module.split(".")) in {f.module for f in files}) is listed, lines


# -- the verdict --------------------------------------------------------------------------------

A = Candidate(CandidateKind.MODULE, "a", "dist-a")
B = Candidate(CandidateKind.MODULE, "b", "dist-b")
C = Candidate(CandidateKind.ENTRY_POINT, "c", "dist-c", attrs=("main",), why="console_scripts: c")
PROBE = Probe(ProbeKind.DERIVED, "...", "derived", candidates=(A, B, C))


def ran(*ends: tuple[Candidate, str], probe: Probe = PROBE) -> ProbeResult:
    candidates = tuple(CandidateResult(c, status, f"Error: {c.target}") for c, status in ends)
    return ProbeResult(
        probe=probe,
        passed=all(c.passed for c in candidates),
        returncode=0,
        timed_out=False,
        seconds=1.0,
        output="",
        candidates=candidates,
    )


def test_a_candidate_that_fails_before_is_dropped_and_blocks_nothing() -> None:
    before = derived.as_baseline(ran((A, "passed"), (B, "failed"), (C, "unfinished")))
    assert before.passed
    assert [c.candidate for c in before.dropped] == [B, C]
    assert derived.dropped_notes([before]) == [
        "b: fails before any change (Error: b); not judged",
        "c:main: did not finish before any change (Error: c); not judged",
    ]
    after_settings = derived.after_settings(ProbeSettings(probes=(PROBE,)), [before])
    (after_probe,) = after_settings.probes
    assert after_probe.candidates == (A, B)  # C did not finish: it is not tried again
    assert after_probe.code == "import a\nimport b"
    still = derived.against(before, ran((A, "passed"), (B, "failed"), probe=after_probe))
    assert still.passed and not still.regressed
    broken = derived.against(before, ran((A, "failed"), (B, "passed"), probe=after_probe))
    assert not broken.passed
    assert [c.candidate for c in broken.regressed] == [A]


def test_a_baseline_that_ran_nothing_is_no_baseline() -> None:
    nothing = derived.as_baseline(ran((A, "not-run"), (B, "not-run"), (C, "not-run")))
    assert not nothing.passed
    every_one_failed = derived.as_baseline(ran((A, "failed"), (B, "failed"), (C, "failed")))
    assert every_one_failed.passed and not every_one_failed.judged


def test_configured_probes_keep_their_meaning() -> None:
    probe = Probe(ProbeKind.PYTHON, "import a", "--probe")
    failed = ProbeResult(probe, False, 1, False, 0.1, "boom")
    assert derived.as_baseline(failed) is failed
    assert derived.against(failed, failed) is failed
    settings = ProbeSettings(probes=(probe,))
    assert derived.after_settings(settings, [failed]) is settings


def test_the_baseline_cache_keeps_each_candidates_end(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path)
    settings = ProbeSettings(probes=(PROBE,))
    result = ran((A, "passed"), (B, "passed"), (C, "passed"))
    cache.put(settings, "env", [result])
    (cached,) = cache.get(settings, "env") or []
    assert cached.cached
    assert [(c.candidate, c.status, c.output) for c in cached.candidates] == [
        (A, "passed", "Error: a"),
        (B, "passed", "Error: b"),
        (C, "passed", "Error: c"),
    ]
    assert [c.status for c in derived.as_baseline(cached).candidates] == ["passed"] * 3
    other = ProbeSettings(probes=(PROBE.only({A, B}),))
    assert cache.get(other, "env") is None  # other candidates: another probe


def test_a_baseline_with_a_failing_candidate_is_not_cached(tmp_path: Path) -> None:
    """A failing candidate drops out of the removal's judgement: a cache that said so could
    take a candidate out of the verdict, so only an all-passing baseline is kept."""
    cache = BaselineCache(tmp_path)
    settings = ProbeSettings(probes=(PROBE,))
    cache.put(settings, "env", [ran((A, "passed"), (B, "failed"), (C, "passed"))])
    assert cache.get(settings, "env") is None


@pytest.mark.parametrize("failing_first", [False, True])
def test_a_baseline_is_cached_only_when_every_result_is(
    tmp_path: Path, failing_first: bool
) -> None:
    """Two probes, one passing and one failing: nothing is kept. Were the passing one enough,
    the failing one would come back from the cache as a pass (a cached result is one that
    passed), and judge a removal against a baseline that never held."""
    cache = BaselineCache(tmp_path)
    plain = Probe(ProbeKind.PYTHON, "import a", "--probe")
    failed = ProbeResult(plain, False, 1, False, 0.1, "boom")
    passing = ran((A, "passed"), (B, "passed"), (C, "passed"))
    probes, results = (PROBE, plain), [passing, failed]
    if failing_first:
        probes, results = probes[::-1], results[::-1]
    settings = ProbeSettings(probes=probes)
    cache.put(settings, "env", results)
    assert cache.get(settings, "env") is None
    assert not cache.path.exists()


def test_a_run_that_did_not_finish_is_not_cached(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path)
    settings = ProbeSettings(probes=(PROBE,))
    cache.put(settings, "env", [ran((A, "passed"), (B, "unfinished"), (C, "not-run"))])
    assert cache.get(settings, "env") is None


@pytest.mark.parametrize(
    "ends",
    [
        [["passed", ""], ["passed", "x"]],  # one missing
        [["passed", ""], ["passed", "x"], ["passed", 3]],
        [["passed", ""], ["passed", "x"], ["exploded", ""]],
        [["passed", ""], ["passed", "x"], ["failed", "x"]],  # a failure is never cached
        [["passed", ""], ["passed", "x"], "passed"],
        "not a list",
    ],
)
def test_an_edited_candidate_cache_entry_is_no_cache(tmp_path: Path, ends: object) -> None:
    cache = BaselineCache(tmp_path)
    settings = ProbeSettings(probes=(PROBE,))
    cache.put(settings, "env", [ran((A, "passed"), (B, "passed"), (C, "passed"))])
    data = json.loads(cache.path.read_text())
    (entry,) = data["data"].values()
    entry["candidates"] = [ends]
    cache.path.write_text(json.dumps(data))
    assert cache.get(settings, "env") is None


# -- the driver, run for real ---------------------------------------------------------------


def this_interpreter() -> Interpreter:
    return Interpreter(sys.executable, sys.prefix, sys.base_prefix, "3", "/x", "/x", "/x", {})


def test_each_candidate_is_tried_on_its_own_and_its_end_written(tmp_path: Path) -> None:
    marker = tmp_path / "called"
    module = tmp_path / "mods" / "entrymod.py"
    module.parent.mkdir()
    module.write_text(
        f"def main():\n    open({str(marker)!r}, 'w').close()\nclass App:\n    go = main\n"
    )
    candidates = (
        Candidate(CandidateKind.MODULE, "json", "d"),
        Candidate(CandidateKind.MODULE, "no_such_module_xyz", "d"),
        Candidate(CandidateKind.ENTRY_POINT, "entrymod", "d", attrs=("main", "App.go")),
        Candidate(CandidateKind.ENTRY_POINT, "os", "d", attrs=("no_such_attr",)),
        Candidate(CandidateKind.CODE, "raise SystemExit(3)", "d", why="exits"),
        Candidate(CandidateKind.MODULE, "email.mime.text", "d"),
        Candidate(CandidateKind.CODE, "import os\nos._exit(9)", "d", why="dies"),
        Candidate(CandidateKind.MODULE, "json", "e"),
    )
    probe = Probe(ProbeKind.DERIVED, "...", "derived", candidates=candidates)
    env = {**os.environ, "PYTHONPATH": str(module.parent)}
    result = run_probe(probe, this_interpreter(), settings=RunSettings(timeout=60.0, env=env))
    assert [c.status for c in result.candidates] == [
        "passed",
        "failed",
        "passed",
        "failed",
        "failed",
        "passed",
        "unfinished",
        "not-run",
    ]
    assert not marker.exists()  # an entry point is loaded, never run
    ends = result.candidates
    assert ends[1].reason == "ModuleNotFoundError: No module named 'no_such_module_xyz'"
    assert ends[3].reason.startswith("AttributeError:")
    assert ends[4].reason == "SystemExit: 3"
    assert ends[6].output == "the probe process ended while it was tried (exit code 9)"
    assert not result.passed and result.returncode == 9


def test_a_candidate_that_hangs_is_the_one_unfinished(tmp_path: Path) -> None:
    candidates = (
        Candidate(CandidateKind.MODULE, "json", "d"),
        Candidate(CandidateKind.CODE, "import time\ntime.sleep(60)", "d", why="hangs"),
    )
    probe = Probe(ProbeKind.DERIVED, "...", "derived", candidates=candidates)
    result = run_probe(
        probe, this_interpreter(), settings=RunSettings(timeout=2.0, env=dict(os.environ))
    )
    assert result.timed_out
    assert [c.status for c in result.candidates] == ["passed", "unfinished"]
    assert "time limit ran out" in result.candidates[1].output


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"0 start\n0 ok\n1 start\n1 failed Boom\\nError: x\n", ["passed", "failed"]),
        (b"0 ok\n9 ok\n-1 ok\nx ok\n1 exploded\n", ["passed", "not-run"]),
        (b"0 start\n0 ok\n1 start\n1 ok", ["passed", "unfinished"]),  # the last line cut off
        (b"0 failed \\x\\u12\n", ["failed", "not-run"]),  # escapes that do not decode
        (b"\xff\xfe\x00" * 100, ["not-run", "not-run"]),
        (b"", ["not-run", "not-run"]),
    ],
)
def test_the_results_file_is_read_as_untrusted(
    tmp_path: Path, data: bytes, expected: list[str]
) -> None:
    path = tmp_path / "candidates.txt"
    path.write_bytes(data)
    run = ProbeResult(PROBE, False, 1, False, 1.0, "")
    ends = _read_candidates(path, (A, B), run)
    assert [c.status for c in ends] == expected


def test_a_huge_results_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "candidates.txt"
    path.write_bytes(b"0 ok\n" * 1_000_000)  # 5 MB
    run = ProbeResult(PROBE, False, 1, False, 1.0, "")
    assert [c.status for c in _read_candidates(path, (A,), run)] == ["not-run"]


# -- how it reads --------------------------------------------------------------------------


def test_a_multi_line_probe_is_a_block_and_its_result_a_line_of_its_own() -> None:
    probe = Probe(ProbeKind.PYTHON, "import a\nimport b", "--probe")
    result = Result(
        command="probe",
        outcome=PASSED,
        python="/v/bin/python",
        probes=ProbeRuns(after=(ProbeResult(probe, True, 0, False, 0.25, ""),)),
    )
    lines = operation(result, verbose=False, quiet=False).splitlines()
    assert lines[1:5] == ["probe:", "    import a", "    import b", "  -- passed in 0.25 s"]


def test_the_derived_probe_is_shown_with_whose_each_candidate_is() -> None:
    before = derived.as_baseline(ran((A, "passed"), (B, "failed"), (C, "passed")))
    result = Result(
        command="uninstall",
        outcome=DRY_RUN,
        python="/v/bin/python",
        probes=ProbeRuns(notes=("derived ...", *derived.dropped_notes([before])), planned=(PROBE,)),
    )
    text = operation(result, verbose=False, quiet=False)
    assert "probe: b: fails before any change (Error: b); not judged" in text
    assert (
        "derived probe, 3 candidates, each tried on its own:\n"
        "    import a     # dist-a\n"
        "    import b     # dist-b\n"
        "    load c:main  # dist-c: console_scripts: c\n"
    ) in text


# -- the command, on toy environments ----------------------------------------------------------


def namespace_wheels(house: Path) -> None:
    """nsco-core and nsco-user share the PEP 420 namespace ``nsco``; top_level.txt says
    ``nsco`` as setuptools writes it."""
    build_wheel(house, "nsco-core", "1.0", {"nsco/core/__init__.py": "X = 1\n"}, top_level=["nsco"])
    build_wheel(
        house,
        "nsco-user",
        "1.0",
        {"nsco/user/__init__.py": "from nsco.core import X\n"},
        requires=["nsco-core"],
        top_level=["nsco"],
    )


def test_a_removal_that_breaks_a_namespace_package_is_caught(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """On a toy: the probe was ``import nsco``, which passes whatever is removed."""
    house = tmp_path / "house"
    namespace_wheels(house)
    venv = make_venv()
    venv.install("nsco-user", find_links=house)
    before = venv.file_hashes()
    run = venv.tool("--json", "--allow-unmet", "nsco-core")
    data = run.json()
    assert run.returncode == 3, run.stdout
    probes = data["probes"]
    assert isinstance(probes, dict)
    (after,) = probes["after"]
    assert [(c["target"], c["status"], c["judged"]) for c in after["candidates"]] == [
        ("nsco.user", "failed", True)
    ]
    assert "No module named 'nsco.core'" in after["candidates"][0]["output"]
    assert venv.file_hashes() == before


def plugin_wheels(house: Path) -> None:
    """base; a user of it; a plugin of it that fails to import anyway (it needs what is not
    installed); a tool whose only use of it is behind its console script."""
    build_wheel(house, "basepkg", "1.0", {"basepkg/__init__.py": "X = 1\n"})
    build_wheel(
        house,
        "baseuser",
        "1.0",
        {"baseuser/__init__.py": "from basepkg import X\n"},
        requires=["basepkg"],
    )
    build_wheel(
        house,
        "brokenplug",
        "1.0",
        {"brokenplug/__init__.py": "import basepkg\nimport not_installed_anywhere\n"},
        requires=["basepkg"],
    )
    build_wheel(
        house,
        "basetool",
        "1.0",
        {
            "basetool/__init__.py": "VERSION = 1\n",
            "basetool/cli.py": "from basetool._impl import run as main\n",
            "basetool/_impl.py": "import basepkg\ndef run():\n    raise SystemExit('ran')\n",
        },
        requires=["basepkg"],
        entry_points="[console_scripts]\nbasetool = basetool.cli:main\n",
    )


def test_a_candidate_failing_before_is_dropped_named_and_blocks_nothing(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """On a toy: brokenplug fails before any change; the removal used to be
    refused ("the probe already fails before any change")."""
    house = tmp_path / "house"
    plugin_wheels(house)
    venv = make_venv()
    venv.install("baseuser", "brokenplug", find_links=house)
    before = venv.file_hashes()
    run = venv.tool("--allow-unmet", "basepkg")
    assert run.returncode == 3, run.stdout + run.stderr
    assert (
        "probe: brokenplug: fails before any change (ModuleNotFoundError: No module named "
        "'not_installed_anywhere'); not judged"
    ) in run.stdout
    assert "FAILED: import baseuser  # baseuser: ModuleNotFoundError" in run.stdout
    assert run.stdout.splitlines()[-1] == (
        "uninstall: the derived probe failed (baseuser) after the removal: all was restored "
        "and verified"
    )
    assert venv.file_hashes() == before


def test_an_entry_point_is_a_candidate(make_venv: MakeVenv, tmp_path: Path) -> None:
    house = tmp_path / "house"
    plugin_wheels(house)
    venv = make_venv()
    venv.install("basetool", find_links=house)
    run = venv.tool("--dry-run", "--allow-unmet", "basepkg")
    assert "    load basetool.cli:main  # basetool: console_scripts: basetool" in run.stdout
    assert run.returncode == 0
    removal = venv.tool("--allow-unmet", "basepkg")
    assert removal.returncode == 3, removal.stdout
    assert "FAILED: load basetool.cli:main" in removal.stdout
    assert "ran" not in removal.stdout  # loaded, never run


def test_probe_with_names_runs_the_probe_a_removal_would_run(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    house = tmp_path / "house"
    plugin_wheels(house)
    venv = make_venv()
    venv.install("baseuser", "brokenplug", find_links=house)
    before = venv.file_hashes()
    run = venv.tool("probe", "basepkg", "not-installed")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert "    passed: import baseuser  # baseuser" in lines
    assert (
        "    failed, not judged: import brokenplug  # brokenplug: ModuleNotFoundError: No module "
        "named 'not_installed_anywhere'"
    ) in lines
    assert "not installed: not-installed" in lines
    assert lines[-1] == "probe: the derived probe passed (1 candidate judged, 1 dropped)"
    assert venv.file_hashes() == before
    data = venv.tool("probe", "--json", "basepkg").json()
    probes = data["probes"]
    assert isinstance(probes, dict)
    (planned,) = probes["planned"]
    assert planned["kind"] == "derived"
    assert [c["target"] for c in planned["candidates"]] == ["baseuser", "brokenplug"]
    (after,) = probes["after"]
    assert [(c["status"], c["judged"]) for c in after["candidates"]] == [
        ("passed", True),
        ("failed", False),
    ]
    configured = venv.tool("probe", "--probe", "import brokenplug", "basepkg")
    assert configured.returncode == 1  # a configured probe passes or fails as a whole


def test_a_removal_whose_every_candidate_failed_before_says_no_probe_judged_it(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """When every candidate fails already, nothing judged
    the removal, and the outcome does not say "every probe passed"."""
    house = tmp_path / "house"
    plugin_wheels(house)
    venv = make_venv()
    venv.install("brokenplug", find_links=house)
    run = venv.tool("--allow-unmet", "basepkg")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == (
        "uninstall: removed; no probe applies: every candidate of the derived probe fails "
        "before the change"
    )
    assert "basepkg" not in venv.installed()


def test_a_thread_left_running_by_an_import_does_not_hold_the_probe(tmp_path: Path) -> None:
    module = tmp_path / "mods" / "spinner.py"
    module.parent.mkdir()
    module.write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,)).start()  # not a daemon\n"
    )
    probe = Probe(
        ProbeKind.DERIVED,
        "...",
        "derived",
        candidates=(Candidate(CandidateKind.MODULE, "spinner", "d"),),
    )
    env = {**os.environ, "PYTHONPATH": str(module.parent)}
    result = run_probe(probe, this_interpreter(), settings=RunSettings(timeout=20.0, env=env))
    assert result.passed, result.output
    assert result.seconds < 10


# -- after a change, the run stops at the first candidate that decides the verdict -----------


def test_a_decisive_failure_ends_the_run_and_the_rest_are_skipped(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    module = tmp_path / "mods" / "sideeffect.py"
    module.parent.mkdir()
    module.write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    dropped = Candidate(
        CandidateKind.MODULE, "no_such_module_before", "d"
    )  # failed before: not decisive
    decisive = Candidate(CandidateKind.MODULE, "no_such_module_after", "d")
    later = Candidate(CandidateKind.MODULE, "sideeffect", "e")
    probe = Probe(ProbeKind.DERIVED, "...", "derived", candidates=(dropped, decisive, later))
    env = {**os.environ, "PYTHONPATH": str(module.parent)}
    how = RunSettings(timeout=60.0, env=env)
    to_the_end = run_probe(probe, this_interpreter(), settings=how)
    assert [c.status for c in to_the_end.candidates] == ["failed", "failed", "passed"]
    assert marker.read_text() == "x"
    stopping = run_probe(probe.stopping_at({decisive, later}), this_interpreter(), settings=how)
    assert [c.status for c in stopping.candidates] == ["failed", "failed", "skipped"]
    assert marker.read_text() == "x"  # not imported again
    assert not stopping.passed
    assert stopping.candidates[2].output == (
        "not tried: no_such_module_after failed first, which decided the verdict"
    )
    assert stopping.probe.key() == probe.key()  # the same probe for the baseline cache


def test_a_skipped_candidate_is_no_regression_and_is_counted_as_not_tried() -> None:
    before = derived.as_baseline(ran((A, "passed"), (B, "passed"), (C, "failed")))
    (after_probe,) = derived.after_settings(ProbeSettings(probes=(PROBE,)), [before]).probes
    assert after_probe.decisive == (A, B)  # those that passed before
    assert derived.to_the_end(ProbeSettings(probes=(after_probe,))).probes[0].decisive == ()
    kept = derived.after_settings(ProbeSettings(probes=(PROBE,)), [before], stop_at_failure=False)
    assert kept.probes[0].decisive == ()
    after = derived.against(
        before, ran((A, "failed"), (B, "skipped"), (C, "skipped"), probe=after_probe)
    )
    assert not after.passed
    assert [c.candidate for c in after.regressed] == [A]
    assert [c.candidate for c in after.skipped] == [B, C]
    assert after.summary() == (
        "FAILED in 1.00 s; 0 of 2 candidates pass, 1 fails, 1 not tried (the verdict was known "
        "at the first failure); 1 not judged (they did not pass before the change)"
    )  # each of the three once: C, dropped, is not counted as not tried too


def test_what_a_candidate_requires_is_tried_before_it(tmp_path: Path) -> None:
    """Torch's check before what imports torch: after a removal that breaks torch, the run
    stops at torch's own failure, not at the first of its dependents in name order."""
    site = tmp_path / "site"
    installed = {
        "torch": make_dist(site, "torch", {"torch/__init__.py": "X = 1\n"}),
        "accel": make_dist(site, "accel", {"accel/__init__.py": "X = 1\n"}, requires=("torch>=2",)),
        "vision": make_dist(site, "vision", {"vision/__init__.py": "X = 1\n"}, requires=("accel",)),
        "alone": make_dist(site, "alone", {"alone/__init__.py": "X = 1\n"}),
    }
    (probe,), _ = derived.derive(installed, ["accel", "alone", "torch", "vision"])
    assert [(c.kind.value, c.distribution) for c in probe.candidates] == [
        ("module", "alone"),  # requires none of them: first, as named
        ("code", "torch"),
        ("module", "accel"),
        ("module", "vision"),
    ]
    (untouched,), _ = derived.derive(installed, ["alone", "vision"])
    assert [c.distribution for c in untouched.candidates] == ["alone", "vision", "torch"]


def stop_wheels(house: Path, marker: Path) -> None:
    """base; two users of it, the second recording each import of it in ``marker``."""
    build_wheel(house, "basepkg", "1.0", {"basepkg/__init__.py": "X = 1\n"})
    build_wheel(
        house,
        "firstuser",
        "1.0",
        {"firstuser/__init__.py": "from basepkg import X\n"},
        requires=["basepkg"],
    )
    build_wheel(
        house,
        "seconduser",
        "1.0",
        {"seconduser/__init__.py": f"open({str(marker)!r}, 'a').write('x')\nimport basepkg\n"},
        requires=["basepkg"],
    )


def test_a_removal_asked_again_derives_its_probe_again(make_venv: MakeVenv, tmp_path: Path) -> None:
    """A derived probe comes from the impact report, so its baseline begins after it, asked
    for the first time or again in the installed set the restore brought back; nothing of a
    derivation is kept in the state folder to run before it."""
    house, marker = tmp_path / "house", tmp_path / "imports"
    stop_wheels(house, marker)
    venv = make_venv()
    venv.install("firstuser", "seconduser", find_links=house)
    before = venv.file_hashes()
    for _ in range(2):
        run = venv.tool("--json", "--allow-unmet", "--fresh-baseline", "basepkg")
        assert run.returncode == 3, run.stdout + run.stderr
        events = run.json()["events"]
        assert isinstance(events, list)
        steps = [event["step"] for event in events]
        assert steps.index("impact") < steps.index("baseline")
        assert venv.file_hashes() == before


def test_a_failing_removal_stops_trying_candidates_once_one_fails(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    house, marker = tmp_path / "house", tmp_path / "imports"
    stop_wheels(house, marker)
    venv = make_venv()
    venv.install("firstuser", "seconduser", find_links=house)
    before = venv.file_hashes()
    marker.unlink(missing_ok=True)
    run = venv.tool("--json", "--allow-unmet", "basepkg")
    assert run.returncode == 3, run.stdout
    assert marker.read_text() == "x"  # the baseline's import only
    probes = run.json()["probes"]
    assert isinstance(probes, dict)
    (after,) = probes["after"]
    assert [(c["target"], c["status"], c["judged"]) for c in after["candidates"]] == [
        ("firstuser", "failed", True),
        ("seconduser", "skipped", True),
    ]
    assert after["candidates"][1]["output"] == (
        "not tried: firstuser failed first, which decided the verdict"
    )
    assert venv.file_hashes() == before
    text = venv.tool("--allow-unmet", "basepkg")
    assert text.returncode == 3, text.stdout
    assert "FAILED: import firstuser  # firstuser: ModuleNotFoundError" in text.stdout
    assert "0 of 2 candidates pass, 1 fails, 1 not tried (the verdict was known" in text.stdout
    assert text.stdout.splitlines()[-1] == (
        "uninstall: the derived probe failed (firstuser) after the removal: all was restored "
        "and verified"
    )
    # --keep-on-failure keeps the broken environment: every candidate is tried, to say all
    marker.unlink()
    kept = venv.tool("--json", "--allow-unmet", "--keep-on-failure", "--fresh-baseline", "basepkg")
    probes = kept.json()["probes"]
    assert isinstance(probes, dict)
    assert [c["status"] for c in probes["after"][0]["candidates"]] == ["failed", "failed"]
    assert marker.read_text() == "xx"
