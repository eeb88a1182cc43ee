"""What every step of the analysis needs: the loaded bundle, the arms in order, the baseline,
the workload keys and levels, the samples indexed by (arm, workload, level), each arm's
restart noise; the sides a comparison is made of, the A/A repeats pooled into the reference."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from diagnostic.analyse import pairing
from diagnostic.analyse.arms import by_restart
from diagnostic.analyse.compare import Side
from diagnostic.analyse.requests import Loaded, Sample, load_samples
from diagnostic.bundle.store import Bundle
from diagnostic.schema.analysis import ALL_WORKLOADS
from diagnostic.schema.bundle import ArmSpec

__all__ = ["Context", "Key", "arm_k", "build_context"]

Key = tuple[str, str, int]  # (arm, workload, concurrency)
_REPEAT_KEYS = 1_000_000  # restart keys of a pooled A/A repeat: i·this + its restart


@dataclass
class Context:
    """What every step needs: the loaded bundle, arm specs, groupings."""

    bundle: Bundle
    loaded: Loaded
    specs: dict[str, ArmSpec]
    arms: list[str]
    baseline: str | None
    workloads: list[str]
    keys: list[str]
    levels: list[int]
    index: dict[Key, list[Sample]]
    noise: dict[Key, pairing.ArmNoise]  # restart noise with each arm's prompt effects removed
    # restart → the covariate adjustment of its log mean, per key (covariate.py); empty: raw
    shifts: dict[Key, dict[int, float]] = field(default_factory=dict)

    @property
    def headline(self) -> str:
        """The workload key of arm-level figures: 'all' with several workloads."""
        return self.keys[-1] if self.keys else ALL_WORKLOADS

    def side(self, arm: str, workload: str, level: int) -> Side:
        """Samples of one arm on one workload key and level, by restart (its restart means
        adjusted by the covariate when the context carries shifts)."""
        key = (arm, workload, level)
        return Side(arm, by_restart(self.index.get(key, [])), shift=self.shifts.get(key, {}))

    def reference(self, base: str, workload: str, level: int, *, pool: bool = True) -> Side:
        """What a speculative arm is compared with: the baseline, joined by its A/A repeats
        (arms with aa_of = base) when the design pools them — each block's reference is then
        the mean of their log restart means (two starts of the same configuration per block:
        a ratio's baseline variance halves). The repeats' restarts are keyed apart."""
        side = self.side(base, workload, level)
        if not (pool and self.bundle.manifest.plan.design.pool_aa):
            return side
        groups, pooled, shift = dict(side.groups), {}, dict(side.shift)
        repeats = [a for a in self.arms if (s := self.specs.get(a)) and s.aa_of == base]
        for i, arm in enumerate(repeats, 1):
            extra = self.side(arm, workload, level)
            groups |= {i * _REPEAT_KEYS + r: g for r, g in extra.groups.items()}
            shift |= {i * _REPEAT_KEYS + r: v for r, v in extra.shift.items()}
            pooled[arm] = len(extra.groups)
        return Side(base, groups, {a: n for a, n in pooled.items() if n}, shift)


def build_context(bundle: Bundle) -> Context:
    """The context of one bundle: its samples loaded, grouped and indexed."""
    loaded = load_samples(bundle)
    plan = bundle.manifest.plan
    specs = {a.name: a for a in plan.arms}
    seen = [r.arm for r in loaded.runs]
    arms = list(dict.fromkeys([a.name for a in plan.arms if a.name in seen] + seen))
    present = {s.workload for s in loaded.samples}
    workloads = [w for w in plan.workloads if w in present] + sorted(present - set(plan.workloads))
    keys = workloads + ([ALL_WORKLOADS] if len(workloads) > 1 else [])
    index: dict[Key, list[Sample]] = defaultdict(list)
    for s in loaded.samples:
        index[(s.arm, s.workload, s.concurrency)].append(s)
        if len(workloads) > 1:
            index[(s.arm, ALL_WORKLOADS, s.concurrency)].append(s)
    baseline = _baseline(plan.baseline, arms, specs)
    pooled = ALL_WORKLOADS if len(workloads) > 1 else None
    return Context(
        bundle=bundle,
        loaded=loaded,
        specs=specs,
        arms=arms,
        baseline=baseline,
        workloads=workloads,
        keys=keys,
        levels=sorted({s.concurrency for s in loaded.samples}),
        index=index,
        noise=pairing.arm_noise(pairing.measured_requests(loaded.frame), baseline, pooled),
    )


def _baseline(planned: str | None, arms: list[str], specs: dict[str, ArmSpec]) -> str | None:
    if planned in arms:
        return planned
    off = [a for a in arms if a in specs and specs[a].speculative is False and not specs[a].aa_of]
    candidates = off or arms
    return candidates[0] if candidates else None


def arm_k(spec: ArmSpec | None) -> int | None:
    """The arm's k (params['k']) when it is a whole number."""
    value = spec.params.get("k") if spec else None
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return int(value)
    return None
