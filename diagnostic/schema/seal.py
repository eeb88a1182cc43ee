"""Pydantic models of what a report PDF records about its bundle (the attachment
deliverable.json): the root hash and seals it was made from, and its signature."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from diagnostic.schema.base import Strict
from diagnostic.schema.bundle import Engagement, Sha256

__all__ = ["DELIVERABLE_FILE", "Deliverable", "RootSignature"]

DELIVERABLE_FILE = "deliverable.json"  # the report PDF's attachment beside analysis.json


class RootSignature(Strict):
    """An ed25519 signature of a bundle's root hash (bundle/signing.py says what is signed)."""

    algorithm: Literal["ed25519"] = Field("ed25519", description="Signature algorithm")
    public_key: str = Field(description="The public key that checks it, OpenSSH form")
    key_id: str = Field(description="Its fingerprint as ssh-keygen -lf prints it")
    signature: str = Field(description="The signature, base64")


class Deliverable(Strict):
    """deliverable.json: the bundle a report was made from, and how it was rendered."""

    format: Literal["diagnose-deliverable/1"] = Field(
        "diagnose-deliverable/1", description="Format of this record"
    )
    tool_version: str = Field(description="diagnose version that rendered the report")
    bundle: str = Field(description="Name of the bundle folder")
    bundle_id: str | None = Field(None, description="manifest.json bundle_id (None before seals)")
    bundle_created_at: str | None = Field(None, description="manifest.json created_at")
    root: Sha256 = Field(description="The bundle's root hash the report prints")
    manifest_sha256: Sha256 = Field(description="sha256 of manifest.json")
    runs: dict[str, Sha256] = Field(description="Each run's seal digest, by run id")
    unsealed: list[str] = Field(default_factory=list, description="Runs that carried no seal")
    engagement: Engagement | None = Field(
        None, description="Client, site and consultant given to `report` (override the bundle's)"
    )
    title: str | None = Field(None, description="Report title given to `report`")
    signature: RootSignature | None = Field(None, description="Signature of the root, if signed")
