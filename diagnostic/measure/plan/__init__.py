"""The sweep plan: TOML file, validation, sweep expansion, presets and TOML output."""

from diagnostic.measure.plan.presets import ENGINES, METHODS, Engine, plan_from_preset
from diagnostic.measure.plan.serialise import to_toml
from diagnostic.measure.plan.spec import (
    MIN_REQUESTS,
    Arm,
    ArmTable,
    Plan,
    PlanFile,
    PlanTable,
    expand_plan,
    infer_speculative,
    load_plan,
    parse_plan,
)
from diagnostic.measure.plan.templates import substitute

__all__ = [
    "ENGINES",
    "METHODS",
    "MIN_REQUESTS",
    "Arm",
    "ArmTable",
    "Engine",
    "Plan",
    "PlanFile",
    "PlanTable",
    "expand_plan",
    "infer_speculative",
    "load_plan",
    "parse_plan",
    "plan_from_preset",
    "substitute",
    "to_toml",
]
