"""Bundles for the verify tests: copies of the recorded samples, sealed as a bundle recorded
today is, and the tamperings of issue 34 done to them (the samples themselves are never written)."""

from __future__ import annotations

import io
import json
import shutil
import uuid
from pathlib import Path

from pypdf import PdfReader, PdfWriter

from diagnostic.analyse.core import analyse
from diagnostic.analyse.verify import ANALYSIS_FILE
from diagnostic.bundle.seal import seal_run
from diagnostic.bundle.store import Bundle
from diagnostic.schema.bundle import SEAL_FORMAT

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
MLA = SAMPLES / "vllm-h200-mla"
SPEC = "triton-ngram-k3"  # the MLA sample's arm that loses (0.56×) under a capture downgrade


def copy(sample: Path, dest: Path) -> Path:
    """A plain copy: recorded before sealing, as the samples are."""
    shutil.copytree(sample, dest)
    return dest


def seal_all(path: Path) -> Path:
    """Seal every run as collect and sweep do when a run ends (a bundle_id and `sealing` first,
    as a bundle created today has them)."""
    bundle = Bundle.open(path, strict=False)
    if bundle.manifest.bundle_id is None:
        update = {"bundle_id": uuid.uuid4().hex, "sealing": SEAL_FORMAT}
        bundle.write_manifest(bundle.manifest.model_copy(update=update))
    for run in bundle.runs():
        seal_run(bundle, run.arm, run.restart)
    return path


def sealed_copy(sample: Path, dest: Path) -> Path:
    """A copy of a sample sealed as if it had been recorded today."""
    return seal_all(copy(sample, dest))


def write_analysis(path: Path) -> None:
    """analysis.json as `report --format json` writes it (an attacker regenerates it)."""
    bundle = Bundle.open(path, strict=False)
    bundle.write_json(ANALYSIS_FILE, analyse(bundle))


def speed_up(path: Path, arm: str = SPEC, factor: float = 0.45) -> None:
    """Raw requests edited consistently: every chunk of the arm arrives `factor` times as
    late, so its decode speed is 1/factor times the recorded one (the MLA sample's 0.56×
    reads about 1.2×)."""
    for requests in sorted(path.glob(f"runs/{arm}-r*/requests.jsonl")):
        lines = []
        for line in requests.read_text().splitlines():
            record = json.loads(line)
            record["chunk_times_s"] = [t * factor for t in record["chunk_times_s"]]
            for key in ("ttft_s", "e2e_s"):
                if record.get(key) is not None:
                    record[key] *= factor
            lines.append(json.dumps(record))
        requests.write_text("\n".join(lines) + "\n")


def hide_downgrade(path: Path, arm: str = SPEC) -> None:
    """Log lines edited so that `check` no longer finds the capture downgrade: vLLM's warning
    deleted, the capture lines made to say FULL_AND_PIECEWISE."""
    for log in sorted(path.glob(f"runs/{arm}-r*/server.log")):
        lines = [
            line.replace(b"PIECEWISE=51", b"FULL_AND_PIECEWISE=51").replace(
                b"prefill-decode, PIECEWISE)", b"prefill-decode, FULL_AND_PIECEWISE)"
            )
            for line in log.read_bytes().split(b"\n")
            if b"is not supported with spec-decode" not in line
        ]
        log.write_bytes(b"\n".join(lines))


def graft(pages_of: Path, attachments_of: Path, out: Path) -> Path:
    """A PDF with the pages of one report and the attachments of another: forged pages that
    carry the genuine analysis.json (and deliverable.json)."""
    writer = PdfWriter()
    for page in PdfReader(pages_of).pages:
        writer.add_page(page)
    for name, contents in PdfReader(attachments_of).attachments.items():
        writer.add_attachment(name, contents[0])
    with io.BytesIO() as buffer:
        writer.write(buffer)
        out.write_bytes(buffer.getvalue())
    return out
