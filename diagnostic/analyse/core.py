"""Bundle → Analysis: arms, comparisons with verdicts, noise band, sweep, equivalence."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from diagnostic import __version__, defaults
from diagnostic.analyse import stats
from diagnostic.analyse.acceptance import acceptance_from_texts
from diagnostic.analyse.arms import arm_workload, by_restart
from diagnostic.analyse.compare import Pending, Side, bundle_looks, finish_family, start_comparison
from diagnostic.analyse.engine_timing import engine_timing
from diagnostic.analyse.equivalence import arm_equivalence
from diagnostic.analyse.ksweep import pooled_alpha, sweep_workload
from diagnostic.analyse.requests import Loaded, Sample, load_samples
from diagnostic.analyse.text import methods, notes
from diagnostic.bundle.store import Bundle
from diagnostic.schema.analysis import (
    ALL_WORKLOADS,
    Adaptive,
    Analysis,
    ArmResult,
    Comparison,
    Estimate,
    NoiseBand,
    RunSummary,
    Sweep,
    ValueCI,
)
from diagnostic.schema.bundle import ArmSpec, RunInfo, utc_now

__all__ = ["analyse"]

METRICS_BEFORE, METRICS_AFTER, SERVER_LOG = (
    "metrics_before.prom",
    "metrics_after.prom",
    "server.log",
)
Key = tuple[str, str, int]  # (arm, workload, concurrency)


@dataclass
class Context:
    """What every step needs: the loaded bundle, arm specs, groupings."""

    bundle: Bundle
    loaded: Loaded
    specs: dict[str, ArmSpec]
    arms: list[str]
    baseline: str | None
    workloads: list[str]
    keys: list[str]
    levels: list[int]
    index: dict[Key, list[Sample]]

    @property
    def headline(self) -> str:
        """The workload key of arm-level figures: 'all' with several workloads."""
        return self.keys[-1] if self.keys else ALL_WORKLOADS

    def side(self, arm: str, workload: str, level: int) -> Side:
        """Samples of one arm on one workload key and level, by restart."""
        return Side(arm, by_restart(self.index.get((arm, workload, level), [])))


def analyse(
    bundle: Bundle,
    *,
    looks: Sequence[int] | None = None,
    target_width: float = 0.05,
    title: str | None = None,
    client: str | None = None,
) -> Analysis:
    """Compute the analysis of one bundle (offline: reads only the bundle).

    `looks` are the planned group-sequential looks (restarts per arm, at most 4; None: the
    ones `sweep --adaptive` plans for the bundle's restarts, compare.bundle_looks);
    `target_width` the relative 95% interval width the planning advice aims at."""
    looks = bundle_looks(bundle.manifest.plan) if looks is None else looks
    if not 1 <= len(looks) <= 4:
        raise ValueError("the group-sequential design takes 1 to 4 planned looks")
    ctx = _context(bundle)
    arms = [_arm_result(ctx, name, target_width) for name in ctx.arms]
    aa = _finish_aa(ctx)
    band = _noise_band(aa)
    spec = _spec_comparisons(ctx, band.delta, looks)
    comparisons = aa + spec
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
        sweep=_sweep(ctx, arms, spec, band.delta),
        equivalence=[
            arm_equivalence(ctx.loaded.texts, a, ctx.baseline)
            for a in ctx.arms
            if ctx.baseline and a != ctx.baseline
        ],
        exclusions=ctx.loaded.exclusions,
        adaptive=_adaptive(spec, looks),
        methods=methods(ctx.loaded.first_chunk_assumed > 0),
    )
    analysis.notes = notes(analysis, ctx.loaded.first_chunk_assumed, _baseline_note(ctx))
    return analysis


# -- context --------------------------------------------------------------------------------
def _context(bundle: Bundle) -> Context:
    loaded = load_samples(bundle)
    plan = bundle.manifest.plan
    specs = {a.name: a for a in plan.arms}
    seen = [r.arm for r in loaded.runs]
    arms = list(dict.fromkeys([a.name for a in plan.arms if a.name in seen] + seen))
    present = {s.workload for s in loaded.samples}
    workloads = [w for w in plan.workloads if w in present] + sorted(present - set(plan.workloads))
    keys = workloads + ([ALL_WORKLOADS] if len(workloads) > 1 else [])
    index: dict[Key, list[Sample]] = defaultdict(list)
    for s in loaded.samples:
        index[(s.arm, s.workload, s.concurrency)].append(s)
        if len(workloads) > 1:
            index[(s.arm, ALL_WORKLOADS, s.concurrency)].append(s)
    return Context(
        bundle=bundle,
        loaded=loaded,
        specs=specs,
        arms=arms,
        baseline=_baseline(plan.baseline, arms, specs),
        workloads=workloads,
        keys=keys,
        levels=sorted({s.concurrency for s in loaded.samples}),
        index=index,
    )


def _baseline(planned: str | None, arms: list[str], specs: dict[str, ArmSpec]) -> str | None:
    if planned in arms:
        return planned
    off = [a for a in arms if a in specs and specs[a].speculative is False and not specs[a].aa_of]
    candidates = off or arms
    return candidates[0] if candidates else None


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


def _k(spec: ArmSpec | None) -> int | None:
    value = spec.params.get("k") if spec else None
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return int(value)
    return None


# -- arms -----------------------------------------------------------------------------------
def _arm_result(ctx: Context, name: str, target_width: float) -> ArmResult:
    spec = ctx.specs.get(name)
    runs = [r for r in ctx.loaded.runs if r.arm == name]
    startup = [r.launch.startup_s for r in runs if r.launch and r.launch.startup_s is not None]
    cost = statistics.fmean(startup) if startup else None
    workloads = [
        arm_workload(
            ctx.index.get((name, w, c), []), w, c, cost_restart_s=cost, target_width=target_width
        )
        for c in ctx.levels
        for w in ctx.keys
    ]
    headline = [w for w in workloads if w.workload == ctx.headline]
    result = ArmResult(
        id=name,
        speculative=spec.speculative if spec else None,
        k=_k(spec),
        params=dict(spec.params) if spec else {},
        aa_of=spec.aa_of if spec else None,
        is_baseline=name == ctx.baseline,
        decode_tps=headline[0].decode_tps if headline else Estimate(estimate=None),
        workloads=workloads,
        runs=[_run_summary(ctx.bundle, r) for r in runs],
    )
    result.acceptance_length = _acceptance_ci(result.runs)
    result.alpha_hat = pooled_alpha([result])[0]
    return result


def _read(bundle: Bundle, run: RunInfo, name: str) -> str | None:
    path = bundle.run_file(run.arm, run.restart, name)
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _run_summary(bundle: Bundle, run: RunInfo) -> RunSummary:
    after, before = _read(bundle, run, METRICS_AFTER), _read(bundle, run, METRICS_BEFORE)
    records = bundle.read_requests(run.arm, run.restart).records
    return RunSummary(
        restart=run.restart,
        block=run.block,
        status=run.status,
        engine=run.engine.name,
        engine_version=run.engine.version,
        acceptance=acceptance_from_texts(after, before, _read(bundle, run, SERVER_LOG)),
        engine_timing=engine_timing(records, after, before),
    )


def _acceptance_ci(runs: Sequence[RunSummary]) -> ValueCI | None:
    values = [
        r.acceptance.mean_acceptance_length
        for r in runs
        if r.acceptance and r.acceptance.mean_acceptance_length is not None
    ]
    if not values:
        return None
    ci = stats.t_interval(values)
    return ValueCI(estimate=ci.estimate, ci_low=ci.low, ci_high=ci.high, n=ci.n)


# -- comparisons ----------------------------------------------------------------------------
def _pending(ctx: Context, arm: str, base: str, kind: str) -> list[Pending]:
    blocked = ctx.bundle.manifest.plan.order == "blocks"
    out = []
    for level in ctx.levels:
        for w in ctx.keys:
            a, b = ctx.side(arm, w, level), ctx.side(base, w, level)
            if a.groups and b.groups:
                k = _k(ctx.specs.get(arm))
                out.append(start_comparison(a, b, w, level, kind=kind, k=k, blocked=blocked))
    return out


def _finish_aa(ctx: Context) -> list[Comparison]:
    out: list[Comparison] = []
    for arm in ctx.arms:
        of = ctx.specs[arm].aa_of if arm in ctx.specs else None
        if of and of in ctx.arms:
            for p in _pending(ctx, arm, of, "aa"):
                out += finish_family([p], delta=defaults.MARGIN)
    return out


"""Restarts per side an A/A comparison needs to set δ: with 2 its t interval has df = 1
(t = 12.7) and would call almost anything noise."""


def _noise_band(aa: Sequence[Comparison]) -> NoiseBand:
    usable = [
        c
        for c in aa
        if c.ci_low is not None
        and c.ci_high is not None
        and min(c.n_restarts_arm, c.n_restarts_baseline) >= defaults.MIN_RESTARTS
    ]
    if not usable:
        source = "the bundle has no A/A arm, so 2% is a default"
        if aa:
            n = min(min(c.n_restarts_arm, c.n_restarts_baseline) for c in aa)
            source = (
                f"the A/A arm {aa[0].arm} has {n} restart(s) per side and calibrating needs "
                f"≥ {defaults.MIN_RESTARTS}, so 2% is a default"
            )
        return NoiseBand(delta=defaults.MARGIN, calibrated=False, source=source)
    deltas = [stats.delta_from_aa(c.ci_low, c.ci_high) for c in usable]  # type: ignore[arg-type]
    worst = usable[deltas.index(max(deltas))]
    delta = max(deltas)
    for c in aa:  # the A/A verdicts are judged against the band they set
        c.verdict = stats.verdict(c.verdict_ci_low, c.verdict_ci_high, delta)
    where = f"{worst.arm} vs {worst.baseline}, {worst.workload}, concurrency {worst.concurrency}"
    if worst.within_process_only:
        where += " (within-process only)"
    return NoiseBand(
        delta=delta,
        calibrated=True,
        source=f"A/A: {where}",
        aa_ci_low=worst.ci_low,
        aa_ci_high=worst.ci_high,
    )


def _spec_comparisons(ctx: Context, delta: float, looks: Sequence[int]) -> list[Comparison]:
    if ctx.baseline is None:
        return []
    pending: list[Pending] = []
    for arm in ctx.arms:
        spec = ctx.specs.get(arm)
        if arm != ctx.baseline and not (spec and spec.aa_of):
            pending += _pending(ctx, arm, ctx.baseline, "spec")
    families: dict[tuple[str, int], list[Pending]] = defaultdict(list)
    for p in pending:
        families[(p.workload, p.concurrency)].append(p)
    out: list[Comparison] = []
    for family in families.values():
        out += finish_family(family, delta=delta, looks=looks)
    return out


# -- sweep and stopping ---------------------------------------------------------------------
def _sweep(
    ctx: Context, arms: list[ArmResult], spec: list[Comparison], delta: float
) -> Sweep | None:
    base = next((a for a in arms if a.is_baseline), None)
    k_arms = _sweep_arms(arms)
    if base is None or not k_arms:
        return None
    per = [
        sweep_workload(base, k_arms, spec, w, c, delta=delta) for c in ctx.levels for w in ctx.keys
    ]
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
