"""Benchmark: false decisions, power and interval coverage of the verdicts `analyse` prints.

Usage::

    python benchmarks/verdict_simulation.py [--sims 1000] [--adaptive-sims 200] [--seed 0]
        [--jobs 2]
        [--restart-cv 0.05 0.10 0.15] [--effect 0.0 0.10] [--restarts 5] [--looks 4 8 12]
        [--family-cv 0.10] [--family 1.0 1.05 1.10] [--request-cv 0.05] [--requests 15]
        [--drift-cv 0.01] [--margin 0.02] [--tmp DIR]

End to end, through the real code path: every simulated experiment is a bundle written with
diagnostic.bundle.store.Bundle (manifest, run.json per restart with its block number,
requests.jsonl with chunk times that give a chosen decode tok/s exactly), opened with
Bundle.open and decided by diagnostic.analyse.core.analyse. Nothing of the statistics is
re-implemented here: the script only reads the Comparison that analyse returns.

The truth. The experiment runs in blocks; each block starts every arm once (plan.order
"blocks"), in a random order. Each restart draws its level: base tok/s × the arm's true
ratio × exp(drift of the block) × a lognormal restart effect with CV `restart_cv`. The block
drift is a random walk with steps of CV `drift_cv`, shared by the arms of a block. Each
restart then serves 1 warm-up and `requests` measured requests, whose decode tok/s scatter
around its level (lognormal, CV `request_cv`). The true speedup of an arm is its ratio: the
restart means of two arms differ in law only by that factor.

The designs:
- fixed: `restarts` blocks (plan.restarts), analysed once;
- adaptive: plan.design = {"kind": "adaptive", "looks": looks, "alpha": 0.05} and
  plan.restarts = the last look. The bundle grows block by block; at each planned look it is
  analysed, and the experiment stops at the first look where every speculative comparison
  is decided (verdict not INCONCLUSIVE), else at the last look (the sweep before issue 22);
- per-arm: the design `sweep --adaptive` records since issue 22 — the same looks, plus the
  baseline's A/A repeat ("base-aa", aa_of "base") in every block, pooled into the reference
  (plan.design.pool_aa), and the plan's target (+10%) for the futility stop; at each look a
  spec arm whose comparison can stop (Comparison.stopping.can_stop: WIN, LOSS or
  EQUIVALENT, or futile) gets no more blocks; the baseline, its repeat and the open arms go
  on until every arm has stopped or the last look. The verdict of a stopped arm is the one
  of its look (paired on the blocks both sides have, its interval no longer changes).

What is read from each Comparison (the rewrite of issue 18 renames the fields; both work):
- after the rewrite (Comparison has `ci_level`): verdict, [ci_low, ci_high] at ci_level,
  the interval that decided; `withheld` counts as INCONCLUSIVE;
- before it: fixed design: verdict with [verdict_ci_low, verdict_ci_high] at verdict_level;
  adaptive design: the group-sequential status analyse computes for `sweep --adaptive`
  (stopping.verdict_at_look with stopping.ci_low/ci_high at 1 − per_look_alpha), which is
  what the sweep stops on. The verdict and 95% interval the report printed before the
  rewrite (Comparison.verdict, ci_low/ci_high) are then tabulated separately.

Section `--noisy-arm` (issue 45): one arm noisier than the rest of its family. A family of
`--noisy-family` speculative arms, every one with no true effect, against one baseline, in
blocks; one arm's restart CV is 1×, 2× or 3× the others' (`--noisy-cv`), at 3, 5 and 8
blocks. Each restart's log level is normal with its arm's SD plus the request mean's noise
(request CV/√requests); the block drift is shared by a block's arms and cancels in its
differences, so it is left out. The block differences (arm − baseline) go through
diagnostic.analyse.family.simultaneous_intervals and diagnostic.analyse.stats.verdict, the
functions compare.decide calls for a blocked family, without writing bundles: a cell then
takes seconds, not the hours that thousands of analysed bundles would take on one core.
Per cell: the noisy arm's coverage against the marginal level its interval states
(FamilyInterval.level), its false decisions (WIN or LOSS) against what that level allows
(1 − level: a false decision needs an interval that misses 1 by the margin), and the
family's joint coverage against 1 − α.

Coverage: the deciding interval contains the true ratio. For a one-arm bundle the family
has one comparison; for the `--family` bundle (one spec arm per true ratio) the family-wise
coverage counts a bundle when every interval covers its own ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import math
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from analyse_bundles import synthetic_record  # noqa: E402  (tests/analyse_bundles.py)

from diagnostic.analyse.core import analyse  # noqa: E402
from diagnostic.analyse.family import simultaneous_intervals  # noqa: E402
from diagnostic.analyse.stats import verdict  # noqa: E402
from diagnostic.bundle.store import Bundle  # noqa: E402
from diagnostic.schema.analysis import Comparison  # noqa: E402
from diagnostic.schema.bundle import ArmSpec, Manifest, PlanSpec, RunInfo  # noqa: E402

BASE_TPS = 100.0
TOKENS = 256  # the plan's default max_tokens; four chunks per request keep files small
CHUNKS = [1, 85, 85, 85]
WORKLOAD = "code"
SERVE = "vllm serve meta-llama/Llama-3.1-8B-Instruct --port {port}"
SPEC = """ --speculative-config '{{"method":"ngram","num_speculative_tokens":{k}}}'"""
ALPHA = 0.05
TARGET = 0.10  # the speedup the per-arm design is powered to find (defaults.TARGET)
REWRITTEN = "ci_level" in Comparison.model_fields
"""The analysis rewrite (one interval per comparison, ci_level, withheld, matched) landed."""
VERDICTS = ("WIN", "LOSS", "EQUIVALENT", "INCONCLUSIVE")


# -- the truth and the bundle ---------------------------------------------------------------
@dataclass(frozen=True)
class Truth:
    """What the simulated engine does: one true speedup ratio per speculative arm."""

    ratios: tuple[float, ...]
    restart_cv: float
    request_cv: float = 0.05
    drift_cv: float = 0.01
    requests: int = 15

    @property
    def arms(self) -> list[str]:
        return [f"spec{i}" for i in range(len(self.ratios))]


def _sigma(cv: float) -> float:
    """SD on the log scale of a lognormal with this CV."""
    return math.sqrt(math.log1p(cv * cv))


def plan_spec(
    truth: Truth,
    *,
    blocks: int,
    looks: Sequence[int] | None,
    margin: float,
    per_arm: bool = False,
) -> PlanSpec:
    """The manifest's plan: baseline + spec arms, blocked order, the margin and the design;
    `per_arm`: the A/A repeat, pooled into the reference, and the futility target too.
    Fields this version of the schema lacks (margin, design before issue 18) are left out."""
    arms = [ArmSpec(name="base", speculative=False, launch=SERVE)]
    if per_arm:
        arms.append(ArmSpec(name="base-aa", speculative=False, launch=SERVE, aa_of="base"))
    arms += [
        ArmSpec(name=a, speculative=True, launch=SERVE + SPEC.format(k=i + 2))
        for i, a in enumerate(truth.arms)
    ]  # launches that differ only in speculation flags: each spec arm matches the baseline
    design: dict[str, Any] | None = (
        {"kind": "adaptive", "looks": list(looks), "alpha": ALPHA} if looks else None
    )
    if design is not None and per_arm:
        design |= {"target": TARGET, "pool_aa": True}
    fields: dict[str, Any] = {
        "arms": arms,
        "workloads": [WORKLOAD],
        "requests": truth.requests,
        "warmup": 1,
        "restarts": blocks,
        "max_tokens": TOKENS,
        "baseline": "base",
        "order": "blocks",
        "margin": margin,
        "design": design,
    }
    known = PlanSpec.model_fields
    return PlanSpec(**{k: v for k, v in fields.items() if k in known and v is not None})


class SimulatedBundle:
    """A blocked bundle that grows one block at a time, through the real Bundle API."""

    def __init__(self, path: Path, truth: Truth, plan: PlanSpec, rng: random.Random) -> None:
        self.truth, self.rng = truth, rng
        self.bundle = Bundle.create(path, Manifest(tool_version="simulation", plan=plan))
        self.blocks = 0
        self.drift = 0.0
        self.ratio = {"base": 1.0} | dict(zip(truth.arms, truth.ratios, strict=True))
        self.references = [a.name for a in plan.arms if a.name == "base" or a.aa_of == "base"]
        self.ratio |= dict.fromkeys(self.references, 1.0)

    def add_block(self, stopped: frozenset[str] = frozenset()) -> None:
        t, rng, b = self.truth, self.rng, self.blocks
        self.drift += rng.gauss(0.0, _sigma(t.drift_cv)) if b else 0.0
        order = [*self.references, *(a for a in t.arms if a not in stopped)]
        rng.shuffle(order)
        for arm in order:
            level = BASE_TPS * self.ratio[arm] * math.exp(self.drift)
            level *= math.exp(rng.gauss(0.0, _sigma(t.restart_cv)))
            self.bundle.write_run(RunInfo(arm=arm, restart=b, block=b, status="ok"))
            for seq in range(t.requests + 1):  # seq 0 is the warm-up
                tps = level * math.exp(rng.gauss(0.0, _sigma(t.request_cv)))
                self.bundle.append_request(
                    synthetic_record(
                        arm,
                        b,
                        seq,
                        tps,
                        workload=WORKLOAD,
                        warmup=seq == 0,
                        tokens=TOKENS,
                        chunk_tokens=CHUNKS,
                    )
                )
        self.blocks += 1

    def grow_to(self, blocks: int, stopped: frozenset[str] = frozenset()) -> None:
        while self.blocks < blocks:
            self.add_block(stopped)


# -- reading a comparison -------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    """A verdict with the interval that made it."""

    verdict: str
    low: float | None
    high: float | None
    level: float | None

    def covers(self, ratio: float) -> bool:
        return self.low is not None and self.high is not None and self.low <= ratio <= self.high


def deciding(c: Comparison, adaptive: bool) -> Decision:
    """The verdict and the interval that decided it, at its level (see the module doc)."""
    if REWRITTEN:
        verdict = "INCONCLUSIVE" if getattr(c, "withheld", False) else c.verdict
        return Decision(verdict, c.ci_low, c.ci_high, getattr(c, "ci_level", None))
    s = c.stopping
    if adaptive and s is not None and s.verdict_at_look is not None:
        return Decision(s.verdict_at_look, s.ci_low, s.ci_high, 1.0 - s.per_look_alpha)
    low = getattr(c, "verdict_ci_low", c.ci_low)
    high = getattr(c, "verdict_ci_high", c.ci_high)
    return Decision(c.verdict, low, high, getattr(c, "verdict_level", None))


def printed(c: Comparison) -> Decision:
    """What the report printed beside the verdict: the verdict and ci_low/ci_high (95% before
    the rewrite, the deciding interval after it)."""
    return Decision(c.verdict, c.ci_low, c.ci_high, getattr(c, "ci_level", 0.95))


_ANALYSE_TAKES_LOOKS = "looks" in inspect.signature(analyse).parameters


def spec_comparisons(path: Path, looks: Sequence[int] | None, truth: Truth) -> list[Comparison]:
    """analyse(Bundle.open(path)): the spec comparisons, in the order of truth.arms."""
    kwargs = {"looks": list(looks)} if looks and _ANALYSE_TAKES_LOOKS else {}
    analysis = analyse(Bundle.open(path), **kwargs)
    by_arm = {c.arm: c for c in analysis.comparisons if c.kind == "spec"}
    missing = [a for a in truth.arms if a not in by_arm]
    if missing:
        raise RuntimeError(f"{path}: analyse gave no comparison for {missing}")
    return [by_arm[a] for a in truth.arms]


# -- one experiment -------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One row of the table: a design, a truth, a number of simulations."""

    design: str  # "fixed", "adaptive" (stop when all are decided) or "per-arm"
    truth: Truth
    sims: int
    restarts: int  # fixed design: blocks per arm
    looks: tuple[int, ...]  # adaptive design: planned looks
    margin: float = 0.02

    @property
    def key(self) -> str:
        return f"{self.design}-{self.truth.ratios}-{self.truth.restart_cv}"


