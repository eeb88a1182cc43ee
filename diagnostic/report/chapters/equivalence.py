"""The output equivalence and data quality chapter: greedy output against the baseline's and
why it differs (`divergence`), warm-up drift and outlier flags, excluded requests, the
client's clock against the engine's, and the failed runs and requests."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

from diagnostic import defaults
from diagnostic.bundle.store import Bundle
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.views.base import KeyValue
from diagnostic.report.views.chapters import (
    DivergentPrompt,
    EquivalenceRow,
    EquivalenceView,
    FailureRow,
    FailuresView,
    Flag,
    TimingRow,
)
from diagnostic.schema.analysis import Analysis, ArmWorkload
from diagnostic.schema.bundle import RunInfo

__all__ = ["Divergence", "divergence", "divergence_cause", "equivalence", "failures"]

_MAX_DIVERGENT = 3
# A run left "running" was cut off: the sweep or collect process stopped before it ended.
_UNFINISHED = "never finished: the collecting process stopped during it"
_MAX_REASON = 200


def _equivalence_rows(a: Analysis) -> list[EquivalenceRow]:
    return [
        EquivalenceRow(
            arm=eq.arm, identical=f"{eq.n_identical} of {eq.n_prompts}", rate=f.pct(eq.rate, 0)
        )
        for eq in a.equivalence
    ]


def _divergent(a: Analysis) -> tuple[list[DivergentPrompt], int]:
    """Differing prompts, each diff once with every arm that differs the same way (same
    prompt, same texts); the first `_MAX_DIVERGENT` and how many more there are."""
    groups: dict[tuple[str, str, str, str, str], list[str]] = {}
    for eq in a.equivalence:
        for p in eq.prompts:
            if not p.identical:
                position = f.text(p.first_divergent_char)
                baseline = f.text(p.baseline_excerpt, "(empty)")
                key = (
                    p.workload,
                    p.prompt_id,
                    position,
                    baseline,
                    f.text(p.arm_excerpt, "(empty)"),
                )
                groups.setdefault(key, []).append(eq.arm)
    shown = [
        DivergentPrompt(
            arms=f.join(arms), workload=w, prompt_id=pid, position=pos, baseline=base, arm=text
        )
        for (w, pid, pos, base, text), arms in groups.items()
    ]
    return shown[:_MAX_DIVERGENT], max(0, len(shown) - _MAX_DIVERGENT)


@dataclass(frozen=True)
class Divergence:
    """Where greedy output first differs from the baseline's, over every differing prompt."""

    arms: list[str]
    firsts: list[tuple[int, str, str]]  # (first differing character, arm, workload/prompt)
    verify: bool = True  # some differing arm speculates (or may): batched verify is a cause

    @property
    def numerics(self) -> str:
        """The floating-point cause of late differences, for these arms."""
        return "numerics of batched verify" if self.verify else "numerics of a restart"

    @property
    def median(self) -> float | None:
        """The median first differing character; None when no position is known."""
        return statistics.median(c for c, _, _ in self.firsts) if self.firsts else None

    @property
    def suspect(self) -> bool:
        """Most differences start within the first few tokens: not numerics."""
        m = self.median
        return m is not None and m < defaults.EARLY_DIVERGENCE_CHARS


def divergence(a: Analysis) -> Divergence:
    """The arms whose greedy output differs from their baseline's, and where it starts."""
    arms = [eq.arm for eq in a.equivalence if eq.n_prompts and eq.n_identical < eq.n_prompts]
    firsts = sorted(
        (p.first_divergent_char, eq.arm, f"{p.workload}/{p.prompt_id}")
        for eq in a.equivalence
        for p in eq.prompts
        if not p.identical and p.first_divergent_char is not None
    )
    speculate = {arm.id: arm.speculative for arm in a.arms}
    verify = any(speculate.get(arm) is not False for arm in arms)
    return Divergence(arms=arms, firsts=firsts, verify=verify)


