"""Prompt pairing: prompt effects removed before restart noise and m* are estimated."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from diagnostic.analyse import stats

__all__ = [
    "ArmNoise",
    "PromptFit",
    "adjusted_restart_means",
    "arm_noise",
    "block_sd",
    "fit_prompts",
    "measured_requests",
    "noise_components",
    "noise_words",
    "paired_requests",
    "pooled_noise",
    "prompt_by_arm",
    "side_variance",
    "with_all_workloads",
]

KEYS = ["arm", "workload", "concurrency"]


@dataclass(frozen=True)
class PromptFit:
    """Least squares of log y = restart + prompt + error over one arm's requests (one workload
    and level). Levels and effects are centred per connected component of the restart-prompt
    graph (restarts linked by the prompts they share): only contrasts inside a component are
    estimable, since a block whose prompts no other restart served confounds the two."""

    restarts: tuple[int, ...]
    n: np.ndarray  # requests per restart
    level: np.ndarray  # per restart: its log level at the average prompt of its component
    level_cov: np.ndarray  # Cov(level) / σ²
    restart_group: np.ndarray  # per restart: its component
    prompts: tuple[str, ...]
    effect: np.ndarray  # per prompt: its log effect, mean 0 over its component's prompts
    effect_cov: np.ndarray  # Cov(effect) / σ²
    prompt_group: np.ndarray  # per prompt: its component
    rss: float
    df: int  # requests − rank of the design

    @property
    def s1_sq(self) -> float | None:
        """Within-restart, within-prompt variance S1² = RSS / (N − rank); None without df."""
        return self.rss / self.df if self.df > 0 else None


def fit_prompts(
    values: Sequence[float], restarts: Sequence[int], prompts: Sequence[str]
) -> PromptFit:
    """Fit the additive model log y_i = α_restart(i) + β_prompt(i) + ε_i by least squares
    (numpy pseudo-inverse of the normal equations; any g-inverse gives the same estimable
    functions). Assumes a prompt multiplies an arm's tok/s by the same factor in every
    restart, and ε independent with one variance σ². Returns each restart's level α + mean β
    over its component's prompts and the centred β, with their covariances over σ²."""
    y = np.asarray(values, dtype=float)
    r_keys, r_idx = np.unique(np.asarray(restarts), return_inverse=True)
    p_keys, p_idx = np.unique(np.asarray(prompts, dtype=str), return_inverse=True)
    n_r, n_p = len(r_keys), len(p_keys)
    x = np.zeros((len(y), n_r + n_p))
    x[np.arange(len(y)), r_idx] = 1.0
    x[np.arange(len(y)), n_r + p_idx] = 1.0
    g, rank = _pinv(x.T @ x)
    beta = g @ (x.T @ y)
    resid = y - x @ beta
    edges = coo_matrix((np.ones(len(y)), (r_idx, n_r + p_idx)), shape=(n_r + n_p,) * 2)
    _, label = connected_components(edges, directed=False)
    centre = _centring(label[:n_r], label[n_r:])
    cov = centre @ g @ centre.T
    theta = centre @ beta
    return PromptFit(
        restarts=tuple(int(r) for r in r_keys),
        n=np.bincount(r_idx, minlength=n_r),
        level=theta[:n_r],
        level_cov=cov[:n_r, :n_r],
        restart_group=label[:n_r],
        prompts=tuple(str(p) for p in p_keys),
        effect=theta[n_r:],
        effect_cov=cov[n_r:, n_r:],
        prompt_group=label[n_r:],
        rss=float(resid @ resid),
        df=len(y) - rank,
    )


def _pinv(xtx: np.ndarray) -> tuple[np.ndarray, int]:
    """Moore-Penrose inverse of a symmetric X'X and its rank, from one eigendecomposition
    (eigenvalues below numpy's pinv cut-off, 1e-15 × the largest × size, count as zero)."""
    w, v = np.linalg.eigh(xtx)
    keep = w > max(float(w.max(initial=0.0)), 0.0) * len(w) * 1e-15
    return (v[:, keep] / w[keep]) @ v[:, keep].T, int(keep.sum())


def _centring(restart_group: np.ndarray, prompt_group: np.ndarray) -> np.ndarray:
    """The linear map (α, β) → (α + mean β of the component, β − mean β of the component)."""
    n_r, n_p = len(restart_group), len(prompt_group)
    mean = np.zeros((n_p, n_p))
    for c in np.unique(prompt_group):
        inside = prompt_group == c
        mean[np.ix_(inside, inside)] = 1.0 / inside.sum()
    out = np.eye(n_r + n_p)
    out[n_r:, n_r:] -= mean
    for r in range(n_r):
        inside = prompt_group == restart_group[r]
        out[r, n_r:][inside] = 1.0 / inside.sum()
    return out


