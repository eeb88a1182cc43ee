"""The verdicts in sentences, which open chapter 2 (before and after): the headline, one line
per workload with what an undecided one's odds are, and every setting measured slower."""

from __future__ import annotations

import re

from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.budget import Day
from diagnostic.report.inputs import Describe, name_of
from diagnostic.report.views.page_one import VerdictLine
from diagnostic.schema.analysis import WITHIN_PROCESS_LABEL, Analysis, Comparison

__all__ = ["headline", "losses", "verdict_line"]

_EACH = re.compile(r" \(each [\d.]+%\)")  # a family interval's own level, beside the family's


def _band(a: Analysis) -> str:
    return f"±{f.pct(a.noise_band.delta)}"


def _phrase(c: Comparison, workload: str, a: Analysis, *, labelled: bool = True) -> str:
    """'1.23× faster on code [95% CI 1.15–1.31]', 'no faster on prose', …; unlabelled, the
    interval stands bare ('[1.15–1.31]') for a sentence that states its level once."""
    interval = f.decided_ci(c, a.noise_band.delta)
    value = f.decided_ratio(c, a.noise_band.delta)
    if not labelled and interval:
        interval = f"[{f.span(c.ci_low, c.ci_high, 'ratio', a.noise_band.delta)}]"
        value = f"{f.ratio(c.ratio)} {interval}"
    if c.withheld:
        return f"not decided on {workload} ({f.ratio(c.ratio)}; {c.label or 'no verdict'})"
    if c.verdict == "WIN":
        return f"{f.ratio(c.ratio)} faster on {workload} {interval}".strip()
    if c.verdict == "LOSS":
        return f"slower on {workload} ({value})"
    if c.verdict == "EQUIVALENT":
        return f"no faster on {workload} ({value}, inside the {_band(a)} margin)"
    return f"undecided on {workload} ({value}, leans {c.lean or 'neither way'})"


def headline(a: Analysis, describe: Describe) -> str:
    """One sentence: the recommended setting's verdict on every workload, e.g. 'Speculation
    with n-gram at k=3 is 1.23× faster on code [95% CI 1.15–1.31] and no faster on prose.'"""
    arm_id, level = sel.headline_arm(a), sel.low_level(a)
    if arm_id is None:
        return "No speculative configuration was compared with the baseline in this bundle."
    best = {w: c for w in sel.workloads(a) if (c := sel.lead_comparison(a, w)) is not None}
    name = name_of(a, arm_id, describe)
    own_items: list[tuple[str, Comparison, str]] = []
    other_items: list[tuple[str, Comparison, str]] = []
    for w, rec in best.items():
        own = sel.comparison(a, arm_id, w, level)
        if rec.arm != arm_id and rec.verdict == "WIN":
            other_items.append((f"with {name_of(a, rec.arm, describe)} it is ", rec, w))
        elif own is not None:
            own_items.append(("", own, w))
    # One level for every interval: said once at the end, not in every clause (the verdict
    # lines below label each their own).
    labels = {_EACH.sub("", c.ci_label or "") for _, c, _ in own_items + other_items}
    once = next(iter(labels)) if len(labels) == 1 else None

    def say(items: list[tuple[str, Comparison, str]]) -> list[str]:
        return [p + _phrase(c, w, a, labelled=not once) for p, c, w in items]

    phrases, others = say(own_items), say(other_items)
    clauses = [f"Speculation with {name} is {f.join(phrases)}"] if phrases else []
    text = "; ".join(clauses + others)
    return text[0].upper() + text[1:] + (f" ({once})" if once else "") + "."


