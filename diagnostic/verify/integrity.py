"""Every run's files against the seal its run.json recorded when the run ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diagnostic.bundle.gate import parse_json
from diagnostic.bundle.manifest_seal import manifest_seal_problem
from diagnostic.bundle.seal import (
    measured_seal,
    schedule_sha256,
    seal_digest,
)
from diagnostic.bundle.store import MANIFEST, RUN_JSON, Bundle, run_id
from diagnostic.schema.bundle import RunInfo, RunSeal
from diagnostic.verify.outcome import Check

__all__ = ["UNSEALED", "check_seals", "sealing_evidence"]

UNSEALED = "recorded before sealing: integrity not provable, consistency checked"


def _short(digest: str) -> str:
    return digest[:12] + "…"


def _files(run: RunInfo, seal: RunSeal, now: dict[str, str]) -> list[str]:
    """Each file of the run that differs from its seal, is gone, or came after it (`now`: the
    sha256 of each file the run folder holds)."""
    where = f"runs/{run_id(run.arm, run.restart)}"
    out = []
    for name, sealed in sorted(seal.files.items()):
        digest = now.get(name)
        if digest is None:
            out.append(f"{where}/{name}: sealed, now missing: removed after the run ended")
        elif digest != sealed:
            out.append(
                f"{where}/{name}: differs from its seal (sealed {_short(sealed)}, now "
                f"{_short(digest)}): changed after the run ended ({seal.sealed_at})"
            )
    for name in sorted(set(now) - set(seal.files)):
        out.append(f"{where}/{name}: not in the seal: added after the run ended")
    return out


def _run(bundle: Bundle, run: RunInfo, seal: RunSeal, schedule: str | None) -> list[str]:
    """What is wrong with one sealed run: the seal itself, its bundle, schedule and files."""
    where = f"runs/{run_id(run.arm, run.restart)}"
    out = []
    fields = seal_digest(
        bundle_id=seal.bundle_id,
        schedule=seal.schedule,
        files=seal.files,
        run_json=seal.run_json,
        sealed_at=seal.sealed_at,
        format=seal.format,
    )
    if fields != seal.digest:
        out.append(
            f"{where}/{RUN_JSON}: its seal's digest is not the digest of its own fields: "
            "the seal was edited"
        )
    mine = bundle.manifest.bundle_id
    if seal.bundle_id != mine:
        out.append(
            f"{where}: sealed in bundle {seal.bundle_id or '(none)'}, not in this one "
            f"({mine or 'no bundle_id'}): the run was copied in from another bundle"
        )
    if schedule is not None and seal.schedule != schedule:
        out.append(
            f"{where}: sealed under another schedule than manifest.json's: the manifest's plan "
            "(arms, restarts, order, seed, design) was edited after the run ended"
        )
    now = measured_seal(bundle, run, bundle_id=seal.bundle_id, like=seal)
    if now.run_json != seal.run_json:
        out.append(
            f"{where}/{RUN_JSON}: changed after the run was sealed (its status, block, engine, "
            "server arguments or times are not those recorded)"
        )
    return out + _files(run, seal, now.files)


def _schedules(bundle: Bundle, sealed: list[RunInfo]) -> dict[str, str | None]:
    """The schedule each sealed run must name: the manifest's, for every run of a sweep (its
    plan is fixed when it starts); for a bundle measured by hand, which grows with each
    collect, for the run sealed last."""
    raw = parse_json((bundle.path / MANIFEST).read_bytes(), str(bundle.path / MANIFEST))
    now = schedule_sha256(raw if isinstance(raw, dict) else {})
    if bundle.manifest.plan.order != "manual":
        return {run_id(r.arm, r.restart): now for r in sealed}
    last = max((r.seal.sealed_at for r in sealed if r.seal), default=None)
    return {
        run_id(r.arm, r.restart): now if r.seal and r.seal.sealed_at == last else None
        for r in sealed
    }


def _strays(bundle: Bundle, runs: list[RunInfo]) -> list[str]:
    """Entries of runs/ that are no run: a folder whose run.json was deleted, a file."""
    known = {run_id(r.arm, r.restart) for r in runs}
    folder = bundle.path / "runs"
    entries = (
        sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []
    )
    return [
        f"runs/{p.name}: {'a folder without run.json' if p.is_dir() else 'a file'} among the "
        "runs: a run whose record was deleted, or something put in by hand"
        for p in entries
        if p.name not in known
    ]


def _raw(path: Path) -> dict[str, Any]:
    """A JSON file as stored, before any upgrade (an object, else empty)."""
    try:
        data = parse_json(path.read_bytes(), str(path))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def sealing_evidence(bundle: Bundle, runs: list[RunInfo], raw: dict[str, Any]) -> str | None:
    """Why the bundle's ended runs must each carry a seal (what in it says it was recorded by
    a diagnose that seals); None for a bundle recorded before sealing (format 1 or 2, no
    bundle_id, no seal anywhere). Stripping every seal does not make a bundle look older:
    all of these would have to go, which makes it a forgery of an old bundle."""
    if raw.get("sealing") is not None:
        return f"manifest.json says its runs are sealed (sealing {raw['sealing']})"
    if raw.get("seal") is not None:
        return "manifest.json carries a seal"
    if raw.get("bundle_id") is not None:
        return "manifest.json has a bundle_id, which diagnose gives only to bundles it seals"
    version = raw.get("schema_version")
    if isinstance(version, int) and version >= 3:
        return f"manifest.json is of bundle format {version}, whose runs are sealed"
    for run in runs:
        if run.seal is not None:
            return f"runs/{run_id(run.arm, run.restart)} carries a seal"
        stored = _raw(bundle.run_file(run.arm, run.restart, RUN_JSON)).get("schema_version")
        if isinstance(stored, int) and stored >= 3:
            rid = run_id(run.arm, run.restart)
            return f"runs/{rid}/{RUN_JSON} is of bundle format {stored}, whose runs are sealed"
    return None


def _formats(runs: list[RunInfo], raw: dict[str, Any]) -> list[str]:
    """Seals of another format than the one the manifest says the bundle's runs are sealed in
    (a seal made by hand, or the run sealed again by an older diagnose)."""
    want = raw.get("sealing")
    if want is None:
        return []
    return [
        f"runs/{run_id(r.arm, r.restart)}/{RUN_JSON}: its seal is of format {r.seal.format}, "
        f"the bundle's runs are sealed in {want}: the seal was made elsewhere"
        for r in runs
        if r.seal is not None and r.seal.format != want
    ]


def check_seals(bundle: Bundle, runs: list[RunInfo]) -> Check:
    """Every sealed run against its seal, the manifest against its own; the runs without one
    named (a run still running, or a bundle recorded before sealing, which says so and is
    checked for consistency only). A bundle recorded with seals whose seals were removed is a
    tamper, not an older bundle."""
    raw = _raw(bundle.path / MANIFEST)
    sealed = [r for r in runs if r.seal is not None]
    schedules = _schedules(bundle, sealed)
    problems = _strays(bundle, runs)
    manifest = manifest_seal_problem(raw)
    problems += [manifest] if manifest else []
    problems += _formats(sealed, raw)
    for run in sealed:
        assert run.seal is not None
        problems += _run(bundle, run, run.seal, schedules[run_id(run.arm, run.restart)])
    unsealed = [r for r in runs if r.seal is None]
    evidence = sealing_evidence(bundle, runs, raw)
    if evidence is None:
        check = Check("seals", "note", f"{UNSEALED} ({len(runs)} runs carry no seal)")
        if problems:
            check = Check.failed("seals", "integrity", check.summary, problems)
        return check
    ended = [r for r in unsealed if r.status != "running"]
    problems += [
        f"runs/{run_id(r.arm, r.restart)}: ended ({r.status}) but carries no seal, though "
        f"{evidence}: its seal was removed"
        for r in ended
    ]
    files = sum(len(r.seal.files) + 1 for r in sealed if r.seal)
    summary = f"{len(sealed)} runs sealed as they ended, {files} files checked against the seals"
    if not sealed and ended:
        summary = (
            f"no run carries a seal, though {evidence}: the seals were removed (a bundle "
            "recorded with seals cannot pass for one recorded before them)"
        )
    running = [run_id(r.arm, r.restart) for r in unsealed if r.status == "running"]
    details = [
        f"runs/{rid}: never ended (left running: killed), so never sealed" for rid in running
    ]
    if problems:
        return Check.failed("seals", "integrity", summary, problems)
    return Check("seals", "ok", summary, details=details)
