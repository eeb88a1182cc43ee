"""diagnostic.analyse.theory: Leviathan's τ and speedup, α estimates, the step-cost fit, best k."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostic.analyse import theory


def test_tau_closed_form_and_limits() -> None:
    assert theory.tau(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert theory.tau(1.0, 3) == 4.0
    assert theory.tau(0.0, 5) == 1.0
    assert theory.tau(0.7, 0) == 1.0


def test_statistics_md_example_k3_to_k7_adds_24_percent_at_alpha_07() -> None:
    gain = theory.tau(0.7, 7) / theory.tau(0.7, 3)
    assert gain == pytest.approx(1.24, abs=0.005)
    # k = 7 loses to k = 3 whenever c > ~0.073.
    assert theory.speedup(0.7, 7, 0.075) < theory.speedup(0.7, 3, 0.075)
    assert theory.speedup(0.7, 7, 0.070) > theory.speedup(0.7, 3, 0.070)


def test_a_speedup_exists_iff_alpha_exceeds_c() -> None:
    assert theory.speedup(0.3, 1, 0.25) > 1  # α > c
    assert all(theory.speedup(0.2, k, 0.25) < 1 for k in range(1, 10))  # α < c


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 0.99), st.integers(1, 8))
def test_alpha_from_tau_inverts_tau(alpha: float, k: int) -> None:
    assert theory.alpha_from_tau(theory.tau(alpha, k), k) == pytest.approx(alpha, abs=1e-6)


def test_alpha_from_tau_clamps() -> None:
    assert theory.alpha_from_tau(1.0, 3) == 0.0
    assert theory.alpha_from_tau(4.2, 3) == 1.0


def test_alpha_from_counters_real_llamacpp_numbers() -> None:
    # ls_ngram_k4_metrics.txt: 912 accepted, 378 drafts, 186 accepted at position 3.
    alpha = theory.alpha_from_counters(912, 378, 186)
    assert alpha == pytest.approx(912 / (912 + 378 - 186))
    assert theory.alpha_from_counters(0, 0, 0) is None


def test_position_rates_cumulative_and_conditional() -> None:
    rates = theory.position_rates([80, 60, 30], drafts=100)
    assert [c for c, _ in rates] == pytest.approx([0.8, 0.6, 0.3])
    assert [c for _, c in rates] == pytest.approx([0.8, 0.75, 0.5])
    # Mean acceptance length = 1 + Σ a_i.
    assert 1 + sum(c for c, _ in rates) == pytest.approx(2.7)


def test_fit_step_cost_recovers_a_line() -> None:
    ks = [1, 2, 3, 5]
    fit = theory.fit_step_cost(ks, [1.4 + 0.1 * k for k in ks])
    assert fit is not None
    assert (fit.a, fit.b, fit.n_points) == (pytest.approx(1.4), pytest.approx(0.1), 4)


def test_fit_step_cost_ignores_k0_and_needs_two_k() -> None:
    assert theory.fit_step_cost([0, 3], [1.0, 2.0]) is None
    fit = theory.fit_step_cost([0, 1, 3], [1.0, 1.2, 1.6])
    assert fit is not None and fit.a == pytest.approx(1.0)


def test_measured_rho() -> None:
    # τ_k = 3, baseline 600 tok/s, spec 1200 tok/s: a step costs 1.5 plain steps.
    assert theory.measured_rho(3.0, 600.0, 1200.0) == pytest.approx(1.5)


def test_best_k_prefers_small_k_when_steps_are_expensive() -> None:
    assert theory.best_k(0.7, 1.0, 0.02) > theory.best_k(0.7, 1.0, 0.15)
    assert theory.best_k(0.3, 2.0, 0.1) == 0  # fixed cost too high: speculation off


def test_best_k_is_the_argmax_of_the_predicted_curve() -> None:
    alpha, a, b = 0.8, 1.1, 0.08
    curve = {k: theory.predicted_speedup(alpha, k, a, b) for k in range(17)}
    assert theory.best_k(alpha, a, b) == max(curve, key=lambda k: curve[k])
    assert curve[0] == 1.0