def verdict_line(a: Analysis, workload: str, describe: Describe, day: Day) -> VerdictLine:
    """The setting page 1 speaks of on one workload against no speculation: its ratio, the
    interval that decided it and the restarts behind it; for an undecided one, its odds."""
    c = sel.lead_comparison(a, workload)
    if c is None:
        return VerdictLine(
            workload=workload,
            verdict="NONE",
            sentence=f"On {workload}, no speculative configuration was measured.",
        )
    name = name_of(a, c.arm, describe)
    restarts = (
        f"{c.n_restarts_arm} restart{'s' if c.n_restarts_arm != 1 else ''} per arm"
        if c.n_restarts_arm == c.n_restarts_baseline
        else f"{c.n_restarts_arm} vs {c.n_restarts_baseline} restarts"
    )
    several = len(sel.spec_comparisons(a, workload)) > 1
    # "the best" only over the configurations shown below it: one whose simultaneous
    # interval reaches the best one's lower end is not distinguishable from it (a tie)
    ties = [
        name_of(a, x.arm, describe)
        for x in sel.spec_comparisons(a, workload)
        if c.verdict == "WIN" and x is not c and not x.withheld and _reaches(x, c)
    ]
    tied = (
        f" (not distinguishable from {f.join(ties)}: their intervals reach its lower end)"
        if ties
        else ""
    )
    lead = (
        f"On {workload}, the best of {len(sel.spec_comparisons(a, workload))} configurations, "
        f"{name}{tied},"
        if several
        else f"On {workload}, {name}"
    )
    off = "no speculation" if c.baseline == a.baseline else f"{c.baseline} (no speculation)"
    body = {
        "WIN": f"is {f.ratio(c.ratio)} as fast as {off}",
        "LOSS": f"is slower than {off}: {f.ratio(c.ratio)} its throughput",
        "EQUIVALENT": f"is no faster than {off} ({f.ratio(c.ratio)})",
        "WITHHELD": f"is not yet decided against {off} ({f.ratio(c.ratio)})",
        "INCONCLUSIVE": f"is not yet decided against {off} ({f.ratio(c.ratio)}, "
        f"leans {c.lean or 'neither way'})",
    }[c.verdict]
    # A withheld interval (two restarts: df 1) spans orders of magnitude: its label says why.
    interval = "" if c.withheld else f.decided_ci(c, a.noise_band.delta)
    tail = f"{'no verdict' if c.withheld else c.verdict}, {restarts}"
    if stop := f.futility(c):
        tail += f"; {stop}"
    if c.sensitivity:  # the verdict rests on pooling the A/A repeat: said where printed
        tail += f"; only with the A/A repeat pooled into the reference: {c.sensitivity}"
    if c.withheld:
        tail += f"; {c.label or WITHIN_PROCESS_LABEL}; {day.extension(c)}"
    sentence = f"{lead} {body} {interval} ({tail}).".replace("  ", " ")
    if c.verdict == "INCONCLUSIVE" and not c.withheld and not stop:
        sentence += " " + _undecided(a, c, day)
    return VerdictLine(workload=workload, verdict=c.verdict, sentence=sentence)


def _undecided(a: Analysis, c: Comparison, day: Day) -> str:
    """An undecided lead: how likely it is faster than the margin, what its estimate and own
    95% interval are, what either choice risks, and what a planned extension would buy."""
    o = c.outlook
    if o is None:
        return ""
    edge = f.ratio(1 + a.noise_band.delta)
    gain = f"{(c.ratio or 1.0) - 1:+.0%}"  # e.g. +11%, -6%
    own = f.span(o.low95, o.high95, "ratio", a.noise_band.delta)
    more = day.extension(c)
    risk = (
        f"serving it now could cost up to {1 - o.low95:.0%} of today's throughput (its 95% "
        f"lower bound, {f.ratio_end(o.low95, a.noise_band.delta)}×)"
        if o.low95 < 1
        else f"serving it now risks no loss within its 95% interval (lower bound "
        f"{f.ratio_end(o.low95, a.noise_band.delta)}×)"
    )
    ratio = c.ratio or 1.0
    forgo = (
        f"not serving it forgoes the estimated {gain}"
        if ratio > 1
        else f"not serving it avoids the estimated {gain}"
        if ratio < 1
        else "not serving it changes nothing on the estimate"
    )
    return (
        f"Odds from its confidence distribution (not a verdict): faster than {edge} with "
        f"probability {o.p_faster:.0%}, slower than {f.ratio(1 / (1 + a.noise_band.delta))} "
        f"with {o.p_slower:.0%}; estimated gain {gain}, 95% of that distribution between "
        f"{own.replace('–', ' and ')}: {risk}; {forgo}."
        + (f" Deciding it: {more}." if more else "")
    )


def losses(a: Analysis, describe: Describe) -> list[str]:
    """Every speculative setting measured slower than its baseline, in one line: the level
    of the intervals said once when they share it, then each setting with the workloads it
    lost on ('n-gram at k=2: code 0.81× [0.72–0.92]; …')."""
    lost: dict[str, list[tuple[str, Comparison]]] = {}
    for w in sel.workloads(a):
        for c in sel.spec_comparisons(a, w):
            if c.verdict == "LOSS":
                lost.setdefault(c.arm, []).append((w, c))
    if not lost:
        return []
    # The family's level once (each interval's own level, as the headline does, left out).
    labels = {_EACH.sub("", c.ci_label or "") for pairs in lost.values() for _, c in pairs}
    once = next(iter(labels)) if len(labels) == 1 and "" not in labels else None

    def measured(w: str, c: Comparison) -> str:
        if once:
            span = f.span(c.ci_low, c.ci_high, "ratio", a.noise_band.delta)
            return f"{w} {f.ratio(c.ratio)} [{span}]"
        return f"{w} {f.decided_ratio(c, a.noise_band.delta)}"

    settings = [
        f"{name_of(a, arm, describe)}: {', '.join(measured(w, c) for w, c in pairs)}"
        for arm, pairs in lost.items()
    ]
    level = f" ({once})" if once else ""
    return [f"Slower than no speculation, a LOSS{level}: {'; '.join(settings)}."]


def _reaches(x: Comparison, best: Comparison) -> bool:
    """x's deciding interval reaches up to the best one's lower end: not shown below it."""
    if x.ci_high is None or best.ci_low is None:
        return False
    return x.ci_high >= best.ci_low
