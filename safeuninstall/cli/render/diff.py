"""``diff``: what changed from one state to another, a line per distribution."""

from __future__ import annotations

from typing import TYPE_CHECKING

from safeuninstall.environment.sizes import count_text, size_text
from safeuninstall.plans.diff import ChangeKind

if TYPE_CHECKING:
    from safeuninstall.operations.results import DiffResult


_DIFF_MARKS = {
    "added": "+",
    "removed": "-",
    "upgraded": "^",
    "downgraded": "v",
    "changed": "*",
    "files-differ": "~",
}
_SHOWN_FILES = 5  # differing files listed per distribution without -v


def diff_report(found: DiffResult, *, quiet: bool = False, verbose: bool = False) -> str:
    """``diff``: a headline with the counts, then a line per changed distribution."""
    d = found.diff
    counts = [
        f"{len(changes)} {kind.value.replace('-', ' ')}"
        for kind in ChangeKind
        if (changes := d.of_kind(kind))
    ]
    said = ", ".join(counts) if counts else "no change"
    lines = [f"{found.before} -> {found.after}: {said}; {d.unchanged} unchanged"]
    if quiet:
        return lines[0]
    for change in d.changes:
        kind = change.kind.value
        mark = _DIFF_MARKS[kind]
        # None: absent on that side, or present with no version (a file's source tree)
        before, after = change.before or "(no version)", change.after or "(no version)"
        if kind == "added":
            what = f"{change.name} {after}"
        elif kind == "removed" or before == after:
            what = f"{change.name} {before}"
        else:
            what = f"{change.name} {before} -> {after}"
        sizes = _diff_sizes(change.size_before, change.size_after)
        lines.append(f"  {mark} {what}  ({kind}{sizes})")
        shown = change.files if verbose else change.files[:_SHOWN_FILES]
        lines += [f"      {path}" for path in shown]
        if len(shown) < len(change.files):
            lines.append(f"      ... and {len(change.files) - len(shown)} more (-v lists them)")
    files = [
        side
        for side, kind in ((found.before, found.before_kind), (found.after, found.after_kind))
        if kind == "file"
    ]
    if files:
        verb = "give" if len(files) > 1 else "gives"
        lines.append(f"files not compared: {' and '.join(files)} {verb} versions only")
    elif d.not_compared:
        names = ", ".join(d.not_compared[:5]) + (" ..." if len(d.not_compared) > 5 else "")
        lines.append(
            f"files not compared for {count_text(len(d.not_compared), 'distribution')} of the same "
            f"version (a snapshot without their stash): {names}"
        )
    lines += [f"not compared: {line}" for line in found.set_aside]
    return "\n".join(lines)


def _diff_sizes(before: int | None, after: int | None) -> str:
    if before is not None and after is not None and before != after:
        return f", {size_text(before)} -> {size_text(after)}"
    size = after if after is not None else before
    return "" if size is None else f", {size_text(size)}"
