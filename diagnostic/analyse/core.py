"""Bundle → Analysis: arms, comparisons with verdicts, noise band, sweep, equivalence."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from diagnostic import __version__, defaults
from diagnostic.analyse import before_after, pairing, stats
from diagnostic.analyse.acceptance import acceptance_from_texts
from diagnostic.analyse.arms import arm_workload, by_restart, restarts_acceptance
from diagnostic.analyse.compare import Pending, Side, decide, decide_apart, start_comparison
from diagnostic.analyse.engine_timing import engine_timing
from diagnostic.analyse.equivalence import arm_equivalence
from diagnostic.analyse.ksweep import pooled_alpha, sweep_workload
from diagnostic.analyse.requests import Loaded, Sample, load_samples
from diagnostic.analyse.telemetry import analyse_telemetry
from diagnostic.analyse.text import methods, notes
from diagnostic.bundle.store import (
    METRICS_AFTER,
    METRICS_BEFORE,
    Bundle,
    workload_metrics,
)
from diagnostic.engines.flags import speculates, without_speculation
from diagnostic.schema.analysis import (
    ALL_WORKLOADS,
    Adaptive,
    Analysis,
    ArmResult,
    ArmWorkload,
    Comparison,
    ComparisonKind,
    Estimate,
    LeftOutRun,
    NoiseBand,
    RunSummary,
    Sweep,
    ValueCI,
)
from diagnostic.schema.bundle import MAIN_SOURCE, ArmSpec, PlanSpec, RunInfo, utc_now

__all__ = ["analyse"]

Key = tuple[str, str, int]  # (arm, workload, concurrency)
_REPEAT_KEYS = 1_000_000  # restart keys of a pooled A/A repeat: i·this + its restart


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
    noise: dict[Key, pairing.ArmNoise]  # restart noise with each arm's prompt effects removed

    @property
    def headline(self) -> str:
        """The workload key of arm-level figures: 'all' with several workloads."""
        return self.keys[-1] if self.keys else ALL_WORKLOADS

    def side(self, arm: str, workload: str, level: int) -> Side:
        """Samples of one arm on one workload key and level, by restart."""
        return Side(arm, by_restart(self.index.get((arm, workload, level), [])))

    def reference(self, base: str, workload: str, level: int, *, pool: bool = True) -> Side:
        """What a speculative arm is compared with: the baseline, joined by its A/A repeats
        (arms with aa_of = base) when the design pools them — each block's reference is then
        the mean of their log restart means (two starts of the same configuration per block:
        a ratio's baseline variance halves). The repeats' restarts are keyed apart."""
        side = self.side(base, workload, level)
        if not (pool and self.bundle.manifest.plan.design.pool_aa):
            return side
        groups, pooled = dict(side.groups), {}
        repeats = [a for a in self.arms if (s := self.specs.get(a)) and s.aa_of == base]
        for i, arm in enumerate(repeats, 1):
            extra = self.side(arm, workload, level).groups
            groups |= {i * _REPEAT_KEYS + r: g for r, g in extra.items()}
            pooled[arm] = len(extra)
        return Side(base, groups, {a: n for a, n in pooled.items() if n})


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
    ctx = _context(bundle)
    arms = [_arm_result(ctx, name, target_width) for name in ctx.arms]
    comparisons = decide(_all_pending(ctx), delta=plan.margin, design=plan.design)
    if plan.design.pool_aa:
        _sensitivity(
            comparisons,
            decide(_all_pending(ctx, pool=False), delta=plan.margin, design=plan.design),
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
    baseline = _baseline(plan.baseline, arms, specs)
    pooled = ALL_WORKLOADS if len(workloads) > 1 else None
    return Context(
        bundle=bundle,
        loaded=loaded,
        specs=specs,
        arms=arms,
        baseline=baseline,
        workloads=workloads,
        keys=keys,
        levels=sorted({s.concurrency for s in loaded.samples}),
        index=index,
        noise=pairing.arm_noise(pairing.measured_requests(loaded.frame), baseline, pooled),
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
            ctx.index.get((name, w, c), []),
            w,
            c,
            noise=ctx.noise.get((name, w, c)),
            cost_restart_s=cost,
            target_width=target_width,
        )
        for c in ctx.levels
        for w in ctx.keys
    ]
    _metric_acceptance(ctx, runs, workloads)
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
        runs=[_run_summary(ctx, r) for r in runs],
    )
    result.acceptance_length = _acceptance_ci(result.runs)
    result.alpha_hat = pooled_alpha([result])[0]
    return result


def _metric_acceptance(ctx: Context, runs: list[RunInfo], workloads: list[ArmWorkload]) -> None:
    """Per restart and workload, the acceptance length from the /metrics snapshots around the
    workload's measured requests (after its warm-up), where no per-request counts gave one."""
    multi = len(ctx.bundle.manifest.plan.concurrency) > 1
    by_restart = {r.restart: r for r in runs}
    for aw in workloads:
        if aw.workload == ALL_WORKLOADS:
            continue
        tag = aw.concurrency if multi else 0
        found = False
        for row in aw.restarts:
            run = by_restart.get(row.restart)
            if row.acceptance_length is not None or run is None:
                continue
            after = _read(ctx.bundle, run, workload_metrics(aw.workload, tag, "after"))
            before = _read(ctx.bundle, run, workload_metrics(aw.workload, tag, "before"))
            acc = acceptance_from_texts(after, before) if after and before else None
            if acc is not None and acc.source == "metrics" and acc.mean_acceptance_length:
                row.acceptance_length = acc.mean_acceptance_length
                row.acceptance_source = "metrics around the workload"
                found = True
        if found:
            aw.acceptance_length = restarts_acceptance(aw.restarts)


def _read(bundle: Bundle, run: RunInfo, name: str) -> str | None:
    path = bundle.run_file(run.arm, run.restart, name)
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _server_log(bundle: Bundle, run: RunInfo) -> str | None:
    path = bundle.log_sources(run).get(MAIN_SOURCE)
    return path.read_text(encoding="utf-8", errors="replace") if path else None


def _run_summary(ctx: Context, run: RunInfo) -> RunSummary:
    bundle = ctx.bundle
    after, before = _read(bundle, run, METRICS_AFTER), _read(bundle, run, METRICS_BEFORE)
    records = ctx.loaded.records[(run.arm, run.restart)]  # read once, by load_samples
    return RunSummary(
        restart=run.restart,
        block=run.block,
        status=run.status,
        engine=run.engine.name,
        engine_version=run.engine.version,
        acceptance=acceptance_from_texts(after, before, _server_log(bundle, run)),
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
def _speculative(spec: ArmSpec | None) -> bool:
    """Whether an arm speculates: the plan says so, else its launch flags; an arm with
    neither (collected by hand) counts as speculative unless it is the baseline."""
    return spec is None or speculates(spec.speculative, spec.launch)


def _matched_baseline(ctx: Context, arm: str) -> tuple[str | None, bool, str | None]:
    """(baseline, matched, what else differs): the arm the plan names for it, else the
    non-speculative arm whose launch differs only in speculation flags, else the plan's
    baseline (unmatched when both launches are known and differ in more than that)."""
    spec = ctx.specs.get(arm)
    if spec and spec.baseline in ctx.arms:
        return spec.baseline, True, None
    if spec is None or not spec.launch:
        return ctx.baseline, True, None
    mine = without_speculation(spec.launch)
    for name in ctx.arms:
        other = ctx.specs.get(name)
        if name == arm or other is None or other.aa_of or _speculative(other) or not other.launch:
            continue
        # the environment counts too (llama.cpp turns CUDA graphs off with GGML_CUDA_DISABLE_GRAPHS)
        if without_speculation(other.launch) == mine and other.env == spec.env:
            return name, True, None
    base = ctx.specs.get(ctx.baseline or "")
    if base is None or not base.launch:
        return ctx.baseline, True, None
    return ctx.baseline, False, _differs(mine, without_speculation(base.launch))


def _differs(arm: tuple[str, ...], base: tuple[str, ...]) -> str:
    only_arm = [w for w in arm if w not in base]
    only_base = [w for w in base if w not in arm]
    text = " ".join(only_arm) or "(none)"
    if only_base:
        text += f" instead of {' '.join(only_base)}"
    return text if len(text) <= 120 else text[:119] + "…"


def _pending(
    ctx: Context,
    arm: str,
    base: str,
    kind: ComparisonKind,
    matched: bool = True,
    differs: str | None = None,
    pool: bool = True,
) -> list[Pending]:
    blocked = ctx.bundle.manifest.plan.order == "blocks"
    k = _k(ctx.specs.get(arm))
    out = []
    for level in ctx.levels:
        for w in ctx.keys:
            a = ctx.side(arm, w, level)
            b = (
                ctx.reference(base, w, level, pool=pool)
                if kind == "spec"
                else ctx.side(base, w, level)
            )
            if a.groups and b.groups:
                out.append(
                    start_comparison(
                        a,
                        b,
                        w,
                        level,
                        kind=kind,
                        k=k,
                        blocked=blocked,
                        matched=matched,
                        differs=differs,
                    )
                )
    return out


def _all_pending(ctx: Context, *, pool: bool = True) -> list[Pending]:
    """A/A arms against the arm they repeat; speculative arms against their matched baseline;
    other configurations against the plan's baseline (a table, never a headline)."""
    out: list[Pending] = []
    for arm in ctx.arms:
        spec = ctx.specs.get(arm)
        if spec and spec.aa_of:
            if spec.aa_of in ctx.arms:
                out += _pending(ctx, arm, spec.aa_of, "aa")
        elif arm == ctx.baseline or ctx.baseline is None:
            continue
        elif _speculative(spec):
            base, matched, differs = _matched_baseline(ctx, arm)
            if base is not None:
                out += _pending(ctx, arm, base, "spec", matched, differs, pool)
        else:
            out += _pending(ctx, arm, ctx.baseline, "config", False)
    return out


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
