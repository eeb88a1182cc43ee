"""The base of the report's view models, and the chart both the report and its telemetry
chapter embed (one module, so that view.py can import the telemetry chapter's views)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Chart", "View"]


class View(BaseModel):
    """A view model: final text, immutable, no field it does not declare."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Chart(View):
    """An SVG chart embedded as a data: URI."""

    title: str = Field(description="Figure caption")
    uri: str = Field(description="data:image/svg+xml;base64,… of the chart")
    alt: str = Field(description="What the chart shows, in words")
