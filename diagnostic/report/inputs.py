"""What a report is built from (analysis, check report, bundle) and how arms are named."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from diagnostic.bundle.store import Bundle, run_id
from diagnostic.report import budget
from diagnostic.report import fmt as f
from diagnostic.schema.analysis import Analysis, ArmResult
from diagnostic.schema.bundle import Engagement, RunInfo
from diagnostic.schema.logfacts import CheckReport, LogFacts, draft_length
from diagnostic.schema.seal import RootSignature

__all__ = ["Describe", "Inputs", "name_of", "served_method"]

Describe = Callable[[ArmResult], str]  # an arm in words: Inputs.describe, Inputs.setting

# Where launch commands name the speculation method: vLLM's --speculative-config JSON,
# SGLang's --speculative-algorithm, llama.cpp's --spec-type (the last of a comma list).
_LAUNCH_METHOD = (
    re.compile(r'"method"\s*:\s*"(?P<m>[A-Za-z0-9_-]+)"'),
    re.compile(r"--speculative[-_]algorithm[= ]+(?P<m>[A-Za-z0-9_-]+)"),
    re.compile(r"--spec-type[= ]+(?:[A-Za-z0-9_-]+,)*(?P<m>[A-Za-z0-9_-]+)"),
)
# Where a server's own answers name it: llama.cpp's /slots "speculative.types" ('none,
# ngram-simple'), SGLang's /server_info "speculative_algorithm".
_SERVED_METHOD = ("speculative.types", "speculative_algorithm")


def served_method(run: RunInfo | None) -> str | None:
    """The speculation method the server reported when it was measured, if it did."""
    args = run.server_args if run is not None else {}
    for key in _SERVED_METHOD:
        named = [m.strip() for m in str(args.get(key) or "").split(",")]
        named = [m for m in named if m and m.lower() != "none"]
        if named:
            return named[-1]
    return None


def name_of(a: Analysis, arm_id: str, describe: Describe) -> str:
    """An arm by id in `describe`'s words; the id itself when the analysis has no such arm."""
    arm = next((x for x in a.arms if x.id == arm_id), None)
    return describe(arm) if arm else arm_id


@dataclass
class Inputs:
    """The analysis, check's report (None when the logs were not checked) and the bundle;
    `engagement` holds the fields `report` was given, which override the bundle's."""

    analysis: Analysis
    bundle: Bundle
    check: CheckReport | None = None
    engagement: Engagement | None = None
    title: str | None = None
    runs: list[RunInfo] = field(default_factory=list)
    signature: RootSignature | None = None  # the root's, when the report is signed

    def __post_init__(self) -> None:
        if not self.runs:
            self.runs = self.bundle.runs()

    @cached_property
    def day(self) -> budget.Day:
        """What a day on site allows, at this bundle's measured cost of a restart."""
        return budget.day(self.runs, self.analysis, warmup=self.bundle.manifest.plan.warmup)

    @property
    def people(self) -> Engagement:
        """Client, site and consultant: report's options over the bundle's manifest."""
        return self.bundle.manifest.engagement.merged(self.engagement)

    def run_of(self, facts: LogFacts) -> RunInfo | None:
        """The run whose server wrote this log, when it belongs to the bundle."""
        label = self.run_label(facts)
        return next((r for r in self.runs if run_id(r.arm, r.restart) == label), None)

    @property
    def log_facts(self) -> list[LogFacts]:
        """Every log check read (empty when there is no check report)."""
        return list(self.check.runs) if self.check is not None else []

    def run_label(self, facts: LogFacts) -> str:
        """The run id of a log (`<arm>-r<restart>`), else its path."""
        if facts.label:
            return facts.label
        parts = facts.path.replace("\\", "/").split("/")
        if "runs" in parts and parts.index("runs") + 1 < len(parts):
            return parts[parts.index("runs") + 1]
        return facts.path or f.MISSING

    def arm_of(self, facts: LogFacts) -> str | None:
        """The arm whose run wrote this log, when the log belongs to the bundle."""
        run = self.run_of(facts)
        return run.arm if run is not None else None

    def arm_method(self, arm: ArmResult) -> str | None:
        """The speculation method of an arm: plan params, else what its log says, else what
        its server reported, else the flag of its launch command."""
        if arm.params.get("method"):
            return str(arm.params["method"])
        for facts in self.log_facts:
            if self.arm_of(facts) == arm.id and facts.spec.method:
                return facts.spec.method
        for run in self.runs:
            if run.arm == arm.id and (served := served_method(run)):
                return served
        launch = next((a.launch for a in self.bundle.manifest.plan.arms if a.name == arm.id), None)
        for pattern in _LAUNCH_METHOD if launch and arm.speculative is not False else ():
            if match := pattern.search(launch or ""):
                return match["m"]
        return None

    def arm_k(self, arm: ArmResult) -> int | None:
        """k of an arm: plan params, else the draft length its logs print when every run of
        the arm that prints one agrees (a plan need not template k: `diagnose plan` edits the
        client's own command)."""
        if arm.k is not None or arm.speculative is False:
            return arm.k
        ks = {
            draft_length(x.engine, x.spec.num_draft_tokens)
            for x in self.log_facts
            if self.arm_of(x) == arm.id and x.spec.num_draft_tokens is not None
        }
        return ks.pop() if len(ks) == 1 else None

    def describe(self, arm: ArmResult) -> str:
        """'n-gram at k=3' for sentences, with the arm's name when another arm reads the same
        ('n-gram at k=3 (fa-ngram-k3)'); 'arm X (k=3)' when the method is unknown."""
        text = self._plain_description(arm)
        twins = [a for a in self.analysis.arms if self._plain_description(a) == text]
        return f"{text} ({arm.id})" if len(twins) > 1 else text

    def describe_id(self, arm_id: str) -> str:
        """An arm by id for page 1: 'n-gram at k=3 (triton-ngram-k3)', 'no speculation
        (triton-base)'; the id alone when the analysis has no such arm."""
        arm = next((x for x in self.analysis.arms if x.id == arm_id), None)
        if arm is None:
            return arm_id
        text = self.describe(arm) if arm.speculative else "no speculation"
        return text if arm_id in text else f"{text} ({arm_id})"

    def _plain_description(self, arm: ArmResult) -> str:
        method, k = self.arm_method(arm), self.arm_k(arm)
        if method:
            return f.method_name(method) + (f" at k={k}" if k is not None else "")
        return f"arm {arm.id}" + (f" (k={k})" if k is not None else "")

    def setting(self, arm: ArmResult) -> str:
        """'n-gram, k=3' for table cells, where the arm's name sits in the next column."""
        if arm.is_baseline:
            return "baseline"
        if arm.aa_of:
            return f"A/A repeat of {arm.aa_of}"
        if arm.speculative is False:
            return "no speculation"
        method, k = self.arm_method(arm), self.arm_k(arm)
        if method is None and k is None and not self._speculates(arm):
            return "not recorded (compared as speculative)"
        return f.spec_setting(method, k)

    def _speculates(self, arm: ArmResult) -> bool:
        """Whether anything recorded says the arm ran speculation: the plan, a log of its
        runs, or its server's answers (llama.cpp's /slots "speculative": true)."""
        if arm.speculative:
            return True
        logs = any(x.spec.enabled for x in self.log_facts if self.arm_of(x) == arm.id)
        served = [r.server_args.get("speculative") for r in self.runs if r.arm == arm.id]
        return logs or True in served
