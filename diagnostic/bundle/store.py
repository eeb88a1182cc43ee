"""The only module that reads or writes a bundle: create/open, atomic writes, request appends."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from diagnostic.bundle.disk import writing
from diagnostic.bundle.files import (
    M,
    atomic_write_bytes,
    atomic_write_text,
    check_version,
    load_json,
    run_id,
    validate,
)
from diagnostic.bundle.gate import (
    bundle_files,
    check_metrics,
    check_tree,
    plain_json,
)
from diagnostic.bundle.manifest_seal import sealed_manifest_text
from diagnostic.bundle.redact import LineRedactor, redact_file_text, redact_json
from diagnostic.bundle.requests_file import (
    RequestLog,
    append_record,
    drop_torn_line,
    read_records,
)
from diagnostic.bundle.upgrade import SERVER_LOG, upgrade, v1_sources
from diagnostic.errors import BundleError
from diagnostic.schema.bundle import (
    SCHEMA_VERSION,
    SEAL_FORMAT,
    Manifest,
    ManifestSeal,
    RunInfo,
    folder_name,
    source_name,
)
from diagnostic.schema.requests import RequestRecord

__all__ = [
    "MANIFEST",
    "METRICS_AFTER",
    "METRICS_BEFORE",
    "RUN_JSON",
    "SERVER_LOG",
    "Bundle",
    "RedactingLog",
    "RequestLog",
    "check_output",
    "log_file",
    "metrics_files",
    "run_id",
    "run_record",
    "workload_metrics",
]

MANIFEST = "manifest.json"
RUN_JSON = "run.json"
REQUESTS = "requests.jsonl"
METRICS_BEFORE = "metrics_before.prom"  # /metrics before a run's first request
METRICS_AFTER = "metrics_after.prom"  # … and after its last


def workload_metrics(workload: str, concurrency: int, side: str) -> str:
    """The /metrics snapshot around one workload's measured requests (after its warm-up):
    metrics_<workload>[_c<concurrency>]_<before|after>.prom; concurrency 0 leaves the level
    out (a run measuring one level)."""
    return f"metrics_{workload}{f'_c{concurrency}' if concurrency else ''}_{side}.prom"


def metrics_files(names: list[str]) -> list[str]:
    """The /metrics snapshots among a run folder's file names (whole run and per workload)."""
    return [n for n in names if n.startswith("metrics_") and n.endswith(".prom")]


# What a bundle read may hold (older bundles had no length limit); a new name must also
# pass schema.bundle.folder_name, checked before anything is written.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]*$")


def log_file(source: str) -> str:
    """File of a log source inside a run folder: logs/<source>.log (the name is checked)."""
    try:
        return f"logs/{source_name(source)}.log"
    except ValueError as exc:
        raise BundleError(str(exc)) from None


def _dump_redacted(model: BaseModel) -> str:
    """JSON of a model with every secret masked: this is the gate nothing secret passes."""
    # Through pydantic's JSON first: a NaN becomes null, as the reader wants it.
    value = plain_json(json.loads(model.model_dump_json()))
    return json.dumps(redact_json(value), indent=2) + "\n"


def run_record(info: RunInfo) -> dict[str, Any]:
    """run.json as write_run stores it, without its seal: secrets redacted, and a seal's hashes
    (file names and hex digests, nothing secret) kept out of the redactor, which must never
    mask one. bundle/seal.py hashes exactly this."""
    value: dict[str, Any] = json.loads(_dump_redacted(info.model_copy(update={"seal": None})))
    value.pop("seal", None)
    return value


