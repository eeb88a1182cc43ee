"""The tamperings of issue 46, done to copies of a real recording: samples/vllm-cpu-0.32 (vLLM
0.32 on a CPU, 2 arms × 3 restarts in blocks), sealed as a bundle recorded today is (manifest
`sealing` and seal, seals of format /2), and to the signed report `diagnose report --sign-key`
makes of it. Each tampering is what an attacker with the bundle, the tool and a PDF editor does:
edit and leave, edit and seal again with the tool's own code, strip, roll back, graft."""

from __future__ import annotations

import io
import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pypdf import PdfWriter
from pypdf.annotations import FreeText
from pypdf.generic import ArrayObject, DecodedStreamObject, NameObject
from verify_bundles import speed_up  # every chunk of an arm later: its decode faster

from diagnostic.analyse.core import analyse
from diagnostic.analyse.verify import ANALYSIS_FILE
from diagnostic.bundle.seal import seal_digest, seal_run
from diagnostic.bundle.store import Bundle
from diagnostic.schema.bundle import SEAL_FORMAT
from diagnostic.verify.schedule import planned

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "vllm-cpu-0.32"
SPEC = "ngram-k3"

Tamper = Callable[[Path], None]


def recorded_today(dest: Path) -> Path:
    """A copy of the sample as a bundle recorded today: its own bundle id and `sealing` given
    when it is created, the manifest sealed at each write, every run sealed (format /2) as it
    ended. Its /metrics snapshots are left out (reading 36 of them is most of what opening the
    bundle costs, and no attack here needs them), findings.json too (recomputed where needed)."""
    shutil.copytree(SAMPLE, dest)
    (dest / "findings.json").unlink()
    for snapshot in dest.glob("runs/*/*.prom"):
        snapshot.unlink()
    bundle = Bundle.open(dest, strict=False)
    update = {"sealing": SEAL_FORMAT, "bundle_id": uuid.uuid4().hex}
    bundle.write_manifest(bundle.manifest.model_copy(update=update))
    for run in bundle.runs():
        seal_run(bundle, run.arm, run.restart)
    return dest


