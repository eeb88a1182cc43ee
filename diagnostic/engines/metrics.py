"""GET /metrics snapshots and the speculation counters in them (vLLM, llama.cpp, SGLang)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict, Field

from diagnostic.bundle.gate import metrics_problem
from diagnostic.common.answers import Deadline, Unreadable, read_body

__all__ = [
    "MetricsSnapshot",
    "SpecCounters",
    "SpecDelta",
    "fetch_metrics",
    "parse_spec_counters",
    "spec_delta",
]

_PREFIXES = ("vllm", "llamacpp", "sglang")
# vLLM's /metrics is tens of KB, hundreds with many models or adapters: far below this.
MAX_METRICS = 64 * 2**20
# Counter names without the `_total` suffix, which the parser adds or strips as it sees fit.
_COUNTERS = {
    "num_drafts": "spec_decode_num_drafts",
    "num_draft_tokens": "spec_decode_num_draft_tokens",
    "num_accepted_tokens": "spec_decode_num_accepted_tokens",
}
_PER_POS = "spec_decode_num_accepted_tokens_per_pos"
_DECODE_TIME = {  # vLLM V1's per-request decode time histogram
    "decode_time_s": "request_decode_time_seconds_sum",
    "decode_requests": "request_decode_time_seconds_count",
}
_GENERATED = ("generation_tokens", "tokens_predicted")  # vLLM/SGLang, llama.cpp
# SGLang counts verify passes, not drafts: with the output tokens they give the acceptance
# length its own way (completion tokens / verify passes, bonus token included), and with the
# draft tokens per pass gauge (the verified root included) the draft tokens proposed.
_VERIFY = "spec_verify_calls"
_PER_PASS = "spec_num_draft_tokens"
# Gauges: SGLang's, and vLLM V0's acceptance rate.
_GAUGES = {
    "accept_length": ("spec_accept_length",),
    "accept_rate": ("spec_accept_rate", "spec_decode_draft_acceptance_rate"),
}


class SpecCounters(BaseModel):
    """Speculation counters of one /metrics text, summed over label sets (engines, models)."""

    model_config = ConfigDict(extra="forbid")

    engine: str | None = Field(None, description="Metric prefix seen: vllm, llamacpp or sglang")
    num_drafts: float | None = Field(None, description="Verification steps with a draft")
    num_draft_tokens: float | None = Field(None, description="Draft tokens proposed")
    num_accepted_tokens: float | None = Field(None, description="Draft tokens accepted")
    accepted_per_pos: list[float] = Field(
        default_factory=list, description="Accepted tokens per draft position 0..k-1"
    )
    generation_tokens: float | None = Field(None, description="Output tokens generated")
    verify_calls: float | None = Field(
        None, description="Verification passes (SGLang spec_verify_calls_total)"
    )
    draft_tokens_per_pass: float | None = Field(
        None, description="Tokens verified per pass, the root included (SGLang gauge)"
    )
    accept_length: float | None = Field(None, description="Acceptance length gauge (SGLang)")
    accept_rate: float | None = Field(None, description="Acceptance rate gauge (SGLang, vLLM V0)")
    decode_time_s: float | None = Field(
        None, description="Σ first-to-last token time of finished requests (vLLM histogram sum)"
    )
    decode_requests: float | None = Field(
        None, description="Requests in decode_time_s (vLLM histogram count)"
    )


class SpecDelta(BaseModel):
    """Counter differences over an interval, and what follows from them."""

    model_config = ConfigDict(extra="forbid")

    engine: str | None = Field(None, description="Metric prefix of the later snapshot")
    num_drafts: float | None = Field(None, description="Δ verification steps with a draft")
    num_draft_tokens: float | None = Field(None, description="Δ draft tokens proposed")
    num_accepted_tokens: float | None = Field(None, description="Δ draft tokens accepted")
    accepted_per_pos: list[float] = Field(
        default_factory=list, description="Δ accepted tokens per draft position 0..k-1"
    )
    accept_length: float | None = Field(
        None, description="Acceptance length gauge of the later snapshot (SGLang)"
    )
    mean_acceptance_length: float | None = Field(
        None, description="1 + Δaccepted / Δdrafts (tokens per verification step)"
    )
    acceptance_rate: float | None = Field(None, description="Δaccepted / Δdraft tokens")
    reset: bool = Field(
        False, description="A counter went down (restart): the deltas are the later counts alone"
    )

    @property
    def counted(self) -> bool:
        """True when the engine exposes speculation counters (even at zero)."""
        counters = (self.num_drafts, self.num_draft_tokens, self.num_accepted_tokens)
        return any(c is not None for c in counters) or bool(self.accepted_per_pos)


class MetricsSnapshot(BaseModel):
    """One GET /metrics: the raw text (stored verbatim) and its parsed counters."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(None, description="Raw Prometheus text; None when not served")
    error: str | None = Field(None, description="Why there is no text or no parse")
    counters: SpecCounters | None = Field(None, description="Speculation counters parsed")


