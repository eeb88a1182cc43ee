"""Page 1's root-cause box: the problems check found in the server logs that explain the
headline or bear on it, each with its most telling log line, and whether acceptance is
degenerate (random weights: the speedups say nothing of the client's model)."""

from __future__ import annotations

import re

from diagnostic.analyse.ksweep import DEGENERATE_ALPHA
from diagnostic.report import fmt as f
from diagnostic.report import remedied
from diagnostic.report import select as sel
from diagnostic.report.inputs import Inputs
from diagnostic.report.views.base import Evidence
from diagnostic.report.views.chapters import FindingView
from diagnostic.report.views.page_one import Cause
from diagnostic.schema.analysis import Analysis, Comparison

__all__ = ["degenerate", "root_causes", "telling_line"]

LOGS = "Server logs"  # the box's title when no finding explains the headline


def root_causes(inputs: Inputs, problems: list[FindingView]) -> tuple[list[Cause], str, str]:
    """The box: (causes, title, sentence), a log line quoted once and not again below it."""
    causes, label, note = _root_box(inputs, problems)
    causes = list({c.text: c for c in reversed(causes)}.values())[::-1]  # one of each, first kept
    quoted: set[str] = set()
    for n, cause in enumerate(causes):
        if cause.quote is not None and cause.quote.text in quoted:
            causes[n] = cause.model_copy(update={"quote": None})
        elif cause.quote is not None:
            quoted.add(cause.quote.text)
    return causes, label, note


def _root_box(inputs: Inputs, problems: list[FindingView]) -> tuple[list[Cause], str, str]:
    """The first page's root-cause box: (causes, title, sentence). A problem explains the
    headline when it is on an arm that lost (LOSS, or slower beyond the margin) and not on
    every arm that did better; one on the recommended arm bears on the headline; the rest
    are counted and left to chapter 1."""
    if inputs.check is None:
        return [], LOGS, "The server logs were not checked (no findings.json in the bundle)."
    if not problems:
        return [], LOGS, "diagnose check found no configuration problem in the server logs."
    a = inputs.analysis
    lost, better = _lost_and_better(a)
    best = {w: c for w in sel.workloads(a) if (c := sel.lead_comparison(a, w)) is not None}
    lead = sel.headline_arm(a)
    # A problem that every better arm shares cannot explain the losses; with no better arm,
    # every problem on a loser may.
    candidates = [
        p
        for p in problems
        if set(p.arm_ids) & lost.keys() and not (better and better <= set(p.arm_ids))
    ]
    denied = {id(p): w for p in candidates if (w := sel.denied(a, p.arm_ids, p.rule))}
    explains = [p for p in candidates if id(p) not in denied]
    explained = {p.rule for p in explains}  # a rule that explains on some arms is not denied
    bears = [p for p in problems if p not in candidates and lead in p.arm_ids]
    others = len(problems) - len(candidates) - len(bears)
    recommended = any(c.arm == lead and c.verdict == "WIN" for c in best.values())
    role = "the recommended arm" if recommended else "the arm the answer speaks of"
    causes = (
        [_cause(inputs, p, lost) for p in explains]
        + [
            Cause(text=f"{p.title or p.message} ({p.arms}): not what made it slower — {why}.")
            for p in candidates
            if (why := denied.get(id(p))) and p.rule not in explained
        ]
        + [Cause(text=f"On {role} ({lead}) too: {p.title or p.message} ({p.arms}).") for p in bears]
    )
    rest = f" {others} other problem(s), in chapter 1, do not bear on the answer." if others else ""
    if explains:
        return causes, "Root cause found in the server logs", "What explains the result:" + rest
    found = (
        "The problem diagnose check found in the server logs does not"
        if len(problems) == 1
        else f"None of the {len(problems)} problems diagnose check found in the server logs"
    )
    note = f"{found} explain the answer: no arm that lost has a problem the others lack."
    if bears:
        return causes, LOGS, f"{note}{rest} Bearing on {role}, though:"
    return causes, LOGS, note + " See chapter 1."


