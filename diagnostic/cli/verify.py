"""`diagnose verify`: recompute a bundle's analysis and compare a stored one (JSON or PDF)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from diagnostic.analyse.verify import ANALYSIS_FILE, verify
from diagnostic.cli._common import console
from diagnostic.errors import DiagnosticError

SHOWN = 50  # differences printed without --all


@click.command("verify")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.argument("stored", required=False, type=click.Path(path_type=Path))
@click.option("--all", "show_all", is_flag=True, help=f"Print every difference, not {SHOWN}.")
def command(bundle: Path, stored: Path | None, show_all: bool) -> None:
    """Check that a report's figures follow from the bundle: recompute the analysis from the
    bundle's raw files and compare every figure of STORED with it.

    STORED is an analysis.json or a report PDF (which embeds the analysis.json it was made
    from); without it, BUNDLE/analysis.json. Each differing figure is named by its path, e.g.
    `comparisons[arm=ngram-k3, baseline=base, workload=code, concurrency=1, kind=spec].ci_low:
    stored 1.0312, recomputed 1.0298`. List items are matched by what identifies them (arms by
    id; comparisons by arm, baseline, workload, concurrency and kind; …), so a reordering is no
    difference but a missing or extra item is.

    Numbers count as equal within a relative tolerance of 1e-9 (JSON keeps every digit of a
    float, so a stored figure reads back exactly; the tolerance only absorbs last-digit
    rounding of another platform's maths libraries); strings and booleans must be equal.
    Ignored, as they differ between runs: created_at, tool_version and bundle (the path).

    Exit 0 when every figure matches, 1 when any differs, 2 when an input cannot be read.

    \b
    Examples:
      diagnose verify acme                       # acme/analysis.json
      diagnose verify acme acme-report.pdf       # the deliverable itself
      diagnose verify acme analysis.json --all
    """
    if stored is None:
        stored = bundle / ANALYSIS_FILE
        if not stored.is_file():
            raise DiagnosticError(
                f"{bundle} has no {ANALYSIS_FILE}: pass the analysis.json or report PDF to "
                f"verify, e.g. `diagnose verify {bundle} report.pdf`"
            )
    result = verify(bundle, stored)
    if result.stored_version and result.stored_version != result.recomputed_version:
        _say(
            f"Note: {stored} was made by diagnose {result.stored_version}, recomputed with "
            f"{result.recomputed_version}."
        )
    if result.ok:
        _say(
            f"OK: all {result.compared} figures of {stored} equal the analysis recomputed "
            f"from {bundle} (numbers within a relative 1e-9)."
        )
        return
    shown = result.differences if show_all else result.differences[:SHOWN]
    for difference in shown:
        _say(str(difference))
    if len(result.differences) > len(shown):
        _say(f"… and {len(result.differences) - len(shown)} more (--all prints every one)")
    _say(
        f"DIFFERS: {len(result.differences)} of {result.compared} figures of {stored} differ "
        f"from the analysis recomputed from {bundle}."
    )
    sys.exit(1)


def _say(line: str) -> None:
    """One line on stdout, unwrapped and taken literally (paths hold brackets)."""
    console.print(line, highlight=False, markup=False, soft_wrap=True)