# -- raw edits ------------------------------------------------------------------------------


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    data = _json(path)
    edit(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _runs(path: Path) -> list[Path]:
    return sorted((path / "runs").iterdir())


def write_analysis(path: Path) -> None:
    """analysis.json regenerated, as `report --format json` writes it."""
    bundle = Bundle.open(path, strict=False)
    bundle.write_json(ANALYSIS_FILE, analyse(bundle))


def reseal(path: Path, *runs: str) -> None:
    """The tool's own sealing code run again after an edit (every run when none is named)."""
    bundle = Bundle.open(path, strict=False)
    bundle.write_manifest(bundle.manifest)  # its seal taken again
    for run in bundle.runs():
        if not runs or f"{run.arm}-r{run.restart}" in runs:
            seal_run(bundle, run.arm, run.restart)


def strip_seals(path: Path) -> None:
    for run in _runs(path):
        _edit_json(run / "run.json", lambda d: d.pop("seal", None))


# -- the bundle's tamperings ---------------------------------------------------------------


def seals_stripped_and_a_run_3x_faster(path: Path) -> None:
    strip_seals(path)
    speed_up(path, SPEC, 1 / 3)
    write_analysis(path)


def forged_as_recorded_before_sealing(path: Path) -> None:
    """Everything that says the bundle was sealed removed: it reads as a format-2 bundle."""
    seals_stripped_and_a_run_3x_faster(path)

    def old(data: dict[str, Any]) -> None:
        for key in ("sealing", "seal", "bundle_id", "collected"):
            data.pop(key, None)
        data["schema_version"] = 2

    _edit_json(path / "manifest.json", old)
    for run in _runs(path):
        _edit_json(run / "run.json", lambda d: d.update(schema_version=2))


def rolled_back_to_a_copy_taken_mid_sweep(path: Path) -> None:
    """The bundle as it was while its fifth start ran: four runs sealed, the fifth running,
    the sixth not started (a copy taken then, put back after the report was made)."""
    bundle = Bundle.open(path, strict=False)
    starts = planned(bundle.manifest) or []
    ids = [f"{s.arm}-r{s.restart}" for s in starts]
    running = path / "runs" / ids[4]
    _edit_json(running / "run.json", lambda d: (d.pop("seal"), d.update(status="running")))
    for made_later in ("findings.json", "analysis.json"):  # written after the sweep, by report
        (path / made_later).unlink(missing_ok=True)
    requests = running / "requests.jsonl"
    requests.write_text("".join(requests.read_text().splitlines(keepends=True)[:2]))
    shutil.rmtree(path / "runs" / ids[5])
    bundle = Bundle.open(path, strict=False)
    bundle.write_manifest(bundle.manifest)  # sealed as the sweep wrote it then


def runs_swapped_and_sealed_again(path: Path) -> None:
    base, spec = path / "runs" / "base-r0", path / "runs" / f"{SPEC}-r0"
    a, b = (base / "requests.jsonl").read_text(), (spec / "requests.jsonl").read_text()
    (base / "requests.jsonl").write_text(b.replace(f'"arm": "{SPEC}"', '"arm": "base"'))
    (spec / "requests.jsonl").write_text(a.replace('"arm": "base"', f'"arm": "{SPEC}"'))
    reseal(path)


def run_replaced_from_another_bundle_and_sealed_again(path: Path) -> None:
    other = recorded_today(path.parent / f"{path.name}-other")
    speed_up(other, SPEC, 1 / 3)
    shutil.rmtree(path / "runs" / f"{SPEC}-r1")
    shutil.copytree(other / "runs" / f"{SPEC}-r1", path / "runs" / f"{SPEC}-r1")
    reseal(path)


def plan_edited_and_sealed_again(path: Path) -> None:
    _edit_json(path / "manifest.json", lambda d: d["plan"].update(margin=0.2))
    reseal(path)


def restart_hidden_as_failed_and_sealed_again(path: Path) -> None:
    _edit_json(
        path / "runs" / f"{SPEC}-r2" / "run.json",
        lambda d: d.update(status="failed", failure="the server stopped answering"),
    )
    reseal(path)


def sealed_at_edited(path: Path) -> None:
    _edit_json(path / "runs" / "base-r1" / "run.json", lambda d: d["seal"].update(sealed_at="x"))


def time_plan_edited(path: Path) -> None:
    _edit_json(path / "manifest.json", lambda d: d["time_plan"].update(took_s=600.0))


def created_at_edited(path: Path) -> None:
    _edit_json(path / "manifest.json", lambda d: d.update(created_at="2027-01-01T00:00:00+00:00"))


def engagement_edited(path: Path) -> None:
    _edit_json(path / "manifest.json", lambda d: d["engagement"].update(client="Other Corp"))


def manifest_seal_stripped(path: Path) -> None:
    _edit_json(path / "manifest.json", lambda d: d.pop("seal"))


def sealing_field_removed(path: Path) -> None:
    _edit_json(path / "manifest.json", lambda d: d.pop("sealing"))


def one_seal_stripped(path: Path) -> None:
    _edit_json(path / "runs" / "base-r2" / "run.json", lambda d: d.pop("seal"))


def seal_rewritten_in_format_1(path: Path) -> None:
    """A seal made by hand in the older format, which leaves sealed_at out: its digest holds."""

    def edit(data: dict[str, Any]) -> None:
        seal = data["seal"]
        seal["format"], seal["sealed_at"] = "diagnose-seal/1", "2000-01-01T00:00:00+00:00"
        fields = {k: seal[k] for k in ("bundle_id", "schedule", "files", "run_json")}
        seal["digest"] = seal_digest(**fields, sealed_at="-", format="diagnose-seal/1")

    _edit_json(path / "runs" / "base-r0" / "run.json", edit)


def requests_3x_faster_left_unsealed(path: Path) -> None:
    speed_up(path, SPEC, 1 / 3)
    write_analysis(path)


def run_deleted(path: Path) -> None:
    shutil.rmtree(path / "runs" / f"{SPEC}-r2")


def run_copied_in_from_another_bundle(path: Path) -> None:
    other = recorded_today(path.parent / f"{path.name}-other")
    shutil.rmtree(path / "runs" / "base-r1")
    shutil.copytree(other / "runs" / "base-r1", path / "runs" / "base-r1")


def run_json_edited(path: Path) -> None:
    _edit_json(path / "runs" / "base-r0" / "run.json", lambda d: d.update(status="failed"))


# -- the PDF's tamperings ------------------------------------------------------------------


def _rewritten(data: bytes, edit: Callable[[PdfWriter], None], *, incremental: bool) -> bytes:
    writer = PdfWriter(io.BytesIO(data), incremental=True) if incremental else None
    writer = writer or PdfWriter(clone_from=io.BytesIO(data))
    edit(writer)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _annotation(writer: PdfWriter) -> None:
    writer.add_annotation(0, FreeText(text="WIN 3.1x", rect=(60, 560, 260, 640)))


def _white_box(writer: PdfWriter) -> None:
    page = writer.pages[0]
    box = DecodedStreamObject()
    box.set_data(b"q 1 1 1 rg 40 80 520 300 re f Q")
    contents = page[NameObject("/Contents")]
    current = contents.get_object()
    items = list(current) if isinstance(current, ArrayObject) else [contents]
    page[NameObject("/Contents")] = ArrayObject([*items, writer._add_object(box)])


def _figures_removed(writer: PdfWriter) -> None:
    writer.remove_images()
    for page in writer.pages:
        resources = page["/Resources"].get_object()
        if "/XObject" in resources:
            del resources[NameObject("/XObject")]


def _attachment(writer: PdfWriter) -> None:
    writer.add_attachment("readme.exe", b"MZ\x90\x00 not a report")


def _metadata(writer: PdfWriter) -> None:
    writer.add_metadata({"/Title": "Speculative decoding: 3.1x WIN", "/Author": "Consultancy"})


PDF_EDITS: dict[str, Callable[[PdfWriter], None]] = {
    "a FreeText annotation 'WIN 3.1x' on page 1": _annotation,
    "a white rectangle drawn over a figure": _white_box,
    "every figure removed": _figures_removed,
    "an attachment readme.exe added": _attachment,
    "Title and Author changed": _metadata,
}


def pdf_edited(data: bytes, name: str, *, incremental: bool = False) -> bytes:
    """The PDF rewritten by a PDF library with one edit (or the edit appended as an
    incremental update, the original bytes kept before it)."""
    return _rewritten(data, PDF_EDITS[name], incremental=incremental)


def bytes_appended(data: bytes) -> bytes:
    return data + b"% WIN 3.1x\n"


def signature_line_stripped(data: bytes) -> bytes:
    cut = data.rfind(b"\n%diagnose-signature ")
    return data[: cut + 1]


def byte_changed_in_place(data: bytes) -> bytes:
    """One byte changed in place, where no reader looks (the header's binary comment line):
    the same length, every offset the same, the document the same."""
    at = data.index(b"\n%", 5) + 2
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]