def _lost_and_better(a: Analysis) -> tuple[dict[str, Comparison], set[str]]:
    """Arms that lost on some workload (their worst comparison), and the speculative arms
    that did not lose anywhere."""
    lost: dict[str, Comparison] = {}
    spec: set[str] = set()
    floor = 1 / (1 + a.noise_band.delta)
    for w in sel.workloads(a):
        for c in sel.spec_comparisons(a, w):
            spec.add(c.arm)
            slower = c.verdict == "LOSS" or (c.verdict != "WIN" and (c.ratio or 1.0) < floor)
            if slower and (c.arm not in lost or (c.ratio or 1.0) < (lost[c.arm].ratio or 1.0)):
                lost[c.arm] = c
    return lost, spec - lost.keys()


def _cause(inputs: Inputs, p: FindingView, lost: dict[str, Comparison]) -> Cause:
    losers = [
        f"{arm} is {f.ratio(c.ratio)} of {c.baseline} on {c.workload}"
        for arm in p.arm_ids
        if (c := lost.get(arm))
    ]
    # a drafter's own problem has no telling line: what it accepts is in chapter 1
    quoted = (p.severity == "error" or losers) and p.rule not in sel.DRAFTER_RULES
    return Cause(
        text=f"{p.title or p.message} ({p.arms}): why {f.join(losers)}."
        + _measured(inputs, p, lost),
        quote=telling_line(p.evidence) if quoted else None,
    )


def _measured(inputs: Inputs, p: FindingView, lost: dict[str, Comparison]) -> str:
    """' Measured on code: …' when the plan has an arm with the fix of a finding about
    acceptance (remedied.twins), on the workload where the finding's arm lost most."""
    for twin in remedied.twins(inputs, p.rule, p.arm_ids, about_acceptance=True):
        worst = lost.get(twin.arm)
        workload = worst.workload if worst else next(iter(sel.workloads(inputs.analysis)), "")
        if workload and (text := remedied.brief(inputs.analysis, twin, workload)):
            return " " + text
    return ""


def telling_line(evidence: list[Evidence]) -> Evidence | None:
    """The WARNING line of a finding when it has one (the engine saying what it changed),
    else its first line from the log itself, else the launch command the bundle recorded."""
    return next(
        (e for e in evidence if "WARNING" in e.text),
        next((e for e in evidence if e.line), evidence[0] if evidence else None),
    )


_DUMMY_WEIGHTS = re.compile(r"--load[-_]format(?:=|\s+)['\"]?dummy\b")


def degenerate(inputs: Inputs) -> str:
    """A sentence when acceptance says nothing about the client's model: random weights
    (`--load-format dummy`) or α̂ above DEGENERATE_ALPHA; '' otherwise."""
    a, m = inputs.analysis, inputs.bundle.manifest
    launches = [x.launch or "" for x in m.plan.arms]
    launches += [r.launch.command for r in inputs.runs if r.launch is not None]
    dummy = any(_DUMMY_WEIGHTS.search(text) for text in launches)
    alphas = [
        sw.theory.alpha_hat
        for sw in (a.sweep.workloads if a.sweep else [])
        if sw.theory is not None and sw.theory.alpha_hat is not None
    ]
    high = max(alphas, default=None)
    high = high if high is not None and high > DEGENERATE_ALPHA else None
    if not dummy and high is None:
        return ""
    why = []
    if high is not None:
        why.append(f"α̂ = {f.num(high, 3)} > {DEGENERATE_ALPHA}")
    if dummy:
        why.append("--load-format dummy: random weights")
    return (
        f"Acceptance is degenerate ({'; '.join(why)}): nearly every draft is accepted, so "
        "these speedups measure the engine, not the client's model: an upper bound, not a "
        "forecast."
    )
