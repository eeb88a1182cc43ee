"""The two bases of every schema model: unknown fields are an error, so typos never pass
silently; the bundle's own records refuse a NaN or an infinity too."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Stored", "Strict"]


class Strict(BaseModel):
    """Base for stored and analysis models: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")


class Stored(Strict):
    """Base for the bundle's own records: a NaN or an infinity is an error too, in any float."""

    model_config = ConfigDict(allow_inf_nan=False)