def _within(groups: np.ndarray) -> np.ndarray:
    """Centring inside each group: W x = x − its group's mean."""
    same = groups[:, None] == groups[None, :]
    return np.eye(len(groups)) - same / same.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class ArmNoise:
    """Kalibera & Jones components of one arm, workload and level with prompt effects removed
    (log scale of decode tok/s)."""

    arm: str
    workload: str
    concurrency: int
    restarts: int
    m: float  # mean measured requests per restart
    prompts: int  # prompts of the workload, over every arm
    s1_sq: float  # within restart and prompt
    s2_sq: float  # of the prompt-adjusted restart levels, inside components
    t2_sq: float  # restart component: S2² − S1²·k
    k: float  # a level's variance from request noise, in units of S1² (K&J's 1/m)
    p2_sq: float | None  # prompt-by-arm variance against the reference (None: the reference;
    # ≤ 0: none seen)


def restart_components(fit: PromptFit) -> tuple[float, float, float] | None:
    """(S2², T2², k) of the prompt-adjusted levels: S2² their variance pooled inside components
    (df = restarts − components), k = tr(W·Cov(level)/σ²)/df with W that centring, so that
    E[S2²] = T2² + k·σ² and T2² = S2² − k·S1² is unbiased (Henderson's method III; k = 1/m,
    Kalibera & Jones' T2² = S2² − S1²/m, when every restart serves the same prompts). Assumes
    restart effects independent with one variance T2². None below 1 df or without S1²."""
    s1_sq = fit.s1_sq
    df = len(fit.restarts) - len(np.unique(fit.restart_group))
    if s1_sq is None or df < 1:
        return None
    w = _within(fit.restart_group)
    s2_sq = float(fit.level @ w @ fit.level) / df
    k = float(np.trace(w @ fit.level_cov)) / df
    return s2_sq, s2_sq - k * s1_sq, k


def prompt_by_arm(fit: PromptFit, reference: PromptFit | None) -> float:
    """Variance over prompts of (the arm's prompt effect − the reference's): what a block's
    log ratio keeps of the prompts it served, since the pairing cancels only the part both
    arms share. The sum of squares of the centred differences (inside each pair of
    components) less its expectation from estimation noise, S1²-weighted traces of the
    effects' covariances, over its df: unbiased, so it may come out below 0 (none seen; a
    mean over arms is floored, not each arm). Against no reference (None), the arm's
    own prompt spread (a reference without prompt effects)."""
    if reference is None:
        mine, theirs, common = fit.effect, np.zeros(len(fit.effect)), list(fit.prompts)
        cov = (fit.s1_sq or 0.0) * fit.effect_cov
        groups = fit.prompt_group
    else:
        common = sorted(set(fit.prompts) & set(reference.prompts))
        a = [fit.prompts.index(p) for p in common]
        b = [reference.prompts.index(p) for p in common]
        mine, theirs = fit.effect[a], reference.effect[b]
        cov = (fit.s1_sq or 0.0) * fit.effect_cov[np.ix_(a, a)]
        cov = cov + (reference.s1_sq or 0.0) * reference.effect_cov[np.ix_(b, b)]
        groups = fit.prompt_group[a] * (reference.prompt_group.max() + 1)
        groups = groups + reference.prompt_group[b]
    df = len(common) - len(np.unique(groups))
    if df < 1:
        return 0.0
    w = _within(np.asarray(groups))
    d = np.asarray(mine) - np.asarray(theirs)
    noise = float(np.trace(w @ cov @ w))
    return (float(d @ w @ d) - noise) / df


def side_variance(s1_sq: float, t2_sq: float, p2_sq: float, prompts: int, requests: float) -> float:
    """Variance of one side's log restart summary in a block ratio with m requests per restart:
    T2² + S1²/m + P²·(1/m − 1/n)·n/(n−1) while m < n (a restart serves m of the n prompts, a
    window that rotates from block to block: the mean of m prompt effects drawn without
    replacement), T2² + S1²/m once every prompt is served (m ≥ n; the repeats of a partial
    second pass are ignored). P² is the side's share of the prompt-by-arm variance."""
    rotating = (
        p2_sq * (1 / requests - 1 / prompts) * prompts / (prompts - 1)
        if prompts > 1 and requests < prompts
        else 0.0
    )
    return t2_sq + s1_sq / requests + rotating


