"""The derived probe on real stacks from the package index: namespace packages, a healthy venv
whose import fails already, a requirement that only a submodule imports.

Each removal here leaves a requirement unmet, which is refused before any change unless
``--allow-unmet``: with it, the probe judges the removal, and that is what is tested."""

from __future__ import annotations

from tests.realstack import RealVenv


def _candidates(run: dict[str, object], key: str) -> list[tuple[str, str, bool]]:
    probes = run["probes"]
    assert isinstance(probes, dict)
    (result,) = probes[key]
    return [(c["target"], c["status"], c["judged"]) for c in result["candidates"]]


def test_removing_google_api_core_is_caught_by_google_cloud_storage(real_venv: RealVenv) -> None:
    """The derived probe was ``import google`` (a namespace root) and the removal
    was kept, breaking ``from google.cloud import storage``."""
    venv = real_venv("gcs")
    before = venv.file_hashes()
    run = venv.tool("--json", "--allow-unmet", "google-api-core")
    data = run.json()
    assert run.returncode == 3, run.stdout
    assert data["outcome"] == "probe-failed-restored"
    baseline = _candidates(data, "baseline")
    assert ("google.cloud.storage", "passed", True) in baseline
    assert not any(target in ("google", "google.cloud") for target, _, _ in baseline)
    # After the removal the run stops at the first candidate that passed before and fails:
    # google-cloud-core's (storage requires it, so it is tried first); the rest are not tried.
    after = _candidates(data, "after")
    ends = [status for _, status, judged in after if judged]
    assert "failed" in ends
    assert set(ends[ends.index("failed") + 1 :]) <= {"skipped"}
    assert {("google.cloud.storage", status, True) for status in ("failed", "skipped")} & set(after)
    assert venv.file_hashes() == before
    assert venv.run_python("from google.cloud import storage").returncode == 0


def test_removing_azure_core_is_caught_by_azure_storage_blob(real_venv: RealVenv) -> None:
    venv = real_venv("azure")
    before = venv.file_hashes()
    run = venv.tool("--allow-unmet", "azure-core")
    assert run.returncode == 3, run.stdout
    assert (
        "FAILED: import azure.storage.blob  # azure-storage-blob: ModuleNotFoundError: No module "
        "named 'azure.core'"
    ) in run.stdout
    assert venv.file_hashes() == before


def test_probe_traitlets_on_jupyterlab_drops_matplotlib_inline(real_venv: RealVenv) -> None:
    """A removal of traitlets was refused, "the probe already fails before any
    change", because the derived probe imported matplotlib_inline (matplotlib is not
    installed, and not required). Now that candidate is dropped and named."""
    venv = real_venv("jupyterlab")
    before = venv.file_hashes()
    run = venv.tool("probe", "traitlets")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert (
        "probe: matplotlib_inline: fails before any change (ModuleNotFoundError: No module named "
        "'matplotlib'); not judged"
    ) in lines
    assert "    passed: import jupyterlab  # jupyterlab" in lines
    assert lines[-1].startswith("probe: the derived probe passed (")
    assert venv.file_hashes() == before


def test_removing_markdown_it_py_is_caught_by_rich_markdown(real_venv: RealVenv) -> None:
    """``import rich`` works without markdown-it-py; rich/markdown.py imports it at module
    level, so rich.markdown is a candidate ("imports markdown_it") and fails."""
    venv = real_venv("rich")
    before = venv.file_hashes()
    run = venv.tool("--json", "--allow-unmet", "markdown-it-py")
    data = run.json()
    assert run.returncode == 3, run.stdout
    assert _candidates(data, "after") == [
        ("rich", "passed", True),
        ("rich.markdown", "failed", True),
    ]
    assert venv.file_hashes() == before
