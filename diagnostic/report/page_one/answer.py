"""Page 1's answer: for each workload, the configuration as found → the configuration the report
recommends, in decode tok/s and as one ratio with its range and a plain verdict word ("On code
the fixed server decodes 3.28× faster than as found, between 1.83× and 5.90×"). The figures are
the analysis' before-and-after comparisons (`Analysis.before_after`); a bundle that names no
configuration as found compares, and says it compares, the recommended speculative setting with
the same server without speculation. The statistics behind each range live in the method
chapter: nothing here names them."""

from __future__ import annotations

from diagnostic.engines.command import changed_flags
from diagnostic.report import fmt as f
from diagnostic.report import select as sel
from diagnostic.report.inputs import Inputs
from diagnostic.report.page_one.caveats import stands
from diagnostic.report.page_one.why import telling_line
from diagnostic.report.views.chapters import FindingView
from diagnostic.report.views.page_one import Answer, AnswerLine
from diagnostic.schema.analysis import Analysis, Comparison

__all__ = ["answer"]

# The verdict in the client's words; the badge's class is the analysis' verdict.
WORDS = {
    "WIN": "faster",
    "LOSS": "slower",
    "EQUIVALENT": "no difference",
    "INCONCLUSIVE": "not decided",
}


def answer(inputs: Inputs, problems: list[FindingView]) -> Answer | None:
    """The answer box; None when nothing was compared at all."""
    a = inputs.analysis
    name = inputs.bundle.manifest.plan.as_found
    if name and sel.arm_by_id(a, name) is not None:
        return _as_found(inputs, name, problems)
    lines = [
        _line(a, w, c, "than with speculation off", inputs.describe_id(c.arm))
        for w in sel.workloads(a)
        if (c := sel.lead_comparison(a, w)) is not None
    ]
    if not lines:
        return _noise_only(a)
    return Answer(
        label="The answer: the best measured setting against no speculation",
        head="This bundle names no configuration as found, so each line compares the best "
        "measured speculative setting with the same server without speculation.",
        lines=lines,
        note=_note(a, lines),
    )


def _as_found(inputs: Inputs, name: str, problems: list[FindingView]) -> Answer:
    a = inputs.analysis
    level = sel.low_level(a)
    lines = []
    afters: set[str] = set()
    for w in sel.workloads(a):
        c = next((x for x in a.before_after if x.workload == w and x.concurrency == level), None)
        if c is None:
            lines.append(_kept(a, name, w, level))
            continue
        afters.add(c.arm)
        lines.append(_line(a, w, c, "than as found", "the fixed server"))
    head = f"As found: {inputs.describe_id(name)}."
    if len(afters) == 1:
        after = next(iter(afters))
        head += f" After the fix: {_named(inputs, after, name)}."
    elif afters:
        head += (
            " After the fix: "
            + "; ".join(
                f"on {c.workload}, {_named(inputs, c.arm, name)}"
                for c in a.before_after
                if c.concurrency == level and c.workload in sel.workloads(a)
            )
            + "."
        )
    why = next((p for p in problems if name in p.arm_ids and p.evidence), None)
    return Answer(
        head=head,
        lines=lines,
        note=_note(a, lines),
        why=f"Why as found was slow: {why.title or why.message}" if why else "",
        quote=telling_line(why.evidence) if why else None,
    )


def _kept(a: Analysis, name: str, w: str, level: int) -> AnswerLine:
    """A workload where nothing measured is shown to beat the configuration as found. When
    as found speculates and measured slower than its own server without speculation, short
    of a decision, that is said too: 'keep it' would hide the likelier better choice."""
    mine = sel.arm_workload(sel.arm_by_id(a, name), w, level)  # type: ignore[arg-type]
    tps = f.tps(mine.decode_tps.estimate) if mine else f.MISSING
    kept = (
        f"On {w} nothing measured is shown to beat the configuration as found ({tps} decode tok/s)"
    )
    own = sel.comparison(a, name, w, level)
    if own is None or own.ratio is None or own.ratio >= 1 or own.verdict == "EQUIVALENT":
        return AnswerLine(
            workload=w, verdict="NONE", word="keep as found", sentence=f"{kept}: keep it."
        )
    return AnswerLine(
        workload=w,
        verdict="INCONCLUSIVE",
        word="not decided",
        sentence=f"{kept}; without speculation it decoded {f.ratio(1 / own.ratio)} faster, "
        "not decided.",
    )


