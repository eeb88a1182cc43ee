"""diagnostic.analyse.extension: the confidence distribution of an undecided speedup and the
assurance of a planned extension, checked against simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from diagnostic.analyse.extension import ADDED, assurance, belief, extension


def test_belief_reads_the_t_confidence_distribution_at_the_margin() -> None:
    b = belief(math.log(1.17), 0.05, 6.0, 0.02)
    assert b.p_faster == pytest.approx(sps.t.sf((math.log(1.02) - math.log(1.17)) / 0.05, 6))
    assert 0.98 < b.p_faster < 1 and b.p_slower < 0.01  # t tails on 6 df are heavy
    half = sps.t.ppf(0.975, 6) * 0.05
    assert (b.low95, b.high95) == pytest.approx((1.17 * math.exp(-half), 1.17 * math.exp(half)))
    centred = belief(0.0, 0.05, 6.0, 0.02)
    assert centred.p_faster == pytest.approx(centred.p_slower)  # symmetric about no change


def test_assurance_matches_a_simulation_of_the_extension() -> None:
    """Truth drawn from the confidence distribution, then the added blocks and the final
    interval at the same level: the share decided is the assurance (±2 points)."""
    mean, se, df, n, level, delta, added = math.log(1.06), 0.03, 4.0, 5, 0.99, 0.02, 8
    rng = np.random.default_rng(19)
    sims = 40_000
    theta = mean + se * rng.standard_t(df, sims)
    sd, total = se * math.sqrt(n), n + added
    final = (n * mean + added * (theta + rng.normal(0, sd / math.sqrt(added), sims))) / total
    half = sps.t.ppf(0.5 + level / 2, df + added) * sd / math.sqrt(total)
    band = math.log1p(delta)
    decided = (final - half > band) | (final + half < -band) | (np.abs(final) < band - half)
    assert assurance(mean, se, df, n, level, delta, added) == pytest.approx(
        float(decided.mean()), abs=0.02
    )


def test_more_restarts_buy_more_assurance_up_to_the_leaning_side() -> None:
    points = extension(math.log(1.10), 0.04, 4.0, 4, 0.99, 0.02)
    assert [r for r, _ in points] == [4 + k for k in ADDED]
    values = [a for _, a in points]
    assert values == sorted(values) and values[0] < 0.5 < values[-1] <= 1
    # Nothing is added: nothing is decided.
    assert assurance(math.log(1.10), 0.04, 4.0, 4, 0.99, 0.02, 0) == 0.0
