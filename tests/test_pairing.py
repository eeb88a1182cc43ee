"""Prompt pairing (analyse.pairing): prompt effects removed before restart noise and m* — by
hand, in seeded simulations with known prompt effects, and on the recorded CPU samples."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diagnostic.analyse import pairing, stats
from diagnostic.analyse.requests import load_samples
from diagnostic.bundle.store import Bundle

SAMPLES = Path(__file__).parents[1] / "samples"


def _table(rows: list[tuple[str, int, str, float]]) -> pd.DataFrame:
    """(arm, restart, prompt, log tok/s) rows of one workload and level."""
    return pd.DataFrame(
        [
            {
                "arm": a,
                "workload": "code",
                "concurrency": 1,
                "restart": r,
                "prompt_id": p,
                "log_tps": y,
            }
            for a, r, p, y in rows
        ]
    )


def _sim(
    rng: np.random.Generator,
    *,
    arms: dict[str, np.ndarray],
    blocks: int,
    requests: int,
    t2: float,
    s1: float,
) -> pd.DataFrame:
    """Blocks as collect runs them: block b's restarts serve prompts (b·m + i) mod n, the same
    for every arm; arm a's request i has log tok/s = restart level + arms[a][prompt] + noise
    (restart levels N(0, t2), noise N(0, s1))."""
    n = len(next(iter(arms.values())))
    rows = []
    for b in range(blocks):
        start = b * requests % n if requests < n else 0
        window = [(start + i) % n for i in range(requests)]
        for arm, effect in arms.items():
            level = rng.normal(0.0, math.sqrt(t2))
            noise = rng.normal(0.0, math.sqrt(s1), requests)
            rows += [
                (arm, b, f"p{j:02d}", level + effect[j] + e)
                for j, e in zip(window, noise, strict=True)
            ]
    return _table(rows)


def test_without_prompt_effects_the_components_are_kalibera_and_jones() -> None:
    """One prompt: log tok/s of restart 0: 1, 3; restart 1: 5, 7. S1² = 2, restart means 2
    and 6, S2² = 8, k = 1/m = 1/2, T2² = 8 − 2/2 = 7: Kalibera & Jones' own figures."""
    rows = [("a", r, "p", y) for r, ys in ((0, (1.0, 3.0)), (1, (5.0, 7.0))) for y in ys]
    row = pairing.noise_components(_table(rows), None).iloc[0]
    assert (row.s1_sq, row.s2_sq, row.k, row.t2_sq) == pytest.approx((2.0, 8.0, 0.5, 7.0))
    assert (row.restarts, row.m, row.prompts) == (2, 2.0, 1)


def test_a_balanced_two_way_table_by_hand() -> None:
    """Two restarts × two prompts, log tok/s [[1, 3], [2, 6]]: the additive fit leaves
    residuals ±0.5 (interaction (6 − 2 − 3 + 1)/4 = 0.5), RSS = 1 on (2−1)(2−1) = 1 df, so
    S1² = 1; the levels are the restart means 2 and 4 (every prompt served once), S2² = 2,
    k = 1/2, T2² = 2 − 1/2 = 1.5. The prompt effects are ±1.5 (prompt means 1.5 and 4.5
    about 3)."""
    rows = [("a", 0, "x", 1.0), ("a", 0, "y", 3.0), ("a", 1, "x", 2.0), ("a", 1, "y", 6.0)]
    table = _table(rows)
    fit = pairing.fit_prompts(table["log_tps"], table["restart"], table["prompt_id"])
    assert fit.s1_sq == pytest.approx(1.0)
    assert fit.level == pytest.approx([2.0, 4.0])
    assert fit.effect == pytest.approx([-1.5, 1.5])
    assert pairing.restart_components(fit) == pytest.approx((2.0, 1.5, 0.5))


def test_blocks_that_share_no_prompt_are_compared_only_inside_their_group() -> None:
    """Prompts {x} in restarts 0 and 2, {y} in restart 1 and 3: which block was slow and which
    prompt is slow cannot be told apart between the groups, so S2² pools inside them. Two
    requests per restart, 0.5 apart: S1² = 8 · 0.25² / (8 − rank 4) = 0.125; levels 1.25, 3.25
    (group x) and 10.25, 14.25 (group y): S2² = (1 + 1 + 4 + 4) / (4 − 2) = 5, k = 1/2,
    T2² = 5 − 0.125/2."""
    rows = [("a", 0, "x", 1.0), ("a", 1, "y", 10.0), ("a", 2, "x", 3.0), ("a", 3, "y", 14.0)]
    rows += [(a, r, p, y + 0.5) for a, r, p, y in rows]
    table = _table(rows)
    fit = pairing.fit_prompts(table["log_tps"], table["restart"], table["prompt_id"])
    assert len(set(fit.restart_group.tolist())) == 2
    assert fit.s1_sq == pytest.approx(0.125)
    assert pairing.restart_components(fit) == pytest.approx((5.0, 5.0 - 0.0625, 0.5))