def _noise_only(a: Analysis) -> Answer | None:
    """A bundle without a speculative arm (a noise study): the A/A repeat against its
    baseline per workload, which is the restart noise a speculative arm will be judged by."""
    level = sel.low_level(a)
    checks = [
        c
        for w in sel.workloads(a)
        for c in a.comparisons
        if c.checks_design and c.workload == w and c.concurrency == level
    ]
    if not checks:
        return None
    lines = []
    for c in checks:
        line = _line(a, c.workload, c, "than the first start of it", "a second start of it")
        same = (c.ci_low or 1.0) <= 1.0 <= (c.ci_high or 1.0)
        word = "within noise" if same else "differs"
        lines.append(line.model_copy(update={"verdict": "AA", "word": word}))
    return Answer(
        label="Restart noise: the same server started twice",
        head="This bundle measures no speculative setting: it starts the same configuration "
        "twice per block, so each line is the difference restarts alone make, the noise that "
        "any speculative setting added later is judged against.",
        lines=lines,
        note=_note(a, lines, together=False),  # each A/A check decides alone, at 95%
    )


def _line(a: Analysis, w: str, c: Comparison, versus: str, subject: str) -> AnswerLine:
    """'On code the fixed server decodes 3.28× faster than as found, between 1.83× and 5.90×:
    272 → 892 decode tok/s.' Slower is said as slower (never a ratio below 1 to invert)."""
    before = c.reference_tps
    after = before * c.ratio if before is not None and c.ratio is not None else None
    tps = f"{f.tps(before)} → {f.tps(after)} decode tok/s"
    ratio, low, high = c.ratio or 1.0, c.ci_low, c.ci_high
    slower = ratio < 1
    factor = f.ratio(1 / ratio if slower else ratio)
    how = "slower" if slower else "faster"
    between = ""  # a withheld range (one df) spans orders of magnitude and decides nothing
    if low and high and not c.withheld:
        lo, hi = (1 / high, 1 / low) if slower else (low, high)
        d = a.noise_band.delta
        between = f", between {f.ratio_end(lo, d)}× and {f.ratio_end(hi, d)}×"
    if c.withheld:
        verdict, word = "WITHHELD", "no verdict yet"
        tail = f" — too few restarts to decide ({c.n_restarts_arm} and {c.n_restarts_baseline})"
    elif not stands(c, a):
        verdict, word = "INCONCLUSIVE", "not confirmed"
        tail = " — not confirmed: the A/A check below failed by more than this range clears"
    else:
        verdict, word = c.verdict, WORDS[c.verdict]
        margin = f.pct(a.noise_band.delta, 0)
        tail = {
            "EQUIVALENT": f" — within the ±{margin} that counts as no difference",
            "INCONCLUSIVE": " — the range still holds both faster and slower",
        }.get(c.verdict, "")
        if c.sensitivity:  # the verdict rests on pooling the A/A repeat: said where printed
            alone = c.sensitivity.split(" (")[0]
            tail += f" — only with the A/A repeat pooled into the reference ({alone})"
    sentence = f"On {w} {subject} decodes {factor} {how} {versus}{between}: {tps}{tail}."
    return AnswerLine(workload=w, verdict=verdict, word=word, sentence=sentence)


def _note(a: Analysis, lines: list[AnswerLine], *, together: bool = True) -> str:
    """What a range means, in one plain sentence (the method chapter says how it is made):
    ranges of one family hold together, an A/A check's each on its own."""
    if not any("between" in line.sentence for line in lines):
        return ""
    joint = " for all the lines together" if together else ""
    return (
        f"Each range holds the true ratio with 95% confidence{joint}, across server restarts; "
        f"differences within ±{f.pct(a.noise_band.delta, 0)} count as none."
    )


def _named(inputs: Inputs, arm_id: str, against: str) -> str:
    """The arm as the report describes it, with the launch flags it changes against the
    configuration as found ('… with --attention-backend FLASH_ATTN_MLA')."""
    named = inputs.describe_id(arm_id)
    launches = {x.name: x.launch for x in inputs.bundle.manifest.plan.arms if x.launch}
    if arm_id not in launches or against not in launches:
        return named
    changes = changed_flags(launches[against], launches[arm_id])
    return f"{named} with {', '.join(changes)}" if changes else named
