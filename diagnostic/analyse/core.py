"""Bundle → Analysis: arms, comparisons with verdicts, noise band, sweep, equivalence.

The steps: `context` loads and indexes the bundle, `arm_result` computes each arm's figures,
`matching` pairs the arms for comparison and `compare` decides; here the analysis is put
together (the A/A check of the design, the k sweep, adaptive stopping, notes, telemetry).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from diagnostic import __version__, defaults
from diagnostic.analyse import before_after
from diagnostic.analyse.arm_result import arm_result
from diagnostic.analyse.compare import decide, decide_apart
from diagnostic.analyse.context import Context, build_context
from diagnostic.analyse.covariate import adjust_by_covariate
from diagnostic.analyse.equivalence import arm_equivalence
from diagnostic.analyse.ksweep import sweep_workload
from diagnostic.analyse.matching import all_pending
from diagnostic.analyse.telemetry import analyse_telemetry
from diagnostic.analyse.text import methods, notes
from diagnostic.bundle.store import Bundle
from diagnostic.schema.analysis import (
    Adaptive,
    Analysis,
    ArmResult,
    Comparison,
    LeftOutRun,
    NoiseBand,
    Sweep,
)
from diagnostic.schema.bundle import PlanSpec, RunInfo, utc_now

__all__ = ["analyse"]


def analyse(
    bundle: Bundle,
    *,
    target_width: float = 0.05,
    title: str | None = None,
    client: str | None = None,
) -> Analysis:
    """Compute the analysis of one bundle (offline: reads only the bundle), deciding with the
    design and margin its manifest records. `target_width` is the relative width of the 95%
    speedup interval the planning advice aims at."""
    plan = bundle.manifest.plan
    if plan.design.kind == "adaptive" and not 1 <= len(plan.design.looks) <= 4:
        raise ValueError("the group-sequential design takes 1 to 4 planned looks")
    # Restart means adjusted by the arm-free covariate when it is recorded and balanced: every
    # comparison below is then decided on them (covariate.py); arms' own figures stay raw.
    ctx, covariate = adjust_by_covariate(
        build_context(bundle), delta=plan.margin, design=plan.design
    )
    arms = [arm_result(ctx, name, target_width) for name in ctx.arms]
    comparisons = decide(all_pending(ctx), delta=plan.margin, design=plan.design)
    if plan.design.pool_aa:
        _sensitivity(
            comparisons,
            decide(all_pending(ctx, pool=False), delta=plan.margin, design=plan.design),
        )
    band = _noise_band(plan, comparisons)
    spec = [c for c in comparisons if c.kind == "spec"]
    declared = [c for c in spec if not c.derived]  # the plan's comparisons: they can stop
    analysis = Analysis(
        tool_version=__version__,
        created_at=utc_now(),
        bundle=str(bundle.path),
        title=title,
        client=client if client is not None else bundle.manifest.engagement.client,
        engines=sorted({_engine(r) for r in ctx.loaded.runs}),
        model=_model(ctx),
        baseline=ctx.baseline,
        workloads=ctx.workloads,
        concurrency_levels=ctx.levels,
        max_tokens=bundle.manifest.plan.max_tokens,
        noise_band=band,
        arms=arms,
        comparisons=comparisons,
        sweep=_sweep(ctx, arms, spec),
        equivalence=[
            arm_equivalence(ctx.loaded.texts, a, ctx.baseline)
            for a in ctx.arms
            if ctx.baseline and a != ctx.baseline
        ],
        exclusions=ctx.loaded.exclusions,
        left_out_runs=[LeftOutRun(run=r, reason=why) for r, why in ctx.loaded.left_out],
        failed_requests=ctx.loaded.failed_requests,
        family_size=max((c.family_size for c in spec if not c.withheld), default=0),
        design=plan.design.kind,
        adaptive=_adaptive(declared, plan.design.looks) if plan.design.kind == "adaptive" else None,
        methods=methods(ctx.loaded.first_chunk_assumed > 0, plan.design),
    )
    if plan.as_found in ctx.arms:
        after = before_after.pending(
            analysis, plan.as_found, ctx.side, ctx.keys, plan.order == "blocks"
        )
        analysis.before_after = decide_apart(after, delta=plan.margin, design=plan.design)
    analysis.notes = notes(analysis, ctx.loaded.first_chunk_assumed, _baseline_note(ctx))
    analysis.telemetry = analyse_telemetry(bundle, ctx.loaded.runs, ctx.loaded.records, arms)
    analysis.covariate = covariate
    if covariate is not None and covariate.applied:
        analysis.notes.append(
            f"Every comparison is decided on restart means adjusted by {covariate.description} "
            "(Methodology, Covariate adjustment, sets the raw estimates beside them)."
        )
    return analysis


# -- the analysis' own fields -------------------------------------------------------------
def _baseline_note(ctx: Context) -> str | None:
    planned = ctx.bundle.manifest.plan.baseline
    if ctx.baseline is None or planned == ctx.baseline:
        return None
    return f"The plan names no measured baseline; '{ctx.baseline}' was used as the baseline."


def _engine(run: RunInfo) -> str:
    return f"{run.engine.name} {run.engine.version}" if run.engine.version else run.engine.name


def _model(ctx: Context) -> str | None:
    models = [r.model for r in ctx.loaded.runs if r.model]
    return models[0] if models else ctx.bundle.manifest.target.model


# -- the design's checks -------------------------------------------------------------------
def _sensitivity(comparisons: Sequence[Comparison], alone: Sequence[Comparison]) -> None:
    """A pooled reference is a design choice (the A/A check cannot prove the repeat equals the
    baseline): each speculative verdict that differs against the baseline alone says so."""
    other = {(c.arm, c.workload, c.concurrency): c for c in alone if c.kind == "spec"}
    for c in comparisons:
        b = other.get((c.arm, c.workload, c.concurrency))
        if c.kind != "spec" or c.withheld or b is None or b.verdict == c.verdict:
            continue
        c.sensitivity = (
            f"{b.verdict if not b.withheld else 'no verdict'} against {b.baseline} alone "
            f"({b.ratio:.3f}×, {b.ci_label}: {b.ci_low:.3f}–{b.ci_high:.3f})"
        )


def _noise_band(plan: PlanSpec, comparisons: Sequence[Comparison]) -> NoiseBand:
    """δ is the plan's margin; the A/A comparisons with restarts on both sides check the
    design: each 95% interval must contain 1, and the widest one is the measured noise."""
    source = (
        "the plan's margin"
        if "margin" in plan.model_fields_set
        else f"the default margin ({defaults.MARGIN:.0%}); set [plan] margin to change it"
    )
    aa = [c for c in comparisons if c.checks_design]  # a check, not a verdict
    band = NoiseBand(delta=plan.margin, source=source)
    if not aa:
        return band
    widest = max(aa, key=lambda c: (c.ci_high or 1.0) / (c.ci_low or 1.0))
    band.aa_check = all(c.ci_low <= 1.0 <= c.ci_high for c in aa)  # type: ignore[operator]
    band.aa_ci_low, band.aa_ci_high = widest.ci_low, widest.ci_high
    band.aa_source = (
        f"{widest.arm} vs {widest.baseline}, {widest.workload}, concurrency {widest.concurrency}"
    )
    return band


# -- sweep and stopping ---------------------------------------------------------------------
def _sweep(ctx: Context, arms: list[ArmResult], spec: list[Comparison]) -> Sweep | None:
    base = next((a for a in arms if a.is_baseline), None)
    on_base = {c.arm for c in spec if c.matched and c.baseline == ctx.baseline}
    k_arms = _sweep_arms([a for a in arms if a.id in on_base])
    if base is None or not k_arms:
        return None
    # CPU only when every run recorded its environment and none saw a GPU (unknown: assume one)
    cpu_only = bool(ctx.loaded.runs) and all(
        "gpus" in r.environment and not r.environment["gpus"] for r in ctx.loaded.runs
    )
    gpu = not cpu_only
    per = [sweep_workload(base, k_arms, spec, w, c, gpu) for c in ctx.levels for w in ctx.keys]
    head = next((s for s in per if s.workload == ctx.headline), None)
    return Sweep(
        ks=[0, *sorted({a.k for a in k_arms if a.k is not None})],
        best_k=head.best_k if head else None,
        workloads=per,
    )


def _sweep_arms(arms: Sequence[ArmResult]) -> list[ArmResult]:
    """Arms that differ only in k: the group (same other params) with the most distinct k;
    the first arm of each k when a plan repeats one."""
    groups: dict[tuple[tuple[str, str], ...], dict[int, ArmResult]] = defaultdict(dict)
    for a in arms:
        if a.k is not None and not a.aa_of and not a.is_baseline:
            rest = tuple(sorted((n, str(v)) for n, v in a.params.items() if n != "k"))
            groups[rest].setdefault(a.k, a)
    if not groups:
        return []
    return list(max(groups.values(), key=len).values())


def _adaptive(spec: Sequence[Comparison], looks: Sequence[int]) -> Adaptive | None:
    if not spec:
        return None
    n_now = min(c.stopping.n_now if c.stopping else 1 for c in spec)
    return Adaptive(
        planned_looks=list(looks),
        n_now=n_now,
        all_decided=all(c.stopping is not None and c.stopping.can_stop for c in spec),
        next_look=next((n for n in looks if n > n_now), None),
    )
