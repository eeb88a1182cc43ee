"""The manifest's own seal: the digest of every field of manifest.json, taken each time diagnose
writes it (docs/verify.md, "The manifest's seal"), so that a field edited by hand afterwards
(`created_at`, `time_plan`, `engagement`, …) shows.

The digest is the sha256 of the UTF-8 text

    diagnose-manifest/1
    sealed_at<TAB><the seal's sealed_at>
    manifest<TAB><sha256 of manifest.json without its seal, canonical JSON>

each line ending in a newline. Canonical JSON: json.dumps(value, sort_keys=True,
separators=(",", ":"), ensure_ascii=False) in UTF-8. Like a run's seal, it proves nothing
against whoever runs this code again after an edit: only the root hash noted on site or signed
in the report does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from diagnostic.schema.bundle import MANIFEST_SEAL_FORMAT, utc_now

__all__ = ["canonical_json", "manifest_digest", "manifest_seal_problem", "sealed_manifest_text"]


def canonical_json(value: Any) -> bytes:
    """One byte string per JSON value, whatever the file's spacing or key order."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def manifest_digest(data: Mapping[str, Any], sealed_at: str) -> str:
    """The digest of a manifest's fields (its `seal` left out) sealed at `sealed_at`."""
    body = hashlib.sha256(canonical_json({k: v for k, v in data.items() if k != "seal"}))
    text = f"{MANIFEST_SEAL_FORMAT}\nsealed_at\t{sealed_at}\nmanifest\t{body.hexdigest()}\n"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sealed_manifest_text(text: str) -> str:
    """manifest.json's text as written, with its seal when the bundle is sealed (`sealing`
    set); taken over the text as stored, after redaction."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("sealing") is None:
        return text
    data.pop("seal", None)
    now = utc_now()
    data["seal"] = {
        "format": MANIFEST_SEAL_FORMAT,
        "sealed_at": now,
        "digest": manifest_digest(data, now),
    }
    return json.dumps(data, indent=2) + "\n"


def manifest_seal_problem(raw: Mapping[str, Any]) -> str | None:
    """What is wrong with manifest.json's seal as stored (`raw`: the file's JSON); None when it
    holds, or when the manifest predates sealing (no `sealing`, no `seal`)."""
    seal = raw.get("seal")
    if seal is None:
        if raw.get("sealing") is not None:
            return (
                "manifest.json: says its runs are sealed but carries no seal of its own: its "
                "seal was removed"
            )
        return None
    if not isinstance(seal, dict) or not isinstance(seal.get("sealed_at"), str):
        return "manifest.json: its seal is damaged"
    if raw.get("sealing") is None:
        return (
            "manifest.json: sealed, but no longer says its runs are sealed (`sealing` removed): "
            "the manifest was edited after it was written"
        )
    if seal.get("digest") != manifest_digest(raw, seal["sealed_at"]):
        return (
            "manifest.json: differs from its seal: a field (created_at, time_plan, "
            "engagement, plan …) was edited after diagnose wrote it"
        )
    return None
