"""The derived probe: what judges a removal when no probe is configured.

Its candidates come from what the removal affects (the impact report's distributions):

- each one's modules at their first level that is not a namespace (``google.cloud.storage``,
  ``rich``), at most ``MODULES_PER_DISTRIBUTION`` of them, spread over its packages;
- the entry points each one declares (console scripts, plugins), loaded, never run, one
  candidate per module they live in;
- the modules of the distributions that require a removed one and import it at module level
  (``rich.markdown`` imports ``markdown_it``; ``import rich`` does not), the shallowest
  ``IMPORTERS_PER_DISTRIBUTION`` of each;
- torch's CUDA check, where torch is installed (of torch itself, only the modules that import
  what is removed: ``torch.fx.experimental.symbolic_shapes`` imports sympy).

One process tries every candidate on its own (probe.py). The verdict is a regression: the
candidates that pass before the removal must pass after it; one that fails before is dropped,
named, and blocks nothing. A candidate that did not finish before (a crash, the time limit) is
not tried again after.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import msgspec
from packaging.utils import canonicalize_name

from safeuninstall.environment.installed import InstalledDistribution
from safeuninstall.probe import importables
from safeuninstall.probe.kinds import CandidateKind, ProbeKind
from safeuninstall.probe.metric import judged
from safeuninstall.probe.runner import Candidate, Probe, ProbeResult, ProbeSettings, derived_code

# torch's own check, plus the libraries a CUDA build loads lazily: without these a removal of
# cuDNN or NCCL passes `import torch` and fails at the first real call (see FACTS.md).
TORCH_PROBE = """import torch
torch.cuda.device_count()
if torch.version.cuda:
    torch.backends.cudnn.version()
    if hasattr(torch.cuda, "nccl"):
        torch.cuda.nccl.version()"""
TORCH_WHY = "CUDA initialisation (and cuDNN/NCCL versions on CUDA builds)"
MODULES_PER_DISTRIBUTION = 8
IMPORTERS_PER_DISTRIBUTION = 3
_LEADING_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def derive(
    installed: Mapping[str, InstalledDistribution],
    affected: Sequence[str] | None,
    removed: Sequence[str] = (),
) -> tuple[tuple[Probe, ...], tuple[str, ...]]:
    """The derived probe (none when nothing applies) and the notes that say what it is.

    ``affected``: the distributions the impact report says a removal touches (metadata
    dependents, library consumers, distributions left hollow), ``removed`` what it removes;
    None when the operation is not a removal (rollback, recover, ``probe`` without names): then
    only torch's check applies.
    """
    groups: dict[str, list[Candidate]] = {}  # a distribution's candidates
    notes: list[str] = []
    searched = {name: _roots(installed[name]) for name in removed if name in installed}
    for name in affected or ():
        if name not in installed or name == "torch":  # torch's, below
            continue
        dist = installed[name]
        found, said = _candidates_of(dist, _imported_by(dist, searched))
        groups[name] = found
        notes += said
    described = []
    count = sum(map(len, groups.values()))
    torch = installed.get("torch")
    if torch is not None and "torch" in (affected or ()):
        # its check imports it; of its submodules, those that import what is removed
        groups["torch"] = _importers(torch, _imported_by(torch, searched), tried=())
        count += len(groups["torch"])
    if count:
        found = [c for group in groups.values() for c in group]
        described.append(
            f"from what the removal affects ({', '.join(affected or ())}): " + _counted(found)
        )
    if torch is not None:
        check = Candidate(CandidateKind.CODE, TORCH_PROBE, "torch", why=TORCH_WHY)
        groups["torch"] = [check, *groups.pop("torch", ())]
        described.append(f"torch's {TORCH_WHY}")
    candidates = [c for name in _requirements_first(groups, installed) for c in groups[name]]
    if not candidates:
        if affected is None:
            return (), ("no probe configured and torch is not installed: no probe to run",)
        return (), ("nothing installed is affected by this removal: no probe to run",)
    probe = Probe(
        kind=ProbeKind.DERIVED,
        code=derived_code(candidates),
        origin="derived",
        candidates=tuple(candidates),
    )
    head = (
        "derived (no probe is configured): "
        + " and ".join(described)
        + "; each candidate is tried on its own, and one that fails before the change is dropped"
    )
    return (probe,), (head, *notes)


def _requirements_first(
    groups: Mapping[str, Sequence[Candidate]], installed: Mapping[str, InstalledDistribution]
) -> list[str]:
    """The distributions of ``groups``, each after those of them it requires (Requires-Dist,
    markers not evaluated), else in their order. Importing a distribution imports what it
    requires: tried first, a requirement that a removal broke fails on its own, the
    cheapest place, with the error that names the cause; after a change the run stops there
    (after_settings), and its dependents, which would each import it again up to the same
    failure, are not tried. Torch's check is then tried before what requires torch."""
    needs = {
        name: {
            canonicalize_name(match.group(1))
            for value in installed[name].requires_dist()
            if (match := _LEADING_NAME.match(value))
        }
        & groups.keys()
        for name in groups
    }
    order: list[str] = []
    left = list(groups)
    while left:
        # the first whose requirements are placed; in a cycle, the first of it
        ready = next((n for n in left if not (needs[n] - {n}) - set(order)), left[0])
        order.append(ready)
        left.remove(ready)
    return order


