"""The timing-dependent holes, run as loops: a signal, a concurrent install or a
SIGKILL at a random moment, the same invariant checked after each run.

    python -m tests.stress                     # 50 iterations of each, a random seed
    python -m tests.stress -n 200 --seed 7     # more, reproducibly

Each iteration gets a fresh venv (uv, offline, from a small wheelhouse built once). The delays
come from one seeded generator; a failure names the seed and the iteration, so it can be run
again exactly. tests/test_stress.py runs a short form of each in the test suite.

- ``signal`` (#9): SIGTERM at a random moment of a removal whose probe fails without the
  package. Exit 0 is impossible, so every run ends 1 (interrupted before any change), 3
  (interrupted, or the probe failed: restored and verified) or by the signal itself (it came
  before the tool set its handler), with the files exactly as before and no journal left.
- ``concurrent`` (#10): a plain ``uv pip install leftpad==2.0`` started at a random moment of a
  removal of leftpad 1.0. Whatever interleaving: never two leftpad dist-info folders after an
  outcome that says "restored", and no journal left unless the exit code is 4.
- ``kill-rollback`` (#11): SIGKILL at a random moment of a rollback, then ``recover``: the
  environment is exactly the state before the rollback, or the one it rolled back to.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from safeuninstall.environment.interpreter import find_uv
from safeuninstall.state.store import VENV_JOURNAL
from tests.wheels import build_wheel

KINDS = ("signal", "concurrent", "kill-rollback")
TOOL = [sys.executable, "-m", "safeuninstall"]


class StressFailure(AssertionError):
    pass


@dataclass(frozen=True)
class Bench:
    """Where a stress run builds: a wheelhouse, a uv cache, a counter of venvs."""

    root: Path
    uv: str

    @classmethod
    def create(cls, root: Path) -> Bench:
        uv = find_uv()
        if uv is None:
            raise StressFailure("uv is needed")
        house = root / "wheels"
        build_wheel(house, "urllib3", "2.3.0", {"urllib3/__init__.py": "VERSION = '2.3.0'\n"})
        build_wheel(
            house,
            "requests",
            "2.32.3",
            {"requests/__init__.py": "import urllib3\n"},
            requires=["urllib3"],
        )
        for version in ("1.0", "2.0"):
            build_wheel(house, "leftpad", version, {"leftpad.py": f"V = {version!r}\n"})
        build_wheel(house, "toolpkg", "1.0", {"toolpkg/__init__.py": "X = 1\n"})
        return cls(root, uv)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
        env.pop("VIRTUAL_ENV", None)
        return {**env, "UV_CACHE_DIR": str(self.root / "uv-cache"), "UV_OFFLINE": "1"}

    def venv(self, name: str, *requirements: str) -> Path:
        root = self.root / name
        env = self.env()
        subprocess.run([self.uv, "venv", "-q", str(root)], env=env, check=True)
        self.install(root, *requirements)
        return root

    def install(self, venv: Path, *requirements: str) -> subprocess.CompletedProcess[bytes]:
        argv = [self.uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python")]
        argv += ["--no-index", "--find-links", str(self.root / "wheels"), *requirements]
        return subprocess.run(argv, env=self.env(), capture_output=True)

    def tool(self, venv: Path, *args: str) -> subprocess.Popen[str]:
        argv = [*TOOL, "--python", str(venv), *args]
        pipe = subprocess.PIPE
        return subprocess.Popen(argv, env=self.env(), stdout=pipe, stderr=pipe, text=True)


def file_hashes(venv: Path) -> dict[str, str]:
    hashes = {}
    for base in (*venv.glob("lib/python3*/site-packages"), venv / "bin"):
        for path in sorted(base.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            hashes[str(path.relative_to(venv))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def _journal(venv: Path) -> Path:
    return venv / VENV_JOURNAL


def _leftpad_dist_infos(venv: Path) -> list[str]:
    return sorted(p.name for p in venv.glob("lib/python3*/site-packages/leftpad-*.dist-info"))


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise StressFailure(what)


def one_signal(bench: Bench, index: int, rng: random.Random) -> str:
    venv = bench.venv(f"signal-{index}", "requests", "leftpad==1.0")
    before = file_hashes(venv)
    # The probe passes with leftpad, fails without: every removal that gets that far restores.
    proc = bench.tool(venv, "--json", "--probe", "import requests, leftpad", "leftpad")
    time.sleep(rng.uniform(0.0, 1.5))  # the moment the signal lands: what this loop varies
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    code = proc.returncode
    # -15: the signal came before the tool set its handler, in the first milliseconds of its
    # start-up, and ended it as it ends any process: before it had done anything.
    _check(code in (1, 3, -signal.SIGTERM), f"exit {code}: {out}{err}")
    _check(not _journal(venv).exists(), f"journal left after exit {code}")
    _check(file_hashes(venv) == before, f"exit {code} but the files differ: {out}{err}")
    return f"exit {code}"


def one_concurrent(bench: Bench, index: int, rng: random.Random) -> str:
    venv = bench.venv(f"concurrent-{index}", "requests", "leftpad==1.0")
    proc = bench.tool(venv, "--json", "--probe", "import requests, leftpad", "leftpad")
    time.sleep(rng.uniform(0.0, 1.5))  # when the other process installs: what this loop varies
    other = bench.install(venv, "leftpad==2.0")
    out, err = proc.communicate(timeout=120)
    code = proc.returncode
    folders = _leftpad_dist_infos(venv)
    outcome = json.loads(out)["outcome"] if out.strip().startswith("{") else "error"
    _check(
        not (len(folders) > 1 and outcome.endswith("-restored")),
        f"{outcome} (exit {code}) with {folders}: {out}{err}",
    )
    _check(len(folders) <= 1 or code == 4, f"{folders} after exit {code}: {out}{err}")
    _check(code == 4 or not _journal(venv).exists(), f"journal left after exit {code}")
    return f"{outcome}, other install exit {other.returncode}, {folders}"


def one_kill_rollback(bench: Bench, index: int, rng: random.Random) -> str:
    venv = bench.venv(f"kill-{index}", "requests", "leftpad==1.0", "toolpkg")
    original = file_hashes(venv)
    snapshot = subprocess.run(
        [*TOOL, "--python", str(venv), "--no-probe", "leftpad", "toolpkg"],
        env=bench.env(),
        capture_output=True,
        text=True,
    )
    _check(snapshot.returncode == 0, f"removal: {snapshot.stdout}{snapshot.stderr}")
    removed_state = file_hashes(venv)
    proc = bench.tool(venv, "rollback", "--no-probe", "0001")
    time.sleep(rng.uniform(0.0, 1.0))  # when the kill lands: what this loop varies
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    recover = subprocess.run(
        [*TOOL, "--python", str(venv), "recover", "--no-probe"],
        env=bench.env(),
        capture_output=True,
        text=True,
    )
    _check(recover.returncode == 0, f"recover exit {recover.returncode}: {recover.stderr}")
    _check(not _journal(venv).exists(), "journal left after recover")
    after = file_hashes(venv)
    _check(after in (original, removed_state), "neither the state before nor after the rollback")
    return "rolled back" if after == original else "back to before the rollback"


RUNS: dict[str, Callable[[Bench, int, random.Random], str]] = {
    "signal": one_signal,
    "concurrent": one_concurrent,
    "kill-rollback": one_kill_rollback,
}


def run(kind: str, iterations: int, seed: int, root: Path) -> dict[str, int]:
    """Run ``kind`` ``iterations`` times; return how often each ending was seen."""
    bench = Bench.create(root)
    rng = random.Random(seed)
    seen: dict[str, int] = {}
    for index in range(iterations):
        try:
            ending = RUNS[kind](bench, index, rng)
        except (StressFailure, subprocess.SubprocessError) as err:
            raise StressFailure(f"{kind}, seed {seed}, iteration {index}: {err}") from err
        seen[ending] = seen.get(ending, 0) + 1
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--iterations", type=int, default=50)
    parser.add_argument("--seed", type=int, default=random.randrange(2**32))
    parser.add_argument("--only", choices=KINDS, action="append")
    args = parser.parse_args()
    print(f"seed {args.seed}", flush=True)
    for kind in args.only or KINDS:
        with tempfile.TemporaryDirectory(prefix=f"stress-{kind}-") as root:
            seen = run(kind, args.iterations, args.seed, Path(root))
        print(f"{kind}: {args.iterations} runs, all held: {json.dumps(seen)}", flush=True)


if __name__ == "__main__":
    main()
