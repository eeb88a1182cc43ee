"""analysis.json `covariate`: the restart means adjusted by an arm-free covariate (issue 45),
its balance check, and every comparison's raw and adjusted estimate side by side."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from diagnostic.schema.base import Strict
from diagnostic.schema.comparison import ComparisonKind, Verdict

__all__ = ["CovariateAnalysis", "CovariateBalance", "CovariateEstimate", "CovariateSlope"]


class CovariateSlope(Strict):
    """The slope of log restart means on the covariate for one workload and level, pooled
    across arms from within-arm deviations, and the spread it leaves."""

    workload: str = Field(description="Workload key ('all': every workload pooled)")
    concurrency: int = Field(description="Concurrency level")
    slope: float = Field(description="Change of the log restart mean per unit of the covariate")
    restarts: int = Field(ge=0, description="Restarts with a mean and a covariate, all arms")
    sd_raw: float = Field(
        ge=0, description="Within-arm SD of log restart means, pooled over arms (≈ the CV)"
    )
    sd_adjusted: float = Field(ge=0, description="The same after the adjustment")


class CovariateBalance(Strict):
    """The covariate's difference between an arm and what it is compared with: an arm that
    moves it would have part of its own effect taken away by the adjustment."""

    arm: str = Field(description="Arm")
    reference: str = Field(description="What it is compared with (its baseline, or A/A source)")
    difference: float = Field(description="Mean covariate of the arm's runs less the reference's")
    p_value: float | None = Field(
        None, description="Two-sided t test of no difference (None: too few runs to test)"
    )
    method: Literal["paired-blocks", "welch"] = Field(
        description="Paired on the blocks both have (blocked schedule), else Welch"
    )
    runs: int = Field(ge=0, description="Pairs of blocks (paired) or runs in all (Welch)")


class CovariateEstimate(Strict):
    """One comparison's ratio and deciding interval from raw and from adjusted restart means."""

    arm: str = Field(description="Arm")
    baseline: str = Field(description="What it is compared with")
    workload: str = Field(description="Workload key")
    concurrency: int = Field(description="Concurrency level")
    kind: ComparisonKind = Field(description="spec, aa or config")
    raw_ratio: float = Field(description="Ratio from the restart means as measured")
    raw_low: float | None = Field(None, description="Its deciding interval's lower end")
    raw_high: float | None = Field(None, description="... and upper end")
    raw_verdict: Verdict = Field(description="Its verdict")
    adjusted_ratio: float = Field(description="Ratio from the adjusted restart means")
    adjusted_low: float | None = Field(None, description="Its deciding interval's lower end")
    adjusted_high: float | None = Field(None, description="... and upper end")
    adjusted_verdict: Verdict = Field(description="Its verdict")


class CovariateAnalysis(Strict):
    """The pre-declared covariate adjustment: what it read, whether it was used, and why."""

    covariate: str = Field(description="What was read per run, e.g. quiet.steal_cores")
    description: str = Field(description="The covariate in words")
    arm_free: bool = Field(
        description="Measured where no arm can move it (the quiet window); False: a study of "
        "a covariate the arm may move, never used for a verdict"
    )
    runs: int = Field(ge=0, description="Runs with a covariate value")
    balance_alpha: float = Field(
        description="Family-wise level of the balance check (Bonferroni over the pairs)"
    )
    balance: list[CovariateBalance] = Field(default_factory=list, description="Per arm pair")
    balanced: bool = Field(description="No pair's difference significant at its level")
    slopes: list[CovariateSlope] = Field(default_factory=list, description="Per workload, level")
    applied: bool = Field(
        description="The comparisons (and their verdicts) are the adjusted ones; False: raw"
    )
    why: str = Field(description="Why the adjustment was applied or withheld, in words")
    estimates: list[CovariateEstimate] = Field(
        default_factory=list, description="Every comparison, raw and adjusted"
    )
