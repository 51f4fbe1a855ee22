"""The fleet's drift report, run for real: examples/ansible/compare-to-golden.yml against ten
local "nodes", one venv each, and one node that cannot be reached.

Skipped only where ansible-core is not installed; .ci/run installs it (the ``ansible`` extra).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import UV, MakeVenv, Venv
from tests.test_ansible import ANSIBLE_PLAYBOOK, RECAP

PLAYBOOK = Path(__file__).parent.parent / "examples" / "ansible" / "compare-to-golden.yml"

pytestmark = [
    pytest.mark.skipif(ANSIBLE_PLAYBOOK is None, reason="ansible-core is not installed"),
    pytest.mark.skipif(UV is None, reason="uv is a runtime dependency of the tool"),
]

GOLDEN = ("urllib3==2.2.1", "requests==2.32.3", "leftpad==1.0")


def run_playbook(
    tmp_path: Path, nodes: dict[str, dict[str, Any]], **extra_vars: object
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """The playbook over ``nodes`` (host vars each); the process and the report."""
    inventory = {
        "all": {
            "hosts": nodes,
            "vars": {
                "ansible_python_interpreter": sys.executable,
                "safe_uninstall": [sys.executable, "-m", "safeuninstall"],
                "safe_uninstall_env": {
                    "UV_OFFLINE": "1",
                    "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache"),
                },
            },
        }
    }
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    home = tmp_path / "ansible-home"
    home.mkdir(exist_ok=True)
    control_dir = tempfile.mkdtemp(prefix="su-ssh-")
    env = {
        **os.environ,
        "PWD": str(tmp_path),
        "HOME": str(home),
        "LC_ALL": "C.UTF-8",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_REMOTE_TEMP": str(home / "remote-tmp"),
        "ANSIBLE_STDOUT_CALLBACK": "default",
        "ANSIBLE_FORKS": "5",
        # ssh refuses a ControlPath of 108 bytes or more, which a deep pytest folder reaches
        "ANSIBLE_SSH_CONTROL_PATH_DIR": control_dir,
    }
    env.pop("ANSIBLE_CONFIG", None)
    assert ANSIBLE_PLAYBOOK is not None
    try:
        done = _ansible(env, tmp_path, extra_vars)
    finally:
        shutil.rmtree(control_dir, ignore_errors=True)
    report = tmp_path / "drift.json"
    return done, json.loads(report.read_text()) if report.exists() else {}


def _ansible(
    env: dict[str, str], tmp_path: Path, extra_vars: dict[str, object]
) -> subprocess.CompletedProcess[str]:
    assert ANSIBLE_PLAYBOOK is not None
    return subprocess.run(
        [
            ANSIBLE_PLAYBOOK,
            "-i",
            str(tmp_path / "inventory.json"),
            str(PLAYBOOK),
            "-e",
            json.dumps({"golden_file": "golden.txt", "report_path": "drift.json", **extra_vars}),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )


def _copies(base: Venv, count: int) -> list[Venv]:
    """``count`` copies of ``base``: a venv moved as a folder still runs (its python is a
    link to the base interpreter) and lists the same set."""
    copies = []
    for number in range(count):
        root = base.root.parent / f"node-venv{number}"
        shutil.copytree(base.root, root, symlinks=True)
        copies.append(Venv(root=root, uv_cache=base.uv_cache, wheelhouse=base.wheelhouse))
    return copies


def test_ten_nodes_two_drift_one_unreachable(make_venv: MakeVenv, tmp_path: Path) -> None:
    golden = make_venv(*GOLDEN)
    exported = golden.tool("export", "-o", str(tmp_path / "golden.txt"))
    assert exported.returncode == 0, exported.stderr
    venvs = _copies(golden, 10)
    venvs[2].install("urllib3==2.3.0", "toolpkg==1.0")  # node03: upgraded, and one added
    venvs[6].uv("pip", "uninstall", "--python", str(venvs[6].python), "leftpad")  # node07
    local = {"ansible_connection": "local"}
    nodes: dict[str, dict[str, Any]] = {
        f"node{number + 1:02}": {**local, "venv_path": str(venv.root)}
        for number, venv in enumerate(venvs)
    }
    # Port 1 of the loopback: nothing listens, the connection is refused at once.
    nodes["node11"] = {
        "ansible_connection": "ssh",
        "ansible_host": "127.0.0.1",
        "ansible_port": 1,
        "ansible_ssh_common_args": "-o ConnectTimeout=10 -o StrictHostKeyChecking=no",
        "venv_path": "/nowhere",
    }
    before = [venv.file_hashes() for venv in venvs]

    done, report = run_playbook(tmp_path, nodes, sets_dir="sets")

    assert done.returncode == 4, done.stdout + done.stderr  # ansible's "a host was unreachable"
    recap = {
        host: (int(changed), int(unreachable))
        for host, _, changed, unreachable, _ in RECAP.findall(done.stdout)
    }
    assert recap.pop("node11") == (0, 1)
    assert set(recap.values()) == {(0, 0)}, recap  # nothing changed on any node
    assert report["differ"] == ["node03", "node07"]
    assert report["no_answer"] == ["node11"]
    assert report["same"] == [f"node{n:02}" for n in (1, 2, 4, 5, 6, 8, 9, 10)]
    assert report["golden"] == str(tmp_path / "golden.txt")
    node03, node07 = report["nodes"]["node03"], report["nodes"]["node07"]
    assert [(c["name"], c["change"], c["before"], c["after"]) for c in node03["changes"]] == [
        ("toolpkg", "added", None, "1.0"),
        ("urllib3", "upgraded", "2.2.1", "2.3.0"),
    ]
    assert node03["commands"] == [
        f"uv pip install --python {shlex.quote(str(venvs[2].root))} urllib3==2.2.1",
        shlex.join([sys.executable, "-m", "safeuninstall", "--python", str(venvs[2].root)])
        + " -- toolpkg",
    ]
    assert [(c["name"], c["change"]) for c in node07["changes"]] == [("leftpad", "removed")]
    assert node07["commands"] == [
        f"uv pip install --python {shlex.quote(str(venvs[6].root))} leftpad==1.0"
    ]
    unreachable = report["nodes"]["node11"]
    assert (unreachable["state"], unreachable["changes"], unreachable["commands"]) == (
        "no answer",
        [],
        [],
    )
    assert "refused" in unreachable["error"], unreachable["error"]
    assert report["nodes"]["node01"] == {
        "state": "same",
        "exit_code": 0,
        "changes": [],
        "commands": [],
        "not_compared": [],
        "error": "",
    }
    # Each node's set, collected; the comparison changed nothing on any node.
    assert (tmp_path / "sets" / "node07.txt").read_text().count("==") == 2
    assert sorted(p.name for p in (tmp_path / "sets").iterdir()) == [
        f"node{n:02}.txt" for n in range(1, 11)
    ]
    assert [venv.file_hashes() for venv in venvs] == before

    # The commands the report gives bring the two nodes back: then every node is the same.
    for node in (node03, node07):
        for command in node["commands"]:
            ran = subprocess.run(
                shlex.split(command),
                capture_output=True,
                text=True,
                env={**golden.env(), "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(golden.wheelhouse)},
            )
            assert ran.returncode == 0, command + ran.stdout + ran.stderr
    for venv in (venvs[2], venvs[6]):
        assert venv.installed() == golden.installed()


def test_fail_on_drift_fails_the_nodes_that_differ_after_the_report(
    make_venv: MakeVenv, tmp_path: Path
) -> None:
    golden = make_venv("leftpad==1.0")
    (tmp_path / "golden.txt").write_text(
        golden.uv("pip", "freeze", "--python", str(golden.python)).stdout
    )
    drifted = make_venv("leftpad==1.0", "urllib3==2.2.1")
    nodes = {
        "good": {"ansible_connection": "local", "venv_path": str(golden.root)},
        "drifted": {"ansible_connection": "local", "venv_path": str(drifted.root)},
        "broken": {"ansible_connection": "local", "venv_path": str(tmp_path / "no-venv")},
    }

    done, report = run_playbook(tmp_path, nodes, fail_on_drift=True)

    assert done.returncode == 2, done.stdout + done.stderr
    assert (report["differ"], report["same"], report["no_answer"]) == (
        ["drifted"],
        ["good"],
        ["broken"],
    )
    assert report["nodes"]["broken"]["exit_code"] == 1
    assert report["nodes"]["broken"]["error"].endswith(
        "no such interpreter or environment directory"
    )
    assert "differs from" in done.stdout and "-- urllib3" in done.stdout
