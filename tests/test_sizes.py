"""sizes.Weighing: audit's walk and count in a child process. Its figures are the ones counted in
the command's own process, or, when the child fails or answers anything else, counted there
instead; the child never outlives the block, whatever interrupts it.

A fake interpreter (a script given as sys.executable) plays the failing child."""

from __future__ import annotations

import marshal
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from safeuninstall.environment import sizes
from safeuninstall.environment.sizes import Counted, Weighing, count, walk
from tests.conftest import running, wait_for


@pytest.fixture
def env(tmp_path: Path) -> Path:
    """An environment's prefix: listed files, a hard link, a file listed by two, unowned files,
    a listed file that is missing, one outside."""
    root = tmp_path / "env"
    site = root / "site"
    (site / "a").mkdir(parents=True)
    (site / "b").mkdir()
    (site / "junk" / "deep").mkdir(parents=True)
    (site / "a" / "one.bin").write_bytes(b"x" * 1000)
    os.link(site / "a" / "one.bin", site / "a" / "same.bin")
    (site / "b" / "both.txt").write_text("shared" * 10)
    (site / "junk" / "deep" / "left.pyc").write_bytes(b"y" * 77)
    (site / "stray.txt").write_text("z")
    return root


def _ownership(root: Path) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    site = os.path.realpath(root / "site")
    owners = {
        f"{site}/a/one.bin": ("a",),
        f"{site}/b/both.txt": ("a", "b"),
        f"{site}/a/gone.txt": ("b",),
        "/elsewhere/x": ("b",),
    }
    return owners, ["a", "b"]


def _here(root: Path) -> Counted:
    owners, dists = _ownership(root)
    sites = [os.path.realpath(root / "site")]
    return count(walk(sites), owners, dists, os.path.realpath(root), sites)


def _weighed(root: Path) -> tuple[Counted, Weighing]:
    owners, dists = _ownership(root)
    with Weighing([str(root / "site")]) as weighing:
        weighing.send(owners, dists, os.path.realpath(root))
        return weighing.result(), weighing


def test_the_child_counts_what_this_process_counts(env: Path) -> None:
    site = os.path.realpath(env / "site")
    counted, weighing = _weighed(env)
    assert weighing.failure is None  # the child's answer, not the fallback's
    assert counted == _here(env)
    own, shared, missing, outside, _, unowned_total, unowned_files, top = counted
    assert own["a"] == (1000, 1, 0)  # one inode, reached by two paths
    assert shared == {"a": (60, ("b",)), "b": (60, ("a",))}
    assert missing == {"b": 1} and outside == {"b": 1}
    assert (unowned_total, unowned_files) == (78, 2)
    assert [folder for folder, _, _ in top] == [f"{site}/junk/", f"{site}/stray.txt"]


def _fake_interpreter(tmp_path: Path, body: str) -> str:
    """A script in place of the interpreter: ``body`` is Python, run whatever the arguments."""
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\nimport marshal, os, sys\n{body}\n")
    fake.chmod(0o755)
    return str(fake)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("sys.exit(3)", "exited with 3"),
        ("os.kill(os.getpid(), 9)", "exited with -9"),
        ("sys.stdout.write('not marshal')", "unreadable answer"),
        # a complete answer, of another version, whose figures are wrong
        (
            "sys.stdin.buffer.read(); "
            "sys.stdout.buffer.write(marshal.dumps((2, ({}, {}, {}, {}, 1, 2, 3, ()))))",
            "another shape",
        ),
        # this version's, but sizes that are no numbers
        (
            "sys.stdin.buffer.read(); sys.stdout.buffer.write(marshal.dumps("
            "(1, ({'a': ('1', 1, 0)}, {}, {}, {}, 1, 2, 3, ()))))",
            "another shape",
        ),
        # this version's, but who shares a file is no list of names
        (
            "sys.stdin.buffer.read(); sys.stdout.buffer.write(marshal.dumps("
            "(1, ({}, {'a': (60, 'b')}, {}, {}, 1, 2, 3, ()))))",
            "another shape",
        ),
        (
            "sys.stdin.buffer.read(); sys.stdout.buffer.write(marshal.dumps((1, (1, 2))))",
            "unreadable",
        ),
    ],
    ids=["exit-3", "killed", "junk", "other-version", "not-numbers", "not-names", "too-short"],
)
def test_a_child_that_fails_or_answers_otherwise_is_not_believed(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, why: str
) -> None:
    monkeypatch.setattr(sys, "executable", _fake_interpreter(tmp_path, body))
    counted, weighing = _weighed(env)
    assert weighing.failure is not None and why in weighing.failure
    assert counted == _here(env)  # counted here instead: the same figures, never the child's


