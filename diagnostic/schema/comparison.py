"""Pydantic models of one comparison in analysis.json: an arm against its baseline on one
workload at one level, its verdict, the outlook of an undecided one and its adaptive-stopping
status (re-exported by `schema.analysis`, the model of the whole file)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from diagnostic.schema.base import Strict as _Model

__all__ = [
    "WITHIN_PROCESS_LABEL",
    "Comparison",
    "ComparisonKind",
    "ExtensionPoint",
    "IntervalMethod",
    "Outlook",
    "StoppingStatus",
    "Verdict",
]

Verdict = Literal["WIN", "LOSS", "EQUIVALENT", "INCONCLUSIVE", "WITHHELD"]
IntervalMethod = Literal["welch-log-restart-means", "paired-log-block-ratios", "within-process"]
ComparisonKind = Literal["spec", "aa", "config", "after"]
WITHIN_PROCESS_LABEL = "within-process only; restart variance not measured"


class StoppingStatus(_Model):
    """Group-sequential (Pocock) status of one comparison, for `sweep --adaptive`."""

    planned_looks: list[int] = Field(description="Restarts (blocks) per arm at which to look")
    n_now: int = Field(description="Restarts (blocks) per arm available now")
    look_number: int | None = Field(None, description="1-based look reached now; None between")
    per_look_alpha: float = Field(description="Nominal two-sided level per look (Pocock / m)")
    verdict_at_look: Verdict | None = Field(
        None, description="Verdict of the comparison's interval (at the per-look level)"
    )
    can_stop: bool = Field(
        False, description="True at a look whose interval decides, at a futile one, or the last"
    )
    target: float | None = Field(
        None, description="Speedup the plan is powered to find (0.1 = +10%); None: no futility"
    )
    futility_p: float | None = Field(
        None,
        description="One-sided p-value of 'ratio ≥ 1 + target' at this look (t test on the "
        "comparison's log ratio); below futility_alpha at an interim look: futile",
    )
    futile: bool = Field(
        False,
        description="Stopped for futility: undecided, and the data reject the target speedup",
    )
    reason: str = Field("", description="Why it can or cannot stop")


class ExtensionPoint(_Model):
    """A planned extension of an undecided comparison and its chance of deciding it."""

    restarts: int = Field(description="Restarts (blocks) per arm in all after the extension")
    added: int = Field(description="Restarts per arm the extension adds")
    assurance: float = Field(
        description="Probability that the comparison is then decided (WIN, LOSS or "
        "EQUIVALENT at its level), averaged over the confidence distribution of its speedup"
    )


class Outlook(_Model):
    """An undecided comparison: what the data say now, and what more restarts would buy."""

    p_faster: float = Field(description="P(speedup > 1 + δ) under the confidence distribution")
    p_slower: float = Field(description="P(speedup < 1/(1 + δ)) under it")
    low95: float = Field(description="Lower end of this comparison's own 95% interval")
    high95: float = Field(description="Upper end of it (one comparison alone: not simultaneous)")
    method: str = Field(
        "confidence distribution: t on the log ratio with the deciding interval's SE and df",
        description="What the probabilities are",
    )
    extension: list[ExtensionPoint] = Field(
        default_factory=list, description="Planned extensions and their assurance"
    )


class Comparison(_Model):
    """One arm against the baseline on one workload at one concurrency level."""

    arm: str = Field(description="Arm compared")
    baseline: str = Field(description="Baseline arm")
    workload: str = Field(description="Workload, or 'all'")
    concurrency: int = Field(description="Requests in flight")
    kind: ComparisonKind = Field(
        description="'spec': a speculative arm vs its matched baseline; 'aa': the A/A check; "
        "'config': a non-speculative arm vs the plan's baseline (table only); 'after': the "
        "recommended configuration vs the configuration as found (Analysis.before_after)"
    )
    matched: bool = Field(
        True,
        description="The baseline's launch differs from the arm's only in speculation flags "
        "(or the plan names it); an unmatched comparison never makes a headline",
    )
    differs: str | None = Field(None, description="What else differs, when not matched")
    k: int | None = Field(None, description="The arm's k, when given")
    ratio: float | None = Field(description="Ratio of geometric means of restart means")
    ci_low: float | None = Field(
        None, description="Lower end of the interval that decided the verdict (at ci_level)"
    )
    ci_high: float | None = Field(None, description="Upper end of the deciding interval")
    ci_level: float = Field(description="Confidence level of that interval (e.g. 1 − 0.05/m)")
    ci_label: str = Field(
        "95% CI",
        description="The interval in words: '95% CI', 'simultaneous 95% CI over 6 "
        "comparisons', 'Pocock-adjusted 95% CI, look 2 of 4'",
    )
    verdict: Verdict = Field(
        description="WIN, LOSS, EQUIVALENT or INCONCLUSIVE against the margin; WITHHELD when "
        "there is no verdict (fewer than 3 restarts a side, or a derived row: label says)"
    )
    withheld: bool = Field(
        False,
        description="No verdict: fewer than 3 restarts on a side, or a derived row (label says)",
    )
    derived: bool = Field(
        False,
        description="A row pooled over every workload: shown, never one of the plan's "
        "comparisons (no verdict, not in the family)",
    )
    lean: Literal["faster", "slower"] | None = Field(
        None, description="INCONCLUSIVE: the side the estimate leans to"
    )
    interval_method: IntervalMethod = Field(description="How the ratio interval was formed")
    paired: bool = Field(False, description="True when paired on blocks (ttest_rel)")
    p_value: float | None = Field(None, description="Two-sided p-value of log ratio = 0")
    p_adjusted: float | None = Field(None, description="Benjamini-Hochberg adjusted p-value")
    family_size: int = Field(1, description="Comparisons whose verdicts share the 5% error rate")
    n_restarts_arm: int = Field(description="Restarts of the arm used")
    n_restarts_baseline: int = Field(description="Restarts of the baseline used")
    pooled_with: str | None = Field(
        None,
        description="A/A repeat(s) averaged with the baseline in each block (design.pool_aa); "
        "their restarts are not in n_restarts_baseline",
    )
    within_process_only: bool = Field(
        False, description="True when a side has one restart: the interval is of one process"
    )
    label: str | None = Field(None, description="Caveat to print beside the interval")
    more_restarts_needed: int | None = Field(
        None,
        description="Undecided: restarts per arm in all whose planned extension decides it "
        "with probability ≥ 80% (outlook.extension); withheld: the floor a verdict needs; "
        "None when no extension of up to 200 more restarts reaches 80%",
    )
    reference_tps: float | None = Field(
        None,
        description="Decode tok/s of what the ratio is against, over the blocks it uses (the "
        "pooled reference's own figure when the A/A repeat joins it): arm / this = ratio",
    )
    sensitivity: str | None = Field(
        None,
        description="Pooled reference: the verdict against the baseline alone, when it differs",
    )
    outlook: Outlook | None = Field(
        None, description="Undecided family member: the confidence distribution and extensions"
    )
    stopping: StoppingStatus | None = Field(None, description="Adaptive-stopping status")

    @property
    def headline(self) -> bool:
        """May appear on page 1: a matched speculative comparison with a verdict."""
        return self.kind == "spec" and self.matched and not self.withheld

    @property
    def checks_design(self) -> bool:
        """An A/A comparison with restarts on both sides, one workload and level (the derived
        'all' row repeats them): its interval, simultaneous at 95% over the bundle's A/A
        comparisons, must contain 1 (NoiseBand.aa_check)."""
        return (
            self.kind == "aa"
            and not self.derived
            and not self.within_process_only
            and self.ci_low is not None
            and self.ci_high is not None
        )
