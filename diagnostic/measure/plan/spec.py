"""Plan files: the TOML tables validated by pydantic, expanded into one arm per sweep value."""

from __future__ import annotations

import difflib
import itertools
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from diagnostic import defaults
from diagnostic.bundle.redact import redact_command, redact_commands, redact_env
from diagnostic.engines.command import infer_speculative
from diagnostic.errors import PlanError
from diagnostic.measure.plan.commands import Commands
from diagnostic.measure.plan.depth import check_depth
from diagnostic.measure.plan.limits import check_limits
from diagnostic.measure.plan.tables import ArmTable, PlanFile, PlanTable
from diagnostic.measure.plan.templates import TemplateError, substitute
from diagnostic.measure.workloads import BUILTIN
from diagnostic.schema.bundle import (
    ArmSpec,
    PlanSpec,
    Target,
    folder_name,
)

__all__ = [
    "Arm",
    "ArmTable",
    "Plan",
    "PlanFile",
    "PlanTable",
    "expand_plan",
    "infer_speculative",
    "load_plan",
    "parse_plan",
]


class Arm(BaseModel):
    """One expanded arm, ready to launch (templates substituted, secrets not yet redacted)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Arm name")
    launch: str = Field(description="Launch command for bash -c")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment")
    params: dict[str, int | float | str] = Field(
        default_factory=dict, description="Sweep values of this arm"
    )
    speculative: bool = Field(description="Whether the arm speculates")
    aa_of: str | None = Field(None, description="Arm this one repeats")
    commands: Commands = Field(description="launch, stop, health and log command templates")

    def spec(self) -> ArmSpec:
        """The manifest's view of the arm, secrets redacted."""
        shown = self.commands.shown()
        return ArmSpec(
            name=self.name,
            launch=redact_command(self.launch),
            env=redact_env(self.env),
            params=self.params,
            speculative=self.speculative,
            aa_of=self.aa_of,
            stop=redact_command(shown.stop, launch=False) if shown.stop else None,
            health=redact_command(shown.health, launch=False) if shown.health else None,
            logs=redact_commands(shown.logs),
        )


class Plan(BaseModel):
    """A validated, expanded plan: what `sweep` runs."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="Where the plan came from (file path or preset)")
    file: PlanFile = Field(description="The plan as written (for --save-plan and resume checks)")
    arms: list[Arm] = Field(description="Expanded arms, in file order")
    baseline: str = Field(description="Baseline arm")
    base_url: str = Field(description="Server URL every start is measured at")
    warnings: list[str] = Field(default_factory=list, description="Doubts worth telling the user")

    @property
    def options(self) -> PlanTable:
        """The [plan] table."""
        return self.file.plan

    def arm(self, name: str) -> Arm:
        """The arm called `name`."""
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise KeyError(name)

    @property
    def has_aa(self) -> bool:
        """Whether an arm repeats another (aa_of): an adaptive sweep pools it into the reference."""
        return any(a.aa_of for a in self.arms)

    def spec(self) -> PlanSpec:
        """The manifest's plan (secrets redacted)."""
        o = self.options
        return PlanSpec(
            arms=[arm.spec() for arm in self.arms],
            workloads=list(o.workloads),
            requests=o.requests,
            warmup=o.warmup,
            restarts=o.restarts,
            max_tokens=o.max_tokens,
            concurrency=list(o.concurrency),
            baseline=self.baseline,
            seed=o.seed,
            order=o.order,
            api=o.api,
            margin=o.margin,
            as_found=o.as_found,
        )

    def workload_sources(self) -> list[str]:
        """[plan] workloads: built-in names, and JSONL paths made relative to the plan's folder."""
        folder = Path(self.source).parent
        return [
            str(folder / w) if w.endswith(".jsonl") and not Path(w).is_absolute() else w
            for w in self.options.workloads
        ]

    def target(self) -> Target:
        """The manifest's target."""
        return Target(base_url=self.base_url, model=self.options.model)


# -- loading -----------------------------------------------------------------------------