def test_strong_prompt_effects_shared_by_the_arms_are_removed() -> None:
    """4 arms, 8 blocks × 6 of 15 prompts (rotating), prompt effects of SD 0.3 shared by the
    arms (10× the request SD): the raw within-restart variance is mostly prompts; after the
    fit S1² and T2² recover the true 0.03² and 0.05² (mean over 40 seeded bundles, within 3
    standard errors of the mean), P² against the baseline 0 (unbiased), and m* is the
    one the true components give (c_restart/c_request = 60: sqrt(60 · 0.36) = 4.6 → 5)."""
    rng = np.random.default_rng(29)
    s1, t2 = 0.03**2, 0.05**2
    got, raw = [], []
    for _ in range(40):
        effect = rng.normal(0.0, 0.3, 15)
        arms = {name: effect for name in ("baseline", "b", "c", "d")}
        table = _sim(rng, arms=arms, blocks=8, requests=6, t2=t2, s1=s1)
        noise = pairing.noise_components(table, "baseline")
        got.append(noise[["s1_sq", "t2_sq", "p2_sq"]].mean().to_numpy())
        raw.append(table.groupby(["arm", "restart"])["log_tps"].var().mean())
    mean, se = np.mean(got, axis=0), np.std(got, axis=0, ddof=1) / math.sqrt(len(got))
    assert np.mean(raw) > 20 * s1  # what Kalibera & Jones' S1² saw before
    assert abs(mean[0] - s1) < 3 * se[0] and abs(mean[1] - t2) < 3 * se[1]
    assert abs(mean[2]) < 3 * se[2]
    assert stats.requests_per_restart(120.0, 2.0, s1, t2) == 5
    assert pairing.paired_requests(120.0, 2.0, mean[0], mean[1], max(mean[2], 0) / 2, 15) == 5


def test_prompt_by_arm_variance_is_what_the_pairing_keeps() -> None:
    """The speculative arm's prompt effects differ from the baseline's by N(0, 0.1²) per
    prompt (n-gram drafting pays on some prompts): P² recovers 0.01 (mean over 40 seeded
    bundles within 3 SE), S1² still the request noise alone."""
    rng = np.random.default_rng(7)
    s1, t2, spread = 0.02**2, 0.04**2, 0.1**2
    got = []
    for _ in range(40):
        base = rng.normal(0.0, 0.2, 15)
        arms = {"baseline": base, "spec": base + rng.normal(0.0, math.sqrt(spread), 15)}
        noise = pairing.noise_components(
            _sim(rng, arms=arms, blocks=6, requests=5, t2=t2, s1=s1), "baseline"
        )
        spec = noise[noise.arm == "spec"].iloc[0]
        got.append((spec.p2_sq, noise.s1_sq.mean()))
    mean, se = np.mean(got, axis=0), np.std(got, axis=0, ddof=1) / math.sqrt(len(got))
    assert abs(mean[0] - spread) < 3 * se[0]
    assert abs(mean[1] - s1) < 3 * se[1]
    assert noise[noise.arm == "baseline"].p2_sq.isna().all()


def test_paired_requests_by_hand() -> None:
    """c_restart/c_request = 46. No prompt-by-arm variance: Kalibera & Jones, sqrt(46 · 20) →
    31. P² = 0.07 over n = 15 prompts with S1² = 2, T2² = 0.1: rotating, S1²′ = 2 + 0.075,
    T2²′ = 0.1 − 0.005, sqrt(46 · 2.075/0.095) = 31.7 ≥ n, so only the whole set is left:
    max(15, 31) = 31. S1² = 0.02, T2² = 0.1, P² = 0.7: rotating T2²′ = 0.05, S1²′ = 0.77,
    sqrt(46 · 15.4) = 26.6 → 27 ≥ n; the whole set: max(15, sqrt(46 · 0.2) = 3.03 → 4) = 15.
    P² = 0.07 (same S1², T2²): rotating sqrt(46 · 0.095/0.095) = 6.8 → 7 against 15: the side
    variance × cost is 0.1 + 0.02/7 + 0.07·(1/7 − 1/15)·15/14 = 0.10857 times 92 + 14 against
    0.10133 × 122: 7."""
    assert pairing.paired_requests(92.0, 2.0, 2.0, 0.1) == 31
    assert pairing.paired_requests(92.0, 2.0, 2.0, 0.1, 0.07, 15) == 31
    assert pairing.paired_requests(92.0, 2.0, 0.02, 0.1, 0.7, 15) == 15
    assert pairing.paired_requests(92.0, 2.0, 0.02, 0.1, 0.07, 15) == 7
    assert pairing.paired_requests(92.0, 2.0, 0.02, -0.1, 0.07, 15) is None


