"""What a probe is, and what a derived probe's candidate is: a closed set each, so a kind read
back from the state folder that this tool does not know is refused when it is decoded, never
run as something else. Each kind has its runner in probe.py (``_ARGV``, ``_CANDIDATE_ARGUMENT``).
"""

from __future__ import annotations

import enum


class ProbeKind(enum.Enum):
    PYTHON = "python"  # Python code, run by the driver in the target interpreter
    COMMAND = "command"  # a command line as typed: split, never through a shell
    DERIVED = "derived"  # candidates, each tried on its own in one Python process
    METRIC = "metric"  # a command line whose last line is a number, run several times


class CandidateKind(enum.Enum):
    MODULE = "module"  # a module to import
    ENTRY_POINT = "entry-point"  # an entry point's module imported, its attributes resolved
    CODE = "code"  # Python code
