"""Seals and the root hash: the sha256 of each file of a run, recorded in its run.json when the
run ends, and one sha256 over the manifest and every run's seal (docs/verify.md, "Seals" and
"The root hash").

A run's seal digest is the sha256 of the UTF-8 text

    diagnose-seal/2
    bundle<TAB><the manifest's bundle_id, or ->
    sealed_at<TAB><the seal's sealed_at>                 (format /2 only: /1 left it out)
    schedule<TAB><sha256 of {"plan": …, "collected": […]} from manifest.json, canonical JSON>
    <path in the run folder><TAB><sha256 of the file>      one line per file, sorted by path,
                                                         run.json's line the hash of run.json
                                                         without its seal, canonical JSON

and the bundle's root hash the sha256 of

    diagnose-root/1
    manifest.json<TAB><sha256 of the bytes of manifest.json>
    runs/<arm>-r<restart><TAB><that run's seal digest>   one line per run, sorted

each line ending in a newline. Canonical JSON is Python's json.dumps(value, sort_keys=True,
separators=(",", ":"), ensure_ascii=False) in UTF-8. A run without a seal (recorded before
sealing, or still running) enters the root with the digest its files give now.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnostic.bundle.gate import bundle_files, parse_json
from diagnostic.bundle.manifest_seal import canonical_json
from diagnostic.bundle.store import MANIFEST, RUN_JSON, Bundle, run_id, run_record
from diagnostic.errors import BundleError
from diagnostic.schema.bundle import SEAL_FORMAT, RunInfo, RunSeal, SealFormat, utc_now

__all__ = [
    "ROOT_FORMAT",
    "Root",
    "bundle_root",
    "canonical_json",
    "file_sha256",
    "measured_seal",
    "root_text",
    "run_files",
    "run_json_sha256",
    "schedule_sha256",
    "seal_digest",
    "seal_line",
    "seal_run",
]

ROOT_FORMAT = "diagnose-root/1"
_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks (a log may be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _raw(path: Path) -> Any:
    """A JSON file as stored (not as a model of this version re-dumps it)."""
    try:
        return parse_json(path.read_bytes(), str(path))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(
            f"{path}: cannot read it as JSON ({exc}); the bundle is damaged"
        ) from None


def run_json_sha256(data: Mapping[str, Any]) -> str:
    """sha256 of run.json's content without its seal, as canonical JSON."""
    return _sha256(canonical_json({k: v for k, v in data.items() if k != "seal"}))


def schedule_sha256(manifest: Mapping[str, Any]) -> str:
    """sha256 of the manifest's schedule: its plan (arms, restarts, order, seed, design …) and
    the runs `collect` was asked for, as manifest.json stores them."""
    value = {"plan": manifest.get("plan"), "collected": manifest.get("collected", [])}
    return _sha256(canonical_json(value))


def _line(path: str, digest: str) -> str:
    # A name with a tab or a newline must not forge another line: such characters are escaped.
    safe = path if path.isprintable() else path.encode("unicode_escape").decode("ascii")
    return f"{safe}\t{digest}\n"


def seal_digest(
    *,
    bundle_id: str | None,
    schedule: str,
    files: Mapping[str, str],
    run_json: str,
    sealed_at: str,
    format: SealFormat = SEAL_FORMAT,
) -> str:
    """The digest of a seal's fields (the module docstring gives the text); format /1, that
    of bundles sealed before February 2027, leaves `sealed_at` out."""
    lines = [f"{format}\n", f"bundle\t{bundle_id or '-'}\n"]
    if format != "diagnose-seal/1":
        lines.append(_line("sealed_at", sealed_at))
    lines.append(f"schedule\t{schedule}\n")
    lines += [_line(p, d) for p, d in sorted({**files, RUN_JSON: run_json}.items())]
    return _sha256("".join(lines).encode("utf-8"))


def run_files(bundle: Bundle, arm: str, restart: int) -> dict[str, Path]:
    """The files a seal covers: every regular file of the run folder but run.json, by path in
    the folder (logs/server.log); dot-files (a .DS_Store a file browser leaves) aside."""
    folder = bundle.run_dir(arm, restart)
    found = {p.relative_to(folder).as_posix(): p for p in bundle_files(folder.parent, folder.name)}
    found.pop(RUN_JSON, None)
    return found