def _counted(candidates: Sequence[Candidate]) -> str:
    """``7 modules, 2 entry point modules, 3 modules that import what is removed``."""
    modules = sum(c.kind is CandidateKind.MODULE and not c.why for c in candidates)
    points = sum(c.kind is CandidateKind.ENTRY_POINT for c in candidates)
    importers = sum(c.kind is CandidateKind.MODULE and bool(c.why) for c in candidates)
    parts = [
        _plural(modules, "module"),
        _plural(points, "module", " of entry points"),
        _plural(importers, "module", " importing what is removed"),
    ]
    return ", ".join(part for part in parts if part)


def _plural(count: int, noun: str, rest: str = "") -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}{rest}" if count else ""


def _roots(dist: InstalledDistribution) -> list[str]:
    """What importing a removed distribution looks like: its modules, private ones too."""
    return importables.top_modules(dist, public=False)


def _imported_by(dist: InstalledDistribution, searched: Mapping[str, Sequence[str]]) -> list[str]:
    """The modules of removed distributions that ``dist`` requires (Requires-Dist, markers not
    evaluated: a requirement that does not apply costs a search, nothing more)."""
    required = {
        canonicalize_name(match.group(1))
        for value in dist.requires_dist()
        if (match := _LEADING_NAME.match(value))
    }
    return [root for name, roots in searched.items() if name in required for root in roots]


def _candidates_of(
    dist: InstalledDistribution, imported: Sequence[str]
) -> tuple[list[Candidate], list[str]]:
    name, notes = dist.key, []
    modules = importables.top_modules(dist)
    shown = _spread(modules, MODULES_PER_DISTRIBUTION)
    if len(shown) < len(modules):
        notes.append(
            f"{name}: {len(shown)} of its {len(modules)} modules are tried, one package after "
            "another"
        )
    found = [Candidate(CandidateKind.MODULE, module, name) for module in shown]
    points = importables.entry_points(dist)
    if len(points) > importables.MAX_ENTRY_POINTS:
        notes.append(
            f"{name}: the first {importables.MAX_ENTRY_POINTS} of its {len(points)} entry "
            "points are loaded"
        )
    found += _entry_point_candidates(name, points[: importables.MAX_ENTRY_POINTS])
    return found + _importers(dist, imported, tried=shown), notes


def _importers(
    dist: InstalledDistribution, imported: Sequence[str], *, tried: Sequence[str]
) -> list[Candidate]:
    """Modules of ``dist`` that import one of ``imported`` at module level, not yet tried."""
    found = importables.importers(dist, imported, limit=IMPORTERS_PER_DISTRIBUTION)
    return [
        Candidate(CandidateKind.MODULE, module, dist.key, why=f"imports {what}")
        for module, what in found
        if module not in tried
    ]


