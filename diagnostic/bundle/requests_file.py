"""A run's requests.jsonl: one redacted request record per line, appended and fsynced as
each request ends; read back with a torn last line (an interrupted write) told apart from a
damaged or edited file."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnostic.bundle.disk import writing
from diagnostic.bundle.files import atomic_write_bytes, check_version, run_id, validate
from diagnostic.bundle.gate import parse_json
from diagnostic.bundle.redact import redact_echoes, redact_text
from diagnostic.errors import BundleError
from diagnostic.schema.requests import LenientRequestRecord, RequestRecord

__all__ = ["RequestLog", "append_record", "drop_torn_line", "read_records"]


def _redacted_record(record: RequestRecord, known: list[str] | None = None) -> RequestRecord:
    """A record with its texts redacted: a prompt's secret echoed by the model, a prompt id, an
    error quoting a request; `known` are literal secrets (of the prompt) masked wherever they
    appear. The same text always redacts the same way, so two arms' identical outputs stay
    identical (greedy equivalence). Numbers are left alone, by shape or by name."""
    texts = ("workload", "prompt_id", "text", "error", "finish_reason")
    update: dict[str, Any] = {
        name: redact_echoes(value, known or [])
        for name in texts
        if isinstance(value := getattr(record, name), str)
    }
    if record.server_timings:
        update["server_timings"] = {
            k: redact_text(v) if isinstance(v, str) else v for k, v in record.server_timings.items()
        }
    return record.model_copy(update=update)


def _check_record(
    path: Path,
    number: int,
    record: RequestRecord,
    run: tuple[str, int],
    seen: dict[tuple[str, int, int], int],
) -> None:
    where = f"{path}:{number}"
    if (record.arm, record.restart) != run:
        raise BundleError(
            f"{where}: a record of {run_id(record.arm, record.restart)} in the requests of "
            f"{run_id(*run)}; the bundle was edited or damaged"
        )
    key = (record.workload, record.seq, record.attempt)
    if key in seen:
        raise BundleError(
            f"{where}: request {record.workload} seq {record.seq} attempt {record.attempt} is "
            f"recorded twice (first on line {seen[key]}); delete the duplicate line"
        )
    seen[key] = number


@dataclass
class RequestLog:
    """Records read from one requests.jsonl, and a torn last line if one was dropped."""

    records: list[RequestRecord] = field(default_factory=list)
    torn_line: int | None = None


def append_record(path: Path, record: RequestRecord, known: list[str] | None = None) -> None:
    """Append one record to `path` as one JSON line, secrets redacted (`known`: literal ones,
    wherever they appear), flushed and fsynced before returning."""
    line = _redacted_record(record, known).model_dump_json() + "\n"
    with writing(path):
        _append_line(path, line)


def _append_line(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        if fh.tell() > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                raise BundleError(
                    f"{path}: the last line is torn (the run was interrupted); "
                    "continue with --resume, which drops it"
                )
        fh.write(line.encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())


def read_records(path: Path, run: tuple[str, int], strict: bool = True) -> RequestLog:
    """The records of run (arm, restart) in `path`; a torn last line is dropped and reported.
    A record of another run, or a second record of one (workload, seq, attempt), is an error
    naming its line: it would be counted twice. `strict` False keeps unknown fields."""
    log = RequestLog()
    if not path.is_file():
        return log
    model = RequestRecord if strict else LenientRequestRecord
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n")
    seen: dict[tuple[str, int, int], int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        is_last = number == len(lines) and not complete
        try:
            data = parse_json(line, f"{path}:{number}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            if is_last:
                log.torn_line = number
                break
            raise BundleError(
                f"{path}:{number}: corrupt request record ({exc}); the bundle was edited or damaged"
            ) from None
        check_version(path, data)
        record = validate(model, path, data, number)
        _check_record(path, number, record, run, seen)
        log.records.append(_redacted_record(record))  # a client's bundle skipped our gate
    return log


def drop_torn_line(path: Path, run: tuple[str, int], strict: bool = True) -> int | None:
    """Cut a torn last line off `path` (for --resume); return its line number."""
    log = read_records(path, run, strict)
    raw = path.read_bytes() if path.is_file() else b""
    if raw and not raw.endswith(b"\n"):
        keep = raw[: raw.rfind(b"\n") + 1]
        if log.torn_line is None:  # a complete record lacking only its newline
            keep = raw + b"\n"
        atomic_write_bytes(path, keep)
    return log.torn_line
