"""Timing a child process (wall time and its peak RSS) and summarising repeated runs."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


class BenchError(RuntimeError):
    """A benchmark step did not do what it must (a command failed, a file is not there)."""


@dataclass(frozen=True)
class Timed:
    argv: tuple[str, ...]
    seconds: float
    maxrss_kib: int | None  # the command's peak RSS; None where it can't be told (no launcher)
    returncode: int
    stdout: str
    stderr: str

    def check(self, *expected: int) -> Timed:
        if self.returncode not in (expected or (0,)):
            raise BenchError(
                f"exit {self.returncode} from {' '.join(self.argv)}\n"
                f"{self.stdout[-2000:]}\n{self.stderr[-2000:]}"
            )
        return self


def _read(handle: IO[bytes]) -> str:
    handle.seek(0)
    return handle.read().decode(errors="replace")


def build_launcher(dest: Path) -> Path | None:
    """Compile launcher.c with gcc into ``dest``; None without gcc (then RSS is not reported)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    source = Path(__file__).with_name("launcher.c")
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([gcc, "-O2", "-o", str(dest), str(source)], check=True, capture_output=True)
    return dest


def run_timed(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    launcher: Path | None = None,
    timeout: float = 900.0,
) -> Timed:
    """Run ``argv`` to completion: wall time from fork to reap, and its peak RSS.

    Through ``launcher`` (see launcher.c) both come from a tiny parent; without it the wall time
    is taken here and the peak RSS is not reported (it would include this process's own RSS).
    """
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile(suffix=".usage") as usage_file,
    ):
        full = [str(launcher), usage_file.name, *argv] if launcher else list(argv)
        started = time.perf_counter()
        proc = subprocess.Popen(
            full, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=dict(env), cwd=cwd
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        seconds = time.perf_counter() - started
        maxrss: int | None = None
        if launcher:
            fields = Path(usage_file.name).read_text().split()
            if len(fields) != 2:
                raise BenchError(f"the launcher reported nothing for {list(argv)}: {_read(err)}")
            maxrss, seconds = int(fields[0]), int(fields[1]) / 1e9
        return Timed(
            argv=tuple(argv),
            seconds=seconds,
            maxrss_kib=maxrss,
            returncode=proc.returncode,
            stdout=_read(out),
            stderr=_read(err),
        )


@dataclass
class Series:
    """Repeated measurements of one thing."""

    values: list[float] = field(default_factory=list)
    peaks_kib: list[int] = field(default_factory=list)

    def add(self, seconds: float, peak_kib: int | None = None) -> None:
        self.values.append(seconds)
        if peak_kib is not None:
            self.peaks_kib.append(peak_kib)

    def add_run(self, timed: Timed) -> Timed:
        self.add(timed.seconds, timed.maxrss_kib)
        return timed

    @property
    def runs(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        if not self.values:
            raise BenchError("no measurement")
        return statistics.median(self.values)

    @property
    def peak_mib(self) -> float | None:
        if not self.peaks_kib:
            return None
        return statistics.median(self.peaks_kib) / 1024


def time_call(func: Callable[[], object]) -> float:
    started = time.perf_counter()
    func()
    return time.perf_counter() - started