def _entry_point_candidates(
    distribution: str, points: Sequence[importables.EntryPoint]
) -> list[Candidate]:
    """One candidate per module the entry points live in: importing it is the cost, resolving
    its attributes is free."""
    by_module: dict[str, list[importables.EntryPoint]] = {}
    for point in points:
        by_module.setdefault(point.module, []).append(point)
    found = []
    for module, group in by_module.items():
        attrs = tuple(dict.fromkeys(p.attr for p in group if p.attr))
        first = group[0]
        why = f"{first.group}: {first.name}" + (f" (+{len(group) - 1})" if len(group) > 1 else "")
        found.append(
            Candidate(CandidateKind.ENTRY_POINT, module, distribution, attrs=attrs, why=why)
        )
    return found


def _spread(modules: Sequence[str], limit: int) -> list[str]:
    """At most ``limit`` of ``modules``, taken in turn from each package they belong to, so
    that ``google.api.*_pb2`` does not crowd out ``google.rpc``."""
    by_parent: dict[str, list[str]] = {}
    for module in modules:
        by_parent.setdefault(module.rpartition(".")[0], []).append(module)
    chosen: list[str] = []
    rank = 0
    while len(chosen) < min(limit, len(modules)):
        chosen += [group[rank] for group in by_parent.values() if rank < len(group)]
        rank += 1
    return sorted(chosen[:limit])


# -- the verdict ---------------------------------------------------------------------------


def as_baseline(result: ProbeResult) -> ProbeResult:
    """A run before the change, as the baseline: a derived probe's candidates that did not pass
    are dropped (not judged). It is a baseline if the probe process ran any candidate at all."""
    if result.probe.kind is not ProbeKind.DERIVED:
        return result
    candidates = tuple(msgspec.structs.replace(c, judged=c.passed) for c in result.candidates)
    ran = any(c.status != "not-run" for c in candidates)
    return msgspec.structs.replace(result, candidates=candidates, passed=ran)


def after_settings(
    settings: ProbeSettings, baseline: Sequence[ProbeResult], *, stop_at_failure: bool = True
) -> ProbeSettings:
    """The probes to run after the change: a derived one without the candidates that did not
    finish before it (a crash or the time limit would only come again). The others, dropped
    or not, run again, so that the libraries both runs load can be compared.

    ``stop_at_failure``: the run stops at the first failure of a candidate that passed before:
    the verdict is known then ("failed"), and each candidate after it would import the same
    broken dependency again (on a CUDA ML venv, 12 more imports of torch up to its missing
    library). A passing run tries them all, so its loaded libraries are complete for drift.
    """
    if not any(p.kind is ProbeKind.DERIVED for p in settings.probes):
        return settings
    probes = []
    for probe, before in zip(settings.probes, baseline, strict=True):
        if probe.kind is ProbeKind.DERIVED:
            probe = probe.only(
                {c.candidate for c in before.candidates if c.status in ("passed", "failed")}
            )
            if stop_at_failure:
                probe = probe.stopping_at({c.candidate for c in before.candidates if c.passed})
        probes.append(probe)
    return msgspec.structs.replace(settings, probes=tuple(probes))


def to_the_end(settings: ProbeSettings) -> ProbeSettings:
    """``settings`` with every derived probe trying all its candidates, whatever fails."""
    probes = tuple(p.to_the_end() for p in settings.probes)
    return msgspec.structs.replace(settings, probes=probes)


def against(before: ProbeResult, after: ProbeResult) -> ProbeResult:
    """A run after the change, judged: a derived probe passes when every candidate that passed
    before passes now; a metric probe when its median is not worse than the baseline's by
    more than its limit."""
    if after.probe.metric is not None and after.metric is not None:
        runs = judged(after.probe.metric, before.metric, after.metric)
        return msgspec.structs.replace(after, metric=runs, passed=after.passed and not runs.why)
    if after.probe.kind is not ProbeKind.DERIVED:
        return after
    passed_before = {c.candidate for c in before.candidates if c.passed}
    candidates = tuple(
        msgspec.structs.replace(c, judged=c.candidate in passed_before) for c in after.candidates
    )
    passed = all(c.passed for c in candidates if c.judged)
    return msgspec.structs.replace(after, candidates=candidates, passed=passed)


def judged_after(
    baseline: Sequence[ProbeResult], after: Sequence[ProbeResult]
) -> list[ProbeResult]:
    return [against(b, a) for b, a in zip(baseline, after, strict=True)]