def divergence_cause(a: Analysis) -> str:
    """One explanation of every greedy mismatch: differences that start late are the
    numerics of batched verify (or, for arms that do not speculate, of a restart); most
    starting early is suspect. '' when no arm differs."""
    d = divergence(a)
    if not d.arms:
        return ""
    where = ""
    if d.firsts:
        low, high = d.firsts[0][0], d.firsts[-1][0]
        where = f" first at character {low}–{high} (median {d.median:.0f})"
    if d.suspect:
        return (
            f"The output of {f.join(d.arms)} differs from the baseline's{where}: mostly within "
            "the first few tokens, where a bug in drafting or acceptance shows; numerics do "
            "not explain that."
        )
    early = [x for x in d.firsts if x[0] < defaults.EARLY_DIVERGENCE_CHARS]
    tail = (
        f" The earliest, character {early[0][0]} ({early[0][1]}, {early[0][2]}), is worth a "
        "look before ruling out a bug."
        if early
        else ""
    )
    why = (
        "The target model scores k+1 tokens in one forward pass instead of one, so its "
        "floating-point sums run in another order"
        if d.verify
        else "None of them speculates: a restarted server may choose other kernels or split "
        "its sums otherwise (GPU kernels need not be bitwise reproducible from one start to "
        "the next)"
    )
    return (
        f"The output of {f.join(d.arms)} differs from the baseline's{where}: the expected "
        f"{d.numerics}, not a bug. {why}; where two tokens nearly tie, the greedy choice can "
        f"flip and the text goes its own way from there.{tail}"
    )


def _drift_flags(arm: str, aw: ArmWorkload) -> list[Flag]:
    out = []
    for r in aw.restarts:
        d = r.drift
        if d is not None and d.flagged:
            detail = (
                f"first {d.n_first} requests {f.tps(d.first_mean)} tok/s against "
                f"{f.tps(d.rest_mean)} for the rest (ratio {f.num(d.ratio, 2)}, "
                f"p = {f.pvalue(d.p_value)})"
            )
            out.append(Flag(kind="warm-up drift", where=f"{arm} / restart {r.restart} / "
                            f"{aw.workload}", detail=detail))  # fmt: skip
    return out


def _outlier_flag(arm: str, aw: ArmWorkload) -> Flag | None:
    """Outliers of one arm and workload in one line: how many, where, which way."""
    found = [(r.restart, o) for r in aw.restarts for o in r.outliers]
    if not found:
        return None
    low = sum(o.side == "low" for _, o in found)
    restarts = sorted({r for r, _ in found})
    worst = min(found, key=lambda x: x[1].decode_tps)[1]
    detail = (
        f"{len(found)} request(s) outside the Tukey fences in {len(restarts)} of "
        f"{len(aw.restarts)} restarts ({low} low, {len(found) - low} high; lowest "
        f"{f.tps(worst.decode_tps)} tok/s, {worst.prompt_id}); kept in the statistics"
    )
    return Flag(kind="outliers", where=f"{arm} / {aw.workload}", detail=detail)


def _flags(a: Analysis) -> list[Flag]:
    names, level = set(sel.workloads(a)), sel.low_level(a)
    out: list[Flag] = []
    for arm in sel.ordered_arms(a):
        for aw in arm.workloads:
            if aw.workload in names and aw.concurrency == level:
                out += _drift_flags(arm.id, aw)
                out += [x for x in [_outlier_flag(arm.id, aw)] if x is not None]
    return out


def equivalence(a: Analysis) -> EquivalenceView:
    """Greedy output equivalence, drift/outlier flags and excluded requests."""
    note = (
        "At temperature 0 speculation must not change the output: every arm's text for "
        "each prompt is compared with the baseline's."
    )
    if not a.equivalence:
        note += f" Equivalence: {f.MISSING} (no arm's output could be compared)."
    if cause := divergence_cause(a):
        note += " " + cause
    divergent, more = _divergent(a)
    ex = [
        KeyValue(key=reason, value=f.count(n))
        for reason, n in sorted(a.exclusions.by_reason.items())
    ]
    if a.exclusions.torn_lines:
        ex.append(KeyValue(key="torn last lines dropped", value=f.count(a.exclusions.torn_lines)))
    rows, sources = _timing(a)
    return EquivalenceView(
        note=note,
        rows=_equivalence_rows(a),
        divergent=divergent,
        more_divergent=more,
        flags=_flags(a),
        exclusions=ex,
        timing_note=_timing_note(rows, sources),
        timing=rows,
    )