@dataclass(frozen=True)
class Outcome:
    """One simulated experiment: per spec arm the deciding and the printed decision."""

    decided: tuple[Decision, ...]
    shown: tuple[Decision, ...]
    blocks: int
    arm_blocks: float = 0.0  # restarts per spec arm, mean over the arms


def simulate(case: Case, index: int, seed: int, tmp: Path) -> Outcome:
    """Write one bundle, decide it with analyse (at each look when adaptive), delete it."""
    rng = random.Random(f"{seed}/{case.key}/{index}")
    adaptive = case.design in ("adaptive", "per-arm")
    looks = case.looks if adaptive else (case.restarts,)
    per_arm = case.design == "per-arm"
    plan = plan_spec(
        case.truth,
        blocks=looks[-1],
        looks=case.looks if adaptive else None,
        margin=case.margin,
        per_arm=per_arm,
    )
    path = Path(tempfile.mkdtemp(prefix="b", dir=tmp))
    arms = case.truth.arms
    ran = dict.fromkeys(arms, 0)
    stopped: frozenset[str] = frozenset()
    try:
        sim = SimulatedBundle(path / "bundle", case.truth, plan, rng)
        for n in looks:
            for a in arms:
                ran[a] += 0 if a in stopped else n - sim.blocks
            sim.grow_to(n, stopped)
            comparisons = spec_comparisons(
                sim.bundle.path, case.looks if adaptive else None, case.truth
            )
            decided = tuple(deciding(c, adaptive) for c in comparisons)
            done = {a for a, d in zip(arms, decided, strict=True) if d.verdict != "INCONCLUSIVE"}
            if per_arm:  # decided or futile: what the sweep's timekeeper stops on
                done = {c.arm for c in comparisons if c.stopping and c.stopping.can_stop}
                stopped = stopped | done
            if len(done) == len(arms):
                break
        shown = tuple(printed(c) for c in comparisons)
        return Outcome(decided, shown, sim.blocks, sum(ran.values()) / len(arms))
    finally:
        shutil.rmtree(path, ignore_errors=True)


