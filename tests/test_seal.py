"""Seals and the root hash (bundle/seal.py): what a run's seal covers, the digests as docs/verify.md
"Seals and the root hash" defines them (recomputed here independently), and the seal collect and
sweep record and print as each run ends."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT, free_port
from verify_bundles import MLA, copy, sealed_copy

from diagnostic.bundle.seal import bundle_root, measured_seal, run_files, seal_run
from diagnostic.bundle.store import Bundle
from diagnostic.cli import main
from diagnostic.verify.integrity import check_seals

DIAGNOSE = str(ROOT / ".venv" / "bin" / "diagnose")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _seal_by_the_readme(run_dir: Path, manifest: Path, bundle_id: str | None) -> str:
    """A run's seal digest as docs/verify.md ("Seals") says, from the files alone (format /2:
    its sealed_at is covered)."""
    data = json.loads(manifest.read_text())
    schedule = _sha(_canonical({"plan": data["plan"], "collected": data.get("collected", [])}))
    run = json.loads((run_dir / "run.json").read_text())
    sealed_at = run.pop("seal")["sealed_at"]
    lines = {"run.json": _sha(_canonical(run))}
    for path in run_dir.rglob("*"):
        if path.is_file() and path.name != "run.json" and not path.name.startswith("."):
            lines[path.relative_to(run_dir).as_posix()] = _sha(path.read_bytes())
    text = f"diagnose-seal/2\nbundle\t{bundle_id or '-'}\nsealed_at\t{sealed_at}\n"
    text += f"schedule\t{schedule}\n"
    text += "".join(f"{p}\t{d}\n" for p, d in sorted(lines.items()))
    return _sha(text.encode())


def test_a_seal_covers_every_file_of_the_run_as_the_readme_says(tmp_path: Path) -> None:
    bundle_path = sealed_copy(MLA, tmp_path / "b")
    bundle = Bundle.open(bundle_path, strict=False)
    bundle_id = bundle.manifest.bundle_id
    assert bundle_id and len(bundle_id) == 32
    for run in bundle.runs():
        assert run.seal is not None and run.seal.bundle_id == bundle_id
        folder = bundle.run_dir(run.arm, run.restart)
        assert set(run.seal.files) == {
            p.name for p in folder.iterdir() if p.is_file() and p.name != "run.json"
        }
        assert run.seal.digest == _seal_by_the_readme(
            folder, bundle_path / "manifest.json", bundle_id
        )
        again = measured_seal(bundle, run, bundle_id=bundle_id, like=run.seal)
        assert again.digest == run.seal.digest


def test_the_manifest_seal_as_the_readme_says(tmp_path: Path) -> None:
    """manifest.json's own seal covers every other field of it, as docs/verify.md says."""
    bundle_path = sealed_copy(MLA, tmp_path / "b")
    data = json.loads((bundle_path / "manifest.json").read_text())
    seal = data.pop("seal")
    assert data["sealing"] == "diagnose-seal/2" and seal["format"] == "diagnose-manifest/1"
    text = (
        f"diagnose-manifest/1\nsealed_at\t{seal['sealed_at']}\nmanifest\t{_sha(_canonical(data))}\n"
    )
    assert seal["digest"] == _sha(text.encode())


def test_the_root_hash_as_the_readme_says(tmp_path: Path) -> None:
    bundle_path = sealed_copy(MLA, tmp_path / "b")
    bundle = Bundle.open(bundle_path, strict=False)
    root = bundle_root(bundle)
    text = (
        "diagnose-root/1\n"
        + f"manifest.json\t{_sha((bundle_path / 'manifest.json').read_bytes())}\n"
    )
    seals = {f"{r.arm}-r{r.restart}": r.seal.digest for r in bundle.runs() if r.seal}
    text += "".join(f"runs/{rid}\t{d}\n" for rid, d in sorted(seals.items()))
    assert root.digest == _sha(text.encode()) and root.sealed and not root.unsealed
    # Unsealed (as recorded): the same definition over what the files give now.
    plain = Bundle.open(MLA, strict=False)
    again = bundle_root(plain)
    assert again.unsealed == tuple(sorted(again.runs)) and not again.sealed
    assert again.digest == bundle_root(plain).digest  # nothing in it depends on the moment


