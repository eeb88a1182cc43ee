"""Benchmark: build time of `diagnose report` for a full sweep bundle vs WeasyPrint alone.

Usage::

    python benchmarks/report_build.py [--repeat 3] [--out /tmp/report-bench] [--keep]

Builds a synthetic full sweep bundle with diagnostic.bundle (tests/report_bundles.py): 8 arms
(baseline, an A/A repeat and n-gram at k = 1, 2, 3, 4, 6, 8) × 5 restarts × 2 workloads × 16
measured requests (+1 warm-up), vLLM speculation counters, and check's findings.json. Then it
times, each the best of --repeat runs:

- `analyse(bundle)` alone;
- the full `build_report(bundle, out.pdf)` (open, analyse, context + charts, HTML, PDF);
- the context and HTML alone (analysis given: charts, formatting, jinja2);
- WeasyPrint rendering that same HTML to PDF alone (`render_pdf`),

and prints a table with the ratio full build / WeasyPrint alone (goal ≤ 3×).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from report_bundles import check_report, sweep_bundle  # noqa: E402

from diagnostic.analyse.core import analyse  # noqa: E402
from diagnostic.bundle.store import Bundle  # noqa: E402
from diagnostic.report import build_report, render_html, render_pdf  # noqa: E402
from diagnostic.report.build import report_context  # noqa: E402

KS = (1, 2, 3, 4, 6, 8)
RESTARTS, REQUESTS = 5, 16


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    """The fastest of `repeat` wall-clock timings of fn() (seconds)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    """Build the bundle, time the four steps, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timings per step (best is kept)")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: a temp one)")
    parser.add_argument("--keep", action="store_true", help="keep the bundle and the report")
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="report-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(work, args.repeat)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path, repeat: int) -> None:
    """Time the steps on a fresh full sweep bundle in `work`."""
    start = time.perf_counter()
    bundle = sweep_bundle(work / "bundle", ks=KS, restarts=RESTARTS, requests=REQUESTS)
    bundle.write_json("findings.json", check_report(bundle))
    built = time.perf_counter() - start
    n_requests = sum(len(bundle.read_requests(r.arm, r.restart).records) for r in bundle.runs())
    print(f"bundle: {len(KS) + 2} arms × {RESTARTS} restarts × 2 workloads × {REQUESTS} "
          f"requests (+1 warm-up) = {n_requests} records, built in {built:.1f} s")  # fmt: skip
    opened = Bundle.open(bundle.path)
    analysis = analyse(opened)
    html = render_html(report_context(opened, analysis=analysis))
    pdf = work / "report.pdf"
    rows = [
        ("analyse(bundle) alone", best_of(repeat, lambda: analyse(Bundle.open(bundle.path)))),
        ("full build_report → PDF", best_of(repeat, lambda: build_report(bundle.path, pdf))),
        ("context + HTML (analysis given)",
         best_of(repeat, lambda: render_html(report_context(opened, analysis=analysis)))),
        ("WeasyPrint alone (same HTML → PDF)",
         best_of(repeat, lambda: render_pdf(html, work / "alone.pdf"))),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    print(f"{'step':<{width}}  seconds (best of {repeat})")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:8.2f}")
    ratio = rows[1][1] / rows[3][1]
    print(f"{'ratio full build / WeasyPrint alone':<{width}}  {ratio:8.2f}×  (goal ≤ 3×)")
    print(f"HTML {len(html) / 1024:.0f} KiB, PDF {pdf.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
