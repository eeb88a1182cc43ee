"""Who is compared with whom: an A/A arm with the arm it repeats, a speculative arm with its
matched baseline (the arm whose launch differs only in speculation flags), any other
configuration with the plan's baseline; each pairing started per workload and level."""

from __future__ import annotations

from diagnostic.analyse.compare import Pending, start_comparison
from diagnostic.analyse.context import Context, arm_k
from diagnostic.engines.command import speculates, without_speculation
from diagnostic.schema.analysis import ComparisonKind
from diagnostic.schema.bundle import ArmSpec

__all__ = ["all_pending"]


def _speculative(spec: ArmSpec | None) -> bool:
    """Whether an arm speculates: the plan says so, else its launch flags; an arm with
    neither (collected by hand) counts as speculative unless it is the baseline."""
    return spec is None or speculates(spec.speculative, spec.launch)


def _matched_baseline(ctx: Context, arm: str) -> tuple[str | None, bool, str | None]:
    """(baseline, matched, what else differs): the arm the plan names for it, else the
    non-speculative arm whose launch differs only in speculation flags, else the plan's
    baseline (unmatched when both launches are known and differ in more than that)."""
    spec = ctx.specs.get(arm)
    if spec and spec.baseline in ctx.arms:
        return spec.baseline, True, None
    if spec is None or not spec.launch:
        return ctx.baseline, True, None
    mine = without_speculation(spec.launch)
    for name in ctx.arms:
        other = ctx.specs.get(name)
        if name == arm or other is None or other.aa_of or _speculative(other) or not other.launch:
            continue
        # the environment counts too (llama.cpp turns CUDA graphs off with GGML_CUDA_DISABLE_GRAPHS)
        if without_speculation(other.launch) == mine and other.env == spec.env:
            return name, True, None
    base = ctx.specs.get(ctx.baseline or "")
    if base is None or not base.launch:
        return ctx.baseline, True, None
    return ctx.baseline, False, _differs(mine, without_speculation(base.launch))


def _differs(arm: tuple[str, ...], base: tuple[str, ...]) -> str:
    only_arm = [w for w in arm if w not in base]
    only_base = [w for w in base if w not in arm]
    text = " ".join(only_arm) or "(none)"
    if only_base:
        text += f" instead of {' '.join(only_base)}"
    return text if len(text) <= 120 else text[:119] + "…"


def _pending(
    ctx: Context,
    arm: str,
    base: str,
    kind: ComparisonKind,
    matched: bool = True,
    differs: str | None = None,
    pool: bool = True,
) -> list[Pending]:
    blocked = ctx.bundle.manifest.plan.order == "blocks"
    k = arm_k(ctx.specs.get(arm))
    out = []
    for level in ctx.levels:
        for w in ctx.keys:
            a = ctx.side(arm, w, level)
            b = (
                ctx.reference(base, w, level, pool=pool)
                if kind == "spec"
                else ctx.side(base, w, level)
            )
            if a.groups and b.groups:
                out.append(
                    start_comparison(
                        a,
                        b,
                        w,
                        level,
                        kind=kind,
                        k=k,
                        blocked=blocked,
                        matched=matched,
                        differs=differs,
                    )
                )
    return out


def all_pending(ctx: Context, *, pool: bool = True) -> list[Pending]:
    """A/A arms against the arm they repeat; speculative arms against their matched baseline;
    other configurations against the plan's baseline (a table, never a headline)."""
    out: list[Pending] = []
    for arm in ctx.arms:
        spec = ctx.specs.get(arm)
        if spec and spec.aa_of:
            if spec.aa_of in ctx.arms:
                out += _pending(ctx, arm, spec.aa_of, "aa")
        elif arm == ctx.baseline or ctx.baseline is None:
            continue
        elif _speculative(spec):
            base, matched, differs = _matched_baseline(ctx, arm)
            if base is not None:
                out += _pending(ctx, arm, base, "spec", matched, differs, pool)
        else:
            out += _pending(ctx, arm, ctx.baseline, "config", False)
    return out
