"""nvidia-smi CSV (`--query-gpu=… --format=csv[,nounits]`) and DCGM exporter text → GPU rows."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from diagnostic.errors import TelemetryError
from diagnostic.schema.telemetry import CLOCKS_EVENT_REASONS

__all__ = ["SmiParser", "parse_dcgm", "parse_smi_file", "reason_bits"]

Row = dict[str, object]

# nvidia-smi's CSV header names (units in brackets taken off, lower case) and the query names
# they come from → our columns. Both spellings of the throttle reasons (renamed clocks events
# in driver 535) are read.
_SMI_FIELDS = {
    "timestamp": "source_time",
    "index": "gpu",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.memory": "mem_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "power.draw": "power_w",
    "power.draw.instant": "power_w",
    "power.draw.average": "power_w",
    "power.limit": "power_limit_w",
    "enforced.power.limit": "power_limit_w",
    "temperature.gpu": "temperature_c",
    "utilization.gpu": "utilization_pct",
    "memory.used": "memory_used_mib",
    "clocks_event_reasons.active": "clocks_event_reasons",
    "clocks_throttle_reasons.active": "clocks_event_reasons",
}
_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")
_NUMBER = re.compile(
    r"^\s*([-+]?(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))\s*([A-Za-z%]*)\s*$"
)
_UNAVAILABLE = ("[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "")

# DCGM exporter fields (dcgm-exporter's default counters) → our columns.
_DCGM_FIELDS = {
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_MEM_CLOCK": "mem_clock_mhz",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit_w",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": "power_limit_w",
    "DCGM_FI_DEV_GPU_TEMP": "temperature_c",
    "DCGM_FI_DEV_GPU_UTIL": "utilization_pct",
    "DCGM_FI_DEV_FB_USED": "memory_used_mib",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "clocks_event_reasons",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "clocks_event_reasons",
}


def reason_bits(mask: int) -> list[str]:
    """Names of the clocks-event reasons set in an NVML bitmask."""
    return [name for name, bit in CLOCKS_EVENT_REASONS.items() if mask & bit]


class SmiParser:
    """nvidia-smi --query-gpu CSV, line by line (a `-lms` loop streams it): the header names
    the columns, each later line one GPU's sample. Lines without an index are numbered by
    their place among the lines of one timestamp. `name` says where the text came from."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._columns: list[str | None] | None = None
        self._last_time: object = None
        self._place = 0

    def feed(self, line: str, lineno: int = 0) -> Row | None:
        """One line → one row of our columns; None for a header or a blank line. A line that
        cannot be read raises TelemetryError naming the source and line."""
        if not line.strip():
            return None
        cells = [c.strip() for c in next(csv.reader([line]))]
        if cells[0].lower().startswith("timestamp") or self._looks_like_header(cells):
            self._columns = [_SMI_FIELDS.get(_UNIT.sub("", c).strip().lower()) for c in cells]
            if not set(self._columns) - {None, "source_time", "gpu"}:
                raise self._error(lineno, f"no known nvidia-smi field in the header {line!r}")
            return None
        if self._columns is None:
            raise self._error(lineno, "a value line before nvidia-smi's header line")
        if len(cells) != len(self._columns):
            raise self._error(lineno, f"{len(cells)} values for {len(self._columns)} columns")
        row: Row = {}
        for column, cell in zip(self._columns, cells, strict=True):
            if column == "source_time":
                row[column] = cell
            elif column is not None:
                row[column] = self._value(cell, column, lineno)
        return self._numbered(row)

    @staticmethod
    def _looks_like_header(cells: list[str]) -> bool:
        return any(_UNIT.sub("", c).strip().lower() in _SMI_FIELDS for c in cells)

    def _value(self, cell: str, column: str, lineno: int) -> float | int | None:
        if cell.lower() in _UNAVAILABLE:
            return None
        match = _NUMBER.match(cell)
        if match is None:
            raise self._error(lineno, f"{column}: {cell!r} is not a number")
        text = match.group(1)
        if column == "clocks_event_reasons" or text.lower().startswith("0x"):
            return int(text, 16) if text.lower().startswith("0x") else int(float(text))
        return float(text)

    def _numbered(self, row: Row) -> Row:
        if "gpu" in row and row["gpu"] is not None:
            row["gpu"] = int(float(str(row["gpu"])))
            return row
        stamp = row.get("source_time")
        self._place = self._place + 1 if stamp == self._last_time and stamp else 0
        self._last_time = stamp
        row["gpu"] = self._place
        return row

    def _error(self, lineno: int, why: str) -> TelemetryError:
        where = f"{self.name}, line {lineno}" if lineno else self.name
        return TelemetryError(
            f"{where}: {why}; expected `nvidia-smi --query-gpu=timestamp,clocks.sm,… "
            "--format=csv,nounits` output"
        )


def parse_smi_file(path: Path) -> list[Row]:
    """Every sample of a recorded nvidia-smi CSV file; errors name the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TelemetryError(f"{path}: cannot be read ({exc})") from exc
    parser = SmiParser(str(path))
    rows = [parser.feed(line, n) for n, line in enumerate(text.splitlines(), start=1)]
    found = [r for r in rows if r is not None]
    if not found:
        raise TelemetryError(f"{path}: no nvidia-smi sample in it")
    return found


def parse_dcgm(text: str, name: str) -> list[Row]:
    """One scrape of a DCGM exporter (Prometheus text) → one row per GPU (label `gpu`)."""
    from prometheus_client.parser import text_string_to_metric_families

    rows: dict[int, Row] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                column = _DCGM_FIELDS.get(sample.name)
                if column is None:
                    continue
                gpu = int(sample.labels.get("gpu", "0"))
                value = sample.value
                rows.setdefault(gpu, {"gpu": gpu})[column] = (
                    int(value) if column == "clocks_event_reasons" else float(value)
                )
    except ValueError as exc:
        raise TelemetryError(f"{name}: not a Prometheus exposition ({exc})") from exc
    if not rows:
        raise TelemetryError(f"{name}: no DCGM_FI_DEV_* field of a GPU in its answer")
    return [rows[g] for g in sorted(rows)]
