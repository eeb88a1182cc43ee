"""`diagnose plan`: the next block of the day from a bundle's findings: the client's
configuration as found, the arms each finding's remedies propose with their matched baselines,
an A/A arm, restarts and requests sized from the bundle's measured costs and noise, within the
time left of the day; written as a plan `sweep` runs unchanged."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from diagnostic import defaults
from diagnostic.bundle.store import Bundle, run_id
from diagnostic.common.progress import duration
from diagnostic.engines.command import EditError, same_launch, speculates
from diagnostic.errors import PlanError
from diagnostic.logcheck.rules import Rule, load_rules
from diagnostic.logcheck.stage import check_paths
from diagnostic.measure.plan.serialise import to_toml
from diagnostic.measure.plan.spec import ArmTable, PlanFile, PlanTable, expand_plan, parse_plan
from diagnostic.measure.sweep import planner
from diagnostic.measure.sweep.remedy_arms import Candidate, candidates, template
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.bundle import ArmSpec, Manifest
from diagnostic.schema.logfacts import CheckReport

__all__ = ["NextPlan", "next_plan"]

_SEVERITY = {"error": 0, "warning": 1, "info": 2}


class NextPlan(BaseModel):
    """The plan `diagnose plan` writes, and what sized it."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The plan as TOML, with a comment per arm")
    as_found: str = Field(description="The arm that is the client's configuration as found")
    arms: list[str] = Field(description="Arm names, in plan order")
    restarts: int = Field(description="Restarts per arm")
    requests: int = Field(description="Measured requests per restart and workload")
    estimated_s: float = Field(description="Expected wall-clock of the plan")
    time_left_s: float = Field(description="Time left of the day the plan had to fit")
    notes: list[str] = Field(default_factory=list, description="Fixes no arm can test")
    dropped: list[str] = Field(default_factory=list, description="Arms left out for time")
    why: list[str] = Field(default_factory=list, description="How restarts and requests came")


def next_plan(
    path: Path,
    *,
    as_found: str | None = None,
    time_left_s: float | None = None,
    source: str = "next.toml",
    rules_dir: Path | None = None,
    requests: int | None = None,
    restarts: int | None = None,
) -> NextPlan:
    """The next plan from the bundle at `path` (offline: reads only the bundle). `as_found`:
    the arm that is the client's configuration (default: the manifest's, else the first
    speculative arm with an error finding that has remedies); `time_left_s`: what is left of
    the day (default: defaults.DAY_ON_SITE_S less the bundle's own measuring time);
    `requests`: measured requests per restart instead of m*; `restarts`: restarts per arm
    instead of those the power at the plan's target asks for within the time left."""
    bundle = Bundle.open(path)
    m = bundle.manifest
    launches = {a.name: a for a in m.plan.arms if a.launch}
    if not launches:
        raise PlanError(
            f"{path}: the bundle records no launch command (a `collect` bundle): write the next "
            "plan by hand (README, Plan files) with the server's command"
        )
    rules = {r.id: r for r in load_rules(rules_dir)}
    check = check_paths([path], rules_dir=rules_dir, write=False)
    arm_of = {run_id(r.arm, r.restart): r.arm for r in bundle.runs()}
    on_arm = _findings_by_arm(check, arm_of, rules)
    found = _as_found(path, as_found or m.plan.as_found, launches, on_arm, rules)
    spec = launches[found]
    base = _base_arm(spec, m)
    picked = _remedy_arms(bundle, check, arm_of, rules, found, spec, on_arm.get(found, []))
    left = time_left_s if time_left_s is not None else _day_left(path, bundle)
    return _sized(path, m, spec, base, picked, left, source, (requests, restarts))


def _findings_by_arm(
    check: CheckReport, arm_of: dict[str, str], rules: dict[str, Rule]
) -> dict[str, list[str]]:
    """Rule ids with remedies per arm, most severe first."""
    run_of = {f.path: f.run_id for f in check.runs}
    out: dict[str, list[str]] = {}
    for f in sorted(check.findings, key=lambda f: _SEVERITY.get(f.severity, 3)):
        arm = arm_of.get(run_of.get(f.run or "") or "")
        if arm and rules.get(f.rule) and rules[f.rule].remedies and f.rule not in out.get(arm, []):
            out.setdefault(arm, []).append(f.rule)
    return out