def test_a_seal_never_goes_through_the_redactor(tmp_path: Path) -> None:
    """A file named like a secret (a log source `api-token`) keeps its name and digest."""
    path = copy(MLA, tmp_path / "b")
    bundle = Bundle.open(path, strict=False)
    (bundle.run_dir("fa-base", 0) / "logs").mkdir()
    (bundle.run_dir("fa-base", 0) / "logs" / "api-token.log").write_text("password: hunter2\n")
    sealed = seal_run(bundle, "fa-base", 0)
    assert sealed.seal is not None and "logs/api-token.log" in sealed.seal.files
    stored = json.loads((bundle.run_dir("fa-base", 0) / "run.json").read_text())
    assert stored["seal"] == sealed.seal.model_dump(mode="json")
    assert "logs/api-token.log" in run_files(bundle, "fa-base", 0)


def test_dot_files_a_file_browser_leaves_are_not_sealed(tmp_path: Path) -> None:
    path = sealed_copy(MLA, tmp_path / "b")
    (path / "runs" / "fa-base-r0" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    bundle = Bundle.open(path, strict=False)
    assert check_seals(bundle, bundle.runs()).status == "ok"


def _failing_plan(tmp_path: Path, restarts: int) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(
        f"[plan]\nrestarts = {restarts}\nrequests = 1\nwarmup = 0\nmax_tokens = 8\n"
        f'workloads = ["code"]\nport = {free_port()}\norder = "sequential"\n'
        '[[arms]]\nname = "baseline"\nlaunch = "echo boom >&2; exit 4 # {port}"\n'
    )
    return path


def test_sweep_seals_each_run_as_it_ends_and_records_why_it_stopped(tmp_path: Path) -> None:
    """A start whose server never comes up still ends: its run (the launch's log) is sealed and
    the seal printed; --stop-on-failure records why the starts after it were not run."""
    out = tmp_path / "b"
    plan = _failing_plan(tmp_path, restarts=3)
    args = [DIAGNOSE, "sweep", str(plan), "-o", str(out), "--stop-on-failure"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    bundle = Bundle.open(out)
    (run,) = bundle.runs()
    assert run.status == "failed" and run.seal is not None
    said = " ".join(result.stderr.split())  # printed above the bars, wrapped to the terminal
    assert f"sealed baseline-r0 (failed): 1 files, seal sha256 {run.seal.digest}" in said
    time_plan = bundle.manifest.time_plan
    assert time_plan is not None and time_plan.ended_early is not None
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    assert "OK   seals     1 runs sealed as they ended" in verified.output
    assert "runs/baseline-r1: not run: --stop-on-failure: baseline r0 failed" in verified.output


@pytest.mark.engine
def test_collect_seals_the_run_and_prints_the_seal(tmp_path: Path, llama_server: str) -> None:
    out = tmp_path / "b"
    args = [llama_server, "-o", str(out), "--workloads", "code", "--requests", "2"]
    args += ["--warmup", "0", "--max-tokens", "8"]
    result = CliRunner().invoke(main, ["collect", *args])
    assert result.exit_code == 0, result.output
    bundle = Bundle.open(out)
    (run,) = bundle.runs()
    assert run.seal is not None and "requests.jsonl" in run.seal.files
    assert (
        f"sealed baseline-r0 (ok): {len(run.seal.files)} files, seal sha256 {run.seal.digest}"
        in " ".join(result.output.split())
    )
    assert bundle.manifest.collected == ["baseline-r0"]
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    assert "CONSISTENT, NOT PROVEN: the bundle and what was made from it agree" in verified.output
