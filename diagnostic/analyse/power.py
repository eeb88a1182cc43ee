"""Power of the family's verdicts before measuring: the WIN rate of a planned design at a true
speedup, at the critical values compare.decide uses, and what a day on site can decide at a
given noise (docs/statistics.md "Planning and stopping"). numpy and scipy load where used: the
sweep command's models name DayPower before anything is computed."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from diagnostic import defaults

__all__ = [
    "DayPower",
    "day_power",
    "fewest",
    "planned_critical",
    "variance_limits",
    "win_rate",
]

POWER_PATHS = 1 << 15  # simulated comparisons per power figure: MC SE ≤ 0.3%
MAX_DAYS = 10  # days on site beyond which a plan is "more than" that
MAX_EFFECT_PCT = 100  # the largest speedup (+100%) a day is asked about


@functools.lru_cache(maxsize=1024)
def planned_critical(size: int, blocks: int, alpha: float) -> tuple[float, float]:
    """(c, df) the verdicts of a family of `size` comparisons reach on `blocks` blocks: each
    on its own variance, df = blocks − 1, at Šidák's level (family.sidak_critical) — what
    compare.decide uses, whatever the comparisons' correlation."""
    from diagnostic.analyse.family import sidak_critical

    return sidak_critical(size, blocks - 1, alpha), float(blocks - 1)


def win_rate(
    looks: Sequence[int],
    sd_log: float,
    family: int,
    target: float,
    margin: float,
    *,
    futility: bool,
    alpha: float = 0.05,
) -> float:
    """P(WIN) of one comparison in a family of `family` at a true ratio 1 + target, block log
    ratios of SD sd_log, decided as compare.decide decides: at each planned look the
    simultaneous interval, c·se wide each side with c from planned_critical at the per-look
    level (sequential_alpha(looks, α): α itself at one look), above 1 + margin is a WIN; with
    `futility`, an interim look whose one-sided t test rejects the target stops the
    comparison undecided (defaults.FUTILITY_ALPHA). The looks' t statistics are drawn
    exactly, each on its own variance (sequential.t_look_paths, seeded). A
    look before defaults.MIN_RESTARTS blocks decides nothing (no verdict): left out."""
    import numpy as np
    from scipy import stats as sps

    from diagnostic.analyse import sequential

    looks = [n for n in looks if n >= defaults.MIN_RESTARTS]  # before: withheld
    if not looks:
        return 0.0
    if sd_log <= 0:
        return 1.0
    shift = math.log1p(target) / sd_log
    level = sequential.sequential_alpha(looks, alpha)
    crit = [planned_critical(family, n, level) for n in looks]
    q, df = np.array(crit).T
    mean, se = sequential.t_look_paths(looks, shift, POWER_PATHS)
    with np.errstate(divide="ignore", invalid="ignore"):
        win = mean - q * se > math.log1p(margin) / sd_log
        futile = sps.t.cdf((mean - shift) / se, df) < defaults.FUTILITY_ALPHA
    futile &= futility
    futile[:, -1] = False  # the last look stops anyway
    open_ = np.ones(len(mean), dtype=bool)
    wins = 0
    for i in range(len(looks)):
        wins += int((open_ & win[:, i]).sum())
        open_ &= ~(win[:, i] | futile[:, i])
    return wins / len(mean)


def fewest(power: Callable[[int], float], wanted: float, low: int, cap: int) -> int | None:
    """The smallest n in [low, cap] whose power reaches `wanted`, by bisection (power grows
    with n, up to simulation noise); None beyond `cap`; `low` if it reaches."""
    high = cap
    if power(high) < wanted:
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if power(mid) >= wanted else (mid + 1, high)
    return low