def _as_found(
    path: Path,
    given: str | None,
    launches: dict[str, ArmSpec],
    on_arm: dict[str, list[str]],
    rules: dict[str, Rule],
) -> str:
    spec = [a for a, s in launches.items() if speculates(s.speculative, s.launch)]
    if given is not None:
        if given not in spec:
            raise PlanError(
                f"{path}: as found = {given!r} is not a speculative arm with a launch command "
                f"(the plan tests speculation against its baseline); name one of: "
                f"{', '.join(spec) or '(none: the bundle has no speculative arm)'}"
            )
        return given
    ranked = [
        (_SEVERITY.get(rules[ids[0]].severity, 3), n, arm)
        for n, (arm, ids) in enumerate(on_arm.items())
        if arm in spec
    ]
    if not ranked:
        raise PlanError(
            f"{path}: no finding on a speculative arm has a remedy to test (run `diagnose check "
            f"{path}` to see the findings); name the arm with --as-found to plan its A/A check "
            "alone, or write the plan by hand"
        )
    return min(ranked)[2]


def _base_arm(spec: ArmSpec, m: Manifest) -> ArmTable:
    """The as-found arm without speculation: the bundle's arm with that launch when there is
    one (its name kept), else the as-found launch with the speculation flags taken out."""
    launch = template(spec.launch or "", speculation=False)
    for other in m.plan.arms:
        if other.launch and not other.aa_of and template(other.launch) == launch:
            return ArmTable(name=other.name, launch=launch, env=dict(other.env), speculative=False)
    return ArmTable(
        name=f"{spec.name}-nospec", launch=launch, env=dict(spec.env), speculative=False
    )


def _remedy_arms(
    bundle: Bundle,
    check: CheckReport,
    arm_of: dict[str, str],
    rules: dict[str, Rule],
    found: str,
    spec: ArmSpec,
    rule_ids: list[str],
) -> tuple[list[Candidate], list[str]]:
    facts_of = {f.run_id: f for f in check.runs if f.source in (None, "server")}
    runs = [rid for rid, arm in arm_of.items() if arm == found and rid in facts_of]
    if not runs:
        return [], []
    analysis = None
    if any(
        r.draft_length and not r.draft_length.values for i in rule_ids for r in rules[i].remedies
    ):
        from diagnostic.analyse.core import analyse  # scipy, pandas: only when k is planned

        analysis = analyse(bundle)
    arms: list[Candidate] = []
    notes: list[str] = []
    for rule_id in rule_ids:
        facts = next(
            (
                facts_of[r]
                for r in sorted(runs)
                if any(f.rule == rule_id and f.run == facts_of[r].path for f in check.findings)
            ),
            facts_of[sorted(runs)[0]],
        )
        got = candidates(
            rules[rule_id],
            facts,
            arm=found,
            launch=spec.launch or "",
            env=dict(spec.env),
            analysis=analysis,
        )
        arms += got.arms
        notes += got.notes
    return _unmeasured(bundle, arms, notes, analysis)


def _unmeasured(
    bundle: Bundle, arms: list[Candidate], notes: list[str], analysis: Analysis | None
) -> tuple[list[Candidate], list[str]]:
    """The candidates the bundle has not measured already: a speculative one whose command
    starts the same server as a measured arm (flag order, spelling and the port aside) with
    the same environment is never proposed again, and the plan says what it gave. A baseline
    stays: the next block measures its own, beside the arms it matches."""
    measured = {r.arm for r in bundle.runs()}
    specs = [a for a in bundle.manifest.plan.arms if a.launch and a.name in measured]
    kept = []
    for c in arms:
        twin = next(
            (a for a in specs if a.env == c.env and same_launch(a.launch or "", c.launch)), None
        )
        if twin is None or not c.speculative:
            kept.append(c)
            continue
        if analysis is None:
            from diagnostic.analyse.core import analyse  # scipy, pandas: only when needed

            analysis = analyse(bundle)
        gave = [
            f"{x.workload} {x.ratio:.2f}× of {x.baseline}, "
            f"{'no verdict' if x.withheld else x.verdict}"
            for x in analysis.comparisons
            if x.arm == twin.name and x.kind == "spec" and not x.derived and x.ratio
        ]
        notes.append(
            f"{c.name} ({c.tests.split(':')[0]}) is not proposed: this bundle measured the same "
            f"command as {twin.name}" + (f" ({'; '.join(gave)})." if gave else ".")
        )
    return kept, notes


