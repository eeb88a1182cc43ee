"""The first page: cover facts and the executive summary (verdicts, root cause, profiles)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePosixPath

from diagnostic.analyse.ksweep import DEGENERATE_ALPHA
from diagnostic.report import advice, charts, launch
from diagnostic.report import capture as cap
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.budget import Day
from diagnostic.report.caveats import caveats, design_warning
from diagnostic.report.design import futility
from diagnostic.report.inputs import Inputs, served_method
from diagnostic.report.unmeasured import unmeasured
from diagnostic.report.view import (
    Cause,
    Chart,
    Cover,
    Evidence,
    FindingView,
    Profile,
    Summary,
    VerdictLine,
)
from diagnostic.schema.analysis import WITHIN_PROCESS_LABEL, Analysis, ArmResult, Comparison

__all__ = [
    "DEFAULT_TITLE",
    "cover",
    "degenerate",
    "headline",
    "missing",
    "summary",
    "telling_line",
    "verdict_phrase",
]

DEFAULT_TITLE = "Speculative decoding performance review"
LOGS = "Server logs"  # the root-cause box's title when no finding explains the headline
Describe = Callable[[ArmResult], str]


# -- cover ------------------------------------------------------------------------------
def cover(inputs: Inputs) -> Cover:
    """Cover facts; what the bundle did not record is None (left off the page)."""
    m, a, people = inputs.bundle.manifest, inputs.analysis, inputs.people
    hardware = advice.hardware(inputs.runs)
    return Cover(
        title=inputs.title or a.title or DEFAULT_TITLE,
        client=people.client or a.client,
        site=people.site,
        date=f.date(m.created_at),
        consultant=people.consultant,
        engine=_engines(inputs) or None,
        model=_short(_model(inputs)),
        drafter=_drafters(inputs) or None,
        hardware=None if hardware == f.MISSING else hardware,
    )


def _short(path: str | None) -> str | None:
    """A model or drafter named by its name on page 1, never by a folder of the recording
    machine ('/root/g3/a/mla' is 'mla'; the appendix's launch commands give the path)."""
    if not path or not path.startswith(("/", "~", "./")):
        return path
    return PurePosixPath(path).name or path


def _model(inputs: Inputs) -> str | None:
    """The model path the engine reported, else the id the server answered with (an alias
    such as llama.cpp's -a), else the plan's; None when nothing was recorded."""
    runs = inputs.runs
    values = [*(launch.recorded_model(r) for r in runs), *(r.model for r in runs)]
    return next((v for v in [*values, inputs.bundle.manifest.target.model] if v), None)


def _engines(inputs: Inputs) -> str:
    seen = dict.fromkeys(
        f"{r.engine.name} {r.engine.version}" if r.engine.version else r.engine.name
        for r in inputs.runs
        if r.engine.name != "unknown"
    )
    return ", ".join(seen) or ", ".join(inputs.analysis.engines)


def _drafters(inputs: Inputs) -> str:
    """Speculation methods seen in the logs (with the drafter), else in the plan's params."""
    found: dict[str, None] = {}
    for facts in inputs.log_facts:
        if facts.spec.enabled:
            method = facts.spec.method or served_method(inputs.run_of(facts))
            name = f.method_name(method) if method else "on (method not recorded)"
            drafter = facts.spec.drafter
            if drafter:
                drafter = _short(launch.expand(drafter, launch.launch_values(inputs.run_of(facts))))
            found[f"{name} (drafter {drafter})" if drafter else name] = None
    for arm in inputs.analysis.arms:
        if arm.speculative and not found and arm.params.get("method"):
            found[f.method_name(str(arm.params["method"]))] = None
    return ", ".join(found)


# -- summary ----------------------------------------------------------------------------
_EACH = re.compile(r" \(each [\d.]+%\)")  # a family interval's own level, beside the family's


def _band(a: Analysis) -> str:
    return f"±{f.pct(a.noise_band.delta)}"


def verdict_phrase(c: Comparison, workload: str, a: Analysis, *, labelled: bool = True) -> str:
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


def _headline_arm(a: Analysis, best: dict[str, Comparison]) -> str:
    """The arm the headline speaks of: the first workload's recommended WIN, else among the
    workloads' leads (the arms the verdict lines speak of) the one with the most wins and
    then the highest mean ratio."""
    wins = [c.arm for c in best.values() if c.verdict == "WIN"]
    if wins:
        return wins[0]
    leads = {c.arm for c in best.values()}
    per_arm: dict[str, list[Comparison]] = {}
    for w in sel.workloads(a):
        for c in sel.spec_comparisons(a, w):
            if c.arm in leads:
                per_arm.setdefault(c.arm, []).append(c)

    def score(arm: str) -> tuple[int, float]:
        comps = per_arm[arm]
        return sum(c.verdict == "WIN" for c in comps), sum(c.ratio or 0.0 for c in comps)

    return max(per_arm, key=lambda arm: (score(arm)[0], score(arm)[1] / len(per_arm[arm])))


def headline_arm(a: Analysis) -> str | None:
    """The arm the headline speaks of; None when nothing was compared."""
    best = {w: c for w in sel.workloads(a) if (c := sel.lead_comparison(a, w)) is not None}
    return _headline_arm(a, best) if best else None


def headline(a: Analysis, describe: Describe) -> str:
    """One sentence: the recommended setting's verdict on every workload, e.g. 'Speculation
    with n-gram at k=3 is 1.23× faster on code [95% CI 1.15–1.31] and no faster on prose.'"""
    best = {w: c for w in sel.workloads(a) if (c := sel.lead_comparison(a, w)) is not None}
    if not best:
        return "No speculative configuration was compared with the baseline in this bundle."
    arm_id, level = _headline_arm(a, best), sel.low_level(a)
    name = _name(a, arm_id, describe)
    own_items: list[tuple[str, Comparison, str]] = []
    other_items: list[tuple[str, Comparison, str]] = []
    for w, rec in best.items():
        own = sel.comparison(a, arm_id, w, level)
        if rec.arm != arm_id and rec.verdict == "WIN":
            other_items.append((f"with {_name(a, rec.arm, describe)} it is ", rec, w))
        elif own is not None:
            own_items.append(("", own, w))
    # One level for every interval: said once at the end, not in every clause (the verdict
    # lines below label each their own).
    labels = {_EACH.sub("", c.ci_label or "") for _, c, _ in own_items + other_items}
    once = next(iter(labels)) if len(labels) == 1 else None

    def say(items: list[tuple[str, Comparison, str]]) -> list[str]:
        return [p + verdict_phrase(c, w, a, labelled=not once) for p, c, w in items]

    phrases, others = say(own_items), say(other_items)
    clauses = [f"Speculation with {name} is {f.join(phrases)}"] if phrases else []
    text = "; ".join(clauses + others)
    return text[0].upper() + text[1:] + (f" ({once})" if once else "") + "."


def _name(a: Analysis, arm_id: str, describe: Describe) -> str:
    arm = sel.arm_by_id(a, arm_id)
    return describe(arm) if arm else arm_id


def _verdict_line(a: Analysis, workload: str, describe: Describe, day: Day) -> VerdictLine:
    c = sel.lead_comparison(a, workload)
    if c is None:
        return VerdictLine(
            workload=workload,
            verdict="NONE",
            sentence=f"On {workload}, no speculative configuration was measured.",
        )
    arm = sel.arm_by_id(a, c.arm)
    name = describe(arm) if arm else c.arm
    restarts = (
        f"{c.n_restarts_arm} restart{'s' if c.n_restarts_arm != 1 else ''} per arm"
        if c.n_restarts_arm == c.n_restarts_baseline
        else f"{c.n_restarts_arm} vs {c.n_restarts_baseline} restarts"
    )
    several = len(sel.spec_comparisons(a, workload)) > 1
    lead = (
        f"On {workload}, the best of {len(sel.spec_comparisons(a, workload))} configurations, "
        f"{name},"
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
    if stop := futility(c):
        tail += f"; {stop}"
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


def _profile(a: Analysis, workload: str, describe: Describe) -> Profile:
    """What to serve a workload with, and the measurement behind it in a few words (the
    verdict lines above give the interval's level)."""
    c = sel.lead_comparison(a, workload)
    if c is None:
        return Profile(workload=workload, profile="no speculation", reason=f.MISSING)
    arm = sel.arm_by_id(a, c.arm)
    name = describe(arm) if arm else c.arm
    # No interval: the answer above gives this comparison's range (one range per comparison).
    measured = f"{f.ratio(c.ratio)} of no speculation, {'no verdict' if c.withheld else c.verdict}"
    if c.verdict == "WIN":
        return Profile(workload=workload, profile=name, reason=measured)
    if c.withheld:  # too few restarts to decide: not a reason to give the gain up
        return Profile(
            workload=workload,
            profile=f"undecided: {name} has no verdict yet",
            reason=f"{name}: {measured}",
        )
    if c.verdict == "INCONCLUSIVE" and not c.withheld and not futility(c) and c.outlook:
        return Profile(
            workload=workload,
            profile=f"undecided: {name} is faster with probability {c.outlook.p_faster:.0%}",
            reason=f"{name}: {measured}",
        )
    return Profile(workload=workload, profile="no speculation", reason=f"{name}: {measured}")


def _summary_chart(a: Analysis) -> Chart | None:
    level, bars = sel.low_level(a), list[charts.Bar]()
    for w in sel.workloads(a):
        c = sel.lead_comparison(a, w)
        base = c.baseline if c else a.baseline  # the matched baseline the ratio is against
        for arm_id, is_base in ((base, True), (c.arm if c else None, False)):
            arm = sel.arm_by_id(a, arm_id) if arm_id else None
            aw = sel.arm_workload(arm, w, level) if arm else None
            est = aw.decode_tps.estimate if aw is not None else None
            if aw is None or est is None:
                continue
            e = aw.decode_tps
            label = "no speculation" if is_base else "best speculative setting"
            bars.append(charts.Bar(w, label, est, e.ci_low, e.ci_high, is_base))
    if not bars:
        return None
    cut = charts.bar_axis(bars).cuts([b.low for b in bars], [b.high for b in bars])
    return Chart(
        title=f"Decode tok/s, 95% CI across restarts{f'; {charts.CUT}' if cut else ''}.",
        # Shorter than chapter 2's: page 1 must hold the whole executive summary.
        uri=charts.data_uri(charts.before_after_chart(bars, legend_on_top=True, height_in=1.0)),
        alt="Bar chart of decode tokens per second, baseline against best speculative arm.",
    )


def summary(inputs: Inputs, actions: list[str], shown: int = 2) -> Summary:
    """Executive summary: headline, verdict per workload, root cause, profiles, caveats and
    the first `shown` recommendations (`actions`)."""
    a, describe = inputs.analysis, inputs.describe
    causes, label, note = _root_box(inputs, cap.problems(inputs))
    quoted: set[str] = set()
    for n, cause in enumerate(causes):  # a line quoted once is not quoted again below it
        if cause.quote is not None and cause.quote.text in quoted:
            causes[n] = cause.model_copy(update={"quote": None})
        elif cause.quote is not None:
            quoted.add(cause.quote.text)
    alarm = unmeasured(inputs)  # then what the bundle lacks is beside the point
    return Summary(
        headline=headline(a, describe),
        verdicts=[_verdict_line(a, w, describe, inputs.day) for w in sel.workloads(a)],
        losses=_losses(a, describe),
        missing="" if alarm else missing(a),
        unmeasured=alarm,
        root_causes=causes,
        root_cause_label=label,
        root_cause_note=note,
        degenerate=degenerate(inputs),
        profiles=[_profile(a, w, describe) for w in sel.workloads(a)],
        chart=_summary_chart(a),
        warning=design_warning(inputs),
        caveats=caveats(inputs),
        actions=actions[:shown],
        more_actions=max(0, len(actions) - shown),
    )


def missing(a: Analysis) -> str:
    """What the bundle lacks to say whether speculation pays at all: '' when it has it."""
    if len(a.arms) < 2:
        only = a.arms[0].id if a.arms else "none"
        return (
            f"This bundle holds one arm ({only}) and nothing to compare it with, so it cannot "
            "say whether speculation pays. Measure a speculative arm into the same bundle "
            "(diagnose collect URL -o BUNDLE --arm ngram-k3 against the server restarted "
            "with speculation on), or let diagnose sweep run both."
        )
    if not any(c.kind == "spec" for c in a.comparisons):
        noise = (
            " Its A/A repeat measures the restart noise a speculative arm's verdict will meet "
            "(below: what a day decides at that noise)."
            if any(x.aa_of for x in a.arms)
            else ""
        )
        return (
            f"No arm of this bundle runs speculation ({f.join([x.id for x in a.arms])}): it "
            "compares server configurations but cannot say whether speculation pays. Add a "
            f"speculative arm (the baseline's launch with the speculation flags added).{noise}"
        )
    return ""


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


def _losses(a: Analysis, describe: Describe) -> list[str]:
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
        f"{_name(a, arm, describe)}: {', '.join(measured(w, c) for w, c in pairs)}"
        for arm, pairs in lost.items()
    ]
    level = f" ({once})" if once else ""
    return [f"Slower than no speculation, a LOSS{level}: {'; '.join(settings)}."]


def _root_box(inputs: Inputs, problems: list[FindingView]) -> tuple[list[Cause], str, str]:
    """The first page's root-cause box: (causes, title, sentence). A problem explains the
    headline when it is on an arm that lost (LOSS, or slower beyond the margin) and not on
    every arm that did better; one on the recommended arm bears on the headline; the rest
    are counted and left to chapter 1."""
    if inputs.check is None:
        return (
            [],
            "Server logs",
            "The server logs were not checked (no findings.json in the bundle).",
        )
    if not problems:
        return (
            [],
            "Server logs",
            "diagnose check found no configuration problem in the server logs.",
        )
    a = inputs.analysis
    lost, better = _lost_and_better(a)
    best = {w: c for w in sel.workloads(a) if (c := sel.lead_comparison(a, w)) is not None}
    lead = _headline_arm(a, best) if best else None
    # A problem that every better arm shares cannot explain the losses; with no better arm,
    # every problem on a loser may.
    candidates = [
        p
        for p in problems
        if set(p.arm_ids) & lost.keys() and not (better and better <= set(p.arm_ids))
    ]
    denied = {id(p): w for p in candidates if (w := sel.denied(a, p.arm_ids))}
    explains = [p for p in candidates if id(p) not in denied]
    bears = [p for p in problems if p not in candidates and lead in p.arm_ids]
    others = len(problems) - len(candidates) - len(bears)
    recommended = any(c.arm == lead and c.verdict == "WIN" for c in best.values())
    role = "the recommended arm" if recommended else "the arm the headline speaks of"
    causes = (
        [_cause(p, lost) for p in explains]
        + [
            Cause(text=f"{p.title or p.message} ({p.arms}): {denied[id(p)]}")
            for p in candidates
            if id(p) in denied
        ]
        + [Cause(text=f"On {role} ({lead}) too: {p.title or p.message} ({p.arms}).") for p in bears]
    )
    rest = (
        f" {others} other problem(s), in chapter 1, do not bear on the headline." if others else ""
    )
    if explains:
        return causes, "Root cause found in the server logs", "What explains the result:" + rest
    found = (
        "The problem diagnose check found in the server logs does not"
        if len(problems) == 1
        else f"None of the {len(problems)} problems diagnose check found in the server logs"
    )
    note = f"{found} explain the headline: no arm that lost has a problem the others lack."
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


def _cause(p: FindingView, lost: dict[str, Comparison]) -> Cause:
    losers = [
        f"{arm} is {f.ratio(c.ratio)} of {c.baseline} on {c.workload}"
        for arm in p.arm_ids
        if (c := lost.get(arm))
    ]
    return Cause(
        text=f"{p.title or p.message} ({p.arms}): why {f.join(losers)}.",
        quote=telling_line(p.evidence) if p.severity == "error" or losers else None,
    )


def telling_line(evidence: list[Evidence]) -> Evidence | None:
    """The WARNING line of a finding when it has one (the engine saying what it changed),
    else its first line from the log itself, else the launch command the bundle recorded."""
    return next(
        (e for e in evidence if "WARNING" in e.text),
        next((e for e in evidence if e.line), evidence[0] if evidence else None),
    )