def load_plan(path: Path) -> Plan:
    """Read, validate and expand a plan file."""
    path = Path(path)
    try:
        if path.stat().st_size > defaults.LIMIT_PLAN_BYTES:
            raise PlanError(
                f"{path}: {path.stat().st_size:,} bytes, more than a plan file holds "
                f"(limit {defaults.LIMIT_PLAN_BYTES:,}); give the plan, not another file"
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(
            f"{path}: no such plan file; write one (see `diagnose sweep --help`)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"{path}: cannot read the plan ({exc})") from None
    return parse_plan(text, source=str(path))


def parse_plan(text: str, *, source: str) -> Plan:
    """Parse TOML text into an expanded plan; errors name `source` and the fix."""
    check_depth(text, source)  # before tomllib, which recurses once per level
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{source}: not valid TOML ({exc}); fix the syntax") from None
    except RecursionError:
        raise PlanError(f"{source}: nested too deep to read; fix the file") from None
    try:
        file = PlanFile.model_validate(data)
    except ValidationError as exc:
        raise PlanError(_explain(source, data, exc)) from None
    return expand_plan(file, source=source)


def _explain(source: str, data: Any, exc: ValidationError) -> str:
    lines = [_explain_one(data, err) for err in exc.errors()[:6]]
    more = len(exc.errors()) - len(lines)
    tail = [f"  … and {more} more"] if more > 0 else []
    return f"{source}: invalid plan:\n" + "\n".join(f"  {line}" for line in lines + tail)


def _where(loc: tuple[int | str, ...]) -> str:
    if not loc:
        return "the file"
    if loc[0] == "arms" and len(loc) > 1 and isinstance(loc[1], int):
        head, rest = f"[[arms]] #{loc[1] + 1}", loc[2:]
    elif loc[0] == "plan":
        head, rest = "[plan]", loc[1:]
    else:
        head, rest = "top level", loc
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest).lstrip(".")
    return f"{head} {path}".strip()


def _explain_one(data: Any, err: Any) -> str:
    loc = tuple(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(known)}"
        return f"{_where(loc[:-1])}: unknown key `{loc[-1]}` ({hint})"
    if kind == "missing":
        return f"{_where(loc[:-1])}: missing key `{loc[-1]}`"
    got = err.get("input")
    shown = f" (got {got!r})" if not isinstance(got, dict | list) else ""
    return f"{_where(loc)}: {err['msg'].lower()}{shown}"


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    if not loc:
        return list(PlanFile.model_fields)
    model = PlanTable if loc[0] == "plan" else ArmTable
    return list(model.model_fields)


# -- expansion ---------------------------------------------------------------------------


def expand_plan(file: PlanFile, *, source: str) -> Plan:
    """Expand sweeps, substitute templates and check names, baseline and A/A references."""
    o = file.plan
    _check_workloads(source, o.workloads)
    check_limits(
        source,
        sweeps=[t.sweep for t in file.arms],
        concurrency=o.concurrency,
        restarts=o.restarts,
        per_level=o.requests + o.warmup,
        workloads=len(o.workloads),
    )
    base_url = _template(source, "[plan] base_url", o.base_url or "http://127.0.0.1:{port}", o.port)
    arms: list[Arm] = []
    for index, table in enumerate(file.arms):
        arms.extend(_expand_arm(source, index, table, file, o.port))
    _check_names(source, arms)
    arms = _resolve_aa(source, arms)
    baseline = _baseline(source, o.baseline, arms)
    if o.as_found is not None and o.as_found not in [a.name for a in arms]:
        raise PlanError(
            f"{source}: [plan] as_found = {o.as_found!r} is not an arm; use one of: "
            f"{', '.join(a.name for a in arms)}"
        )
    plan = Plan(source=source, file=file, arms=arms, baseline=baseline, base_url=base_url)
    plan.warnings.extend(_warnings(plan))
    return plan


def _check_workloads(source: str, workloads: list[str]) -> None:
    for name in workloads:
        if name not in BUILTIN and not name.endswith(".jsonl"):
            raise PlanError(
                f"{source}: [plan] workloads: unknown workload {name!r}; use a built-in "
                f"({', '.join(BUILTIN)}) or a .jsonl prompt file (relative to the plan)"
            )
    if len(set(workloads)) != len(workloads):
        raise PlanError(f"{source}: [plan] workloads lists a workload twice: {workloads}")


def _template(source: str, where: str, text: str, port: int, **params: Any) -> str:
    try:
        return substitute(text, {"port": port, **params})
    except TemplateError as exc:
        raise PlanError(f"{source}: {where}: {exc}") from None


def _expand_arm(source: str, index: int, table: ArmTable, file: PlanFile, port: int) -> list[Arm]:
    where = f"[[arms]] #{index + 1} ({table.name})"
    if table.launch is None and table.aa_of is None:
        raise PlanError(
            f"{source}: {where}: missing key `launch` (the command that starts the server)"
        )
    if table.launch is not None and not _mentions_port(table.launch):
        raise PlanError(
            f"{source}: {where}: launch has no {{port}}; add `--port {{port}}` so the server "
            f"listens where diagnose measures it ([plan] port = {port})"
        )
    for key, values in table.sweep.items():
        if not values:
            raise PlanError(f"{source}: {where}: sweep.{key} is empty; list at least one value")
        if f"{{{key}" not in table.name:
            raise PlanError(
                f"{source}: {where}: name has no {{{key}}}; every swept arm needs its own name, "
                f'e.g. name = "{table.name}-{key}{{{key}}}"'
            )
    keys = list(table.sweep)
    arms = []
    for combo in itertools.product(*(table.sweep[k] for k in keys)):
        params = dict(zip(keys, combo, strict=True))
        arms.append(_one_arm(source, where, table, file.plan, params))
    return arms


def _mentions_port(launch: str) -> bool:
    return re.search(r"(?<!\{)\{\s*port\s*(?:[+-]\s*\d+\s*)?\}", launch) is not None


def _one_arm(source: str, where: str, table: ArmTable, o: PlanTable, params: dict[str, Any]) -> Arm:
    port = o.port
    name = _template(source, f"{where} name", table.name, port, **params)
    commands = Commands(
        launch=table.launch or "",
        stop=table.stop if table.stop is not None else o.stop,
        health=table.health if table.health is not None else o.health,
        logs=table.logs or o.logs,
        telemetry=o.telemetry,
        values={"port": port, **params, "arm": name},
    )
    try:
        commands.check()
    except (TemplateError, ValueError) as exc:
        raise PlanError(f"{source}: {where}: {exc}") from None
    launch = commands.shown().launch
    env = {
        key: _template(source, f"{where} env.{key}", value, port, **params)
        for key, value in table.env.items()
    }
    speculative = table.speculative
    if speculative is None:
        speculative = infer_speculative(launch) if table.launch is not None else False
    return Arm(
        name=name,
        launch=launch,
        env=env,
        params=params,
        speculative=speculative,
        aa_of=table.aa_of,
        commands=commands,
    )


def _check_names(source: str, arms: list[Arm]) -> None:
    seen: set[str] = set()
    for arm in arms:
        try:
            folder_name("arm", arm.name)
        except ValueError as exc:
            raise PlanError(f"{source}: {exc}") from None
        if arm.name in seen:
            raise PlanError(
                f"{source}: two arms are named {arm.name!r}; give each [[arms]] a distinct name "
                "(a sweep arm needs its {key} in the name)"
            )
        seen.add(arm.name)


def _resolve_aa(source: str, arms: list[Arm]) -> list[Arm]:
    """An A/A arm without its own launch repeats its reference's launch and env."""
    by_name = {arm.name: arm for arm in arms}
    resolved = []
    for arm in arms:
        if arm.aa_of is None:
            resolved.append(arm)
            continue
        ref = by_name.get(arm.aa_of)
        if ref is None or ref.name == arm.name:
            raise PlanError(
                f"{source}: arm {arm.name!r} has aa_of = {arm.aa_of!r}, which is not another "
                f"arm; name one of: {', '.join(a.name for a in arms if a.name != arm.name)}"
            )
        if ref.aa_of is not None:
            raise PlanError(
                f"{source}: arm {arm.name!r} repeats {ref.name!r}, itself an A/A arm; "
                f"set aa_of = {ref.aa_of!r}"
            )
        if not arm.launch:  # it repeats its reference unchanged: the same commands too
            commands = ref.commands.model_copy(
                update={"values": {**ref.commands.values, "arm": arm.name}}
            )
            update = {"launch": ref.launch, "env": dict(ref.env), "speculative": ref.speculative}
            arm = arm.model_copy(update={**update, "commands": commands})
        resolved.append(arm)
    return resolved


def _baseline(source: str, baseline: str | None, arms: list[Arm]) -> str:
    names = [arm.name for arm in arms]
    listed = ", ".join(names)
    if baseline is None:
        if "baseline" in names:
            return "baseline"
        raise PlanError(
            f"{source}: no arm is named 'baseline'; set [plan] baseline to one of: {listed}"
        )
    if baseline not in names:
        raise PlanError(
            f"{source}: [plan] baseline = {baseline!r} is not an arm; use one of: {listed}"
        )
    return baseline


def _warnings(plan: Plan) -> list[str]:
    notes = []
    o = plan.options
    if o.requests < defaults.MIN_REQUESTS:
        notes.append(
            f"{plan.source}: requests = {o.requests} is below {defaults.MIN_REQUESTS}; per-restart "
            "medians will be noisy (fine for a smoke test, not for a verdict)"
        )
    if o.restarts < 3:
        notes.append(
            f"{plan.source}: restarts = {o.restarts}: with fewer than 3 starts per arm the "
            "restart-to-restart variance is barely measured"
        )
    for arm in plan.arms:
        ref = plan.arm(arm.aa_of) if arm.aa_of else None
        if ref is not None and (arm.launch, arm.env) != (ref.launch, ref.env):
            notes.append(
                f"{plan.source}: A/A arm {arm.name!r} does not launch exactly like "
                f"{ref.name!r}; an A/A arm should repeat its reference unchanged"
            )
    if not any(arm.aa_of for arm in plan.arms):
        notes.append(
            f'{plan.source}: no A/A arm (aa_of = "{plan.baseline}"): the report cannot check '
            "that the baseline agrees with itself across restarts (the design check)"
        )
    return notes