def test_an_ownership_marshal_cannot_write_is_counted_here(env: Path) -> None:
    """The child is stopped, and the same count runs here."""
    owners, dists = _ownership(env)
    site = os.path.realpath(env / "site")
    odd: dict[str, tuple[object, ...]] = {**owners, f"{site}/odd": (object(),)}
    root = os.path.realpath(env)
    with Weighing([str(env / "site")]) as weighing:
        weighing.send(odd, dists, root)  # type: ignore[arg-type]
        assert weighing.failure is not None and "could not be sent" in weighing.failure
        counted = weighing.result()
    assert counted == count(walk([site]), odd, dists, root, [site])  # type: ignore[arg-type]


def test_no_interpreter_to_start_counts_here(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    counted, weighing = _weighed(env)
    assert weighing.failure is not None and "could not start" in weighing.failure
    assert counted == _here(env)


@pytest.fixture
def sleeper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The child: it says its pid, then neither reads nor answers (a walk that takes long).
    Yields the pid's file, which appears with the pid in it (written aside, then renamed: seen
    as soon as it exists, an open() not yet written would read empty); a child the test failed
    to stop is killed afterwards."""
    pid_file = tmp_path / "pid"
    body = (
        f"open({str(pid_file)!r} + '.tmp', 'w').write(str(os.getpid()))\n"
        f"os.replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r})\n"
        "import time\ntime.sleep(600)"
    )
    monkeypatch.setattr(sys, "executable", _fake_interpreter(tmp_path, body))
    yield pid_file
    if pid_file.exists() and running(pid := int(pid_file.read_text())):
        os.kill(pid, signal.SIGKILL)


def test_an_interrupt_in_the_block_stops_the_child(env: Path, sleeper: Path) -> None:
    pid_file = sleeper
    with pytest.raises(KeyboardInterrupt), Weighing([str(env / "site")]):
        wait_for(pid_file)
        raise KeyboardInterrupt
    assert not running(int(pid_file.read_text()))


def test_an_interrupt_while_the_child_starts_stops_it(
    env: Path, sleeper: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C right after the child is started, before the block is entered: __exit__ never
    runs then, so the start itself must stop it."""
    pid_file = sleeper
    real = subprocess.Popen

    def interrupted(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        child = real(*args, **kwargs)  # type: ignore[call-overload]
        wait_for(pid_file)
        signal.raise_signal(signal.SIGINT)
        return child  # type: ignore[no-any-return]

    monkeypatch.setattr(subprocess, "Popen", interrupted)
    with pytest.raises(KeyboardInterrupt), Weighing([str(env / "site")]):
        pytest.fail("the block must not be entered")
    assert not running(int(pid_file.read_text()))


def test_the_child_ends_when_the_command_sends_nothing(env: Path) -> None:
    """A command killed before it sent the ownership closes the pipe: the child exits, and
    writes no answer."""
    site = os.path.realpath(env / "site")
    done = subprocess.run(
        [sys.executable, "-I", "-S", sizes.__file__, site],
        input=b"",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, b"")


def test_the_child_answers_in_the_format_read_back(env: Path) -> None:
    owners, dists = _ownership(env)
    site = os.path.realpath(env / "site")
    done = subprocess.run(
        [sys.executable, "-I", "-S", sizes.__file__, site],
        input=marshal.dumps((owners, dists, os.path.realpath(env))),
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert sizes._checked(done.stdout) == _here(env)


def test_a_folder_that_is_a_link_when_it_is_opened_is_not_followed(tmp_path: Path) -> None:
    """A folder swapped for a link once it was listed (here: the root walked is a link) is not
    walked into: a path found is always the file's own, never one through a link."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "big").write_bytes(b"x" * 1000)
    (tmp_path / "site").symlink_to(elsewhere)

    assert walk([str(tmp_path / "site")]) == {}
    assert list(walk([str(elsewhere)])) == [str(elsewhere / "big")]
