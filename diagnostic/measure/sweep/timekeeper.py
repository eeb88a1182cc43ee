"""The sweep's plan for the day, kept as it runs: after each block it measures its costs and
noise (planner), plans the requests per restart (adaptive design), closes the arms whose
comparisons are decided at a planned look, and says how many verdicts are decided and when
the sweep is likely done; the bundle's manifest records it (TimePlan)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from diagnostic.bundle.store import Bundle
from diagnostic.common.progress import Reporter
from diagnostic.errors import DiagnosticError
from diagnostic.measure.collect import RunSettings
from diagnostic.measure.plan.spec import Plan
from diagnostic.measure.schedule import Start
from diagnostic.measure.sweep import planner
from diagnostic.schema.analysis import Comparison
from diagnostic.schema.bundle import TimePlan

__all__ = ["TimeKeeper", "open_arms"]


def open_arms(
    comparisons: Sequence[Comparison], arms: Sequence[str], closed: dict[str, str], look: int
) -> dict[str, str]:
    """Arms that stop getting restarts after this look, with why: a speculative arm once
    every one of its comparisons (all workloads and levels) can stop — WIN, LOSS or
    EQUIVALENT at the Pocock per-look level, or futile (undecided while its data reject the
    plan's target speedup); every other arm (the baseline, the A/A arm) once no speculative
    arm is left open. Returns `closed` with the new ones added."""
    by_arm: dict[str, list[Comparison]] = {}
    for c in comparisons:
        if c.kind == "spec" and not c.derived:  # a derived row never decides
            by_arm.setdefault(c.arm, []).append(c)
    out = dict(closed)
    for arm, cs in by_arm.items():
        if arm in out or not all(c.stopping is not None and c.stopping.can_stop for c in cs):
            continue
        out[arm] = f"stopped at look {look} ({_why(cs)})"
    if by_arm and all(arm in out for arm in by_arm):
        for arm in arms:
            out.setdefault(arm, f"every comparison decided at look {look}")
    return out


def _why(comparisons: Sequence[Comparison]) -> str:
    """'WIN', 'LOSS; futility stop on prose, against +10%': what closed an arm."""
    decided = sorted({c.verdict for c in comparisons if not (c.stopping and c.stopping.futile)})
    futile = [c for c in comparisons if c.stopping and c.stopping.futile]
    target = next((c.stopping.target for c in futile if c.stopping), None)
    parts = [", ".join(decided)] if decided else []
    if futile:
        where = ", ".join(sorted({c.workload for c in futile}))
        parts.append(f"futility stop on {where}, against {target:+.0%}")
    return "; ".join(parts)


class TimeKeeper:
    """Replans the sweep after every block and records the plan in the manifest."""

    def __init__(
        self,
        plan: Plan,
        bundle: Bundle,
        schedule: Sequence[Start],
        settings: RunSettings,
        *,
        looks: Sequence[int] | None,
        day: planner.DayEstimate,
        reporter: Reporter,
    ) -> None:
        self.bundle, self.schedule, self.reporter = bundle, list(schedule), reporter
        self.settings = settings
        self.looks = list(looks or [])
        self.levels = len(plan.options.concurrency)
        self.arms = [a.name for a in plan.arms]
        self.baseline = plan.baseline
        self.costs = day.costs  # assumed, or a pilot's, until the first block is measured
        self.stop_s = day.costs.stop_s
        self.closed: dict[str, str] = {}
        self.decided: tuple[int, int, int] | None = None  # (decided, futile, all), last look
        self.began = time.monotonic()
        prior = bundle.manifest.time_plan
        self.took_before = (prior.took_s or 0.0) if prior is not None else 0.0
        self.record = prior or TimePlan(
            design="adaptive" if self.looks else "fixed",
            costs_source=self.costs.source,
            startup_s=self.costs.startup_s,
            request_s=self.costs.mean_request_s,
            requests=settings.requests,
            requests_why="the plan's requests (nothing measured yet)",
            estimated_s=day.adaptive_by_look_s[-1] if self.looks else day.fixed_s,
        )
        if prior is not None:  # --resume: go on from where the sweep was
            self.record = prior.model_copy(update={"ended_early": None})
            self.closed = dict(prior.stopped)
            if self.looks:
                self.settings = settings.model_copy(update={"requests": prior.requests})
        self._save(likely_s=self.record.estimated_s)

    @property
    def requests(self) -> int:
        """Measured requests per restart and workload the next start gets."""
        return self.settings.requests

    def skip(self, start: Start) -> bool:
        """Whether this start's arm was closed at a look."""
        return start.arm in self.closed

    def after_block(self, index: int, start: Start) -> bool:
        """Replan after the block that `schedule[index]` ends; True when every arm is closed."""
        from diagnostic.analyse.requests import load_samples  # scipy, pandas load slowly

        blocks = (start.block or 0) + 1
        loaded = load_samples(Bundle.open(self.bundle.path))
        measured = planner.measured_costs(
            loaded.frame,
            loaded.runs,
            stop_s=self.stop_s,
            source=f"measured in blocks 1-{blocks}" if blocks > 1 else "measured in block 1",
        )
        if measured is not None:
            self.costs = measured
        why = self.record.requests_why
        if self.looks:  # the adaptive design plans its requests per restart
            noise = planner.noise_components(loaded.frame, self.baseline)
            more = index + 1 < len(self.schedule)  # no start follows the last block:
            if more:  # a plan for the last block would be recorded but never run
                chosen = planner.plan_requests(self.costs, noise, current=self.requests)
                self.settings = self.settings.model_copy(update={"requests": chosen.requests})
                why = chosen.why
            if blocks in self.looks and blocks != self.looks[-1]:
                self._look(blocks)
        self.record = self.record.model_copy(
            update={
                "costs_source": self.costs.source,
                "startup_s": self.costs.startup_s,
                "request_s": self.costs.mean_request_s,
                "requests": self.requests,
                "requests_why": why,
                "stopped": dict(self.closed),
            }
        )
        self._save(likely_s=self._elapsed() + self._remaining(index))
        return bool(self.arms) and all(a in self.closed for a in self.arms)

    def headline(self) -> str:
        """The overall bar's summary: verdicts decided (adaptive) and the likely end."""
        likely = self.record.likely_s
        left = max((likely or 0.0) - self._elapsed(), 0.0)
        parts = []
        if self.decided:
            decided, futile, every = self.decided
            parts.append(f"verdicts decided {decided}/{every}")
            parts += [f"{futile} futile"] if futile else []
        return " · ".join([*parts, f"likely done {planner.likely_end(left)}"])

    def finish(self, *, ended_early: str | None = None) -> TimePlan:
        """Record what the sweep took, the restarts each arm got and, when it ended before its
        schedule did, why (the starts it did not run are accounted for: `diagnose verify`)."""
        runs = Bundle.open(self.bundle.path).runs()
        restarts = {a: sum(r.arm == a and r.status == "ok" for r in runs) for a in self.arms}
        update = {"restarts": restarts, "ended_early": ended_early}
        self.record = self.record.model_copy(update=update)
        self._save(likely_s=self._elapsed())
        return self.record

    def _look(self, blocks: int) -> None:
        from diagnostic.analyse.core import analyse  # imported here: scipy loads slowly

        look = self.looks.index(blocks) + 1
        try:
            comparisons = analyse(Bundle.open(self.bundle.path)).comparisons
        except (DiagnosticError, ValueError) as exc:
            self.reporter.note(f"look after block {blocks}: no analysis ({exc}); going on")
            return
        spec = [c for c in comparisons if c.kind == "spec" and not c.derived]
        before = set(self.closed)
        self.closed = open_arms(comparisons, self.arms, self.closed, look)
        stops = [c.stopping for c in spec if c.stopping is not None and c.stopping.can_stop]
        futile = sum(st.futile for st in stops)
        self.decided = (len(stops) - futile, futile, len(spec))
        new = [a for a in self.arms if a in self.closed and a not in before]
        if len(self.closed) == len(self.arms):
            how = "decided or futile" if futile else "decided"
            self.reporter.note(f"look after block {blocks}: every comparison {how}; stopping")
        elif new:
            stopped = "; ".join(f"{a} {self.closed[a]}" for a in new)
            self.reporter.note(
                f"look after block {blocks}: {stopped}, no more restarts; the others go on"
            )
        else:
            self.reporter.note(f"look after block {blocks}: no arm decided yet; going on")

    def _remaining(self, index: int) -> float:
        return planner.remaining_s(
            self.costs,
            self.schedule,
            index,
            set(self.closed),
            requests=self.requests,
            warmup=self.settings.warmup,
            levels=self.levels,
        )

    def _elapsed(self) -> float:
        return self.took_before + time.monotonic() - self.began

    def _save(self, *, likely_s: float) -> None:
        self.record = self.record.model_copy(
            update={"likely_s": likely_s, "took_s": self._elapsed()}
        )
        manifest = self.bundle.manifest.model_copy(update={"time_plan": self.record})
        self.bundle.write_manifest(manifest)
