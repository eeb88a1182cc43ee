"""Report sections that interpret: recommendations, methodology and the environment appendix."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from diagnostic.bundle.seal import Root, bundle_root
from diagnostic.bundle.store import Bundle
from diagnostic.checklist.lists import STATE_FILE, checklist_summary
from diagnostic.report import fmt as f
from diagnostic.report import launch, quality
from diagnostic.report import select as sel
from diagnostic.report.budget import Day
from diagnostic.report.design import COST_ROW, design_rows, futility
from diagnostic.report.view import (
    ChecklistRow,
    FindingView,
    KeyValue,
    Methodology,
    Recommendation,
)
from diagnostic.schema.analysis import (
    WITHIN_PROCESS_LABEL,
    Analysis,
    ArmResult,
    Comparison,
)
from diagnostic.schema.bundle import Manifest, RunInfo
from diagnostic.schema.seal import RootSignature

__all__ = [
    "checklist",
    "engine_args",
    "environment",
    "hardware",
    "methodology",
    "recommendations",
]

Describe = Callable[[ArmResult], str]

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


# -- recommendations ------------------------------------------------------------------------
def _name(a: Analysis, arm_id: str, describe: Describe) -> str:
    arm = next((x for x in a.arms if x.id == arm_id), None)
    return describe(arm) if arm else arm_id


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
            kind = "FUTILE" if futility(c) else kind
            grouped.setdefault((kind, c.arm), []).append(c)
    out = []
    for (kind, arm), comps in grouped.items():
        ws, name = f.join([c.workload for c in comps]), _name(a, arm, describe)
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
    stop = futility(c)
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
            out.append(
                Recommendation(
                    text=f"Keep k at {sw.best_k} on {sw.workload}; longer drafts cost more than "
                    "they gain.",
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
    futile = [c for c in _undecided(a) if futility(c)]
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
    pending = [c for c in _undecided(a) if c.outlook and not futility(c)]
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
    first difference is early, else know it for numerics (quality.divergence_cause)."""
    d = quality.divergence(a)
    arms = d.arms
    if not arms:
        return []
    differ = [eq for eq in a.equivalence if eq.arm in arms]
    shares = [f"{eq.arm} {eq.n_prompts - eq.n_identical} of {eq.n_prompts}" for eq in differ]
    evidence = f"prompts whose output differs from the baseline's: {'; '.join(shares)}. "
    evidence += quality.divergence_cause(a)
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
    why = sel.denied(a, p.arm_ids)
    if not why:
        return p.advice
    return f"{p.advice.rstrip('.')} — though it may not help: {why}."


def recommendations(
    a: Analysis, problems: list[FindingView], describe: Describe, day: Day
) -> list[Recommendation]:
    """Numbered recommendations: fix what check found, then serving profiles, then method."""
    recs = [
        Recommendation(
            text=_checked(a, p),
            evidence=f"{p.message} ({p.rule})",
        )
        for p in problems
    ]
    recs += _profile_recs(a, describe, bool(problems)) + _sweep_recs(a) + _measurement_recs(a, day)
    unique = list({r.text: r for r in recs}.values())
    return unique or [
        Recommendation(
            text="No change is needed.", evidence="no finding and no comparison to act on"
        )
    ]


# -- methodology ------------------------------------------------------------------------------
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


# -- environment --------------------------------------------------------------------------------
def _envs(runs: Iterable[RunInfo]) -> list[dict[str, Any]]:
    return [r.environment for r in runs if r.environment]


def hardware(runs: list[RunInfo]) -> str:
    """'1 × NVIDIA H200 (143771 MiB)' or the CPU model when no GPU was seen."""
    for env in _envs(runs):
        gpus = env.get("gpus") or []
        if gpus:
            names: dict[str, int] = {}
            for g in gpus:
                label = f"{g.get('name', 'GPU')} ({g.get('memory_mib', '?')} MiB)"
                names[label] = names.get(label, 0) + 1
            return ", ".join(f"{n} × {label}" for label, n in names.items())
    for env in _envs(runs):
        if env.get("cpu"):
            cores = f", {env['cpu_count']} threads" if env.get("cpu_count") else ""
            return f"CPU: {env['cpu']}{cores}"
    return f.MISSING


def _distinct(runs: list[RunInfo], key: str) -> str:
    values = dict.fromkeys(str(e[key]) for e in _envs(runs) if e.get(key) not in (None, ""))
    return ", ".join(values) or f.MISSING


_NO_SMI = "not found"  # environment.py's nvidia_smi when the serving machine has none


