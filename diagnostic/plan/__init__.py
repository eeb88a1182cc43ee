"""The sweep plan: TOML file, validation, sweep expansion, presets and TOML output."""

from diagnostic.plan.presets import ENGINES, METHODS, Engine, plan_from_preset
from diagnostic.plan.serialise import to_toml
from diagnostic.plan.spec import (
    MIN_REQUESTS,
    Arm,
    ArmTable,
    Plan,
    PlanError,
    PlanFile,
    PlanTable,
    expand_plan,
    infer_speculative,
    load_plan,
    parse_plan,
)
from diagnostic.plan.templates import TemplateError, substitute

__all__ = [
    "ENGINES",
    "METHODS",
    "MIN_REQUESTS",
    "Arm",
    "ArmTable",
    "Engine",
    "Plan",
    "PlanError",
    "PlanFile",
    "PlanTable",
    "TemplateError",
    "expand_plan",
    "infer_speculative",
    "load_plan",
    "parse_plan",
    "plan_from_preset",
    "substitute",
    "to_toml",
]