@dataclass(frozen=True)
class DayPower:
    """What a day on site decides with a fixed plan at one noise (day_power)."""

    blocks: int  # blocks of every arm a day holds
    arms: int  # arms started in a block, speculative or not
    speculative: int  # of them speculative: the family is these × workloads × levels
    family: int  # comparisons that share the 5% error rate
    target: float  # the speedup the plan looks for (0.1 = +10%)
    at_target: float  # P(WIN) when the true speedup is the target
    smallest: float | None  # the smallest whole-percent speedup decided with `wanted`
    kept: int | None  # speculative arms a day can keep to decide the target; None: not one
    kept_blocks: int  # blocks a day holds with those arms
    days: int | None  # days with every arm to decide the target; None: more than MAX_DAYS
    wanted: float  # the probability of deciding asked for
    budget_s: float  # measuring time of a day
    # P(WIN) at the target at the 95% confidence limits of the restart CV (high CV first),
    # the limits themselves and the restarts' df they come from; None: the CV was assumed
    at_target_limits: tuple[float, float] | None = None
    cv_limits: tuple[float, float] | None = None
    cv_df: int | None = None

    @property
    def decides_target(self) -> bool:
        """A day decides the target with the wanted probability."""
        return self.at_target >= self.wanted

    def sentence(self) -> str:
        """'a 6 h day holds 7 blocks of the 8 arms (12 comparisons): it decides a true +10%
        with probability 11% and +25% with 80%. To decide +10% with 80%: 3 arms (1
        speculative, 18 blocks) in a day, or 2 days with every arm.'"""
        chance = f"{self.at_target:.0%}" if self.at_target >= 0.005 else "below 1%"
        if self.at_target_limits and self.cv_limits:
            (low, high), (cv_low, cv_high) = self.at_target_limits, self.cv_limits
            chance += (  # plain words: page 1 prints it for a noise study
                f" ({low:.0%} to {high:.0%} across the restart-to-restart variation the "
                f"measured restarts leave possible at 95% confidence, {cv_low:.1%} to "
                f"{cv_high:.1%})"
            )
        smallest = (
            f"{self.smallest:+.0%} with {self.wanted:.0%}"
            if self.smallest is not None
            else f"no speedup up to +{MAX_EFFECT_PCT}% with {self.wanted:.0%}"
        )
        text = (
            f"a {self.budget_s / 3600:g} h day holds {self.blocks} blocks of the {self.arms} "
            f"arms ({self.family} comparison{'s' if self.family != 1 else ''}): it decides a "
            f"true {self.target:+.0%} with probability {chance} and {smallest}."
        )
        if self.decides_target:
            return text
        ways = []
        if self.kept:
            arms = self.arms - self.speculative + self.kept
            ways.append(
                f"{arms} arms ({self.kept} speculative, {self.kept_blocks} blocks) in a day"
            )
        ways.append(
            f"{self.days} days with every arm"
            if self.days
            else f"more than {MAX_DAYS} days with every arm"
        )
        alone = "" if self.kept else " (one speculative arm alone would not do it in a day)"
        return (
            f"{text} To decide {self.target:+.0%} with {self.wanted:.0%}: "
            f"{', or '.join(ways)}{alone}."
        )


def variance_limits(df: int, level: float = 0.95) -> tuple[float, float]:
    """Factors (low, high) that carry a variance estimated on `df` degrees of freedom to the
    ends of its chi-square confidence interval at `level`: df/χ²(1 − (1 − level)/2, df) and
    df/χ²((1 − level)/2, df). Normal-theory: a variance's own uncertainty."""
    from scipy import stats as sps

    tail = (1 - level) / 2
    return df / float(sps.chi2.ppf(1 - tail, df)), df / float(sps.chi2.ppf(tail, df))


def day_power(
    sd_block: float,
    *,
    start_s: float,
    arms: int,
    speculative: int,
    keys: int,
    target: float,
    margin: float,
    budget_s: float = defaults.DAY_ON_SITE_S,
    wanted: float | None = None,
) -> DayPower:
    """What a fixed plan decides in a day on site: a block starts each of `arms` arms once at
    `start_s` seconds a start, so a day holds ⌊budget_s/(arms·start_s)⌋ blocks; the family is
    the `speculative` arms × `keys` comparisons each (workloads × levels), decided by win_rate
    with block log ratios of SD sd_block. Deciding a true speedup means calling it a WIN.
    Also the smallest speedup (whole percent, up to +100%) a day decides with `wanted`
    probability (default extension.ASSURANCE, as a planned extension aims at) and, when the
    target needs more: the most speculative arms a day could keep (the other arms cut), or the
    days every arm needs."""
    from diagnostic.analyse.extension import ASSURANCE

    wanted = ASSURANCE if wanted is None else wanted
    others = arms - speculative

    def blocks(spec: int, days: int = 1) -> int:
        return math.floor(days * budget_s / ((others + spec) * start_s))

    def power(effect: float, spec: int = speculative, days: int = 1) -> float:
        looks = [blocks(spec, days)]
        return win_rate(looks, sd_block, spec * keys, effect, margin, futility=False)

    at_target = power(target)
    smallest = fewest(lambda pct: power(pct / 100), wanted, 1, MAX_EFFECT_PCT)
    enough = at_target >= wanted
    last = speculative - 1
    cut = 0 if enough else fewest(lambda r: power(target, speculative - r), wanted, 0, last)
    days = 1 if enough else fewest(lambda d: power(target, days=d), wanted, 2, MAX_DAYS)
    kept = None if cut is None else speculative - cut
    return DayPower(
        blocks=blocks(speculative),
        arms=arms,
        speculative=speculative,
        family=speculative * keys,
        target=target,
        at_target=at_target,
        smallest=None if smallest is None else smallest / 100,
        kept=kept,
        kept_blocks=blocks(kept) if kept else 0,
        days=days,
        wanted=wanted,
        budget_s=budget_s,
    )