def pooled_noise(noise: pd.DataFrame) -> tuple[float, float, float, int]:
    """(S1², T2², P², n) of one side of a comparison, pooled (averaged) over the table's rows:
    one m serves every workload of every start, and one pair's T2² from a few restarts is too
    noisy to size it alone. P² is half the mean prompt-by-arm variance of the compared arms
    (a block ratio sees it once, over its two sides; a mean below 0 is none), n the largest
    prompt set; without those columns (assumed noise) P² = 0."""
    s1_sq, t2_sq = float(noise["s1_sq"].mean()), float(noise["t2_sq"].mean())
    compared = "p2_sq" in noise and bool(noise["p2_sq"].notna().any())
    p2_sq = max(float(noise["p2_sq"].mean()), 0.0) / 2 if compared else 0.0  # skips NaN
    prompts = int(noise["prompts"].max()) if "prompts" in noise else 1
    return s1_sq, t2_sq, p2_sq, prompts


def noise_words(noise: pd.DataFrame) -> str:
    """The pooled noise as CVs, and where it comes from: 'restart CV 5.0%, request CV 3.0% on
    one prompt, prompt-by-arm CV 12% (measured, each arm's prompt effects removed)'."""
    s1_sq, t2_sq, p2_sq, _ = pooled_noise(noise)
    measured = "prompts" in noise
    text = f"restart CV {math.sqrt(max(t2_sq, 0.0)):.1%}, request CV {math.sqrt(s1_sq):.1%}"
    text += " on one prompt" if measured else ""
    text += f", prompt-by-arm CV {math.sqrt(2 * p2_sq):.1%}" if p2_sq > 0 else ""
    return text + (" (measured, each arm's prompt effects removed)" if measured else " (assumed)")


def block_sd(noise: pd.DataFrame, requests: float, reference_starts: int = 1) -> float:
    """SD of one block's log ratio at `requests` per restart: an arm against a reference of
    `reference_starts` starts per block (2: the baseline with its A/A repeat), every side's
    variance side_variance on the components pooled_noise pools: sqrt((1 + 1/r)·side)."""
    s1_sq, t2_sq, p2_sq, prompts = pooled_noise(noise)
    side = side_variance(s1_sq, max(t2_sq, 0.0), p2_sq, prompts, requests)
    return math.sqrt((1 + 1 / reference_starts) * side)


def paired_requests(
    cost_restart: float,
    cost_request: float,
    s1_sq: float,
    t2_sq: float,
    p2_sq: float = 0.0,
    prompts: int = 1,
) -> int | None:
    """Requests per restart m* that minimise side_variance × (c_restart + m·c_request), in
    Kalibera & Jones' closed form on each of its two pieces: rotating (m < n), where it is
    T2²′ + S1²′/m with S1²′ = S1² + P²·n/(n−1) and T2²′ = T2² − P²/(n−1), so
    m* = ceil(sqrt(c_restart/c_request · S1²′/T2²′)); and the whole set (m ≥ n):
    max(n, Kalibera & Jones on S1², T2²). The cheaper of the two for the same precision.
    Without prompt-by-arm variance (P² = 0) this is Kalibera & Jones' m*. None when T2² ≤ 0
    (no restart component: any m works, add restarts instead)."""
    whole = stats.requests_per_restart(cost_restart, cost_request, s1_sq, t2_sq)
    if whole is None:
        return None
    candidates = [max(prompts, whole)] if p2_sq > 0 and prompts > 1 else [whole]
    if p2_sq > 0 and prompts > 1:
        s1_rot = s1_sq + p2_sq * prompts / (prompts - 1)
        t2_rot = t2_sq - p2_sq / (prompts - 1)
        rotating = stats.requests_per_restart(cost_restart, cost_request, s1_rot, t2_rot)
        if rotating is not None and rotating < prompts:
            candidates.append(rotating)

    def price(m: int) -> float:
        return side_variance(s1_sq, t2_sq, p2_sq, prompts, m) * (cost_restart + m * cost_request)

    return min(candidates, key=price)


def measured_requests(frame: pd.DataFrame) -> pd.DataFrame:
    """The measured rows of a requests table (load_samples' frame: no exclusion, a decode
    rate) with log_tps; the columns arm, restart, workload, concurrency, prompt_id."""
    rows = frame[(frame["excluded"] == "") & frame["decode_tps"].notna()]
    out = rows[[*KEYS, "restart", "prompt_id"]].copy()
    out["prompt_id"] = out["prompt_id"].astype(str)
    out["log_tps"] = np.log(rows["decode_tps"].astype(float).to_numpy())
    return out