def judged_apart(
    settings: ProbeSettings,
    baseline: Sequence[ProbeResult],
    run: Callable[[ProbeSettings], Sequence[ProbeResult]],
    compared: Callable[[Probe], ProbeResult] | None,
) -> list[ProbeResult]:
    """Each probe of ``settings`` run (``run``) and judged against its baseline. With
    ``compared``, a metric whose baseline passed is not among them: once they all pass, it is
    judged by ``compared`` (runs of the states before and after the change, interleaved); when
    one fails, the verdict is known, and it is run and judged as they are."""
    probes = settings.probes
    apart = {
        i
        for i, p in enumerate(probes)
        if compared is not None and p.metric is not None and baseline[i].passed
    }
    kept = [i for i in range(len(probes)) if i not in apart]
    plain = msgspec.structs.replace(settings, probes=tuple(probes[i] for i in kept))
    results: dict[int, ProbeResult] = {
        i: against(baseline[i], r) for i, r in zip(kept, run(plain), strict=True)
    }
    others_pass = all(r.passed for r in results.values())
    for index in sorted(apart):
        assert compared is not None
        if others_pass:
            results[index] = compared(probes[index])
        else:
            alone = msgspec.structs.replace(settings, probes=(probes[index],))
            (ran,) = run(alone)
            results[index] = against(baseline[index], ran)
    return [results[i] for i in range(len(probes))]


def undecided(results: Sequence[ProbeResult]) -> bool:
    """Every probe that did not pass is a metric whose runs could not tell (and there is
    one): the verdict is inconclusive, not a failure, though never a pass."""
    failing = [r for r in results if not r.passed]
    return bool(failing) and all(r.metric is not None and r.metric.inconclusive for r in failing)


def dropped_notes(results: Sequence[ProbeResult]) -> list[str]:
    """A line for each candidate a baseline dropped: which, and why."""
    return [
        f"{c.candidate.name}: {_before(c.status)} ({c.reason}); not judged"
        for r in results
        for c in r.dropped
    ]


def _before(status: str) -> str:
    if status == "failed":
        return "fails before any change"
    if status == "unfinished":
        return "did not finish before any change"
    return "not tried before any change"


# -- the verdict on any change (``run``): its candidates are known only after it -------------


def judged_change(baseline: Sequence[ProbeResult], after: ProbeResult) -> ProbeResult:
    """A derived probe run after a change that was not a removal (an install, an upgrade),
    judged against the baseline of every installed distribution's candidates taken before it:
    a candidate that failed or did not finish there is dropped; every other one counts, one
    that was not tried before too (a module the change brought must import)."""
    if after.probe.kind is not ProbeKind.DERIVED:
        return after
    failed_before = _failed_before(baseline)
    candidates = tuple(
        msgspec.structs.replace(c, judged=_same(c.candidate) not in failed_before)
        for c in after.candidates
    )
    passed = all(c.passed for c in candidates if c.judged)
    return msgspec.structs.replace(after, candidates=candidates, passed=passed)


def stopping_after_change(
    settings: ProbeSettings, baseline: Sequence[ProbeResult]
) -> ProbeSettings:
    """``settings`` (derived after a change) stopping at the first failure of a candidate that
    counts for judged_change: one that did not fail or stop before the change."""
    if not any(p.kind is ProbeKind.DERIVED for p in settings.probes):
        return settings
    failed_before = _failed_before(baseline)
    probes = tuple(
        p.stopping_at({c for c in p.candidates if _same(c) not in failed_before})
        if p.kind is ProbeKind.DERIVED
        else p
        for p in settings.probes
    )
    return msgspec.structs.replace(settings, probes=probes)


def _failed_before(
    baseline: Sequence[ProbeResult],
) -> set[tuple[CandidateKind, str, tuple[str, ...]]]:
    """What the candidates that failed or did not finish in the baseline try: they do not
    count for the verdict on a change (judged_change), so they do not stop its run."""
    return {
        _same(c.candidate)
        for run in baseline
        for c in run.candidates
        if c.status in ("failed", "unfinished")
    }


def _same(candidate: Candidate) -> tuple[CandidateKind, str, tuple[str, ...]]:
    """What a candidate tries, whatever the reason it was chosen for (``why``)."""
    return candidate.kind, candidate.target, candidate.attrs