# -- summaries ------------------------------------------------------------------------------
def _rate(k: int, n: int) -> tuple[float, float]:
    p = k / n if n else float("nan")
    return p, math.sqrt(p * (1 - p) / n) if n else float("nan")


def wrong(verdict: str, ratio: float, margin: float) -> bool:
    """A verdict the true ratio contradicts (INCONCLUSIVE is never wrong)."""
    inside = 1 / (1 + margin) <= ratio <= 1 + margin
    return (
        (verdict == "WIN" and ratio <= 1 + margin)
        or (verdict == "LOSS" and ratio >= 1 / (1 + margin))
        or (verdict == "EQUIVALENT" and not inside)
    )


@dataclass
class Summary:
    """Rates over the simulations of one case."""

    case: Case
    n: int
    per_arm: list[dict[str, int]]  # verdict counts of each spec arm
    covered: int  # every deciding interval covers its true ratio
    any_wrong: int  # some verdict the truth contradicts
    blocks: float  # mean restarts per arm used (the baseline's)
    level: float | None  # mean level of the deciding interval
    shown_counts: list[dict[str, int]] = field(default_factory=list)
    shown_covered: int = 0
    shown_wrong: int = 0
    seconds: float = 0.0  # wall time of the run the case was part of
    arm_blocks: float = 0.0  # mean restarts per spec arm (per-arm stopping gives fewer)

    @classmethod
    def of(cls, case: Case, outcomes: Sequence[Outcome], seconds: float) -> Summary:
        ratios, margin = case.truth.ratios, case.margin

        def tally(pick: str) -> tuple[list[dict[str, int]], int, int]:
            counts = [dict.fromkeys(VERDICTS, 0) for _ in ratios]
            covered = bad = 0
            for o in outcomes:
                ds = getattr(o, pick)
                for arm, d in zip(counts, ds, strict=True):
                    arm[d.verdict] += 1
                covered += all(d.covers(r) for d, r in zip(ds, ratios, strict=True))
                bad += any(wrong(d.verdict, r, margin) for d, r in zip(ds, ratios, strict=True))
            return counts, covered, bad

        counts, covered, bad = tally("decided")
        shown_counts, shown_covered, shown_wrong = tally("shown")
        levels = [d.level for o in outcomes for d in o.decided if d.level is not None]
        return cls(
            case=case,
            n=len(outcomes),
            per_arm=counts,
            covered=covered,
            any_wrong=bad,
            blocks=sum(o.blocks for o in outcomes) / len(outcomes),
            arm_blocks=sum(o.arm_blocks for o in outcomes) / len(outcomes),
            level=sum(levels) / len(levels) if levels else None,
            shown_counts=shown_counts,
            shown_covered=shown_covered,
            shown_wrong=shown_wrong,
            seconds=seconds,
        )

    @property
    def counts(self) -> dict[str, int]:
        """Verdict counts of the first spec arm (the only one of a one-arm case)."""
        return self.per_arm[0]

    def rate(self, verdict: str) -> float:
        return self.counts[verdict] / self.n

    @property
    def false_rate(self) -> tuple[float, float]:
        """WIN + LOSS of the first arm (the false decisions when its ratio is 1)."""
        return _rate(self.counts["WIN"] + self.counts["LOSS"], self.n)

    @property
    def coverage(self) -> tuple[float, float]:
        return _rate(self.covered, self.n)


