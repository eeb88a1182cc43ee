"""Where the real recorded runs are: tests/data/real-runs, inside the repository (its README says
how each was recorded). Missing data fails loudly, never skips."""

from __future__ import annotations

from pathlib import Path

REAL_RUNS = Path(__file__).resolve().parent / "data" / "real-runs"
if not (REAL_RUNS / "README.md").is_file():
    raise RuntimeError(f"real recorded runs not found in {REAL_RUNS}: the checkout is incomplete")