def _timing(a: Analysis) -> tuple[list[TimingRow], set[str]]:
    rows, sources = [], set()
    for arm in sel.ordered_arms(a):
        timed = [r.engine_timing for r in arm.runs if r.engine_timing is not None]
        if not timed:
            continue
        sources |= {t.source for t in timed}
        ratios = [t.ratio for t in timed]
        same = all(t.engine_tokens == t.client_tokens for t in timed)
        rows.append(
            TimingRow(
                arm=arm.id,
                runs=f.count(len(timed)),
                client=f.tps(sum(t.client_tps for t in timed) / len(timed)),
                engine=f.tps(sum(t.engine_tps for t in timed) / len(timed)),
                ratio=f"{min(ratios):.4f}–{max(ratios):.4f}"
                if len(timed) > 1
                else f"{ratios[0]:.4f}",
                tokens="equal" if same else "differ",
            )
        )
    return rows, sources


def _timing_note(rows: list[TimingRow], sources: set[str]) -> str:
    if not rows:
        return (
            "The engine exposed no timing of its own (vLLM's /metrics decode-time histogram or "
            "llama.cpp's answer timings), so the client's clock could not be checked against it."
        )
    return (
        "The client's decode throughput against the engine's own clock over the same requests "
        f"(warm-ups included; {'; '.join(sorted(sources))}). These figures are another centre "
        "than the rest of the report: token-weighted (Σ tokens / Σ decode time over a run's "
        "requests, averaged over its runs), made to compare two clocks, not arms. A ratio near "
        "1 means the client measures what the engine did; token counts compare the API's usage "
        "with the engine's."
    )


def _request_failures(bundle: Bundle, runs: list[RunInfo]) -> list[FailureRow]:
    rows: list[FailureRow] = []
    for run in runs:
        errors = Counter(
            (r.error or "")[:_MAX_REASON]
            for r in bundle.read_requests(run.arm, run.restart).records
            if r.error
        )
        rows.extend(
            FailureRow(where=f"{run.arm} / restart {run.restart}", count=str(n), reason=reason)
            for reason, n in errors.most_common()
        )
    return rows


def failures(bundle: Bundle, runs: list[RunInfo]) -> FailuresView:
    """Failed runs and failed requests, with their reasons (never counted in statistics)."""
    rows = [
        FailureRow(
            where=f"{r.arm} / restart {r.restart}",
            count="run",
            reason=_UNFINISHED
            if r.status == "running" and not r.failure
            else f"run {r.status}: {f.text(r.failure, 'no reason recorded')}",
        )
        for r in runs
        if r.status != "ok"
    ]
    bad_runs = len(rows)
    rows += [
        FailureRow(
            where=f"{r.arm} / restart {r.restart}",
            count=f"{r.attempts} starts",
            reason=f"re-measured on a new server process: the earlier {r.attempts - 1} did not "
            "end ok; their records are kept apart (requests.attempt<N>.jsonl), not analysed",
        )
        for r in runs
        if r.attempts > 1
    ]
    requests = _request_failures(bundle, runs)
    failed_requests = sum(int(r.count) for r in requests)
    rows.extend(requests)
    runs_text = (
        f"All {len(runs)} server runs completed"
        if not bad_runs
        else f"{bad_runs} of {len(runs)} server runs did not finish cleanly"
    )
    if not failed_requests:
        summary = f"{runs_text} and no request failed."
    else:
        summary = (f"{runs_text}; {failed_requests} request(s) failed and are excluded from "
                   "every statistic.")  # fmt: skip
    return FailuresView(summary=summary, rows=rows)