# -- running the cases ----------------------------------------------------------------------
def _job(args: tuple[Case, int, int, str]) -> Outcome:
    case, index, seed, tmp = args
    return simulate(case, index, seed, Path(tmp))


def run_cases(
    cases: Sequence[Case], seed: int, tmp: Path, pool: Any | None = None
) -> list[Summary]:
    """Every simulation of every case, all in one queue (in a process pool when given one)."""
    start = time.perf_counter()
    jobs = [(case, i, seed, str(tmp)) for case in cases for i in range(case.sims)]
    outcomes = list(pool.imap(_job, jobs, chunksize=2)) if pool else [_job(j) for j in jobs]
    seconds = time.perf_counter() - start
    out, at = [], 0
    for case in cases:
        out.append(Summary.of(case, outcomes[at : at + case.sims], seconds))
        at += case.sims
    return out


def run_case(case: Case, seed: int, tmp: Path, pool: Any | None = None) -> Summary:
    """Every simulation of one case."""
    return run_cases([case], seed, tmp, pool)[0]


@contextlib.contextmanager
def workers(jobs: int) -> Iterator[Any | None]:
    """A pool of `jobs` forked processes (None: run in this process). Each simulation seeds
    its own generator from (seed, case, index) and imap keeps the order, so the results are
    the same with any number of processes."""
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield None
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield pool


