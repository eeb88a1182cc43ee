"""A run's telemetry CSVs (telemetry/<source>.csv): appended row by row, read with pandas."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from diagnostic.bundle.redact import redact_file_text
from diagnostic.errors import BundleError
from diagnostic.schema.bundle import RunInfo
from diagnostic.schema.telemetry import (
    GPU_COLUMNS,
    HOST_COLUMNS,
    OPTIONAL_COLUMNS,
    TELEMETRY_FORMAT,
    TelemetryKind,
    telemetry_file,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TelemetryWriter", "columns_of", "read_telemetry"]


def columns_of(kind: TelemetryKind) -> tuple[str, ...]:
    """The CSV columns of a source kind."""
    return HOST_COLUMNS if kind == "host" else GPU_COLUMNS


class TelemetryWriter:
    """One source's CSV, appended and flushed row by row (a killed collect keeps what it took).

    A resumed run appends to the file it already has; the first line names the format."""

    def __init__(self, run_dir: Path, source: str, kind: TelemetryKind) -> None:
        self.path = run_dir / telemetry_file(source)
        self.columns = columns_of(kind)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.is_file() or self.path.stat().st_size == 0
        self._fh: IO[str] = open(self.path, "a", encoding="utf-8", newline="")  # noqa: SIM115
        self._csv = csv.writer(self._fh)
        self.rows = 0
        if fresh:
            self._fh.write(f"# {TELEMETRY_FORMAT} kind={kind}\n")
            self._csv.writerow(self.columns)
            self._fh.flush()

    def write(self, rows: Sequence[Mapping[str, object]]) -> None:
        """Append rows (missing values empty; text redacted like every stored text)."""
        for row in rows:
            self._csv.writerow([_cell(row.get(c)) for c in self.columns])
        self.rows += len(rows)
        self._fh.flush()

    def close(self) -> None:
        """Flush to disk and close."""
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return redact_file_text(str(value)) if isinstance(value, str) else str(value)


def read_telemetry(run_dir: Path, run: RunInfo) -> dict[str, pd.DataFrame]:
    """Every telemetry source of a run that has rows, by source name. A file that is not a
    telemetry CSV of a known format is a BundleError naming it."""
    out: dict[str, pd.DataFrame] = {}
    for source, info in sorted(run.telemetry.items()):
        if info.file is None:
            continue
        path = run_dir / info.file
        if not path.is_file():
            continue  # stopped before the first sample, or removed (verify says so)
        frame = _read_csv(path, columns_of(info.kind))
        if len(frame):
            out[source] = _aligned(frame) if info.kind == "nvidia-smi" else frame
    return out


def _aligned(frame: pd.DataFrame) -> pd.DataFrame:
    """A remote command's rows placed by nvidia-smi's own timestamps: its output may arrive in
    bursts (a pipe's buffer, ssh), so arrival times (kept as t_arrival_s) can bunch samples.
    The other host's clock is put on the run's by the smallest arrival delay seen (the
    offset, as NTP's minimum filter takes it); rows without a readable timestamp keep their
    arrival time."""
    import pandas as pd

    stamps = pd.to_datetime(frame["source_time"], format="%Y/%m/%d %H:%M:%S.%f", errors="coerce")
    if stamps.notna().sum() < 2:
        return frame
    remote = (stamps - stamps.min()).dt.total_seconds()
    offset = (frame["t_s"] - remote).min()
    out = frame.assign(t_arrival_s=frame["t_s"])
    out["t_s"] = (remote + offset).where(stamps.notna(), frame["t_s"])
    return out


def _read_csv(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    import pandas as pd  # here: the recorder process writes with this module, and starts light

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path}: cannot be read as a telemetry CSV ({exc})") from exc
    first, _, rest = text.partition("\n")
    if not first.startswith(f"# {TELEMETRY_FORMAT} "):
        raise BundleError(
            f"{path}: not a {TELEMETRY_FORMAT} telemetry file (first line {first[:60]!r}); "
            "a newer diagnose may have written it"
        )
    try:
        frame = pd.read_csv(io.StringIO(rest), dtype={"top_other": "string"})
    except (ValueError, pd.errors.ParserError) as exc:
        raise BundleError(f"{path}: unreadable telemetry CSV ({exc})") from exc
    for column in OPTIONAL_COLUMNS & set(columns) - set(frame.columns):
        frame[column] = float("nan")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise BundleError(f"{path}: telemetry CSV without column(s) {', '.join(missing)}")
    numeric = [c for c in columns if c not in ("top_other", "source_time")]
    for column in numeric:
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().sum() > frame[column].isna().sum():
            raise BundleError(f"{path}: column {column} holds a value that is not a number")
        frame[column] = values
    return frame
