"""Where the real recorded runs are: shared/real-runs beside the checkout (as on developer
machines and CI), or $DIAGNOSE_SHARED/real-runs. Missing data fails loudly, never skips."""

from __future__ import annotations

import os
from pathlib import Path


def _find() -> Path:
    candidates = [Path(__file__).resolve().parents[2] / "shared"]
    if os.environ.get("DIAGNOSE_SHARED"):
        candidates.insert(0, Path(os.environ["DIAGNOSE_SHARED"]))
    for shared in candidates:
        if (shared / "real-runs").is_dir():
            return shared / "real-runs"
    raise RuntimeError(
        f"real recorded runs not found in {', '.join(map(str, candidates))}: the tests need "
        "the shared/ folder beside the checkout, or DIAGNOSE_SHARED pointing to it"
    )


REAL_RUNS = _find()