def scratch_dir(base: str | None) -> Path:
    """A fresh folder for the bundles: in memory (/dev/shm) where there is one."""
    if base is None and os.access("/dev/shm", os.W_OK):
        base = "/dev/shm"
    return Path(tempfile.mkdtemp(prefix="verdict-sim-", dir=base))


# -- tables ---------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _design(s: Summary) -> str:
    c = s.case
    if c.design == "fixed":
        return f"fixed, {c.restarts} blocks"
    return f"{c.design}, looks " + "/".join(map(str, c.looks))


def _effects(s: Summary) -> str:
    return ", ".join(f"{100 * (r - 1):+.0f}%" for r in s.case.truth.ratios)


def _level(s: Summary) -> str:
    return f"{100 * s.level:.2f}%" if s.level is not None else "?"


def table(summaries: Sequence[Summary]) -> str:
    """One-arm cases: verdict rates, coverage of the deciding interval, restarts used."""
    head = (
        "| design | restart CV | effect | sims | WIN | LOSS | EQUIVALENT | INCONCLUSIVE "
        "| coverage ± SE | interval level (mean) | restarts per arm (mean) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = []
    for s in summaries:
        cov, se = s.coverage
        rows.append(
            f"| {_design(s)} | {_pct(s.case.truth.restart_cv)} | {_effects(s)} | {s.n} | "
            + " | ".join(_pct(s.rate(v)) for v in VERDICTS)
            + f" | {_pct(cov)} ± {_pct(se)} | {_level(s)} | {s.blocks:.2f} |"
        )
    return "\n".join([head, *rows])


def family_table(summaries: Sequence[Summary]) -> str:
    """Several spec arms, one family: simultaneous coverage and any wrong verdict."""
    head = (
        "| design | restart CV | true effects | sims | family-wise coverage ± SE "
        "| any wrong verdict ± SE | WIN per arm | interval level (mean) "
        "| restarts per arm (mean) | restarts per spec arm (mean) |\n"
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = []
    for s in summaries:
        cov, se = s.coverage
        bad, bse = _rate(s.any_wrong, s.n)
        wins = " / ".join(_pct(a["WIN"] / s.n) for a in s.per_arm)
        rows.append(
            f"| {_design(s)} | {_pct(s.case.truth.restart_cv)} | {_effects(s)} | {s.n} | "
            f"{_pct(cov)} ± {_pct(se)} | {_pct(bad)} ± {_pct(bse)} | {wins} | "
            f"{_level(s)} | {s.blocks:.2f} | {s.arm_blocks:.2f} |"
        )
    return "\n".join([head, *rows])


def shown_table(summaries: Sequence[Summary]) -> str:
    """Before the rewrite: what the report printed (Comparison.verdict and its 95%
    ci_low/ci_high) on the same bundles, where it differs from what decided."""
    head = (
        "| design | restart CV | effects | sims | printed WIN (first arm) "
        "| printed LOSS (first arm) "
        "| printed wrong ± SE | printed 95% interval covers ± SE |\n"
        "|---|---:|---|---:|---:|---:|---:|---:|"
    )
    rows = []
    for s in summaries:
        cov, se = _rate(s.shown_covered, s.n)
        bad, bse = _rate(s.shown_wrong, s.n)
        rows.append(
            f"| {_design(s)} | {_pct(s.case.truth.restart_cv)} | {_effects(s)} | {s.n} | "
            f"{_pct(s.shown_counts[0]['WIN'] / s.n)} | {_pct(s.shown_counts[0]['LOSS'] / s.n)} | "
            f"{_pct(bad)} ± {_pct(bse)} | {_pct(cov)} ± {_pct(se)} |"
        )
    return "\n".join([head, *rows])


# -- one noisier arm (issue 45) ------------------------------------------------------------
@dataclass(frozen=True)
class NoisyCell:
    """One cell of the noisy-arm table: the noisy arm's coverage, stated level and false
    decisions, and the family's joint coverage, over `n` simulated families."""

    scale: float
    blocks: int
    n: int
    covered: int
    level: float  # mean stated marginal level of the noisy arm's interval
    false: int
    joint: int


def noisy_cell(scale: float, blocks: int, args: argparse.Namespace) -> NoisyCell:
    """`args.noisy_sims` families of `args.noisy_family` null arms, arm 0 at `scale`× the CV."""
    import numpy as np

    rng = np.random.default_rng([args.seed, int(scale * 10), blocks])
    arms = args.noisy_family
    sd = np.full(arms + 1, _sigma(args.noisy_restart_cv))
    sd[1] = _sigma(args.noisy_restart_cv * scale)  # 0: the baseline, 1: the noisy arm
    sd = np.sqrt(sd**2 + _sigma(args.request_cv) ** 2 / args.requests)
    covered = false = joint = 0
    level = 0.0
    for _ in range(args.noisy_sims):
        logs = rng.standard_normal((arms + 1, blocks)) * sd[:, None]
        diffs = [dict(enumerate(logs[j] - logs[0])) for j in range(1, arms + 1)]
        out = simultaneous_intervals(diffs, ALPHA)
        hits = [i.low <= 0.0 <= i.high for i in out]
        noisy = out[0]
        covered += hits[0]
        joint += all(hits)
        level += noisy.level
        false += verdict(math.exp(noisy.low), math.exp(noisy.high), args.margin) in ("WIN", "LOSS")
    n = args.noisy_sims
    return NoisyCell(scale, blocks, n, covered, level / n, false, joint)


def noisy_table(cells: Sequence[NoisyCell]) -> str:
    """Markdown table of the noisy-arm cells, each rate with its Monte Carlo SE."""
    head = (
        "| noisy arm's CV | blocks | families | its coverage | stated level | its false "
        "decisions | allowed | joint coverage (target 95%) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = []
    for c in cells:
        cov, cse = _rate(c.covered, c.n)
        bad, bse = _rate(c.false, c.n)
        joint, jse = _rate(c.joint, c.n)
        rows.append(
            f"| {c.scale:g}× | {c.blocks} | {c.n} | {_pct(cov)} ± {_pct(cse)} | "
            f"{_pct(c.level)} | {_pct(bad)} ± {_pct(bse)} | {_pct(1 - c.level)} | "
            f"{_pct(joint)} ± {_pct(jse)} |"
        )
    return "\n".join([head, *rows])


def noisy_arm(args: argparse.Namespace) -> int:
    """Print the noisy-arm table; 1 when a cell misses: coverage more than 2 points under its
    stated level, or false decisions above the allowed rate."""
    start = time.perf_counter()
    cells = [noisy_cell(s, b, args) for s in args.noisy_cv for b in args.noisy_blocks]
    print(
        f"Seed {args.seed}; {args.noisy_family} null speculative arms and one baseline; restart"
        f" CV {args.noisy_restart_cv:.0%} (the noisy arm: that × its factor); request CV "
        f"{args.request_cv}, {args.requests} requests; δ = {args.margin}; "
        f"{time.perf_counter() - start:.0f} s.\n"
    )
    print(noisy_table(cells))
    misses = [c for c in cells if c.covered / c.n < c.level - 0.02 or c.false / c.n > 1 - c.level]
    return 1 if misses else 0


# -- command line ---------------------------------------------------------------------------
def cases(args: argparse.Namespace) -> tuple[list[Case], list[Case]]:
    """One-arm cases (design × restart CV × effect) and the family cases."""

    def truth(ratios: Sequence[float], cv: float) -> Truth:
        return Truth(tuple(ratios), cv, args.request_cv, args.drift_cv, args.requests)

    designs = [d for d in ("fixed", "adaptive", "per-arm") if d in args.designs]
    sims = {"fixed": args.sims, "adaptive": args.adaptive_sims, "per-arm": args.adaptive_sims}
    looks = tuple(args.looks)

    def case(design: str, ratios: Sequence[float], cv: float) -> Case:
        return Case(design, truth(ratios, cv), sims[design], args.restarts, looks, args.margin)

    single = [
        case(d, [1.0 + e], cv) for d in designs for cv in args.restart_cv for e in args.effect
    ]
    family = [case(d, args.family, cv) for d in designs for cv in args.family_cv]
    return single, family


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sims", type=int, default=1000, help="bundles per fixed-design case")
    p.add_argument(
        "--adaptive-sims",
        type=int,
        default=200,
        help="bundles per adaptive case (each is analysed at up to every look)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--restart-cv", type=float, nargs="+", default=[0.05, 0.10, 0.15])
    p.add_argument("--effect", type=float, nargs="+", default=[0.0, 0.10])
    p.add_argument("--restarts", type=int, default=5, help="fixed design: blocks per arm")
    p.add_argument("--looks", type=int, nargs="+", default=[4, 8, 12], help="adaptive looks")
    p.add_argument("--family-cv", type=float, nargs="*", default=[0.10])
    p.add_argument(
        "--family",
        type=float,
        nargs="+",
        default=[1.0, 1.05, 1.10],
        help="true ratios of the spec arms of the family bundle",
    )
    p.add_argument("--designs", nargs="+", default=["fixed", "adaptive", "per-arm"])
    p.add_argument("--request-cv", type=float, default=0.05)
    p.add_argument("--requests", type=int, default=15)
    p.add_argument("--drift-cv", type=float, default=0.01)
    p.add_argument("--margin", type=float, default=0.02, help="plan.margin δ")
    p.add_argument("--tmp", default=None, help="folder for the bundles (default /dev/shm)")
    p.add_argument("--noisy-arm", action="store_true", help="run only the noisy-arm section")
    p.add_argument("--noisy-sims", type=int, default=2000, help="families per noisy-arm cell")
    p.add_argument("--noisy-family", type=int, default=3, help="null spec arms in the family")
    p.add_argument("--noisy-restart-cv", type=float, default=0.10)
    p.add_argument("--noisy-cv", type=float, nargs="+", default=[1.0, 2.0, 3.0])
    p.add_argument("--noisy-blocks", type=int, nargs="+", default=[3, 5, 8])
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.noisy_arm:
        return noisy_arm(args)
    single, family = cases(args)
    tmp = scratch_dir(args.tmp)
    start = time.perf_counter()
    load = os.getloadavg()[0]
    try:
        with workers(args.jobs) as pool:
            done = run_cases([*single, *family], args.seed, tmp, pool)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ones, fams = done[: len(single)], done[len(single) :]
    fields = (
        "ci_low/ci_high at ci_level (rewritten)"
        if REWRITTEN
        else ("verdict_ci_low/high at verdict_level; adaptive: stopping.ci_low/high")
    )
    print(
        f"Seed {args.seed}, {args.jobs} processes, {time.perf_counter() - start:.0f} s, "
        f"load average {load:.1f} → {os.getloadavg()[0]:.1f}; deciding interval read from "
        f"Comparison {fields}; δ = {args.margin}, request CV {args.request_cv}, "
        f"{args.requests} requests per restart, drift CV {args.drift_cv} per block.\n"
    )
    print(table(ones))
    if fams:
        print()
        print(family_table(fams))
    if not REWRITTEN:
        print(
            "\nBefore the rewrite, what the report printed on the same bundles "
            "(Comparison.verdict with its 95% ci_low/ci_high):\n"
        )
        print(shown_table([*ones, *fams]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