def _no_gpu(runs: list[RunInfo]) -> str | None:
    """What to print for the GPU driver and CUDA of a server that ran on a machine with no
    GPU (a CPU engine: every run local, no nvidia-smi there), else None."""
    envs = _envs(runs)
    cpu = bool(envs) and all(
        e.get("server_is_local") is True
        and not e.get("gpus")
        and e.get("nvidia_smi") == "not found"
        for e in envs
    )
    return "none: the serving machine has no GPU (no nvidia-smi)" if cpu else None


def _recorded_model(runs: list[RunInfo]) -> str | None:
    return next((m for r in runs if (m := launch.recorded_model(r))), None)


def seals(root: Root) -> str:
    """Whether the root hash rests on seals taken as each run ended."""
    n = len(root.runs)
    if root.sealed:
        return f"every run sealed as it ended ({n} of {n}); `diagnose verify` checks each file"
    if len(root.unsealed) == n:
        return "recorded before sealing: integrity not provable, consistency checked"
    return f"{n - len(root.unsealed)} of {n} runs sealed; not sealed: {', '.join(root.unsealed)}"


def environment(
    a: Analysis, bundle: Bundle, runs: list[RunInfo], signature: RootSignature | None = None
) -> list[KeyValue]:
    """Environment appendix: hardware, software, versions and the bundle's fingerprint: its
    root hash over the seals, and the root's signature when the report was signed."""
    from diagnostic import __version__

    engines = dict.fromkeys(f"{r.engine.name} {r.engine.version or ''}".strip() for r in runs)
    no_gpu = _no_gpu(runs)
    rows = [
        ("Hardware", hardware(runs)),
        ("GPU driver", no_gpu or _distinct(runs, "driver")),
        ("CUDA", no_gpu or _distinct(runs, "cuda")),
        ("Host", _distinct(runs, "host")),
        ("Operating system", _distinct(runs, "os")),
        ("Python", _distinct(runs, "python")),
        ("Engine", ", ".join(engines) or f.MISSING),
        ("Server URL", f.text(bundle.manifest.target.base_url, f.NOT_RECORDED)),
        ("Model", f.text(_recorded_model(runs) or a.model or bundle.manifest.target.model)),
        ("Bundle", Path(a.bundle).name),  # as analysed: verify re-renders it under any name
        ("Bundle created", f.text(bundle.manifest.created_at, f.NOT_RECORDED)),
        ("Recorded with", f"diagnose {bundle.manifest.tool_version}"),
        ("Analysed with", f"diagnose {a.tool_version}"),
        ("Report rendered with", f"diagnose {__version__}"),
    ]
    root = bundle_root(bundle, runs)
    if bundle.manifest.bundle_id:
        rows.append(("Bundle id", bundle.manifest.bundle_id))
    rows += [("Bundle root hash (sha256)", root.digest), ("Seals", seals(root))]
    if signature is not None:
        rows.append(("Signature (ed25519)", f"{signature.signature} by {signature.key_id}"))
    if _distinct(runs, "server_is_local") == "False":
        rows.insert(1, ("Note", "hardware describes the measuring machine; the server was remote"))
    return [KeyValue(key=k, value=f.text(v)) for k, v in rows]


def engine_args(manifest: Manifest, runs: list[RunInfo]) -> list[KeyValue]:
    """How each arm's server was started: the launch command (its shell variables expanded
    where the bundle recorded their values), else the server's own args."""
    out = []
    arms = [a.name for a in manifest.plan.arms] or list(dict.fromkeys(r.arm for r in runs))
    for name in arms:
        spec = next((a for a in manifest.plan.arms if a.name == name), None)
        run = next((r for r in runs if r.arm == name), None)
        value = spec.launch if spec and spec.launch else None
        if value is None and run is not None and run.launch is not None:
            value = run.launch.command
        if value is not None:
            value = launch.expand(value, launch.launch_values(run))
        if value is None and run is not None and run.server_args:
            value = json.dumps(run.server_args, sort_keys=True, default=str)
        out.append(KeyValue(key=name, value=f.text(value, f.NOT_RECORDED)))
    return out


def checklist(bundle: Bundle) -> list[ChecklistRow]:
    """The consultant's checklists evaluated on the bundle, when it holds ticks (checklist.json)."""
    if not (bundle.path / STATE_FILE).is_file():
        return []
    return [
        ChecklistRow(
            item=f"{s.list_name}: {s.text}",
            status=s.label,
            status_class=s.status or "none",
            evidence="; ".join(x for x in (s.evidence, s.note or "") if x) or "—",
        )
        for s in checklist_summary(bundle)
    ]