def test_the_side_variance_loses_its_prompt_term_once_every_prompt_is_served() -> None:
    """T2² + S1²/m + P²·(1/m − 1/n)·n/(n−1): at m = 5 of 15, 0.1 + 0.2 + 0.7·(2/15)·15/14."""
    assert pairing.side_variance(1.0, 0.1, 0.7, 15, 5) == pytest.approx(0.3 + 0.1)
    assert pairing.side_variance(1.0, 0.1, 0.7, 15, 15) == pytest.approx(0.1 + 1 / 15)


def test_adjusted_restart_means_remove_the_prompts_a_restart_served() -> None:
    """Rotating windows over prompts with effects of SD 0.3 and no noise: each restart's raw
    log mean carries its window's prompt effects, the level only the restart's own level."""
    rng = np.random.default_rng(3)
    effect = rng.normal(0.0, 0.3, 12)
    table = _sim(rng, arms={"a": effect}, blocks=6, requests=5, t2=0.05**2, s1=0.0)
    levels = table.assign(log_tps=table["log_tps"] - effect[table["prompt_id"].str[1:].astype(int)])
    truth = levels.groupby("restart")["log_tps"].mean().to_numpy()
    out = pairing.adjusted_restart_means(table)
    offset = float(np.mean(effect))  # levels are at the average prompt
    assert out["level"].to_numpy() == pytest.approx(truth + offset, abs=1e-9)
    assert not np.allclose(out["log_mean"], truth + offset, atol=0.01)


def test_fully_crossed_sample_by_hand() -> None:
    """samples/llamacpp-cpu-gemma3: every restart serves each of the 15 prompts once, so the
    fit is the balanced two-way ANOVA: S1² = Σ(y − ȳ_restart − ȳ_prompt + ȳ)²/((R−1)(n−1))
    and the levels are the restarts' mean log tok/s. The n-gram arms' request spread was
    their prompts: S1² of ngram-k3 on code falls from 0.016 to under 0.001."""
    frame = load_samples(Bundle.open(SAMPLES / "llamacpp-cpu-gemma3")).frame
    table = pairing.measured_requests(frame)
    noise = pairing.noise_components(table, "baseline")
    for arm in ("baseline", "ngram-k3"):
        part = table[(table.arm == arm) & (table.workload == "code")]
        y = part.pivot(index="restart", columns="prompt_id", values="log_tps")
        resid = y.sub(y.mean(axis=1), axis=0) - y.mean(axis=0) + y.to_numpy().mean()
        r, n = y.shape
        s1_sq = float((resid.to_numpy() ** 2).sum()) / ((r - 1) * (n - 1))
        row = noise[(noise.arm == arm) & (noise.workload == "code")].iloc[0]
        assert row.s1_sq == pytest.approx(s1_sq)
        assert row.s2_sq == pytest.approx(float(y.mean(axis=1).var(ddof=1)))
    raw = table[(table.arm == "ngram-k3") & (table.workload == "code")]
    assert raw.groupby("restart")["log_tps"].var().mean() > 0.01
    assert noise[(noise.arm == "ngram-k3") & (noise.workload == "code")].s1_sq.iloc[0] < 0.001
    means = pairing.adjusted_restart_means(table)
    assert means["level"].to_numpy() == pytest.approx(means["log_mean"].to_numpy())


def test_rotating_sample_components() -> None:
    """samples/llamacpp-cpu-adaptive: 15, 15, then 5-7 of 22-23 prompts per restart, rotating.
    The levels' request variance k exceeds 1/m (the prompt effects are estimated), and the
    arms whose speculation
    depends on the prompt keep a prompt-by-arm variance against the baseline far above the
    A/A arm's."""
    frame = load_samples(Bundle.open(SAMPLES / "llamacpp-cpu-adaptive")).frame
    noise = pairing.noise_components(pairing.measured_requests(frame), "baseline")
    assert (noise.k > 1 / noise.m).all()
    assert set(noise.prompts) == {22, 23}
    aa = noise[noise.arm == "baseline-aa"].p2_sq.max()
    assert noise[noise.arm.str.startswith("ngram")].p2_sq.min() > 3 * aa
