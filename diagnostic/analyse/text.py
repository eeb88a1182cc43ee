"""Method descriptions and caveat notes of an Analysis, in words for the report."""

from __future__ import annotations

from diagnostic.schema.analysis import Analysis, Methods

__all__ = ["methods", "notes"]


def methods(first_chunk_assumed: bool) -> Methods:
    """The method text; says so when some requests lacked per-chunk token counts."""
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
            "differ from max_tokens are excluded and counted." + first
        ),
        restart_summary=(
            "Each restart (server process) is summarised by the mean decode tokens/s of its "
            "measured requests; the median has a distribution-free order-statistic 95% interval "
            "(none for n ≤ 5). Outliers are flagged with Tukey fences (1.5 IQR), never removed; "
            "warm-up drift compares the first measured requests with the rest (Welch t test)."
        ),
        arm_interval=(
            "The restart is the unit of replication: an arm's estimate is the mean of its "
            "restart means with a Student t 95% interval on them (df = R − 1; its lower end is "
            "clipped at 0). With one restart the interval is within-process only and omits "
            "restart-to-restart variance."
        ),
        ratio_interval=(
            "The speedup is the ratio of geometric means of restart means, with a Welch t 95% "
            "interval on the difference of log restart means, exponentiated; paired t on block "
            "log-ratios when restarts ran in blocks. With one restart per arm, the interval uses "
            "the requests of one process and is labelled within-process only; an arm with one "
            "restart against a side with several gets no verdict."
        ),
        verdict=(
            "With [L, U] the ratio interval and δ the noise band: WIN if L > 1+δ, LOSS if "
            "U < 1/(1+δ), EQUIVALENT if the interval lies inside [1/(1+δ), 1+δ], else "
            "INCONCLUSIVE. δ = max(1%, distance of the A/A ratio interval from 1) when an A/A "
            "arm was measured with ≥ 3 restarts per side, else 2% (not calibrated)."
        ),
        multiplicity=(
            "Several arms against one baseline: p-values are adjusted with Benjamini-Hochberg, "
            "and verdicts use intervals widened to the Bonferroni level 1 − 0.05/m. Best k is "
            "the smallest k within the noise band of the best speedup (k = 0: speculation off). "
            "Adaptive stopping looks at ≤ 4 equally spaced planned points with one per-look "
            "level (Pocock), calibrated for t intervals so that the overall level stays 0.05."
        ),
        acceptance=(
            "Mean acceptance length = 1 + Δaccepted/Δdrafts from /metrics counters before and "
            "after each run (bonus token counted); per-position rates from the cumulative "
            "per-position counters; α̂ = A / (A + drafts stopped early). Counters cover every "
            "workload of a run. The client's clock is checked against the engine's own decode "
            "timing over the same requests (vLLM's request decode-time histogram, llama.cpp's "
            "answer timings)."
        ),
    )


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
    if not analysis.noise_band.calibrated:
        out.append(f"The noise band δ is not calibrated: {analysis.noise_band.source}.")
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