def with_all_workloads(table: pd.DataFrame, name: str) -> pd.DataFrame:
    """The table plus every request again under workload `name`, its prompt keyed by its
    workload (each restart's requests of every workload pooled, as the report's 'all' rows)."""
    pooled = table.assign(
        prompt_id=table["workload"].astype(str) + "/" + table["prompt_id"], workload=name
    )
    return pd.concat([table, pooled], ignore_index=True)


def _fits(table: pd.DataFrame) -> dict[tuple[str, str, int], PromptFit]:
    return {
        (str(arm), str(workload), int(level)): fit_prompts(
            part["log_tps"], part["restart"], part["prompt_id"]
        )
        for (arm, workload, level), part in table.groupby(KEYS, sort=True)
    }


def arm_noise(
    table: pd.DataFrame, reference: str | None, all_workloads: str | None = None
) -> dict[tuple[str, str, int], ArmNoise]:
    """Prompt-adjusted components per (arm, workload, level) of a measured_requests table
    (and of every workload pooled, as workload `all_workloads`, when given):
    each arm's own prompt effects removed (speculation changes how fast a prompt decodes, so
    the effects differ by arm), S1², S2², T2² and k from restart_components, and the
    prompt-by-arm variance against `reference` (the arm the comparisons divide by; None for
    the reference itself). Only (arm, workload, level) with ≥ 1 df for S1² and for S2²."""
    if all_workloads is not None:
        table = with_all_workloads(table, all_workloads)
    fits = _fits(table)
    prompts = table.groupby(["workload", "concurrency"])["prompt_id"].nunique()
    out = {}
    for key, fit in fits.items():
        parts = restart_components(fit)
        if parts is None:
            continue
        arm, workload, level = key
        base = fits.get((reference, workload, level)) if reference is not None else None
        s2_sq, t2_sq, k = parts
        out[key] = ArmNoise(
            arm=arm,
            workload=workload,
            concurrency=level,
            restarts=len(fit.restarts),
            m=float(fit.n.mean()),
            prompts=int(prompts[(workload, level)]),
            s1_sq=float(fit.s1_sq or 0.0),
            s2_sq=s2_sq,
            t2_sq=t2_sq,
            k=k,
            p2_sq=None if arm == reference else prompt_by_arm(fit, base),
        )
    return out


def noise_components(table: pd.DataFrame, reference: str | None) -> pd.DataFrame:
    """arm_noise as a table, one row per (arm, workload, concurrency)."""
    rows = [vars(n) for n in arm_noise(table, reference).values()]
    return pd.DataFrame(rows, columns=list(ArmNoise.__dataclass_fields__))


def adjusted_restart_means(table: pd.DataFrame) -> pd.DataFrame:
    """Per (arm, workload, concurrency, restart) of a measured_requests table: n, log_mean (the
    mean log tok/s of its requests), level (the prompt-adjusted one: fit_prompts' estimate of
    the restart's mean log tok/s at the average prompt of the prompts its arm served — of its
    component's prompts when blocks share none) and level_se1 (the level's standard error per
    unit of S1: sqrt of Cov(level)/σ²'s diagonal). Where every restart serves every prompt
    equally often, level = log_mean. Levels are correlated across restarts through the
    shared prompt estimates (they are not independent replicates unless the prompts are
    crossed with the restarts); a ratio of two arms' levels inside a block is a ratio at the
    same average prompt, and ratios across components assume equal average prompt effects."""
    rows = []
    for (arm, workload, level), part in table.groupby(KEYS, sort=True):
        fit = fit_prompts(part["log_tps"], part["restart"], part["prompt_id"])
        log_mean = part.groupby("restart")["log_tps"].mean()
        for i, restart in enumerate(fit.restarts):
            rows.append(
                {
                    "arm": arm,
                    "workload": workload,
                    "concurrency": level,
                    "restart": restart,
                    "n": int(fit.n[i]),
                    "log_mean": float(log_mean[restart]),
                    "level": float(fit.level[i]),
                    "level_se1": math.sqrt(max(float(fit.level_cov[i, i]), 0.0)),
                }
            )
    return pd.DataFrame(rows, columns=[*KEYS, "restart", "n", "log_mean", "level", "level_se1"])
