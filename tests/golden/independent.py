"""Independent reference implementation of the analysis rules (v2) for the golden tests.

Reads the raw bundle files (manifest.json, runs/*/run.json, runs/*/requests.jsonl) with json
and computes the figures of tests/golden/README.md with numpy and scipy only. It imports
nothing from the `diagnostic` package on purpose: it is the check of that package's analysis.

    .venv/bin/python tests/golden/independent.py      # rewrites tests/golden/<sample>.expected.json
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shlex
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize, special, stats

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent.parent / "samples"
ALL = "all"
DEFAULT_MARGIN = 0.02
ERROR_SHARE = 0.10
SIGNIFICANT = 10

SPEC_FLAG = re.compile(
    r"--speculative[-_][\w-]+|--num[-_]speculative[-_]tokens|--spec[-_][\w-]+|-md|--model-draft"
    r"|--draft(?:[-_][\w-]+)?|--hf-repo-draft|-hfd|-devd|--device-draft|-ngld|--gpu-layers-draft"
    r"|-td|--threads-draft|-tbd|--threads-batch-draft|-cd|--ctx-size-draft"
)


# -- R1, R2: reading ---------------------------------------------------------------------------
def read_records(path: Path) -> list[dict[str, Any]]:
    """requests.jsonl as dicts; an unparseable last line (torn write) is dropped."""
    if not path.is_file():
        return []
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    out = []
    for i, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as err:
            if i == len(lines) - 1:
                break
            raise ValueError(
                f"{path}: line {i + 1} is not JSON (only a torn last line may be)"
            ) from err
    return out


def decode_tps(rec: dict[str, Any]) -> float | None:
    """R1's decode interval, or None when the request has none."""
    times = rec.get("chunk_times_s") or []
    tokens = rec.get("completion_tokens")
    chunk_tokens = rec.get("chunk_tokens")
    first = chunk_tokens[0] if isinstance(chunk_tokens, list) and chunk_tokens else 1
    if len(times) < 2 or times[-1] <= times[0] or tokens is None or tokens <= first:
        return None
    return (tokens - first) / (times[-1] - times[0])


def is_measured(rec: dict[str, Any], max_tokens: int | None) -> bool:
    if rec.get("warmup") or rec.get("error") is not None:
        return False
    if max_tokens is not None and rec.get("completion_tokens") != max_tokens:
        return False
    return decode_tps(rec) is not None


def load_runs(bundle: Path) -> list[dict[str, Any]]:
    """Every run folder: its run.json facts, records, and whether (and why) it is left out."""
    runs = []
    for run_json in sorted((bundle / "runs").glob("*/run.json")):
        info = json.loads(run_json.read_text(encoding="utf-8"))
        records = read_records(run_json.parent / "requests.jsonl")
        arm, restart = info.get("arm"), info.get("restart")
        reason = None
        non_warm = [r for r in records if not r.get("warmup")]
        failed = sum(1 for r in non_warm if r.get("error") is not None)
        if info.get("status") == "failed":
            reason = "run status failed"
        elif non_warm and failed / len(non_warm) > ERROR_SHARE:
            reason = f"{failed} of {len(non_warm)} non-warm-up requests failed (> 10%)"
        runs.append(
            {
                "id": f"{arm}-r{restart}",
                "arm": arm,
                "restart": restart,
                "block": info.get("block"),
                "records": records,
                "left_out": reason,
            }
        )
    return runs


# -- R6: which comparisons ---------------------------------------------------------------------
def without_speculation(launch: str | None) -> list[str] | None:
    if launch is None:
        return None
    tokens = shlex.split(launch)
    out, i = [], 0
    while i < len(tokens):
        tok = tokens[i]
        head = tok.split("=", 1)[0]
        if SPEC_FLAG.fullmatch(head):
            if "=" not in tok and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                i += 1  # the flag's value
            i += 1
            continue
        out.append(tok)
        i += 1
    return out


def carries_speculation(launch: str | None) -> bool:
    if launch is None:
        return False
    return any(SPEC_FLAG.fullmatch(t.split("=", 1)[0]) for t in shlex.split(launch))


def is_speculative(arm: dict[str, Any]) -> bool:
    flag = arm.get("speculative")
    return carries_speculation(arm.get("launch")) if flag is None else bool(flag)


