"""The atoms of the report's view models: the base every view model extends, the chart, a
labelled value and a quoted log line."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Chart", "Evidence", "KeyValue", "View"]


class View(BaseModel):
    """A view model: final text, immutable, no field it does not declare."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Chart(View):
    """An SVG chart embedded as a data: URI."""

    title: str = Field(description="Figure caption")
    uri: str = Field(description="data:image/svg+xml;base64,… of the chart")
    alt: str = Field(description="What the chart shows, in words")


class KeyValue(View):
    """A labelled value (cover facts, environment rows, definitions)."""

    key: str = Field(description="Label")
    value: str = Field(description="Formatted value; 'not measured' when missing")


class Evidence(View):
    """One quoted log line with its line number."""

    line: str = Field(description="Line number in the log, or '' when unknown")
    text: str = Field(description="The line, verbatim (escaped by the template)")
