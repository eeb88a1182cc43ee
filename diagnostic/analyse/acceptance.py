"""Speculation acceptance of one run from /metrics snapshots (deltas) and the server log."""

from __future__ import annotations

import re

from diagnostic.analyse.theory import alpha_from_counters, position_rates
from diagnostic.engines.metrics import SpecDelta, parse_spec_counters, spec_delta
from diagnostic.schema.analysis import PositionAcceptance, RunAcceptance

__all__ = ["acceptance_from_delta", "acceptance_from_texts", "log_acceptance_length"]

_VLLM_LOG = re.compile(r"Mean acceptance length: (?P<len>[\d.]+).*?Accepted: (?P<acc>\d+) tokens")
_SGLANG_LOG = re.compile(r"accept len: (?P<len>[\d.]+)")
_LLAMACPP_LOG = re.compile(
    r"draft acceptance = [\d.]+ \(\s*(?P<acc>\d+) accepted.*?mean len = "
    r"\s*(?P<len>[\d.]+)"
)


def acceptance_from_texts(
    after: str | None, before: str | None, log: str | None = None
) -> RunAcceptance | None:
    """Acceptance of one run from its /metrics texts (see `acceptance_from_delta`) and the
    log's own figure beside it. None when neither source mentions speculation."""
    delta = None
    if after:
        before_counters = parse_spec_counters(before) if before else None
        delta = spec_delta(before_counters, parse_spec_counters(after))
    return acceptance_from_delta(delta, log_acceptance_length(log) if log else None)


def acceptance_from_delta(delta: SpecDelta | None, log_len: float | None) -> RunAcceptance | None:
    """Mean acceptance length 1 + Δaccepted/Δdrafts, rate Δaccepted/Δdraft_tokens, per-position
    rates and α̂ from counter deltas, else the acceptance-length gauge (SGLang), else the log's
    figure `log_len`. None when there is neither."""
    if delta is not None and delta.counted:
        return _from_counters(delta, log_len)
    # SGLang keeps its gauge at 0 on a server that does not speculate: a length is ≥ 1.
    if delta is not None and delta.accept_length is not None and delta.accept_length >= 1:
        return RunAcceptance(
            source="metrics",
            engine_prefix=delta.engine,
            mean_acceptance_length=delta.accept_length,
            log_mean_acceptance_length=log_len,
        )
    if log_len is None:
        return None
    return RunAcceptance(
        source="log", mean_acceptance_length=log_len, log_mean_acceptance_length=log_len
    )


def _from_counters(d: SpecDelta, log_len: float | None) -> RunAcceptance:
    # A counter the engine does not expose counts as zero beside those it does.
    drafts, accepted = max(d.num_drafts or 0.0, 0.0), d.num_accepted_tokens or 0.0
    positions = d.accepted_per_pos if drafts > 0 else []
    return RunAcceptance(
        source="metrics",
        engine_prefix=d.engine,
        drafts=drafts,
        draft_tokens=d.num_draft_tokens or 0.0,
        accepted_tokens=accepted,
        mean_acceptance_length=d.mean_acceptance_length if drafts > 0 else None,
        acceptance_rate=d.acceptance_rate if drafts > 0 else None,
        per_position=[
            PositionAcceptance(position=i, cumulative=cum, conditional=cond)
            for i, (cum, cond) in enumerate(position_rates(positions, drafts))
        ],
        alpha_hat=alpha_from_counters(accepted, drafts, positions[-1]) if positions else None,
        log_mean_acceptance_length=log_len,
    )


def log_acceptance_length(text: str) -> float | None:
    """Mean acceptance length over a server log: vLLM `SpecDecoding metrics` intervals
    (drafts = accepted/(L−1), pooled), else the mean of SGLang `accept len` or llama.cpp
    `mean len` figures. None when the log reports none."""
    vllm = [(float(m["len"]), float(m["acc"])) for m in _VLLM_LOG.finditer(text)]
    drafts = sum(acc / (length - 1) for length, acc in vllm if length > 1)
    if drafts > 0:
        return 1.0 + sum(acc for length, acc in vllm if length > 1) / drafts
    for pattern in (_SGLANG_LOG, _LLAMACPP_LOG):
        values = [float(m["len"]) for m in pattern.finditer(text)]
        if values:
            return sum(values) / len(values)
    return None
