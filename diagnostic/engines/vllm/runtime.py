"""vLLM's acceptance lines at run time (V0 `Speculative metrics`, V1 `SpecDecoding metrics`
in every release's layout, Prometheus per-position counters) and the draft length k they show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnostic.engines._common import AcceptanceTally, cap_append, ev
from diagnostic.engines._lines import Line
from diagnostic.engines._signals import name_source, set_fact
from diagnostic.schema.logfacts import AcceptanceSample, Evidence, LogFacts

__all__ = ["Metrics"]

_NUM = r"(?:\d+(?:\.\d+)?|nan)"
_METRIC = {
    "mean": re.compile(r"Mean acceptance length: (" + _NUM + ")"),
    "avg_rate": re.compile(r"Avg Draft acceptance rate: (" + _NUM + ")%"),
    "rate": re.compile(r"(?<!Avg )Draft acceptance rate: (" + _NUM + ")(%?)"),
    "accepted": re.compile(r"Accepted: (\d+) tokens"),
    "drafted": re.compile(r"Drafted: (\d+) tokens"),
    "per_pos": re.compile(r"Per-position acceptance rate: ((?:" + _NUM + r")(?:, " + _NUM + ")*)"),
    "k": re.compile(r"Number of speculative tokens: (\d+)"),
    "v0_accepted": re.compile(r"Number of accepted tokens: (\d+)"),
    "v0_drafted": re.compile(r"Number of draft tokens(?: tokens)?: (\d+)"),
    "v0_emitted": re.compile(r"Number of emitted tokens: (\d+)"),
}
# The usual ≥0.10.2 line in one search (gigabyte logs hold thousands of them).
_FAST_METRICS = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<mean>" + _NUM + r"), Accepted throughput: "
    r"[^,]*, Drafted throughput: [^,]*, Accepted: (?P<a>\d+) tokens, Drafted: (?P<d>\d+) tokens, "
    r"Per-position acceptance rate: (?P<pos>[\d., na]*?), Avg Draft"
)
_RATE = re.compile(r"\d+\.\d{3}|nan")  # per-position rates are printed with 3 decimals
_POSITION = re.compile(r'position="(?P<p>\d+)"')


@dataclass
class Metrics:
    """Acceptance lines of one log, tallied; k from them when no settings line gave it."""

    facts: LogFacts
    tally: AcceptanceTally = field(default_factory=AcceptanceTally)
    k_from_metrics: int | None = None
    first_metric: Evidence | None = None
    positions: set[int] = field(default_factory=set)  # Prometheus per-position series seen

    def position(self, line: Line) -> None:
        """A `vllm:spec_decode_num_accepted_tokens_per_pos` series: one draft position."""
        m = _POSITION.search(line.text)
        if m:
            self.positions.add(int(m["p"]))
            self.first_metric = self.first_metric or ev(line)

    def line(self, line: Line) -> None:
        """Read one SpecDecoding / Speculative metrics line."""
        text = line.text
        self.first_metric = self.first_metric or ev(line)
        fast = _FAST_METRICS.search(text)
        if fast:
            accepted, drafted = int(fast["a"]), int(fast["d"])
            self.tally.count(
                self.facts,
                line.number,
                mean=None if fast["mean"] == "nan" else float(fast["mean"]),
                per_position=[float(x) for x in fast["pos"].split(", ") if x],
                accepted=accepted,
                drafted=drafted,
            )
            return
        got = {name: rx.search(text) for name, rx in _METRIC.items()}
        if not any(got.values()):  # a fork's layout, or a line cut before its numbers
            cap_append(self.facts.not_understood, ev(line, "metrics"))
            return
        sample = AcceptanceSample(line=line.number)
        if got["per_pos"]:
            rates = got["per_pos"][1].split(", ")
            last = text[got["per_pos"].start(1) :].rsplit(", ", 1)[-1].strip()
            if "Avg Draft" not in text and not _RATE.fullmatch(last):
                rates = rates[:-1]  # the line was cut inside the list: k from the totals
                self._k_from_totals(got)
            sample.per_position = [float(x) for x in rates if x]
        if got["accepted"] and got["drafted"]:
            sample.accepted, sample.drafted = int(got["accepted"][1]), int(got["drafted"][1])
        elif got["v0_accepted"] and got["v0_drafted"]:
            sample.accepted, sample.drafted = int(got["v0_accepted"][1]), int(got["v0_drafted"][1])
        if sample.accepted is not None and sample.drafted:
            sample.accept_rate = sample.accepted / sample.drafted
        elif got["avg_rate"] or got["rate"]:
            m = got["avg_rate"] or got["rate"]
            assert m is not None
            value = float(m[1])
            percent = m.re is _METRIC["avg_rate"] or m[2] == "%"
            sample.accept_rate = value / 100 if percent else value
        sample.mean_acceptance_length = self._mean_length(got, sample)
        if got["k"]:
            self.k_from_metrics = int(got["k"][1])
        self.tally.add(sample, self.facts)

    def _k_from_totals(self, got: dict[str, re.Match[str] | None]) -> None:
        """k = drafted / drafts, drafts = accepted / (mean - 1) (the bonus token excluded)."""
        mean, accepted, drafted = got["mean"], got["accepted"], got["drafted"]
        if mean and accepted and drafted and mean[1] != "nan" and int(accepted[1]):
            per_draft = float(mean[1]) - 1
            k = round(int(drafted[1]) * per_draft / int(accepted[1])) if per_draft > 0 else 0
            self.k_from_metrics = self.k_from_metrics or k or None

    def _mean_length(
        self, got: dict[str, re.Match[str] | None], s: AcceptanceSample
    ) -> float | None:
        """Tokens per step, bonus included, whatever the release printed."""
        k = self.facts.spec.num_draft_tokens or self.k_from_metrics
        if got["v0_emitted"] and s.drafted and k:
            return int(got["v0_emitted"][1]) * k / s.drafted  # V0: emitted / proposals
        if got["rate"] and not got["avg_rate"] and s.accepted is not None and s.drafted and k:
            # 0.8.5–0.10.1 put the rate first; 0.8.5's mean excluded the bonus token, so
            # recompute it: 1 + accepted / drafts, drafts = drafted / k.
            return 1 + s.accepted * k / s.drafted
        m = got["mean"]
        return float(m[1]) if m and m[1] != "nan" else None

    def finish(self) -> None:
        """The summary; k from totals, rates per position or Prometheus positions."""
        facts = self.facts
        if facts.spec.enabled is None and self.tally.samples:
            facts.spec.enabled = True
        self.tally.finish(facts)
        rates = next((len(s.per_position) for s in facts.acceptance if s.per_position), None)
        k = self.k_from_metrics or rates or (max(self.positions) + 1 if self.positions else None)
        if self.first_metric and set_fact(facts, "spec.num_draft_tokens", k):
            facts.spec.enabled = True
            name_source(facts, "spec.num_draft_tokens", "metric", self.first_metric)
