"""Method descriptions and caveat notes of an Analysis, in words for the report."""

from __future__ import annotations

from diagnostic.schema.analysis import Analysis, Methods
from diagnostic.schema.bundle import Design

__all__ = ["methods", "notes"]


def methods(first_chunk_assumed: bool, design: Design | None = None) -> Methods:
    """The method text; says so when some requests lacked per-chunk token counts, and how
    an adaptive design's reference and futility stop worked when it recorded them."""
    first = (
        " Where the server did not report tokens per chunk, the first chunk counts as 1 token."
        if first_chunk_assumed
        else ""
    )
    return Methods(
        decode_tps=(
            "Per request: (completion_tokens from the API's usage − tokens of the first chunk) "
            "/ (time of the last chunk − time of the first chunk). Chunks are never counted as "
            "tokens. Warm-up requests, failed requests and requests whose completion_tokens "
            "differ from max_tokens are excluded and counted; a run with over 10% of its "
            "measured requests failed is left out of every figure and named." + first
        ),
        restart_summary=(
            "Each restart (server process) is summarised by the mean decode tokens/s of its "
            "measured requests; the median has a distribution-free order-statistic 95% interval "
            "(none for n ≤ 5). Outliers are flagged with Tukey fences (1.5 IQR), never removed; "
            "warm-up drift compares the first measured requests with the rest (Welch t test)."
        ),
        arm_interval=(
            "The restart is the unit of replication: an arm's estimate is the geometric mean of "
            "its restart means — the centre every speedup ratio uses — with the Student t 95% "
            "interval of the log restart means (df = R − 1), exponentiated. With one restart "
            "it is that restart's mean, and the interval is within-process only and omits "
            "restart-to-restart variance."
        ),
        ratio_interval=(
            "The speedup is the ratio of geometric means of restart means, with a Welch t "
            "interval on the difference of log restart means, exponentiated; paired t on block "
            "log-ratios when restarts ran in blocks. Each speculative arm is compared with its "
            "matched baseline: the arm whose launch differs only in speculation flags (or the "
            "one the plan names). With one restart on a side the ratio is of the two means, "
            "its interval uses the requests of one process (delta method), is labelled "
            "within-process only, and gets no verdict." + _adaptive_ratio(design)
        ),
        verdict=(
            "With [L, U] the interval printed beside the verdict — the one that decided it, at "
            "the level printed with it — and δ the plan's margin (default 2%): WIN if L > 1+δ, "
            "LOSS if U < 1/(1+δ), EQUIVALENT if the interval lies inside [1/(1+δ), 1+δ], else "
            "INCONCLUSIVE, with the side the estimate leans to; WITHHELD, with no verdict, "
            "below 3 restarts on a side. The A/A arm checks the design: its 95% interval must "
            "contain 1, and its width is the measured restart noise. When it does not, the "
            "A/A difference b (the far end of its interval) widens the margin: a verdict "
            "counts only when L > (1+δ)·b or U < 1/((1+δ)·b)."
        ),
        multiplicity=(
            "The family is every speculative comparison with a verdict (all arms, workloads and "
            "levels, m in all): their intervals are simultaneous at 95%, each member's paired t "
            "interval on its own block variance (none borrowed from a quieter arm) at "
            "Šidák's level (1 − α)^(1/m); members "
            "not paired on 3 blocks take Bonferroni (level 1 − α/m) for their share of α. The "
            "before-and-after (the recommended configuration against the one as found) is a "
            "family of its own, simultaneous at 95% the same way. Benjamini-Hochberg p-values "
            "are listed, never used for a verdict. "
            "Under an adaptive design the sweep looked at ≤ 4 planned points with one per-look "
            "level (Pocock), calibrated for t intervals so that the overall level stays 0.05, "
            "and the report decides at that level. Best k is taken among WINs only: the arm with "
            "the highest lower bound, then the smallest k whose interval reaches it; no WIN "
            "means no speculation (or more restarts when some k leans faster)."
        ),
        acceptance=(
            "Acceptance is taken per workload without warm-ups: from the engine's per-request "
            "draft counts where it returns them (llama.cpp: tokens per target step = Σ tokens "
            "/ (Σ tokens − Σ accepted), steps without a draft included — the τ the step-cost "
            "fit needs), else from /metrics read after each workload's warm-up and after its "
            "measured requests (1 + Δaccepted/Δdrafts, bonus token counted); α̂ per workload by "
            "inverting τ(α, k). Run-level figures (whole-run /metrics: per-position rates, "
            "α̂ = A / (A + drafts stopped early)) cover every workload and the warm-ups. The "
            "client's clock is checked against the engine's own decode timing over the same "
            "requests (vLLM's request decode-time histogram, llama.cpp's answer timings)."
        ),
    )


def _adaptive_ratio(design: Design | None) -> str:
    """What the adaptive design adds to the speedup interval: the pooled reference, the
    futility test; '' when it recorded neither."""
    out = ""
    if design is not None and design.pool_aa:
        out += (
            " Each block's reference is the mean of the baseline's and its A/A repeat's log "
            "restart means (two starts of the same configuration); the A/A check still "
            "compares the two."
        )
    if design is not None and design.target is not None:
        out += (
            " At an interim look, an undecided comparison whose one-sided t test (the same log "
            f"ratio, SE and df) rejects a speedup of +{design.target:.0%}, the plan's target, at "
            f"{design.futility_alpha:.1%} stops for futility; its verdict stays INCONCLUSIVE."
        )
    return out


def notes(analysis: Analysis, first_chunk_assumed: int, baseline_note: str | None) -> list[str]:
    """Caveats the report must print beside the numbers."""
    out = [baseline_note] if baseline_note else []
    if not analysis.arms or all(a.decode_tps.n_requests == 0 for a in analysis.arms):
        out.append("No measured request: nothing to analyse (see exclusions).")
    if any(c.within_process_only for c in analysis.comparisons):
        out.append(
            "Some comparisons rest on one restart per arm: their intervals are within-process "
            "only; restart variance was not measured. Restart the server ≥ 3 times per arm."
        )
    if analysis.noise_band.aa_check is False:
        out.append(
            "The A/A check failed: an A/A interval excludes 1, so the schedule has drift or "
            "order effects; every verdict of this bundle carries that caveat."
        )
    for run in analysis.left_out_runs:
        out.append(f"Run {run.run} is left out of every figure: {run.reason}.")
    if first_chunk_assumed:
        out.append(
            f"{first_chunk_assumed} requests had no per-chunk token counts: their first chunk "
            "was counted as 1 token."
        )
    out += _restart_notes(analysis)
    if analysis.exclusions.torn_lines:
        out.append(f"{analysis.exclusions.torn_lines} torn last line(s) of requests.jsonl dropped.")
    return out


def _restart_notes(analysis: Analysis) -> list[str]:
    summaries = [
        r for a in analysis.arms for w in a.workloads if w.workload != "all" for r in w.restarts
    ]
    drift = sum(1 for r in summaries if r.drift and r.drift.flagged)
    outliers = sum(len(r.outliers) for r in summaries)
    out = []
    if drift:
        out.append(f"Warm-up drift flagged in {drift} restart summaries: consider more warm-up.")
    if outliers:
        out.append(f"{outliers} outlier requests flagged (Tukey fences); none removed.")
    return out