def _day_left(path: Path, bundle: Bundle) -> float:
    """A day on site less the bundle's measuring time (first start to last end)."""
    runs = bundle.runs()
    times = [dt.datetime.fromisoformat(t) for r in runs for t in (r.started_at, r.ended_at) if t]
    took = (max(times) - min(times)).total_seconds() if times else 0.0
    left = defaults.DAY_ON_SITE_S - took
    if left <= 0:
        raise PlanError(
            f"{path}: the bundle's measuring took {duration(took)}, a whole day on site "
            f"({duration(defaults.DAY_ON_SITE_S)}); give --time-left for the next block"
        )
    return left


def _port(spec: ArmSpec, m: Manifest) -> int:
    from diagnostic.engines.command import flag_value

    for text in (
        flag_value(spec.launch or "", "--port"),
        (m.target.base_url or "").rsplit(":", 1)[-1],
    ):
        digits = str(text or "").split("/")[0]
        if digits.isdigit() and 0 < int(digits) < 65536:
            return int(digits)
    return defaults.PORT


def _arms(
    spec: ArmSpec, base: ArmTable, remedies: list[Candidate]
) -> tuple[list[ArmTable], list[str], list[list[int]]]:
    """The plan's arms, the comment of each, and the indices of each remedy's arms (the
    groups dropped together when time runs short). A remedy arm that launches like an arm
    already planned is that arm."""
    found = ArmTable(
        name=spec.name, launch=template(spec.launch or ""), env=dict(spec.env), speculative=True
    )
    arms = [found, base, ArmTable(name=f"{base.name}-aa", aa_of=base.name)]
    notes = [
        "As found: the client's configuration, the arm the before-and-after leads with.",
        f"The as-found configuration without speculation: the matched baseline of {spec.name}.",
        f"A/A: {base.name} again (aa_of), the check of the design and the measured noise.",
    ]
    groups: dict[str, list[int]] = {}
    for c in remedies:
        same = next((i for i, a in enumerate(arms) if (a.launch, a.env) == (c.launch, c.env)), None)
        if same is not None:
            if same > 2:
                notes[same] += f"\n{c.tests}"
            continue
        name = c.name
        while name in {a.name for a in arms}:
            name += "-2"
        arms.append(ArmTable(name=name, launch=c.launch, env=c.env, speculative=c.speculative))
        notes.append(c.tests)
        groups.setdefault(c.tests.split(";")[0], []).append(len(arms) - 1)
    return arms, notes, list(groups.values())