def comparison_plan(plan: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(arm, baseline, kind, matched) in plan order."""
    arms = plan.get("arms") or []
    base = plan.get("baseline")
    plain = [a for a in arms if not is_speculative(a) and not a.get("aa_of")]
    out = []
    for arm in arms:
        name = arm["name"]
        if arm.get("aa_of"):
            out.append((name, arm["aa_of"], "aa", True))  # the same configuration again
        elif is_speculative(arm):
            if arm.get("baseline"):
                out.append((name, arm["baseline"], "spec", True))
                continue
            mine = without_speculation(arm.get("launch"))
            match = next(
                (b["name"] for b in plain if without_speculation(b.get("launch")) == mine), None
            )
            if match is not None:
                out.append((name, match, "spec", True))
            elif base is not None:
                out.append((name, base, "spec", False))
        elif base is not None and name != base:
            out.append((name, base, "config", False))
    return out


# -- R3-R5: summaries and arm estimates --------------------------------------------------------
def t_interval(values: list[float], level: float) -> tuple[float, float]:
    x = np.asarray(values, dtype=float)
    n = len(x)
    mean = float(x.mean())
    if n < 2:
        return mean, mean
    sd = float(x.std(ddof=1))
    if sd == 0:
        return mean, mean
    half = float(stats.t.ppf((1 + level) / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def summaries(runs: list[dict[str, Any]], plan: dict[str, Any]) -> dict:
    """{(arm, key, level): {restart: {"tps": [...], "block": b}}} over the runs left in."""
    max_tokens = plan.get("max_tokens")
    order = list(plan.get("workloads") or [])
    per_run: dict = defaultdict(lambda: defaultdict(dict))
    workloads_of: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        if run["left_out"]:
            continue
        for rec in run["records"]:
            if not is_measured(rec, max_tokens):
                continue
            level = rec.get("concurrency")
            level = 1 if level is None else int(level)
            wl = rec.get("workload")
            cell = per_run[(run["arm"], wl, level)].setdefault(
                run["restart"], {"tps": [], "block": run["block"]}
            )
            cell["tps"].append(decode_tps(rec))
            workloads_of[run["arm"]].add(wl)
    out: dict = {}
    for (arm, wl, level), by_restart in per_run.items():
        out[(arm, wl, level)] = by_restart
    for arm, wls in workloads_of.items():
        if len(wls) < 2:
            continue
        levels = sorted({lv for (a, _, lv) in per_run if a == arm})
        for level in levels:
            pooled: dict = {}
            for wl in wls:
                for restart, cell in per_run.get((arm, wl, level), {}).items():
                    dest = pooled.setdefault(restart, {"tps": [], "block": cell["block"]})
                    dest["tps"].extend(cell["tps"])
            if pooled:
                out[(arm, ALL, level)] = pooled
    keys_of = {}
    for arm, wls in workloads_of.items():
        keys = [w for w in order if w in wls] + sorted(wls - set(order))
        keys_of[arm] = keys + ([ALL] if len(wls) > 1 else [])
    return {"cells": out, "keys": keys_of}


def restart_means(cell: dict) -> dict[int, float]:
    return {r: float(np.mean(c["tps"])) for r, c in sorted(cell.items())}


def arm_estimate(cell: dict) -> dict[str, Any]:
    means = restart_means(cell)
    if len(means) == 1:
        (only,) = cell.values()
        low, high = t_interval(only["tps"], 0.95)
        est = next(iter(means.values()))
        return _estimate(est, low, high, 1, True)
    logs = np.log(list(means.values()))
    low, high = t_interval(list(logs), 0.95)
    return _estimate(math.exp(float(logs.mean())), math.exp(low), math.exp(high), len(logs), False)


def _estimate(est: float, low: float, high: float, n: int, within: bool) -> dict[str, Any]:
    return {
        "estimate": est,
        "ci_low": low,
        "ci_high": high,
        "n_restarts": n,
        "within_process": within,
    }


# -- R7: ratio and interval --------------------------------------------------------------------
def within_process_ratio(a: dict, b: dict, level: float) -> tuple[float, float, float]:
    """One restart on either side: requests of each side pooled over its restarts."""
    xa = np.asarray([v for c in a.values() for v in c["tps"]], dtype=float)
    xb = np.asarray([v for c in b.values() for v in c["tps"]], dtype=float)
    ma, mb = float(xa.mean()), float(xb.mean())
    ratio = ma / mb
    na, nb = len(xa), len(xb)
    va = float(xa.var(ddof=1)) / (na * ma**2) if na > 1 else 0.0
    vb = float(xb.var(ddof=1)) / (nb * mb**2) if nb > 1 else 0.0
    se2 = va + vb
    if se2 == 0:
        return ratio, ratio, ratio
    den = (va**2 / (na - 1) if na > 1 else 0.0) + (vb**2 / (nb - 1) if nb > 1 else 0.0)
    df = se2**2 / den
    half = float(stats.t.ppf((1 + level) / 2, df)) * math.sqrt(se2)
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def common_blocks(a: dict, b: dict) -> list[tuple[float, float]]:
    """(mean log summary arm, mean log summary base) per block holding a restart of both."""

    def by_block(cell: dict) -> dict[Any, list[float]]:
        out: dict[Any, list[float]] = defaultdict(list)
        for c in cell.values():
            if c["block"] is not None:
                out[c["block"]].append(math.log(float(np.mean(c["tps"]))))
        return out

    ba, bb = by_block(a), by_block(b)
    return [(float(np.mean(ba[k])), float(np.mean(bb[k]))) for k in sorted(set(ba) & set(bb))]


def ratio_interval(a: dict, b: dict, level: float, blocks: bool) -> tuple[float, float, float]:
    pairs = common_blocks(a, b) if blocks else []
    if len(pairs) >= 2:
        la = np.asarray([p[0] for p in pairs])
        lb = np.asarray([p[1] for p in pairs])
        d = la - lb
        ratio = math.exp(float(d.mean()))
        if float(d.std(ddof=1)) == 0:
            return ratio, ratio, ratio
        ci = stats.ttest_rel(la, lb).confidence_interval(confidence_level=level)
        return ratio, math.exp(float(ci.low)), math.exp(float(ci.high))
    la = np.log(list(restart_means(a).values()))
    lb = np.log(list(restart_means(b).values()))
    ratio = math.exp(float(la.mean() - lb.mean()))
    if float(la.std(ddof=1)) == 0 and float(lb.std(ddof=1)) == 0:
        return ratio, ratio, ratio
    ci = stats.ttest_ind(la, lb, equal_var=False).confidence_interval(confidence_level=level)
    return ratio, math.exp(float(ci.low)), math.exp(float(ci.high))


# -- R8: the family's simultaneous intervals ---------------------------------------------------
def block_values(cell: dict) -> dict[Any, float]:
    """block → mean of the log restart summaries of the restarts in that block."""
    out: dict[Any, list[float]] = defaultdict(list)
    for c in cell.values():
        if c["block"] is not None:
            out[c["block"]].append(math.log(float(np.mean(c["tps"]))))
    return {k: float(np.mean(v)) for k, v in out.items()}


def block_diffs(a: dict, b: dict, before: int | None) -> dict[Any, float]:
    va, vb = block_values(a), block_values(b)
    return {k: va[k] - vb[k] for k in va if k in vb and (before is None or k < before)}


def family_intervals(
    diffs: list[dict[Any, float]], alpha: float
) -> list[tuple[float, float, float, float, float, float]]:
    """(ratio, low, high, level, se, df) per comparison: each one's one-sample t interval on
    its own block log ratios (scipy's ttest_1samp) at Šidák's level (1 − α)^(1/k), k the
    members; se and df its own."""
    level = (1 - alpha) ** (1 / len(diffs))
    out = []
    for d in diffs:
        values = np.array(list(d.values()))
        test = stats.ttest_1samp(values, 0.0)
        ci = test.confidence_interval(level)
        se = float(np.std(values, ddof=1) / math.sqrt(len(values)))
        mean = float(values.mean())
        out.append((math.exp(mean), math.exp(ci.low), math.exp(ci.high), level, se, float(test.df)))
    return out


def percent(level: float) -> str:
    """The level with its miss rate to two significant digits."""
    miss = 100 * (1 - level)
    places = max(0, 1 - math.floor(math.log10(miss)))
    text = f"{100 - round(miss, places):.{places}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text + "%"


def family_label(head: str, m: int, level: float, bonferroni: bool) -> str:
    each = ("Bonferroni; " if bonferroni else "") + "each " + percent(level)
    if m == 1:
        return "95% CI" if head == "95% CI" else f"{head} ({percent(level)})"
    if head == "95% CI":
        return f"simultaneous 95% CI over {m} comparisons ({each})"
    return f"{head}, simultaneous over {m} comparisons ({each})"


def decide_family(members: list[dict], alpha: float, before: int | None, head: str) -> dict:
    """R8 at one level α: members paired on ≥ 3 blocks (before `before`) take Šidák's level
    at α·(their share); the others get Bonferroni at α/m on all their restarts (at an
    earlier look: only the unpaired). {id: (ratio, low, high, level, label, m, se, df)}."""
    diffs = {id(x): block_diffs(x["a"], x["b"], before) if x["blocks"] else {} for x in members}
    paired = [x for x in members if len(diffs[id(x)]) >= 3]
    others = [x for x in members if len(diffs[id(x)]) < 3 and (before is None or not diffs[id(x)])]
    m = len(paired) + len(others)
    out: dict[int, tuple] = {}
    if paired:
        share = alpha * len(paired) / m
        for x, (ratio, low, high, level, se, df) in zip(
            paired, family_intervals([diffs[id(x)] for x in paired], share), strict=True
        ):
            out[id(x)] = (ratio, low, high, level, family_label(head, m, level, False), m, se, df)
    for x in others:
        level = 1 - alpha / m
        ratio, low, high = ratio_interval(x["a"], x["b"], level, x["blocks"])
        se, df = se_df(x["a"], x["b"], x["blocks"])
        out[id(x)] = (ratio, low, high, level, family_label(head, m, level, True), m, se, df)
    return out


# -- R9: verdict -------------------------------------------------------------------------------
def verdict(low: float, high: float, delta: float) -> str:
    if low > 1 + delta:
        return "WIN"
    if high < 1 / (1 + delta):
        return "LOSS"
    if 1 / (1 + delta) <= low and high <= 1 + delta:
        return "EQUIVALENT"
    return "INCONCLUSIVE"


# -- R12-R14: the adaptive design ----------------------------------------------------------------
def pocock_level(looks: list[int], alpha: float) -> float:
    """R13: the two-sided per-look level c of a Pocock design on paired t intervals: under no
    difference (i.i.d. normal block differences), P(the t interval at some look excludes 0 at
    level 1 − c) = alpha. One look: c = alpha; two looks: two_look_rejection solved for c by
    Brent's method on log c (Bonferroni, alpha/2 per look, never rejects more than alpha)."""
    if len(looks) < 2:
        return alpha
    if len(looks) > 2:
        raise NotImplementedError(f"R13 is integrated here for two looks, not {looks}")
    n1, n2 = looks

    def excess(log_c: float) -> float:
        return math.log(two_look_rejection(n1, n2, math.exp(log_c)) / alpha)

    low, high = math.log(alpha / 2), math.log(alpha)
    return math.exp(optimize.brentq(excess, low, high, xtol=1e-12, rtol=1e-12))


def two_look_rejection(n1: int, n2: int, level: float, nodes: int = 64) -> float:
    """P(the level-(1 − level) t interval excludes 0 at n1 or n2 blocks), i.i.d. N(0, 1)
    differences, from the sufficient statistics: at look 1 the within sum of squares
    W = r² ~ χ²(n1−1) and the sum S = h1·r·t ~ N(0, n1), |t| ≤ 1 being look 1 accepting
    (h = c·√(n/(n−1)), c the t quantile); the next m = n2 − n1 blocks add a sum Y ~ N(0, m)
    and a within sum of squares Q ~ χ²(m−1), and look 2 accepts iff Q ≥ G(Y) =
    (S+Y)²/h2² − W − (n1·m/n2)(S/n1 − Y/m)², so P(look 2 accepts | S, W) =
    1 − ∫_{G>0} φ(Y)·F_Q(G(Y)) dY with F_Q the χ² CDF. r, t and Y by Gauss–Legendre; G is
    tangent to 0 at a fixed |t|, which splits t."""
    m = n2 - n1
    c1, c2 = stats.t.isf(level / 2, n1 - 1), stats.t.isf(level / 2, n2 - 1)
    h1, h2sq = c1 * math.sqrt(n1 / (n1 - 1)), c2**2 * n2 / (n2 - 1)
    a = 1 / h2sq - n1 / (n2 * m)  # G = a·Y² + b·S·Y + c·S² − W
    b, c = 2 / h2sq + 2 / n2, 1 / h2sq - m / (n1 * n2)
    kappa = (a * c - b**2 / 4) / a  # W/S² where G's discriminant vanishes: t² = 1/(h1²·kappa)
    tangent = 1 / (h1**2 * kappa) if kappa > 0 else 1.0
    t_breaks = [0.0, math.sqrt(tangent), 1.0] if tangent < 1 else [0.0, 1.0]
    r, w_r = gauss(0.0, math.sqrt(n1) + 12, 4 * nodes)
    chi = np.exp(
        (n1 - 2) * np.log(r) - r**2 / 2 - (n1 - 3) / 2 * math.log(2) - special.gammaln((n1 - 1) / 2)
    )  # the density of r = √W
    accept = 0.0
    for t_lo, t_hi in itertools.pairwise(t_breaks):
        t, w_t = gauss(t_lo, t_hi, nodes)
        rr, tt = np.meshgrid(r, t, indexing="ij")
        s = h1 * rr * tt
        weight = np.outer(chi * w_r, w_t) * 2 * h1 * rr * stats.norm.pdf(s, scale=math.sqrt(n1))
        lost = second_look_rejects(a, b * s, c * s**2 - rr**2, m, nodes)
        accept += float((weight * (1 - lost)).sum())
    return 1 - accept


def second_look_rejects(
    a: float, lin: np.ndarray, const: np.ndarray, m: int, nodes: int
) -> np.ndarray:
    """∫_{G>0} φ(Y; m)·F_Q(G(Y)) dY for G = a·Y² + lin·Y + const, Q ~ χ²(m−1): between the
    roots when a < 0, outside them (or everywhere) when a > 0; |Y| ≤ 12√m."""
    disc = lin**2 - 4 * a * const
    root = np.sqrt(np.maximum(disc, 0.0))
    y1 = np.minimum((-lin - root) / (2 * a), (-lin + root) / (2 * a))
    y2 = np.maximum((-lin - root) / (2 * a), (-lin + root) / (2 * a))
    far = np.full_like(lin, 12 * math.sqrt(m))

    def part(lo: np.ndarray, hi: np.ndarray, where: np.ndarray) -> np.ndarray:
        y, w_y = gauss(lo, hi, nodes)
        g = a * y**2 + lin[..., None] * y + const[..., None]
        f = stats.chi2.cdf(np.maximum(g, 0.0), m - 1) * stats.norm.pdf(y, scale=math.sqrt(m))
        return np.where(where, (f * w_y).sum(axis=-1), 0.0)

    if a < 0:
        return part(y1, y2, disc > 0)
    outside = part(np.minimum(-far, y1), y1, (disc > 0) & (y1 > -far))
    outside += part(y2, np.maximum(far, y2), (disc > 0) & (y2 < far))
    return outside + part(-far, far, disc <= 0)


def gauss(lo: np.ndarray | float, hi: np.ndarray | float, n: int) -> tuple[np.ndarray, ...]:
    """Gauss–Legendre on [lo, hi] (a last axis of n nodes), mapped by sin² so that an
    integrand vanishing like a power at either end stays smooth: nodes, weights."""
    x, w = special.roots_legendre(n)
    s = (x + 1) / 2
    lo, hi = np.asarray(lo)[..., None], np.asarray(hi)[..., None]
    nodes = lo + (hi - lo) * np.sin(np.pi * s / 2) ** 2
    return nodes, w / 2 * (hi - lo) * np.pi / 2 * np.sin(np.pi * s)


def pooled_reference(cells: dict, plan: dict[str, Any], base: str, key: str, level: int) -> dict:
    """R12: the baseline's restarts and those of every arm repeating it (aa_of), one cell."""
    out = {("base", r): c for r, c in cells.get((base, key, level), {}).items()}
    for arm in plan.get("arms") or []:
        if arm.get("aa_of") == base:
            rows = cells.get((arm["name"], key, level), {})
            out |= {(arm["name"], r): c for r, c in rows.items()}
    return out


def se_df(a: dict, b: dict, blocks: bool) -> tuple[float, float]:
    """The log ratio's SE and df of R7's paired (≥ 2 common blocks) or Welch interval."""
    pairs = common_blocks(a, b) if blocks else []
    if len(pairs) >= 2:
        d = np.asarray([p[0] - p[1] for p in pairs])
        return float(d.std(ddof=1)) / math.sqrt(len(d)), len(d) - 1.0
    la = np.log(list(restart_means(a).values()))
    lb = np.log(list(restart_means(b).values()))
    va, vb = la.var(ddof=1) / len(la), lb.var(ddof=1) / len(lb)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    return math.sqrt(va + vb), float(df)


def futility_p(ratio: float, se: float, df: float, target: float) -> float | None:
    """R14: one-sided p of 'ratio ≥ 1 + target': T_df.cdf((log ratio − log(1 + target)) / se)
    with the deciding interval's ratio, SE and df (R8's own ones in the family)."""
    if se == 0:
        return None
    return float(stats.t.cdf((math.log(ratio) - math.log1p(target)) / se, df))


# -- everything --------------------------------------------------------------------------------
def compute(bundle_dir: str | Path) -> dict[str, Any]:
    bundle = Path(bundle_dir)
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    plan = manifest["plan"]
    margin = plan.get("margin")
    delta = DEFAULT_MARGIN if margin is None else float(margin)
    blocks = plan.get("order") == "blocks"
    runs = load_runs(bundle)
    data = summaries(runs, plan)
    cells, keys_of = data["cells"], data["keys"]

    plan_arms = [a["name"] for a in plan.get("arms") or []]
    seen = sorted({arm for (arm, _, _) in cells} - set(plan_arms))
    levels_of = {arm: sorted({lv for (a, _, lv) in cells if a == arm}) for arm in plan_arms + seen}

    arms_out: dict[str, dict[str, Any]] = {}
    for arm in plan_arms + seen:
        rows = {}
        for key in keys_of.get(arm, []):
            for level in levels_of[arm]:
                if (arm, key, level) in cells:
                    rows[f"{key}@{level}"] = arm_estimate(cells[(arm, key, level)])
        if rows:
            arms_out[arm] = rows

    # R6-R8: the comparisons; the spec family decided together, the rest at 95% alone.
    design = plan.get("design") or {}
    looks = list(design.get("looks") or []) if design.get("kind") == "adaptive" else []
    pending = []
    for arm, base, kind, matched in comparison_plan(plan):
        for key in keys_of.get(arm, []):
            for level in levels_of.get(arm, []):
                a, b = cells.get((arm, key, level)), cells.get((base, key, level))
                if not a or not b:
                    continue
                own_base = len(b)
                if kind == "spec" and design.get("pool_aa"):
                    b = pooled_reference(cells, plan, base, key, level)
                within = len(a) == 1 or len(b) == 1
                withheld = within or min(len(a), own_base) < 3
                pending.append(
                    {
                        "arm": arm,
                        "base": base,
                        "kind": kind,
                        "matched": matched,
                        "key": key,
                        "level": level,
                        "a": a,
                        "b": b,
                        "within": within,
                        "withheld": withheld,
                        "blocks": blocks,
                    }
                )
    family = [x for x in pending if x["kind"] == "spec" and x["key"] != ALL and not x["withheld"]]
    outs: dict[int, tuple] = {}
    per_look = pocock_level(looks, 0.05) if looks and family else None
    if per_look is not None:  # R13: each member at its own look, in the family as it stood there
        for x in family:
            n_now = len(common_blocks(x["a"], x["b"])) if blocks else min(len(x["a"]), len(x["b"]))
            x["reached"] = [i for i, n in enumerate(looks, 1) if n <= n_now]
            x["look"] = x["reached"][-1] if x["reached"] else 1
        now = max(x["look"] for x in family)
        for look in sorted({x["look"] for x in family}):
            before = looks[look - 1] if look < now else None
            # one planned look is a fixed design: labelled as one (R13)
            head = (
                f"Pocock-adjusted 95% CI, look {look} of {len(looks)}"
                if len(looks) > 1
                else "95% CI"
            )
            at = decide_family(family, per_look, before, head)
            outs |= {id(x): at[id(x)] for x in family if x["look"] == look and id(x) in at}
    elif family:
        outs = decide_family(family, 0.05, None, "95% CI")
    # R8: the A/A comparisons (not the 'all' row, not within-process) form a family of
    # their own at 95%: the check fails 5% of the time without drift.
    aa_members = [x for x in pending if x["kind"] == "aa" and x["key"] != "all" and not x["within"]]
    aa_outs = decide_family(aa_members, 0.05, None, "95% CI") if aa_members else {}
    comparisons = []
    for x in pending:
        a, b, kind = x["a"], x["b"], x["kind"]
        if id(x) in outs:
            ratio, low, high, ci_level, label, size = outs[id(x)][:6]
            withheld = False
        elif id(x) in aa_outs:
            ratio, low, high, ci_level, label, size = aa_outs[id(x)][:6]
            withheld = bool(x["withheld"])
        else:
            ci_level, label, size = 0.95, "95% CI", 1
            if x["within"]:
                ratio, low, high = within_process_ratio(a, b, 0.95)
            else:
                ratio, low, high = ratio_interval(a, b, 0.95, blocks)
            withheld = x["withheld"] or kind == "spec"  # derived and withheld: no verdict
        x["size"] = size
        extra: dict[str, Any] = {}
        if per_look is not None and id(x) in outs:
            target = design.get("target")
            ratio_x, se_x, df_x = outs[id(x)][0], outs[id(x)][6], outs[id(x)][7]
            pv = futility_p(ratio_x, se_x, df_x, target) if target is not None else None
            decided = verdict(low, high, delta) != "INCONCLUSIVE"
            interim = x["reached"] and x["reached"][-1] < len(looks)
            alpha_f = design.get("futility_alpha", 0.025)
            extra = {
                "look": x["look"] if x["reached"] else None,
                "futility_p": pv,
                "futile": bool(interim and not decided and pv is not None and pv < alpha_f),
            }
        comparisons.append(
            {
                "arm": x["arm"],
                "baseline": x["base"],
                "kind": kind,
                "matched": x["matched"],
                "workload": x["key"],
                "concurrency": x["level"],
                "ratio": ratio,
                "ci_low": low,
                "ci_high": high,
                "ci_level": ci_level,
                "ci_label": label,
                "verdict": "WITHHELD" if withheld else verdict(low, high, delta),
                "withheld": withheld,
                **extra,
            }
        )
    m = max((x["size"] for x in pending if id(x) in outs), default=0)

    within = {(x["arm"], x["key"], x["level"]) for x in pending if x["within"]}
    checked = [  # the A/A check: two restarts a side form its interval
        c
        for c in comparisons
        if c["kind"] == "aa"
        and c["workload"] != "all"
        and (c["arm"], c["workload"], c["concurrency"]) not in within
    ]
    aa_check = all(c["ci_low"] <= 1 <= c["ci_high"] for c in checked) if checked else None

    # R11: best k among the sweep arms (spec, matched to plan.baseline, integer k).
    base_name = plan.get("baseline")
    k_of: dict[str, int] = {}
    taken: set[int] = set()
    params = {a["name"]: a.get("params") or {} for a in plan.get("arms") or []}
    for arm, base, kind, matched in comparison_plan(plan):
        k = params.get(arm, {}).get("k")
        if kind != "spec" or not matched or base != base_name:
            continue
        if isinstance(k, int) and not isinstance(k, bool) and k not in taken:
            k_of[arm] = k
            taken.add(k)
    best_k: dict[str, int | None] = {}
    for c in comparisons:
        if c["arm"] not in k_of or c["kind"] != "spec":
            continue
        best_k.setdefault(f"{c['workload']}@{c['concurrency']}", None)
    for cell in best_k:
        sweep = [
            c
            for c in comparisons
            if c["arm"] in k_of
            and c["kind"] == "spec"
            and f"{c['workload']}@{c['concurrency']}" == cell
        ]
        wins = [c for c in sweep if c["verdict"] == "WIN"]
        if wins:
            top = max(c["ci_low"] for c in wins)
            best_k[cell] = min(k_of[c["arm"]] for c in wins if c["ci_high"] >= top)
        elif all(c["verdict"] in ("LOSS", "EQUIVALENT") for c in sweep):
            best_k[cell] = 0  # every k decided not to win
        else:
            best_k[cell] = None

    before_after = compare_before_after(plan, cells, keys_of, comparisons, best_k, delta, blocks)
    return {
        "left_out_runs": [{"run": r["id"], "reason": r["left_out"]} for r in runs if r["left_out"]],
        "arms": arms_out,
        "comparisons": comparisons,
        "before_after": before_after,
        "family_size": m,
        "aa_check": aa_check,
        "best_k": best_k,
    }


# -- R15: the before-and-after -------------------------------------------------------------------
def after_arm(
    plan: dict, comparisons: list[dict], best_k: dict, found: str, key: str, level: int
) -> str:
    """R15: what the client serves after the fix on one cell: the WIN at the sweep's best k,
    else the WIN with the highest lower bound (those against the plan's baseline first); no WIN:
    the as-found arm's own baseline when it speculates and LOSES, else the as-found arm."""
    spec = [
        c
        for c in comparisons
        if c["kind"] == "spec"
        and c["matched"]
        and c["workload"] == key
        and c["concurrency"] == level
    ]
    wins = [c for c in spec if c["verdict"] == "WIN"]
    wins = [c for c in wins if c["baseline"] == plan.get("baseline")] or wins
    params = {a["name"]: a.get("params") or {} for a in plan.get("arms") or []}
    k = best_k.get(f"{key}@{level}")
    at_k = [c for c in wins if k and params.get(c["arm"], {}).get("k") == k]
    if at_k:
        return at_k[0]["arm"]
    if wins:
        return max(wins, key=lambda c: c["ci_low"])["arm"]
    own = next((c for c in spec if c["arm"] == found), None)
    if own is not None and not own["withheld"] and own["verdict"] == "LOSS":
        return own["baseline"]
    return found


def compare_before_after(
    plan: dict,
    cells: dict,
    keys_of: dict,
    comparisons: list[dict],
    best_k: dict,
    delta: float,
    blocks: bool,
) -> list[dict]:
    """R15: after against as found on every cell where they differ, the same restarts, paired
    on blocks; a family of its own at 95% (R8), the pooled 'all' row withheld."""
    found = plan.get("as_found")
    if not found or not keys_of.get(found):
        return []
    members = []
    for level in sorted({lv for (a, _, lv) in cells if a == found}):
        named = [k for k in keys_of[found] if k != ALL]
        afters = {k: after_arm(plan, comparisons, best_k, found, k, level) for k in named}
        if ALL in keys_of[found] and len(set(afters.values())) == 1:
            afters[ALL] = next(iter(afters.values()))
        for key, after in afters.items():
            a, b = cells.get((after, key, level)), cells.get((found, key, level))
            if after == found or not a or not b:
                continue
            within = len(a) == 1 or len(b) == 1
            withheld = within or min(len(a), len(b)) < 3
            members.append({"arm": after, "key": key, "level": level, "a": a, "b": b,
                            "within": within, "withheld": withheld, "blocks": blocks})  # fmt: skip
    family = [x for x in members if x["key"] != ALL and not x["withheld"]]
    outs = decide_family(family, 0.05, None, "95% CI") if family else {}
    out = []
    for x in members:
        if id(x) in outs:
            ratio, low, high, ci_level, label = outs[id(x)][:5]
            decided = verdict(low, high, delta)
        else:
            ci_level, label = 0.95, "95% CI"
            pick = within_process_ratio if x["within"] else None
            ratio, low, high = (
                pick(x["a"], x["b"], 0.95) if pick else ratio_interval(x["a"], x["b"], 0.95, blocks)
            )
            decided = "WITHHELD"
        out.append({"arm": x["arm"], "baseline": found, "kind": "after", "matched": True,
                    "workload": x["key"], "concurrency": x["level"], "ratio": ratio,
                    "ci_low": low, "ci_high": high, "ci_level": ci_level, "ci_label": label,
                    "verdict": decided, "withheld": decided == "WITHHELD"})  # fmt: skip
    return out


def rounded(value: Any) -> Any:
    """Floats to 10 significant digits, recursively (what the expected files hold)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


def sample_dirs() -> list[Path]:
    return sorted(p for p in SAMPLES.iterdir() if (p / "manifest.json").is_file())


def expected_path(sample: Path) -> Path:
    return HERE / f"{sample.name}.expected.json"


def main() -> int:
    for sample in sample_dirs():
        out = expected_path(sample)
        out.write_text(json.dumps(rounded(compute(sample)), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {out.relative_to(HERE.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
