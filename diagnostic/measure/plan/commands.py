"""An arm's shell command templates (launch, stop, health, logs, telemetry), rendered per
restart."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from diagnostic.measure.plan.templates import substitute
from diagnostic.schema.bundle import source_name

__all__ = ["Commands"]

RESTART = "restart"  # the one placeholder known only when a restart starts


class Commands(BaseModel):
    """Command templates of one arm: {port}, {arm}, sweep keys and {restart} are substituted
    (templates.py's rules: {{ and }} are literal braces), then run with bash -c."""

    model_config = ConfigDict(extra="forbid")

    launch: str = Field(description="Starts the server (its output is the `server` log)")
    stop: str | None = Field(None, description="Stops it; None: signal the launch's group")
    health: str | None = Field(None, description="Exits 0 once it serves; None: HTTP check")
    logs: dict[str, str] = Field(
        default_factory=dict, description="Log source name -> command printing that log"
    )
    telemetry: dict[str, str] = Field(
        default_factory=dict,
        description="Telemetry source name -> command printing nvidia-smi CSV, or DCGM URL",
    )
    values: dict[str, int | float | str] = Field(
        default_factory=dict, description="{port}, {arm} and the sweep values"
    )

    def render(self, template: str, restart: int | str) -> str:
        """One template with every placeholder substituted for this restart."""
        return substitute(template, {**self.values, RESTART: restart})

    def at(self, restart: int | str) -> Commands:
        """Every template rendered for one restart (values then hold nothing to substitute)."""
        return Commands(
            launch=self.render(self.launch, restart),
            stop=self.render(self.stop, restart) if self.stop else None,
            health=self.render(self.health, restart) if self.health else None,
            logs={name: self.render(cmd, restart) for name, cmd in self.logs.items()},
            telemetry={n: self.render(cmd, restart) for n, cmd in self.telemetry.items()},
        )

    def shown(self) -> Commands:
        """The commands as a reader sees them in the plan's manifest: {restart} left in."""
        return self.at("{restart}")

    def check(self) -> None:
        """Raise TemplateError (or ValueError for a bad source name) now, not mid-sweep."""
        for name in [*self.logs, *self.telemetry]:
            source_name(name)
        self.at(0)
