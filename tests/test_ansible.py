"""The fleet example, run for real: ansible-playbook against local "nodes", one venv each.

Skipped only where ansible-core is not installed; .ci/run installs it (the ``ansible`` extra).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import UV, MakeVenv, Venv

PLAYBOOK = Path(__file__).parent.parent / "examples" / "ansible" / "safe-uninstall.yml"
ANSIBLE_PLAYBOOK = shutil.which(
    "ansible-playbook", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
)

pytestmark = [
    pytest.mark.skipif(ANSIBLE_PLAYBOOK is None, reason="ansible-core is not installed"),
    pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool"),
]

RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def playbook(
    tmp_path: Path, nodes: dict[str, Path], *extra: str, **extra_vars: object
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, int]], dict[str, Any]]:
    """Run the example playbook; return the process, the play recap and the per-node report."""
    inventory = {
        "all": {
            "hosts": {name: {"venv_path": str(path)} for name, path in nodes.items()},
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "safe_uninstall": [sys.executable, "-m", "safeuninstall"],
                # Offline, with an empty uv cache: a restore can only come from the stash.
                "safe_uninstall_env": {
                    "UV_OFFLINE": "1",
                    "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache"),
                },
            },
        }
    }
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    report = tmp_path / "report.json"
    home = tmp_path / "ansible-home"
    home.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PWD": str(tmp_path),  # as a shell sets it for the folder it runs a command in
        "HOME": str(home),
        "LC_ALL": "C.UTF-8",  # ansible refuses a non-UTF-8 locale
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_REMOTE_TEMP": str(home / "remote-tmp"),
        "ANSIBLE_STDOUT_CALLBACK": "default",
    }
    env.pop("ANSIBLE_CONFIG", None)
    variables = {"packages_to_remove": ["urllib3"], "report_path": str(report), **extra_vars}
    assert ANSIBLE_PLAYBOOK is not None
    done = subprocess.run(
        [
            ANSIBLE_PLAYBOOK,
            "-i",
            str(tmp_path / "inventory.json"),
            str(PLAYBOOK),
            "-e",
            json.dumps(variables),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    recap = {
        host: {"ok": int(ok), "changed": int(changed), "unreachable": int(unr), "failed": int(f)}
        for host, ok, changed, unr, f in RECAP.findall(done.stdout)
    }
    nodes_report = json.loads(report.read_text()) if report.exists() else {}
    report.unlink(missing_ok=True)
    return done, recap, nodes_report


def three_nodes(make_venv: MakeVenv) -> dict[str, Venv]:
    """node3 has requests, which needs urllib3: with allow_unmet its default probe (import
    requests) fails."""
    return {
        "node1": make_venv("urllib3", "leftpad"),
        "node2": make_venv("urllib3"),
        "node3": make_venv("requests"),
    }


def test_three_nodes_two_cleaned_one_restored(make_venv: MakeVenv, tmp_path: Path) -> None:
    venvs = three_nodes(make_venv)
    nodes = {name: venv.root for name, venv in venvs.items()}
    before = {name: venv.file_hashes() for name, venv in venvs.items()}

    # --check: safe-uninstall --dry-run on every node; nothing changes.
    checked, recap, report = playbook(tmp_path, nodes, "--check", allow_unmet=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert {name: node["state"] for name, node in report.items()} == {
        "node1": "would remove",
        "node2": "would remove",
        "node3": "would remove",
    }
    assert {name: venv.file_hashes() for name, venv in venvs.items()} == before

    done, recap, report = playbook(tmp_path, nodes, allow_unmet=True)

    assert done.returncode == 0, done.stdout + done.stderr
    assert recap["node1"] == {"ok": 4, "changed": 1, "unreachable": 0, "failed": 0}
    assert recap["node2"] == {"ok": 1, "changed": 1, "unreachable": 0, "failed": 0}
    assert recap["node3"] == {"ok": 1, "changed": 0, "unreachable": 0, "failed": 0}
    assert report["node1"]["state"] == report["node2"]["state"] == "removed"
    assert report["node1"]["removed"] == ["urllib3==2.3.0"]
    assert report["node3"] == {
        "state": "restored",
        "exit_code": 3,
        "outcome": "probe-failed-restored",
        "removed": ["urllib3==2.3.0"],
        "restored": ["urllib3==2.3.0"],
        "snapshot": "0001",
        "error": "",
        "next_command": None,
    }
    summary = done.stdout[done.stdout.index("TASK [Summary]") :]
    assert '"restored": [\n            "node3"\n        ]' in summary
    # What the report says is what the nodes are.
    assert set(venvs["node1"].installed()) == {"leftpad"}
    assert venvs["node2"].installed() == {}
    assert venvs["node3"].file_hashes() == before["node3"]
    assert venvs["node3"].run_python("import requests").returncode == 0


def test_a_relative_report_path_is_from_the_current_folder(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """``report_path: report.json`` lands where the person running ansible-playbook is (the
    helper runs it in tmp_path and reads tmp_path/report.json)."""
    done, recap, report = playbook(
        tmp_path, {"node1": make_venv("urllib3").root}, report_path="report.json"
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert recap["node1"]["failed"] == 0
    assert report["node1"]["state"] == "removed"


def test_failed_nodes_fail_after_the_report(make_venv: MakeVenv, tmp_path: Path) -> None:
    """Every node failing still writes the report first; fail_on_restore counts exit 3."""
    restored = make_venv("requests")
    nodes = {"gone": tmp_path / "no-such-venv", "restored": restored.root}

    done, recap, report = playbook(tmp_path, nodes, fail_on_restore=True, allow_unmet=True)

    assert done.returncode == 2, done.stdout + done.stderr
    assert recap["gone"]["failed"] == recap["restored"]["failed"] == 1
    assert report["gone"]["state"] == "failed"
    assert report["gone"]["exit_code"] == 1
    assert report["gone"]["error"].endswith("no such interpreter or environment directory")
    assert report["restored"]["state"] == "restored"
    assert "probe-failed-restored (exit 3): the probe failed; everything was restored" in (
        done.stdout + done.stderr
    )
    assert "urllib3" in restored.installed()


def test_a_removal_that_leaves_a_requirement_unmet_is_refused(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    """Without allow_unmet, the node that would lose what requests needs is "refused", nothing
    changed, in --check too; the other node is cleaned."""
    venvs = {"clean": make_venv("urllib3"), "needed": make_venv("requests")}
    nodes = {name: venv.root for name, venv in venvs.items()}
    before = venvs["needed"].file_hashes()

    checked, _, would = playbook(tmp_path, nodes, "--check")
    done, recap, report = playbook(tmp_path, nodes)

    assert would["needed"]["state"] == "refused"
    assert would["clean"]["state"] == "would remove"
    assert checked.returncode == done.returncode == 2, done.stdout + done.stderr
    assert recap["needed"]["failed"] == 1 and recap["clean"]["failed"] == 0
    assert report["clean"]["state"] == "removed"
    refused = report["needed"]
    assert (refused["state"], refused["exit_code"], refused["outcome"], refused["removed"]) == (
        "refused",
        1,
        "refused-unmet",
        [],
    )
    assert "requests requires urllib3" in refused["error"]
    assert "--allow-unmet urllib3" in refused["error"]
    assert venvs["needed"].file_hashes() == before