def measured_seal(
    bundle: Bundle, run: RunInfo, *, bundle_id: str | None = None, like: RunSeal | None = None
) -> RunSeal:
    """The seal the run's files give now, run.json as stored (not written anywhere): in the
    format and at the time of `like` (a run's recorded seal), else in format /1, which leaves
    the time out (an unsealed run's digest in the root depends on its files alone)."""
    raw = _raw(bundle.run_file(run.arm, run.restart, RUN_JSON))
    record = raw if isinstance(raw, dict) else {}
    if like is None:
        return _seal(bundle, run, record, bundle_id, "diagnose-seal/1", "-")
    return _seal(bundle, run, record, bundle_id, like.format, like.sealed_at)


def _seal(
    bundle: Bundle,
    run: RunInfo,
    record: Mapping[str, Any],
    bundle_id: str | None,
    format: SealFormat = SEAL_FORMAT,
    sealed_at: str | None = None,
) -> RunSeal:
    files = {p: file_sha256(path) for p, path in run_files(bundle, run.arm, run.restart).items()}
    schedule = schedule_sha256(_raw(bundle.path / MANIFEST))
    run_json = run_json_sha256(record)
    sealed_at = sealed_at or utc_now()
    digest = seal_digest(
        bundle_id=bundle_id,
        schedule=schedule,
        files=files,
        run_json=run_json,
        sealed_at=sealed_at,
        format=format,
    )
    return RunSeal(
        format=format,
        sealed_at=sealed_at,
        bundle_id=bundle_id,
        schedule=schedule,
        files=files,
        run_json=run_json,
        digest=digest,
    )


def seal_run(bundle: Bundle, arm: str, restart: int) -> RunInfo:
    """Seal a run that has ended: the sha256 of each of its files and of its run.json, written
    into run.json (a later seal replaces an earlier one: a resumed run is sealed again)."""
    info = bundle.find_run(arm, restart)
    if info is None:
        raise BundleError(f"{bundle.run_dir(arm, restart)}: no run.json to seal")
    info = info.model_copy(update={"seal": None})
    seal = _seal(bundle, info, run_record(info), bundle.manifest.bundle_id)
    sealed = info.model_copy(update={"seal": seal})
    bundle.write_run(sealed)
    return sealed


def seal_line(info: RunInfo) -> str:
    """What collect and sweep print as a run closes: the client's engineer can note it."""
    seal = info.seal
    rid = run_id(info.arm, info.restart)
    if seal is None:
        return f"{rid} ({info.status}): not sealed"
    return f"sealed {rid} ({info.status}): {len(seal.files)} files, seal sha256 {seal.digest}"


@dataclass(frozen=True)
class Root:
    """The bundle's root hash and what it was made of."""

    digest: str
    manifest_sha256: str
    runs: dict[str, str]  # run id -> the run's seal digest (measured now for an unsealed run)
    unsealed: tuple[str, ...]  # runs without a seal

    @property
    def sealed(self) -> bool:
        """Whether every run of the bundle carries a seal."""
        return bool(self.runs) and not self.unsealed


def root_text(manifest_sha256: str, runs: Mapping[str, str]) -> str:
    """The text the root hash is taken over (the module docstring gives its form)."""
    lines = [f"{ROOT_FORMAT}\n", f"{MANIFEST}\t{manifest_sha256}\n"]
    lines += [_line(f"runs/{rid}", digest) for rid, digest in sorted(runs.items())]
    return "".join(lines)


def bundle_root(bundle: Bundle, runs: list[RunInfo] | None = None) -> Root:
    """The root hash over manifest.json and every run's seal (its recorded digest; for a run
    without one, the digest its files give now)."""
    runs = bundle.runs() if runs is None else runs
    digests: dict[str, str] = {}
    unsealed: list[str] = []
    for run in runs:
        rid = run_id(run.arm, run.restart)
        if run.seal is None:
            unsealed.append(rid)
        seal = run.seal or measured_seal(bundle, run, bundle_id=bundle.manifest.bundle_id)
        digests[rid] = seal.digest
    manifest = file_sha256(bundle.path / MANIFEST)
    digest = _sha256(root_text(manifest, digests).encode("utf-8"))
    return Root(digest, manifest, digests, tuple(sorted(unsealed)))