def _redacted_bytes(data: bytes, redact: Callable[[str], str]) -> bytes:
    # surrogateescape keeps non-UTF-8 bytes of a log byte-exact while the text is redacted
    return redact(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


class Bundle:
    """A bundle directory: manifest.json plus runs/<arm>-r<restart>/."""

    def __init__(self, path: Path, manifest: Manifest, *, strict: bool = True) -> None:
        self.path = path
        self.manifest = manifest
        self.strict = strict

    # -- lifecycle ---------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, manifest: Manifest, *, force: bool = False) -> Bundle:
        """Create a new bundle; refuse to touch an existing non-empty folder without force,
        a symbolic link, or names that cannot name its files (before writing anything)."""
        path = Path(path)
        check_output(path)
        _check_names(manifest)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            if not force:
                raise BundleError(
                    f"{path} already exists; use --resume to continue it, --force to replace "
                    "it, or choose another -o"
                )
            if (path / MANIFEST).is_file() or path.is_file():
                _remove(path)
            else:
                raise BundleError(
                    f"{path} is not a bundle; refusing to delete it even with --force"
                )
        with writing(path):
            (path / "runs").mkdir(parents=True, exist_ok=True)
        if manifest.bundle_id is None:  # every run's seal names it: a run copied in shows
            # `sealing` says from the start that its runs are sealed: a stripped seal shows.
            update = {"bundle_id": uuid.uuid4().hex, "sealing": SEAL_FORMAT}
            manifest = manifest.model_copy(update=update)
        bundle = cls(path, manifest)
        bundle.write_manifest(manifest)
        return bundle

    @classmethod
    def open(cls, path: Path, *, strict: bool = True) -> Bundle:
        """Open and validate an existing bundle (manifest and every run.json)."""
        path = Path(path)
        if not path.is_dir():
            raise BundleError(f"{path}: no such bundle folder; record one with `diagnose collect`")
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            raise BundleError(f"{manifest_path}: missing; {path} is not a diagnose bundle")
        check_tree(path)
        data = load_json(manifest_path)
        check_version(manifest_path, data)
        data = upgrade(data)
        bundle = cls(path, validate(Manifest, manifest_path, data), strict=strict)
        for run in bundle.runs():  # validates every run.json and /metrics snapshot up front
            for prom in sorted(bundle.run_dir(run.arm, run.restart).glob("*.prom")):
                check_metrics(prom)
        return bundle

    def write_manifest(self, manifest: Manifest) -> None:
        """Replace manifest.json atomically (its names checked first)."""
        check_output(self.path)
        _check_names(manifest)
        text = sealed_manifest_text(_dump_redacted(manifest.model_copy(update={"seal": None})))
        atomic_write_text(self.path / MANIFEST, text)
        # what is in memory carries the seal just written (and keeps its unredacted values)
        seal = json.loads(text).get("seal")
        self.manifest = manifest.model_copy(
            update={"seal": ManifestSeal.model_validate(seal) if seal else None}
        )

    # -- runs --------------------------------------------------------------------------
    def run_dir(self, arm: str, restart: int) -> Path:
        """Folder of one run; the arm name must be usable as a folder name."""
        if not _SAFE_NAME.match(arm):
            raise BundleError(
                f"arm name {arm!r} cannot name a folder; use letters, digits and . _ + = -"
            )
        return self.path / "runs" / run_id(arm, restart)

    def write_run(self, info: RunInfo) -> None:
        """Write run.json atomically (created on first write), secrets redacted; its seal, when
        it has one, as it is (run_record)."""
        value: dict[str, Any] = run_record(info)
        if info.seal is not None:
            value["seal"] = info.seal.model_dump(mode="json")
        path = self.run_dir(info.arm, info.restart) / RUN_JSON
        atomic_write_text(path, json.dumps(value, indent=2) + "\n")

    def runs(self) -> list[RunInfo]:
        """Every run of the bundle, ordered by (block, arm, restart)."""
        infos = [self._read_run(p / RUN_JSON) for p in self._run_dirs()]
        return sorted(
            infos, key=lambda r: (r.block if r.block is not None else -1, r.arm, r.restart)
        )

    def find_run(self, arm: str, restart: int) -> RunInfo | None:
        """run.json of (arm, restart), or None when that run was never started."""
        path = self.run_dir(arm, restart) / RUN_JSON
        return self._read_run(path) if path.is_file() else None

    def _run_dirs(self) -> Iterator[Path]:
        runs = self.path / "runs"
        if runs.is_dir():
            yield from sorted(p for p in runs.iterdir() if (p / RUN_JSON).is_file())

    def _read_run(self, path: Path) -> RunInfo:
        data = load_json(path)
        check_version(path, data)
        info = validate(RunInfo, path, upgrade(data))
        if not _SAFE_NAME.match(info.arm) or run_id(info.arm, info.restart) != path.parent.name:
            raise BundleError(
                f"{path}: arm {info.arm!r} restart {info.restart} does not match its folder "
                f"{path.parent.name!r}; the bundle was edited or damaged"
            )
        return info

    # -- run files (server.log, metrics_*.prom, endpoint answers) ------------------------
    def run_file(self, arm: str, restart: int, name: str) -> Path:
        """Path of a file inside a run folder (it may not exist)."""
        return self.run_dir(arm, restart) / name

    def write_run_file(self, arm: str, restart: int, name: str, data: str | bytes) -> Path:
        """Write a file into a run folder atomically, secrets redacted."""
        path = self.run_file(arm, restart, name)
        raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
        atomic_write_bytes(path, _redacted_bytes(raw, redact_file_text))
        return path

    def write_log(self, arm: str, restart: int, source: str, data: str | bytes) -> Path:
        """Write one log source of a run (logs/<source>.log) atomically, secrets redacted."""
        return self.write_run_file(arm, restart, log_file(source), data)

    def log_sources(self, run: RunInfo) -> dict[str, Path]:
        """The run's logs that exist, by source; a run that names none (a v2 run written by
        hand, or a v1 one) has its server.log as source `server`."""
        names = run.sources or v1_sources(run.logs)
        paths = {s: self.run_file(run.arm, run.restart, n) for s, n in names.items()}
        return {s: p for s, p in paths.items() if p.is_file()}

    def open_log(self, arm: str, restart: int, name: str) -> RedactingLog:
        """An appending log in a run folder that redacts each line before it is written."""
        path = self.run_file(arm, restart, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        return RedactingLog(path)

    # -- requests ----------------------------------------------------------------------
    def append_request(self, record: RequestRecord, known: list[str] | None = None) -> None:
        """Append one record as one JSON line, flushed and fsynced before returning; secrets
        redacted, `known` ones (literal strings: the prompt's) wherever they appear."""
        append_record(self.run_file(record.arm, record.restart, REQUESTS), record, known)

    def read_requests(self, arm: str, restart: int) -> RequestLog:
        """Records of one run; a torn last line (interrupted write) is dropped and reported.

        A record of another run, or a second record of one (workload, seq, attempt), is an
        error naming its line: it would be counted twice."""
        return read_records(self.run_file(arm, restart, REQUESTS), (arm, restart), self.strict)

    def drop_torn_line(self, arm: str, restart: int) -> int | None:
        """Cut a torn last line off requests.jsonl (for --resume); return its line number."""
        return drop_torn_line(self.run_file(arm, restart, REQUESTS), (arm, restart), self.strict)

    def content_hash(self) -> str:
        """sha256 over manifest.json and every regular file under runs/ (path, size and bytes,
        sorted); links are never followed, so only the bundle's own bytes count."""
        digest = hashlib.sha256()
        for path in [self.path / MANIFEST, *bundle_files(self.path, "runs")]:
            data = path.read_bytes()
            digest.update(f"{path.relative_to(self.path).as_posix()}\0{len(data)}\0".encode())
            digest.update(data)
        return digest.hexdigest()

    # -- bundle-level JSON files (findings.json, checklist.json, analysis.json) -----------
    def write_json(self, name: str, model: BaseModel) -> Path:
        """Write a top-level JSON file of the bundle atomically."""
        path = self.path / name
        atomic_write_text(path, _dump_redacted(model))
        return path

    def read_json(self, name: str, model: type[M], *, newest: int = SCHEMA_VERSION) -> M | None:
        """Read and validate a top-level JSON file, or None when absent; `newest` is the
        highest schema_version of that file this diagnose reads (a file with its own history:
        checklist.json)."""
        path = self.path / name
        if not path.is_file():
            return None
        data = load_json(path)
        check_version(path, data, newest)
        return validate(model, path, data)


class RedactingLog:
    """A log file written line by line (a server's stdout), each line redacted and flushed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with writing(path):
            self._fh = open(path, "ab")  # noqa: SIM115 - closed by close()/__exit__
        self._redactor = LineRedactor()

    def write_line(self, line: bytes) -> None:
        """Append one line (with or without its newline), secrets masked, flushed at once."""
        with writing(self.path):
            self._fh.write(_redacted_bytes(line, self._redactor.line))
            self._fh.flush()

    def close(self) -> None:
        """Flush to disk and close."""
        if not self._fh.closed:
            with writing(self.path):
                try:
                    os.fsync(self._fh.fileno())
                finally:
                    self._fh.close()

    def __enter__(self) -> RedactingLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_output(path: Path) -> None:
    """A bundle is written where -o names it: not through a symbolic link, which may lead
    anywhere (or nowhere: a dangling one), and which --force would have to delete."""
    if path.is_symlink():
        raise BundleError(
            f"{path} is a symbolic link (to {os.readlink(path)}); diagnose writes a bundle only "
            "in the folder -o names: give that folder itself, or another -o"
        )


def _check_names(manifest: Manifest) -> None:
    """Arm and workload names become folder and file names: refused, with the rule, before
    anything is written (a /, a NUL, 300 characters)."""
    names = [("arm", a.name) for a in manifest.plan.arms]
    names += [("workload", w) for w in manifest.plan.workloads]
    for kind, name in names:
        try:
            folder_name(kind, name)
        except ValueError as exc:
            raise BundleError(str(exc)) from None


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
