"""uv installs a wheel by hard-linking the files of its cache into the environment. A file
written in place there is written in uv's cache too, and in any stash that linked it: every
reinstall brings the edit back. An undo must not end in a loop where ``recover`` fails the same
way each time and every other command is refused until it succeeds.

Each test has a uv cache of its own (never the session's: the edit would reach it) and toy
wheels in a find-links folder of its own.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import Run, Venv
from tests.wheels import build_wheel

LEFTPAD = "def pad(s):\n    return ' ' + s\n"


def _venv(tmp_path: Path, find_links: str | None = None) -> Venv:
    """leftpad and six installed by uv from the test's own find-links (a folder, or
    ``find_links``: a page that lists it) through the test's own uv cache."""
    house = tmp_path / "house"
    build_wheel(house, "leftpad", "1.0", {"leftpad.py": LEFTPAD})
    build_wheel(house, "six", "1.16.0", {"six.py": "PY3 = True\n"})
    venv = Venv(root=tmp_path / "venv", uv_cache=tmp_path / "uv-cache", wheelhouse=house)
    venv.uv("venv", "--quiet", "--python", sys.executable, str(venv.root))
    venv.install("leftpad", "six", find_links=find_links or house)
    return venv


def _as_recorded(venv: Venv) -> bool:
    (record,) = venv.site_packages.glob("leftpad-1.0.dist-info/RECORD")
    line = next(x for x in record.read_text().splitlines() if x.startswith("leftpad.py,"))
    digest = hashlib.sha256((venv.site_packages / "leftpad.py").read_bytes()).digest()
    return line.split(",")[1] == "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _run_writing_in_place(venv: Venv, **env: str) -> Run:
    """``run`` of a command that appends to an installed file (a link into uv's cache), then
    fails: its undo must put the file back."""
    path = venv.site_packages / "leftpad.py"
    assert path.stat().st_nlink > 1  # installed as a hard link into uv's cache
    writes = f"open({str(path)!r}, 'a').write('# edited in place\\n'); raise SystemExit(1)"
    return venv.tool(
        "run",
        "--no-probe",
        "--",
        sys.executable,
        "-c",
        writes,
        UV_CACHE_DIR=str(venv.uv_cache),
        **env,
    )


def test_an_undo_reinstalls_past_uvs_cache_a_file_written_in_place(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    links = {"UV_NO_INDEX": "1", "UV_FIND_LINKS": str(venv.wheelhouse)}

    run = _run_writing_in_place(venv, **links)

    assert run.returncode == 3, run.stdout + run.stderr
    assert "each reinstall brings it back. Installed again past the cache" in run.stdout
    assert "verified: the installed set equals the snapshot" in run.stdout
    assert _as_recorded(venv)
    assert not venv.journal.exists()
    later = venv.tool("--no-probe", "six", UV_CACHE_DIR=str(venv.uv_cache))
    assert later.returncode == 0, later.stdout + later.stderr


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A find-links page on loopback (a folder listing) of the test's wheels: uv keeps what
    it fetched from there in its cache, and offline may install only from that cache."""
    house = tmp_path / "house"
    house.mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(house))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{server.server_address[1]}/"
        server.shutdown()


def test_offline_the_way_out_is_the_uv_cache_clean_line_it_prints(
    tmp_path: Path, served: str
) -> None:
    """Offline, uv can reinstall only from its cache, which holds the edit, and cannot go
    past it: the undo ends unfinished and says the exact ``uv cache clean`` line; after it,
    ``recover`` with the index reachable ends the loop."""
    venv = _venv(tmp_path, find_links=served)
    index = {"UV_NO_INDEX": "1", "UV_FIND_LINKS": served}

    run = _run_writing_in_place(venv, UV_OFFLINE="1", **index)

    assert run.returncode == 4, run.stdout + run.stderr
    (line,) = re.findall(r"`([^`]*uv cache clean[^`]*)` drops those bytes", run.stdout)
    assert line.endswith(f"cache clean --cache-dir {venv.uv_cache} leftpad"), line
    assert venv.journal.exists()
    cleaned = subprocess.run(shlex.split(line), capture_output=True, text=True)
    assert cleaned.returncode == 0, cleaned.stderr

    online = {"UV_CACHE_DIR": str(venv.uv_cache), "UV_OFFLINE": "0", **index}
    recovered = venv.tool("recover", "--no-probe", **online)

    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert "past the cache" not in recovered.stdout  # the cache no longer holds the edit
    assert _as_recorded(venv)
    assert not venv.journal.exists()
