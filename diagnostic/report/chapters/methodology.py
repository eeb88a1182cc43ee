"""The methodology chapter: definitions, the statistical method in words, the margin and the A/A
check, multiplicity, what was measured (the plan, the design that ran and what it cost) and
the limitations."""

from __future__ import annotations

import re

from diagnostic.common.progress import duration
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.budget import Day
from diagnostic.report.chapters.covariate import covariate_rows, covariate_section
from diagnostic.report.views.base import KeyValue
from diagnostic.report.views.chapters import Methodology
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.bundle import Manifest, PlanSpec, TimePlan

__all__ = ["COST_ROW", "design_rows", "methodology"]

DEFINITIONS = [
    (
        "Decode throughput (tok/s)",
        "Output tokens after the first chunk divided by the time from the first to the last "
        "chunk of one streamed request. Tokens come from the API's usage, never from counting "
        "chunks: under speculation one chunk carries several tokens.",
    ),
    ("TTFT", "Time from sending a request to the first chunk that carries output."),
    (
        "Tokens per chunk",
        "Output tokens divided by streamed chunks; above 1 when the server "
        "emits several accepted tokens per verify step.",
    ),
    (
        "Acceptance length",
        "Mean tokens produced per verify step of the target model (accepted "
        "draft tokens plus the bonus token), from the engine's speculation counters.",
    ),
    (
        "Arm, restart",
        "An arm is one server configuration; a restart is one server process of "
        "that arm. Requests inside one process share its state and are not independent.",
    ),
    (
        "A/A arm",
        "The baseline configuration run as a second arm: a check of the design. Its ratio "
        "to the baseline must contain 1; its width is the restart noise measured. The "
        "margin δ comes from the plan, not from it.",
    ),
    (
        "Speedup",
        "Ratio of geometric means of restart mean decode throughput, arm over "
        "baseline, on the same workload and concurrency.",
    ),
]

WHY_RESTARTS = (
    "Restart-to-restart differences in LLM serving (graph capture, allocator state, clocks) "
    "are often larger than the effect of speculation. Treating requests of one process as "
    "independent replicates makes noise look significant, so every interval here is formed "
    "across server restarts, with the restart as the unit of replication."
)


# The sweep's sizing of requests names the costs it used; the report states the measured
# costs once (COST_ROW) and refers to them, so no second figure for a start reads otherwise.
COST_ROW = "Cost of a restart (measured)"
SEE_COSTS = "the measured costs: Cost of a restart, above"
_COSTS = re.compile(r"; a start costs [\d.]+ s against [\d.]+ s per request, costs ([^;]*)")


def methodology(a: Analysis, manifest: Manifest, day: Day) -> Methodology:
    """Definitions, the statistical method in words, δ, multiplicity, plan and limitations."""
    m = a.methods
    stats = [
        KeyValue(key="Why restarts are the unit", value=WHY_RESTARTS),
        KeyValue(key="Per request", value=m.decode_tps),
        KeyValue(key="Per restart", value=m.restart_summary),
        KeyValue(key="One arm across restarts", value=m.arm_interval),
        KeyValue(key="Speedup interval", value=m.ratio_interval),
        KeyValue(key="Verdict", value=m.verdict),
        KeyValue(key="Acceptance", value=m.acceptance),
    ]
    nb = a.noise_band
    band = (
        f"Margin δ = {f.pct(nb.delta)}, {nb.source}: a practical threshold set before "
        "measuring, not estimated from the data. WIN when the lower end of the deciding "
        "speedup interval exceeds 1+δ, LOSS when the upper end is below 1/(1+δ), EQUIVALENT "
        "when the interval lies inside [1/(1+δ), 1+δ], otherwise INCONCLUSIVE. " + _aa_sentence(a)
    )
    return Methodology(
        definitions=[KeyValue(key=k, value=v) for k, v in DEFINITIONS],
        statistics=stats,
        noise_band=band,
        multiplicity=m.multiplicity,
        covariate=covariate_section(a),
        covariate_rows=covariate_rows(a),
        plan=_plan(manifest, a, day),
        limitations=_limitations(a, manifest),
    )


def _aa_sentence(a: Analysis) -> str:
    nb = a.noise_band
    if nb.aa_check is None:
        return "No A/A comparison with restarts on both sides checks the design."
    interval = f.ci(nb.aa_ci_low, nb.aa_ci_high, fmt="ratio")
    widest = f"The widest A/A interval ({nb.aa_source}) {interval} is the restart noise"
    if nb.aa_check:
        return f"{widest}; every A/A interval contains 1, as it must."
    failed = "; ".join(sel.aa_text(c) for c in sel.aa_failures(a))
    return f"{widest}; the design check failed: {failed} excludes 1."