def fetch_metrics(client: httpx.Client, *, timeout_s: float | None = None) -> MetricsSnapshot:
    """GET /metrics on a client with the server's base URL, read within `timeout_s` (default:
    the client's read timeout) and MAX_METRICS bytes; never raises for HTTP faults or an answer
    that cannot be read. Text the bundle's reader would refuse (garbage, a NaN counter) is not
    kept: the error says why."""
    timeout_s = timeout_s or client.timeout.read or 30.0
    with Deadline(timeout_s) as deadline:
        try:
            body = _get_metrics(client, deadline)
        except httpx.HTTPError as exc:
            if deadline.passed or isinstance(exc, httpx.TimeoutException):
                return MetricsSnapshot(
                    error=f"GET /metrics: no whole answer within {timeout_s:g} s"
                )
            return MetricsSnapshot(error=f"GET /metrics failed: {type(exc).__name__}: {exc}")
        except Unreadable as exc:
            return MetricsSnapshot(error=f"GET /metrics: {exc}; not kept")
    if isinstance(body, int):
        hint = " (llama-server needs --metrics, SGLang --enable-metrics)"
        return MetricsSnapshot(error=f"GET /metrics answered HTTP {body}{hint}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return MetricsSnapshot(error="GET /metrics: not UTF-8 text; not kept")
    problem = metrics_problem(text)
    if problem is not None:
        return MetricsSnapshot(error=f"GET /metrics: {problem}; not kept")
    return MetricsSnapshot(text=text, counters=parse_spec_counters(text))


def _get_metrics(client: httpx.Client, deadline: Deadline) -> bytes | int:
    """The body of GET /metrics, or the status when it is not 200."""
    timeout = deadline.left()
    with client.stream(
        "GET", "/metrics", timeout=timeout, extensions=deadline.extensions
    ) as answer:
        if answer.status_code != 200:
            return answer.status_code
        return read_body(answer, limit=MAX_METRICS, deadline=deadline.end)


def parse_spec_counters(text: str) -> SpecCounters:
    """Speculation counters from Prometheus text; ValueError when the text does not parse."""
    sums: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    engine: str | None = None
    for family in text_string_to_metric_families(text):
        prefix = family.name.partition(":")[0]
        if prefix not in _PREFIXES:
            continue
        engine = engine or prefix
        for sample in family.samples:
            name = sample.name.partition(":")[2]
            if name.endswith("_created"):
                continue
            name = name.removesuffix("_total")
            if name == _PER_POS and "position" in sample.labels:
                pos = _position(sample.labels["position"])
                if pos is not None:
                    per_pos[pos] = per_pos.get(pos, 0.0) + sample.value
            else:
                sums[name] = sums.get(name, 0.0) + sample.value
    return _counters(engine, sums, per_pos)


def _position(label: str) -> int | None:
    """A draft position label as an index; None for one no engine writes (`x`, 10^9)."""
    return int(label) if label.isdecimal() and len(label) <= 3 else None


def _counters(
    engine: str | None, sums: dict[str, float], per_pos: dict[int, float]
) -> SpecCounters:
    fields: dict[str, float | None] = {key: sums.get(name) for key, name in _COUNTERS.items()}
    fields["generation_tokens"] = next((sums[n] for n in _GENERATED if n in sums), None)
    fields["verify_calls"] = sums.get(_VERIFY)
    fields["draft_tokens_per_pass"] = sums.get(_PER_PASS)
    for key, names in _GAUGES.items():
        fields[key] = next((sums[n] for n in names if n in sums), None)
    for key, name in _DECODE_TIME.items():
        fields[key] = sums.get(name)
    positions = [per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)] if per_pos else []
    return SpecCounters(engine=engine, accepted_per_pos=positions, **fields)


def spec_delta(before: SpecCounters | None, after: SpecCounters) -> SpecDelta:
    """Counter differences between two snapshots of one server process; `after` alone when
    there is no `before` or a counter went down (the process restarted in between)."""
    reset = before is not None and any(
        (getattr(after, key) or 0.0) < (getattr(before, key) or 0.0)
        for key in (*_COUNTERS, "verify_calls")
    )
    base = SpecCounters() if before is None or reset else before
    drafts, drafted, accepted = (_minus(getattr(after, k), getattr(base, k)) for k in _COUNTERS)
    if drafts is None and after.verify_calls is not None:
        drafts, drafted, accepted = _from_verify_passes(after, base)
    below = base.accepted_per_pos
    return SpecDelta(
        engine=after.engine,
        num_drafts=drafts,
        num_draft_tokens=drafted,
        num_accepted_tokens=accepted,
        accepted_per_pos=[
            a - (below[i] if i < len(below) else 0.0) for i, a in enumerate(after.accepted_per_pos)
        ],
        accept_length=after.accept_length,
        mean_acceptance_length=1 + accepted / drafts if drafts and accepted is not None else None,
        acceptance_rate=accepted / drafted if drafted and accepted is not None else None,
        reset=reset,
    )


def _from_verify_passes(
    after: SpecCounters, base: SpecCounters
) -> tuple[float | None, float | None, float | None]:
    """SGLang's (verify passes, draft tokens proposed, draft tokens accepted) over an interval:
    each pass yields one token of its own, the rest of the output was accepted drafts; each
    pass verifies the root and `draft_tokens_per_pass` − 1 drafts."""
    passes = _minus(after.verify_calls, base.verify_calls)
    tokens = _minus(after.generation_tokens, base.generation_tokens)
    if passes is None or tokens is None:
        return passes, None, None
    per_pass = after.draft_tokens_per_pass
    drafted = passes * (per_pass - 1) if per_pass is not None and per_pass > 1 else None
    return passes, drafted, max(tokens - passes, 0.0)


def _minus(after: float | None, before: float | None) -> float | None:
    return None if after is None else after - (before or 0.0)
