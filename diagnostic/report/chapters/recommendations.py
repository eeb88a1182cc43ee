"""The recommendations chapter: fix what check found, then what to serve each workload with,
the sweep's k, and how to measure what is still undecided; each with the evidence behind it."""

from __future__ import annotations

from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.budget import Day
from diagnostic.report.chapters.equivalence import divergence, divergence_cause
from diagnostic.report.inputs import Describe, name_of
from diagnostic.report.views.chapters import FindingView, Recommendation
from diagnostic.schema.analysis import WITHIN_PROCESS_LABEL, Analysis, Comparison

__all__ = ["recommendations"]


def _measured(c: Comparison) -> str:
    return (
        f"{c.arm} against {c.baseline} on {c.workload}: "
        f"{f.decided_ratio(c)}, {'no verdict' if c.withheld else c.verdict} over "
        f"{c.n_restarts_arm} and {c.n_restarts_baseline} restarts"
    )


def _profile_recs(a: Analysis, describe: Describe, problems: bool) -> list[Recommendation]:
    """What to serve each workload with; workloads with the same advice share one line. A
    loss points at the configuration problem only where check found one."""
    grouped: dict[tuple[str, str], list[Comparison]] = {}
    for w in sel.workloads(a):
        c = sel.lead_comparison(a, w)
        if c is not None:
            kind = "UNDECIDED" if c.verdict == "INCONCLUSIVE" else str(c.verdict)
            kind = "FUTILE" if f.futility(c) else kind
            grouped.setdefault((kind, c.arm), []).append(c)
    out = []
    for (kind, arm), comps in grouped.items():
        ws, name = f.join([c.workload for c in comps]), name_of(a, arm, describe)
        text = {
            "WIN": f"Serve {ws} with {name}.",
            "LOSS": f"Serve {ws} without speculation until the configuration problem is fixed."
            if problems
            else f"Serve {ws} without speculation: {name} is slower, and check found no "
            "configuration problem to fix.",
            "EQUIVALENT": f"Serve {ws} without speculation: it does not pay.",
            "UNDECIDED": f"Decide {ws} with the odds in the before-and-after chapter: {name} is "
            "not yet shown faster "
            "or slower; serving it is a bet on the estimate, not a measured win.",
            "FUTILE": f"Serve {ws} without speculation: {name} is unlikely to pay.",
            "WITHHELD": f"Decide {ws} after more restarts: {name} has too few for a verdict.",
        }[kind]
        out.append(Recommendation(text=text, evidence="; ".join(_evidence(c) for c in comps)))
    return out


def _evidence(c: Comparison) -> str:
    """What was measured, and for a futile comparison why the sweep stopped it."""
    stop = f.futility(c)
    return f"{_measured(c)}; {stop}" if stop else _measured(c)


def _sweep_recs(a: Analysis) -> list[Recommendation]:
    out = []
    named = set(sel.workloads(a))
    for sw in a.sweep.workloads if a.sweep else []:
        if sw.workload not in named or sw.concurrency != sel.low_level(a):
            continue
        if not sw.best_k or len(sw.points) < 3:
            continue
        top = max(sw.points, key=lambda p: p.k)
        best = next((p for p in sw.points if p.k == sw.best_k), None)
        if best is None or top.k <= sw.best_k or top.ratio is None or best.ratio is None:
            continue
        if top.ratio < best.ratio:
            # "cost more" is a claim about a trend: only when the intervals do not overlap
            # (a conservative test of the difference); else the data only fail to show a gain
            apart = (
                top.ci_high is not None and best.ci_low is not None and top.ci_high < best.ci_low
            )
            claim = (
                "longer drafts cost more than they gain"
                if apart
                else f"k={top.k} measured lower, but not distinguishably (the intervals "
                "overlap): longer drafts were not shown to gain"
            )
            out.append(
                Recommendation(
                    text=f"Keep k at {sw.best_k} on {sw.workload}; {claim}.",
                    evidence=f"k={top.k}: {f.ratio_ci(top.ratio, top.ci_low, top.ci_high)} against "
                    f"k={sw.best_k}: {f.ratio_ci(best.ratio, best.ci_low, best.ci_high)}",
                )
            )
    return out


def _undecided(a: Analysis) -> list[Comparison]:
    """The undecided comparisons of the workloads page 1 names, at its concurrency."""
    return [
        c
        for w in sel.workloads(a)
        for c in sel.spec_comparisons(a, w)
        if c.verdict == "INCONCLUSIVE"
    ]


def _futility_recs(a: Analysis) -> list[Recommendation]:
    """No more restarts for the comparisons the adaptive sweep stopped for futility."""
    futile = [c for c in _undecided(a) if f.futility(c)]
    if not futile:
        return []
    by_arm: dict[str, list[str]] = {}
    for c in futile:
        by_arm.setdefault(c.arm, []).append(c.workload)
    names = [f"{arm} on {f.join(ws)}" for arm, ws in by_arm.items()]
    target = futile[0].stopping.target if futile[0].stopping else None
    return [
        Recommendation(
            text=f"Plan no more restarts for {f.join(names)}: the sweep stopped them for "
            f"futility, a speedup of +{f.pct(target, 0)} (the plan's target) is unlikely.",
            evidence="; ".join(_evidence(c) for c in futile[:3]),
        )
    ]