def _plan(manifest: Manifest, a: Analysis, day: Day) -> list[KeyValue]:
    """What was measured: the requests per restart and the cost of a restart are the ones
    budget.costs measured in the bundle (not the plan's: an adaptive sweep resizes them)."""
    p = manifest.plan
    measured = day.costs
    requests = measured.requests_text() if measured and measured.requests else None
    rows = [
        ("Arms", ", ".join(x.name for x in p.arms) or ", ".join(x.id for x in a.arms)),
        ("Workloads", ", ".join(p.workloads) or ", ".join(a.workloads)),
        ("Requests per restart and workload", requests or f"{p.requests} planned"),
        (COST_ROW, measured.cost_text() if measured else None),
        ("Restarts per arm (planned)", str(p.restarts)),
        ("Output length", f"{a.max_tokens} tokens, forced on every request"),
        ("Concurrency", ", ".join(str(c) for c in p.concurrency)),
        ("Schedule", p.order),
        ("API", p.api),
        ("Seed", str(p.seed)),
    ]
    if decides := day.decides(a, p):  # page 1 says it only for a noise study
        rows.append(("What a day decides at this noise", decides))
    return [KeyValue(key=k, value=f.text(v)) for k, v in rows] + design_rows(manifest, a)


def _limitations(a: Analysis, manifest: Manifest) -> list[str]:
    out = list(a.notes)  # within-process intervals and an assumed δ are noted there
    if manifest.plan.order == "manual":
        out.append(
            "Restarts were not scheduled in interleaved blocks, so slow drift of the "
            "machine (thermal, background load) is not separated from the arms."
        )
    out.append(
        "Throughput is measured with the prompts and output length of this bundle; "
        "other prompt mixes, longer outputs or higher concurrency can behave differently."
    )
    out.append("Output quality is compared only as exact greedy equality, not graded.")
    return out


# -- the design that ran -----------------------------------------------------------------------
def design_rows(manifest: Manifest, a: Analysis) -> list[KeyValue]:
    """Rows of the methodology's 'What was measured' table on the design and its cost."""
    p, t = manifest.plan, manifest.time_plan
    if p.design.kind == "adaptive":
        design = _adaptive(p)
    else:
        design = f"fixed: every planned restart ({p.restarts} per arm), decided once"
    rows = [("Design", design), ("Restarts per arm (run)", _restarts(a, t))]
    if t is not None:
        why = _COSTS.sub(rf"; on the costs \1 ({SEE_COSTS})", t.requests_why)
        rows.append(("Requests per restart (planned on site)", f"{t.requests}: {why}"))
        took = duration(t.took_s) if t.took_s is not None else "not recorded"
        rows.append(
            (
                "Wall-clock: planned against taken",
                f"planned {duration(t.estimated_s)} at the start, from the costs given "
                f"before measuring; took {took}",
            )
        )
    return [KeyValue(key=k, value=f.text(v)) for k, v in rows]


def _adaptive(p: PlanSpec) -> str:
    """The adaptive design in words: its looks, when an arm stopped, and, when the manifest
    records them, the futility rule and the pooled reference."""
    d = p.design
    if len(d.looks) == 1:
        return (
            f"fixed: one look, after {d.looks[0]} blocks (recorded as adaptive with a single "
            "look, which decides once at the family's 95%, as a fixed plan does)"
            + (f"; each block's reference: {_pooled(p)}" if d.pool_aa else "")
        )
    looks = ", ".join(str(n) for n in d.looks)
    stop = "decided (WIN, LOSS or EQUIVALENT)" + (" or futile" if d.target is not None else "")
    parts = [
        f"adaptive (group-sequential): looks after blocks {looks} at the Pocock per-look "
        f"level; an arm whose comparisons were all {stop} got no more restarts, the baseline "
        "and the A/A arm ran while any was open"
    ]
    if d.target is not None:
        parts.append(
            "an undecided comparison stopped at an interim look when a one-sided t test "
            f"rejected a speedup of +{f.pct(d.target, 0)}, the plan's target, at "
            f"{f.pct(d.futility_alpha)}: a futility stop, verdict INCONCLUSIVE"
        )
    if d.pool_aa:
        parts.append(f"each block's reference: {_pooled(p)}")
    return "; ".join(parts)


def _pooled(p: PlanSpec) -> str:
    """'the mean of baseline and baseline-aa, two starts of the same configuration'."""
    repeats: dict[str, list[str]] = {}
    for arm in p.arms:
        if arm.aa_of is not None:
            repeats.setdefault(arm.aa_of, []).append(arm.name)
    groups = [[base, *names] for base, names in repeats.items()]
    if not groups:
        return "the baseline alone (the plan names no A/A repeat)"
    means = "; ".join(f"the mean of {f.join(g)}" for g in groups)
    starts = "two starts" if all(len(g) == 2 for g in groups) else "starts"
    return f"{means}, {starts} of the same configuration"


def _restarts(a: Analysis, t: TimePlan | None) -> str:
    """Restarts each arm contributed ('baseline 8; ngram-k3 4 (stopped at look 1 (WIN))'),
    or one number when every arm got the same."""
    counts: dict[str, int] = dict(t.restarts) if t is not None else {}
    stopped = t.stopped if t is not None else {}
    if not counts:
        for c in a.comparisons:
            counts.setdefault(c.baseline, c.n_restarts_baseline)
            counts.setdefault(c.arm, c.n_restarts_arm)
    if not counts:
        return f.MISSING
    if len(set(counts.values())) == 1 and not stopped:
        return f"{next(iter(counts.values()))} for every arm"
    parts = []
    for arm, n in counts.items():
        why = f" ({stopped[arm]})" if arm in stopped else ""
        parts.append(f"{arm} {n}{why}")
    return "; ".join(parts)