def _sized(
    path: Path,
    m: Manifest,
    spec: ArmSpec,
    base: ArmTable,
    picked: tuple[list[Candidate], list[str]],
    left: float,
    source: str,
    given: tuple[int | None, int | None],
) -> NextPlan:
    from diagnostic.measure.sweep.stage import day_estimate

    remedies, fixes = picked
    arms, notes, groups = _arms(spec, base, remedies)
    if len(arms) <= 3 and not fixes:
        raise PlanError(
            f"{path}: the remedies of the findings on {spec.name} propose no arm that differs "
            "from it; nothing new to measure"
        )
    p = m.plan
    options = PlanTable(
        restarts=max(defaults.MIN_RESTARTS, p.restarts),
        requests=p.requests,
        warmup=p.warmup,
        workloads=list(p.workloads),
        max_tokens=p.max_tokens,
        baseline=base.name,
        port=_port(spec, m),
        order="blocks",
        seed=p.seed,
        concurrency=list(p.concurrency),
        api=p.api,
        margin=p.margin,
        as_found=spec.name,
    )

    def build(keep: list[ArmTable], **update: object) -> PlanFile:
        return PlanFile(plan=options.model_copy(update=update), engagement=m.engagement, arms=keep)

    try:
        day = day_estimate(expand_plan(build(arms), source=source), None, path)
    except PlanError as exc:
        raise PlanError(f"{path}: the next plan would be invalid: {exc}") from None
    requests_given, restarts_given = given
    requests = requests_given or day.adaptive.requests
    per_start = day.costs.per_start(requests, p.warmup, len(p.concurrency))
    dropped: list[str] = []
    while len(groups) > 1 and left < len(arms) * per_start * defaults.MIN_RESTARTS:
        gone = groups.pop()
        dropped += [f"{arms[i].name} ({notes[i].split(':')[0]})" for i in gone]
        arms = [a for i, a in enumerate(arms) if i not in gone]
        notes = [n for i, n in enumerate(notes) if i not in gone]
    fit = math.floor(left / (len(arms) * per_start))
    power = day_estimate(
        expand_plan(build(arms, requests=requests), source=source), None, path, power=True
    ).power
    assert power is not None
    needed = power.fixed_restarts
    restarts = restarts_given or max(defaults.MIN_RESTARTS, min(needed or fit, fit))
    file = build(arms, requests=requests, restarts=restarts, health_timeout_s=_health(day.costs))
    estimated = planner.wall_clock(
        day.costs,
        len(arms) * restarts,
        requests=requests,
        warmup=p.warmup,
        levels=len(p.concurrency),
    )
    why = _why(power, day, given, restarts=restarts, fit=fit, left=left, requests=requests)
    why.append(
        f"Estimated {duration(estimated)} for {len(arms)} arms × {restarts} restarts "
        f"(costs {day.costs.source}: {day.costs.startup_s:.3g} s start-up, "
        f"{day.costs.mean_request_s:.3g} s per request)"
    )
    if estimated > left:
        why.append(f"WARNING: that is more than the {duration(left)} left: drop an arm")
    text = _text(path, file, spec.name, notes, why, fixes, dropped, source)
    parse_plan(text, source=source)  # what `sweep` will read: refused here, not on site
    return NextPlan(
        text=text,
        as_found=spec.name,
        arms=[a.name for a in arms],
        restarts=restarts,
        requests=requests,
        estimated_s=estimated,
        time_left_s=left,
        notes=fixes,
        dropped=dropped,
        why=why,
    )


def _why(
    power: planner.Power,
    day: planner.DayEstimate,
    given: tuple[int | None, int | None],
    *,
    restarts: int,
    fit: int,
    left: float,
    requests: int,
) -> list[str]:
    """Where the restarts and requests come from, in words (the plan's header)."""
    needed = power.fixed_restarts
    floor = not given[1] and restarts > min(needed or fit, fit)
    return [
        f"Restarts {restarts}{' (given)' if given[1] else ''}: {power.wanted:.0%} power to find "
        f"{power.target:+.0%} over {power.family} comparison(s) needs "
        f"{needed if needed else 'over 100'} (fixed plan, at {power.noise}); {fit} fit in the "
        f"time left ({duration(left)})"
        + (f"; {defaults.MIN_RESTARTS} is the floor" if floor else ""),
        f"Requests {requests} per restart and workload"
        + (f" (given; m* would be {day.adaptive.why})" if given[0] else f": {day.adaptive.why}"),
    ]


def _health(costs: planner.Costs) -> float:
    """Seconds a start may take: a multiple of the measured mean, at least the default."""
    return float(
        max(defaults.HEALTH_TIMEOUT_S, math.ceil(defaults.PLAN_HEALTH_STARTUPS * costs.startup_s))
    )


def _text(
    path: Path,
    file: PlanFile,
    found: str,
    notes: list[str],
    why: list[str],
    fixes: list[str],
    dropped: list[str],
    source: str,
) -> str:
    header = [
        f"Next block of the day, from the findings of {path} (diagnose plan).",
        f"As found: {found}, the client's configuration ([plan] as_found); each other arm",
        "tests a remedy of a finding on it (the comment above it says which).",
        *why,
    ]
    if fixes:
        header += ["Fixes no arm here can test:", *(f"  - {n}" for n in fixes)]
    if dropped:
        header += ["Left out to fit the time left:", *(f"  - {d}" for d in dropped)]
    header += [
        "Environment values are as the bundle recorded them (secrets redacted): restore any",
        "redacted value before running it.",
        f"Run: diagnose sweep {source} -o NEXT_BUNDLE --dry-run, then without --dry-run.",
    ]
    try:
        return to_toml(file, header="\n".join(header), notes=dict(enumerate(notes)))
    except (ValueError, EditError) as exc:
        raise PlanError(f"{path}: cannot write the next plan ({exc})") from None
