"""Fixes the plan measured: an arm that is a finding's arm with one of its rule's remedies
applied (checklists/rules/*.yaml `remedies`, the same launch otherwise) puts a measurement
beside the finding: what each of the two arms accepts per step and how fast each is, so a
claim such as "the wrong flag is why it accepts nothing" stands on both arms' numbers."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from diagnostic.engines.command import EditError, edit_command, same_launch
from diagnostic.logcheck.rules import Rule, finding_values, load_rules
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.inputs import Inputs
from diagnostic.schema.analysis import Analysis, Comparison
from diagnostic.schema.arms import ValueCI

__all__ = ["Twin", "brief", "sentence", "twins"]


@dataclass(frozen=True)
class Twin:
    """`twin` is `arm` with the remedy `title` (a rule's fix) applied, nothing else changed."""

    arm: str
    twin: str
    title: str


@cache
def _rules() -> dict[str, Rule]:
    return {r.id: r for r in load_rules()}


def twins(
    inputs: Inputs, rule_id: str, arms: list[str], *, about_acceptance: bool = False
) -> list[Twin]:
    """The arms of the plan that measure a remedy of `rule_id` on one of `arms`; with
    `about_acceptance`, only for a rule whose evidence is acceptance (a claim these numbers
    test, not one they merely stand beside)."""
    rule = _rules().get(rule_id)
    if rule is None or not rule.remedies:
        return []
    if about_acceptance and "acceptance" not in rule.evidence:
        return []
    plan = {a.name: a for a in inputs.bundle.manifest.plan.arms}
    found: list[Twin] = []
    for arm in arms:
        spec = plan.get(arm)
        facts = next((x for x in inputs.log_facts if inputs.arm_of(x) == arm), None)
        if spec is None or not spec.launch or facts is None:
            continue
        values = finding_values(rule, facts) or {}
        for remedy in rule.remedies:
            if remedy.patch or remedy.draft_length or not remedy.set:
                continue
            try:
                env = {**spec.env, **remedy.env}
                fixed = edit_command(spec.launch, remedy.settings(facts, values), env=env)
                title = remedy.fill(remedy.title, facts, values)
            except (KeyError, EditError):
                continue
            found += [
                Twin(arm, other.name, title)
                for other in plan.values()
                if other.name != arm and other.launch
                if same_launch(edit_command(other.launch, {}, env=other.env), fixed)
            ]
    return found


def sentence(a: Analysis, twin: Twin, workload: str) -> str:
    """Both arms measured on `workload`: acceptance per step and speed against the baseline,
    e.g. 'Measured on code: eagle-flag-k3 accepts 1.05 tokens per step [95% CI 1.00–1.10] and
    is 0.41× of base (LOSS); eagle3-k3, the same drafter under --speculative-algorithm EAGLE3,
    accepts 2.10 … and is 1.32× of base (WIN).' (the remedy's title names the fix)"""
    mine, fixed = _facts(a, twin.arm, workload), _facts(a, twin.twin, workload)
    if not mine or not fixed:
        return ""
    return f"Measured on {workload}: {twin.arm} {mine}; {twin.twin}, {twin.title}, {fixed}."


def brief(a: Analysis, twin: Twin, workload: str) -> str:
    """The same in page 1's few words: 'Measured on code: eagle-flag-k3 accepts 1.05 tokens
    per step; with the fix, eagle3-k3 accepts 2.10 and is 1.32× of base.'"""
    mine, fixed = _acceptance(a, twin.arm, workload), _acceptance(a, twin.twin, workload)
    if mine is None or fixed is None:
        return ""
    comp = _comparison(a, twin.twin, workload)
    speed = f" and is {f.ratio(comp.ratio)} of {comp.baseline}" if comp and comp.ratio else ""
    return (
        f"Measured on {workload}: {twin.arm} accepts {f.num(mine.estimate, 2)} tokens per step; "
        f"with the fix, {twin.twin} accepts {f.num(fixed.estimate, 2)}{speed}."
    )


def _acceptance(a: Analysis, arm: str, workload: str) -> ValueCI | None:
    """An arm's acceptance length on a workload, else over every workload; None if unknown."""
    result = next((x for x in a.arms if x.id == arm), None)
    if result is None:
        return None
    acc = next((w.acceptance_length for w in result.workloads if w.workload == workload), None)
    acc = acc if acc is not None and acc.estimate is not None else result.acceptance_length
    return acc if acc is not None and acc.estimate is not None else None


def _comparison(a: Analysis, arm: str, workload: str) -> Comparison | None:
    return next((c for c in sel.spec_comparisons(a, workload) if c.arm == arm), None)


def _facts(a: Analysis, arm: str, workload: str) -> str:
    acc, comp = _acceptance(a, arm, workload), _comparison(a, arm, workload)
    said = []
    if acc is not None:
        interval = f.ci(acc.ci_low, acc.ci_high, fmt="ratio")
        said.append(f"accepts {f.num(acc.estimate, 2)} tokens per step {interval}".rstrip())
    if comp is not None and comp.ratio is not None:
        verdict = "withheld" if comp.withheld else comp.verdict
        said.append(f"is {f.ratio(comp.ratio)} of {comp.baseline} ({verdict})")
    return " and ".join(said)
