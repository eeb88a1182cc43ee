"""CSV export of a bundle and its analysis: tables for a spreadsheet or a notebook.

`requests_frame` has one row per request record of every run, with why it was left out of the
statistics (empty when measured); `restarts_frame` the analysis' restart summaries (one row
per arm, workload, concurrency and restart); `comparisons_frame` the analysis' comparisons
(nested objects flattened to dotted columns, e.g. `stopping.can_stop`); `telemetry_frame`,
for a bundle that recorded telemetry, each run's median and worst value of every variable per
workload window. `write_csv` writes them as requests.csv, restarts.csv, comparisons.csv and
(with telemetry) telemetry.csv into one folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from diagnostic.analyse.requests import load_samples
from diagnostic.bundle.files import atomic_write_text
from diagnostic.bundle.store import Bundle
from diagnostic.errors import DiagnosticError
from diagnostic.schema.analysis import Analysis

__all__ = [
    "CSV_FILES",
    "comparisons_frame",
    "frames",
    "requests_frame",
    "restarts_frame",
    "telemetry_frame",
    "write_csv",
]

CSV_FILES = ("requests.csv", "restarts.csv", "comparisons.csv")
TELEMETRY_CSV = "telemetry.csv"  # only for a bundle that recorded telemetry


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted keys (`stopping.can_stop`); an absent object adds no keys, a
    list of scalars becomes its values joined by spaces."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping):
            out.update(_flatten(item, f"{name}."))
        elif isinstance(item, list):
            out[name] = " ".join(str(v) for v in item)
        else:
            out[name] = item
    return out


def _frame(rows: list[dict[str, Any]], columns: Iterable[str] | None = None) -> pd.DataFrame:
    """A table of flat rows; integer columns with gaps as nullable Int64 (written `3`, not
    `3.0`), a gap written empty."""
    frame = pd.DataFrame.from_records(rows, columns=list(columns) if columns else None)
    for column in frame.columns:
        values = [r[column] for r in rows if r.get(column) is not None]
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            frame[column] = frame[column].astype("Int64")
    return frame


def requests_frame(bundle: Bundle) -> pd.DataFrame:
    """One row per request record of every run — the analysis' own requests table: identity,
    attempt, warm-up, error, why it was left out (empty when measured), decode tokens/s, TTFT,
    end-to-end time, tokens."""
    frame = load_samples(bundle).frame.drop(columns=["error"])
    for column in ("restart", "block", "concurrency", "seq", "attempt", "completion_tokens"):
        frame[column] = frame[column].astype("Int64")  # written `3`, a gap written empty
    return frame


def restarts_frame(analysis: Analysis) -> pd.DataFrame:
    """The restart summaries of every arm, workload and concurrency level; the drift check
    as `drift.*` columns, the outliers counted in `n_outliers`."""
    rows = []
    for arm in analysis.arms:
        for workload in arm.workloads:
            for summary in workload.restarts:
                row = _flatten(summary.model_dump(mode="json", exclude={"outliers"}))
                row["n_outliers"] = len(summary.outliers)
                rows.append(row)
    return _frame(rows)


def comparisons_frame(analysis: Analysis) -> pd.DataFrame:
    """One row per comparison (A/A and speculation vs baseline), nested fields as dotted
    columns (`stopping.*`), the planned looks as their values joined by spaces."""
    return _frame(
        [
            _flatten(c.model_dump(mode="json"))
            for c in [*analysis.comparisons, *analysis.before_after]
        ]
    )


def telemetry_frame(analysis: Analysis) -> pd.DataFrame | None:
    """One row per run, workload window ('all': the whole run), source and variable: median,
    worst (the lowest clock, the highest power, temperature or load) and samples; a
    clocks-event reason is a row `reason.<name>` whose median is the share of samples (0-1)
    with it active. None when no run recorded telemetry."""
    t = analysis.telemetry
    if t is None:
        return None
    rows: list[dict[str, Any]] = []
    for w in t.windows:
        key = {"arm": w.arm, "restart": w.restart, "window": w.window, "source": w.source}
        rows += [
            key
            | {"variable": s.variable, "median": s.median, "worst": s.worst, "samples": s.samples}
            for s in w.stats
        ]
        rows += [key | {"variable": f"reason.{n}", "median": v} for n, v in w.reasons.items()]
    columns = ("arm", "restart", "window", "source", "variable", "median", "worst", "samples")
    return _frame(rows, columns)


def frames(bundle: Bundle, analysis: Analysis) -> dict[str, pd.DataFrame]:
    """The tables by file name: CSV_FILES, and TELEMETRY_CSV when telemetry was recorded."""
    out = dict(
        zip(
            CSV_FILES,
            (
                requests_frame(bundle),
                restarts_frame(analysis),
                comparisons_frame(analysis),
            ),
            strict=True,
        )
    )
    telemetry = telemetry_frame(analysis)
    if telemetry is not None:
        out[TELEMETRY_CSV] = telemetry
    return out


def write_csv(bundle: Bundle, analysis: Analysis, folder: Path) -> list[Path]:
    """Write requests.csv, restarts.csv, comparisons.csv (and telemetry.csv when recorded)
    into `folder` (made if missing)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DiagnosticError(f"{folder}: not a folder; --format csv writes its tables into -o DIR")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for name, frame in frames(bundle, analysis).items():
            atomic_write_text(folder / name, frame.to_csv(index=False))
            written.append(folder / name)
    except OSError as exc:
        raise DiagnosticError(f"{folder}: cannot write the CSV files ({exc})") from None
    return written