def _repeat_recs(a: Analysis, day: Day) -> list[Recommendation]:
    """Extend the undecided comparisons a day can decide with ASSURANCE, at the cost of the
    one that needs most; name the ones it cannot, with what a day would buy. A comparison
    stopped for futility is not extended (_futility_recs)."""
    pending = [c for c in _undecided(a) if c.outlook and not f.futility(c)]
    arms = list(dict.fromkeys(c.arm for c in pending))
    # Extending them all restarts every arm named and the baseline, alike.
    fit = day.restarts(len(arms) + 1)

    def added(c: Comparison) -> int | None:
        need = c.more_restarts_needed
        return None if need is None else need - min(c.n_restarts_arm, c.n_restarts_baseline)

    doable = [c for c in pending if (n := added(c)) is not None and (fit is None or n <= fit)]
    beyond = [c for c in pending if c not in doable]
    out = []
    if doable:
        hardest = max(doable, key=lambda c: added(c) or 0)
        names = list(dict.fromkeys(c.arm for c in doable))
        out.append(
            Recommendation(
                text=f"Extend the undecided comparisons of {f.join(names)} together; the one "
                f"that needs most, {hardest.arm} on {hardest.workload}: "
                f"{day.extension(hardest, len(names) + 1)}.",
                evidence="; ".join(_measured(c) for c in doable[:3]),
            )
        )
    if beyond:
        names = list(dict.fromkeys(f"{c.arm} on {c.workload}" for c in beyond))
        first = beyond[0]
        text = day.extension(first, len(arms) + 1)
        out.append(
            Recommendation(
                text=f"Plan no more restarts for {f.join(names)} on this visit"
                + (f"; {first.arm} on {first.workload}: {text}." if text else "."),
                evidence="; ".join(_measured(c) for c in beyond[:3]),
            )
        )
    return out


def _measurement_recs(a: Analysis, day: Day) -> list[Recommendation]:
    out = _futility_recs(a) + _repeat_recs(a, day)
    if any(c.within_process_only for c in a.comparisons):
        out.append(
            Recommendation(
                text="Measure again with at least 3 server restarts per arm (5 recommended).",
                evidence=f"intervals are {WITHIN_PROCESS_LABEL}",
            )
        )
    if a.noise_band.aa_check is None:
        out.append(
            Recommendation(
                text="Add an A/A arm (the baseline configuration twice, with restarts) so the "
                "design is checked and the restart noise measured.",
                evidence="no A/A comparison with restarts on both sides in this bundle",
            )
        )
    elif not a.noise_band.aa_check:
        out.append(
            Recommendation(
                text="Find the drift or order effect the A/A check shows before acting on "
                "any verdict (thermal state, other load, a schedule that is not interleaved).",
                evidence="A/A "
                + "; ".join(sel.aa_text(c) for c in sel.aa_failures(a))
                + " excludes 1",
            )
        )
    out += _equivalence_recs(a)
    return out


def _equivalence_recs(a: Analysis) -> list[Recommendation]:
    """One recommendation for every arm whose greedy output differs: find the bug when the
    first difference is early, else know it for numerics (equivalence.divergence_cause)."""
    d = divergence(a)
    arms = d.arms
    if not arms:
        return []
    differ = [eq for eq in a.equivalence if eq.arm in arms]
    shares = [f"{eq.arm} {eq.n_prompts - eq.n_identical} of {eq.n_prompts}" for eq in differ]
    evidence = f"prompts whose output differs from the baseline's: {'; '.join(shares)}. "
    evidence += divergence_cause(a)
    if d.suspect:
        text = (
            f"Find out why {f.join(arms)} change greedy output within the first few tokens: "
            "speculation must be lossless at temperature 0."
        )
    else:
        text = (
            f"Read the greedy differences of {f.join(arms)} as {d.numerics}, not a bug; judge "
            "output quality on the client's own prompts if exact text matters."
        )
    return [Recommendation(text=text, evidence=evidence)]


def _checked(a: Analysis, p: FindingView) -> str:
    """A finding's advice, with what the measured arms say against it when they deny that it
    explains the loss (an arm without the problem lost as much)."""
    why = sel.denied(a, p.arm_ids, p.rule)
    if not why:
        return p.advice
    return f"{p.advice.rstrip('.')} — though it may not help: {why}."


def recommendations(
    a: Analysis, problems: list[FindingView], describe: Describe, day: Day
) -> list[Recommendation]:
    """Numbered recommendations: fix what check found (first what the measured arms do not
    deny), then serving profiles, then method."""
    ordered = sorted(problems, key=lambda p: bool(sel.denied(a, p.arm_ids, p.rule)))
    recs = [
        Recommendation(
            text=_checked(a, p),
            evidence=f"{p.message} ({p.rule})",
        )
        for p in ordered
    ]
    recs += _profile_recs(a, describe, bool(problems)) + _sweep_recs(a) + _measurement_recs(a, day)
    unique = list({r.text: r for r in recs}.values())
    return unique or [
        Recommendation(
            text="No change is needed.", evidence="no finding and no comparison to act on"
        )
    ]
