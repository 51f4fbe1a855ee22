"""Install a built wheel alone in a fresh venv and run README.md's quickstart with it.

    python .ci/quickstart.py dist/safe_uninstall-X.Y.Z-py3-none-any.whl

What a user gets from the wheel, not from the source tree: the venv is made outside the
checkout, the wheel is installed by pip with its dependencies (uv among them), and every line
of the README's quickstart runs in one shell from a folder of its own, its exit code checked
against the `exit N` its comment states (0 when it states none). Only the demo venv's path is
changed, so that a `/tmp/demo` of the user's is left alone. `--version` must print the
wheel's version, and `safeuninstall` must be imported from the fresh venv.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = "/tmp/demo"
_BLOCK = re.compile(r"^## Quickstart\n.*?^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
_EXIT = re.compile(r"#.*\bexit (\d+)")


def quickstart_lines(readme: str) -> list[tuple[str, int]]:
    """The quickstart's command lines, each with the exit code its comment promises."""
    match = _BLOCK.search(readme)
    if match is None:
        raise SystemExit("README.md has no ```sh block under '## Quickstart'")
    lines = []
    for line in match.group(1).splitlines():
        if line.strip():
            code = _EXIT.search(line)
            lines.append((line, int(code.group(1)) if code else 0))
    return lines


def _script(lines: list[tuple[str, int]], demo: str) -> str:
    """One shell that runs the lines in order and stops at the first unexpected exit code."""
    out = ["set -u"]
    for line, expected in lines:
        command = line.replace(DEMO, demo)
        out += [
            f"echo {shlex.quote('$ ' + line)}",
            f"{{ {command}\n}} > quickstart.log 2>&1; rc=$?",
            f"if [ $rc -ne {expected} ]; then cat quickstart.log;"
            f" echo 'exit '$rc', README.md says {expected}'; exit 1; fi",
        ]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].endswith(".whl"):
        print(__doc__, file=sys.stderr)
        return 2
    wheel = Path(argv[0]).resolve()
    version = wheel.name.split("-")[1]
    lines = quickstart_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="quickstart-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        python = str(venv / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "--quiet", wheel], check=True, env=env)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        shown = subprocess.run(
            ["safe-uninstall", "--version"], env=env, cwd=work, capture_output=True, text=True
        )
        if shown.stdout.strip() != f"safe-uninstall, version {version}":
            print(f"--version printed {shown.stdout!r}{shown.stderr!r}, not {version}")
            return 1
        where = subprocess.run(
            [python, "-c", "import safeuninstall; print(safeuninstall.__file__)"],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not Path(where).is_relative_to(venv):
            print(f"safeuninstall was imported from {where}, not from the wheel's venv")
            return 1
        script = _script(lines, str(work / "demo"))
        done = subprocess.run(["bash", "-c", script], env=env, cwd=work)
        if done.returncode != 0:
            return 1
    print(f"quickstart: {len(lines)} lines as README.md says, with the wheel of {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
