"""Benchmark: how long `diagnose verify` takes on each recorded sample, sealed as a bundle
recorded today is.

Usage::

    python benchmarks/verify_time.py [--samples NAME ...] [--out /tmp/verify-bench]

For each sample it copies the bundle, seals every run (as collect and sweep do when a run ends),
writes its analysis.json and renders its report PDF once (not timed), then times, as wall-clock
and as this process's CPU seconds (the machine is shared: CPU time is the steadier figure):

- `verify BUNDLE`: seals, schedule, findings recomputed from the logs, analysis.json;
- `verify BUNDLE report.pdf`: the same plus the printed root hash, the embedded analysis and
  every page's text against the report re-rendered from the bundle.

It prints one table row per sample, and the exit code each run gave (0 expected).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [
    "llamacpp-cpu-gemma3",
    "llamacpp-cpu-adaptive",
    "vllm-h200-mla",
    "vllm-h200-validation",
    "vllm-h200-gemma3",
]


def _sealed(sample: str, out: Path) -> Path:
    from diagnostic.analyse.core import analyse
    from diagnostic.analyse.verify import ANALYSIS_FILE
    from diagnostic.bundle.seal import seal_run
    from diagnostic.bundle.store import Bundle

    path = out / sample
    shutil.copytree(ROOT / "samples" / sample, path)
    bundle = Bundle.open(path, strict=False)
    bundle.write_manifest(bundle.manifest.model_copy(update={"bundle_id": uuid.uuid4().hex}))
    for run in bundle.runs():
        seal_run(bundle, run.arm, run.restart)
    bundle = Bundle.open(path, strict=False)
    bundle.write_json(ANALYSIS_FILE, analyse(bundle))
    return path


def _timed(bundle: Path, pdf: Path | None) -> tuple[float, float, int]:
    from diagnostic.verify import verify_bundle

    wall, cpu = time.perf_counter(), time.process_time()
    report = verify_bundle(bundle, pdf)
    return time.perf_counter() - wall, time.process_time() - cpu, report.exit_code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", nargs="*", default=SAMPLES)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="verify-bench-"))
    sys.path.insert(0, str(ROOT))
    from diagnostic.report import build_report

    _timed(_sealed(args.samples[0], out / "warm"), None)  # imports and first-use costs
    print("| sample | runs | files | verify BUNDLE wall / CPU s | verify BUNDLE PDF wall / CPU s |")
    print("| --- | --- | --- | --- | --- |")
    for sample in args.samples:
        bundle = _sealed(sample, out)
        pdf = build_report(bundle, out / f"{sample}.pdf", "pdf")
        runs = len(list((bundle / "runs").iterdir()))
        files = sum(1 for p in (bundle / "runs").rglob("*") if p.is_file())
        plain = _timed(bundle, None)
        whole = _timed(bundle, pdf)
        print(
            f"| {sample} | {runs} | {files} | {plain[0]:.1f} / {plain[1]:.1f} (exit {plain[2]}) "
            f"| {whole[0]:.1f} / {whole[1]:.1f} (exit {whole[2]}) |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
