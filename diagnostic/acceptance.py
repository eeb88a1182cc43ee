"""Speculation acceptance of one run from /metrics snapshots (deltas) and the server log."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from diagnostic.analysis_models import PositionAcceptance, RunAcceptance
from diagnostic.theory import alpha_from_counters, position_rates

__all__ = ["Counters", "acceptance_from_texts", "log_acceptance_length", "parse_counters"]

# vLLM and llama.cpp expose the same counter names under their own prefix.
_COUNTER_PREFIXES = ("vllm", "llamacpp")
_SGLANG_GAUGE = "sglang:spec_accept_length"
_VLLM_LOG = re.compile(r"Mean acceptance length: (?P<len>[\d.]+).*?Accepted: (?P<acc>\d+) tokens")
_SGLANG_LOG = re.compile(r"accept len: (?P<len>[\d.]+)")
_LLAMACPP_LOG = re.compile(
    r"draft acceptance = [\d.]+ \(\s*(?P<acc>\d+) accepted.*?mean len = "
    r"\s*(?P<len>[\d.]+)"
)


@dataclass
class Counters:
    """Speculation counters read from one /metrics text (summed over label sets)."""

    prefix: str | None = None
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: dict[int, float] = field(default_factory=dict)
    sglang_accept_length: float | None = None


def parse_counters(text: str) -> Counters:
    """Read spec-decode counters (vllm:/llamacpp: `spec_decode_*_total`) and SGLang's gauge."""
    out = Counters()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            _take(out, sample.name, sample.labels, float(sample.value))
    return out


def _take(out: Counters, name: str, labels: dict[str, str], value: float) -> None:
    if name == _SGLANG_GAUGE:
        out.prefix, out.sglang_accept_length = "sglang", value
        return
    prefix, _, metric = name.partition(":")
    if prefix not in _COUNTER_PREFIXES or not metric.startswith("spec_decode_num_"):
        return
    if metric.endswith("_created"):
        return
    out.prefix = prefix
    key = metric.removeprefix("spec_decode_num_").removesuffix("_total")
    if key == "drafts":
        out.drafts += value
    elif key == "draft_tokens":
        out.draft_tokens += value
    elif key == "accepted_tokens":
        out.accepted += value
    elif key == "accepted_tokens_per_pos" and "position" in labels:
        pos = int(labels["position"])
        out.per_pos[pos] = out.per_pos.get(pos, 0.0) + value


def _delta(after: Counters, before: Counters | None) -> Counters:
    # A counter that went down means the process restarted between snapshots: use `after`.
    if before is None or after.drafts < before.drafts or after.accepted < before.accepted:
        return after
    return Counters(
        prefix=after.prefix,
        drafts=after.drafts - before.drafts,
        draft_tokens=after.draft_tokens - before.draft_tokens,
        accepted=after.accepted - before.accepted,
        per_pos={p: v - before.per_pos.get(p, 0.0) for p, v in after.per_pos.items()},
        sglang_accept_length=after.sglang_accept_length,
    )


def acceptance_from_texts(
    after: str | None, before: str | None, log: str | None = None
) -> RunAcceptance | None:
    """Acceptance of one run: mean acceptance length 1 + Δaccepted/Δdrafts, rate
    Δaccepted/Δdraft_tokens, per-position rates and α̂ from the /metrics deltas; the log's
    own figure beside it. None when neither source mentions speculation."""
    log_len = log_acceptance_length(log) if log else None
    counters = None
    if after:
        counters = _delta(parse_counters(after), parse_counters(before) if before else None)
    if counters is None or counters.prefix is None:
        if log_len is None:
            return None
        return RunAcceptance(
            source="log", mean_acceptance_length=log_len, log_mean_acceptance_length=log_len
        )
    if counters.prefix == "sglang":
        return RunAcceptance(
            source="metrics",
            engine_prefix="sglang",
            mean_acceptance_length=counters.sglang_accept_length,
            log_mean_acceptance_length=log_len,
        )
    return _from_counters(counters, log_len)


def _from_counters(c: Counters, log_len: float | None) -> RunAcceptance:
    if c.drafts <= 0:
        return RunAcceptance(
            source="metrics",
            engine_prefix=c.prefix,
            drafts=0.0,
            draft_tokens=c.draft_tokens,
            accepted_tokens=c.accepted,
            log_mean_acceptance_length=log_len,
        )
    positions = [c.per_pos[p] for p in sorted(c.per_pos)]
    rates = position_rates(positions, c.drafts)
    alpha = alpha_from_counters(c.accepted, c.drafts, positions[-1]) if positions else None
    return RunAcceptance(
        source="metrics",
        engine_prefix=c.prefix,
        drafts=c.drafts,
        draft_tokens=c.draft_tokens,
        accepted_tokens=c.accepted,
        mean_acceptance_length=1.0 + c.accepted / c.drafts,
        acceptance_rate=c.accepted / c.draft_tokens if c.draft_tokens > 0 else None,
        per_position=[
            PositionAcceptance(position=i, cumulative=cum, conditional=cond)
            for i, (cum, cond) in enumerate(rates)
        ],
        alpha_hat=alpha,
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
