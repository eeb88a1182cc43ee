"""`diagnose verify`: a bundle's integrity, and whether a report (PDF or JSON) follows from it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from diagnostic.cli._common import RichReporter, console
from diagnostic.verify import Check, VerifyReport, verify_bundle

SHOWN = 50  # problems printed per check without --all
_MARK = {"ok": "OK  ", "failed": "FAIL", "note": "NOTE", "skipped": "SKIP"}
_VERDICT = {
    1: "DIFFERS (exit 1): the deliverable does not follow from the bundle; ask for a report "
    "rendered again from this bundle, or refuse it",
    3: "INTEGRITY FAILS (exit 3): the bundle is not as it was recorded (files changed after "
    "their run was sealed, a planned run gone, a run from elsewhere, a bad signature); compare "
    "with the seals noted on site and refuse the figures until explained",
    4: "ANOTHER BUNDLE (exit 4): the report PDF was made from another bundle; verify it "
    "against the bundle it names",
}


@click.command("verify")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.argument("stored", required=False, type=click.Path(path_type=Path))
@click.option(
    "--key",
    "--public-key",
    "public_key",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The consultancy's ed25519 public key (PEM or OpenSSH .pub), pinned: the report PDF "
    "must be signed with it, byte for byte, and its root hash too (--public-key: the same).",
)
@click.option("--all", "show_all", is_flag=True, help=f"Print every problem, not {SHOWN} a check.")
def command(bundle: Path, stored: Path | None, public_key: Path | None, show_all: bool) -> None:
    """Check a bundle's integrity and that a report follows from it; name whatever fails.

    \b
    The bundle (always):
      seals      every file of every run against the sha256 its run.json recorded when the
                 run ended; a file changed, removed or added since, a run sealed in another
                 bundle, a plan edited after the runs, a seal edited
      schedule   every run the manifest planned is there, or its absence is recorded with a
                 reason (failed, stopped at a look, interrupted, --stop-on-failure); no run
                 the plan did not plan
      findings   findings.json against the findings recomputed from the logs
    STORED, a report PDF or an analysis.json (default: BUNDLE/analysis.json when present):
      root       the root hash the report prints against the bundle's (a report of another
                 bundle is said to be one)
      analysis   every figure against the analysis recomputed from the raw requests
      pages      every page's text against the report re-rendered from the bundle: pages made
                 from a tampered bundle show, whatever analysis.json the PDF embeds
      document   every page's drawing, its annotations, the attachments and the metadata
                 against the report re-rendered from the bundle
      signature  the PDF's ed25519 signature of its bytes and of the root hash; with --key,
                 that the consultancy's pinned key made them

    A bundle recorded before sealing (five of the samples in samples/) is said to be one:
    "recorded before sealing: integrity not provable, consistency checked".

    Figures count as equal within a relative 1e-9; created_at, tool_version and bundle (the
    path) are not compared. Differences are named by path, e.g. `comparisons[arm=ngram-k3,
    baseline=base, workload=code, concurrency=1, kind=spec].ci_low: stored 1.0312, recomputed
    1.0298`, list items matched by what identifies them, not by position.

    The last line says VERIFIED only when the report is byte for byte the one the pinned key
    signed and was made from this bundle as it is now; else, when nothing fails, it says that
    everything agrees but that anyone could have produced a consistent bundle.

    \b
    Exit codes (the highest that applies):
      0  everything checked holds (VERIFIED with --key, else consistent)
      1  the deliverable (PDF, analysis.json, findings.json) does not follow from the bundle
      2  an input cannot be read
      3  the bundle's integrity fails: it is not as it was recorded
      4  the report PDF was made from another bundle

    \b
    Examples:
      diagnose verify acme                                   # the bundle, its analysis.json
      diagnose verify acme acme-report.pdf                   # the deliverable itself
      diagnose verify acme acme-report.pdf --key consultancy.pub
    """
    with RichReporter() as reporter:
        report = verify_bundle(bundle, stored, public_key=public_key, reporter=reporter)
    _say(f"Bundle {report.bundle}: {len(report.root.runs)} runs, root sha256 {report.root.digest}")
    for check in report.checks:
        _print_check(check, show_all)
    _say(_verdict(report))
    sys.exit(report.exit_code)


def _print_check(check: Check, show_all: bool) -> None:
    _say(f"  {_MARK[check.status]} {check.name:<9} {check.summary}")
    lines = check.problems + check.details
    shown = lines if show_all else lines[:SHOWN]
    for line in shown:
        _say(f"         {line}")
    if len(lines) > len(shown):
        _say(f"         … and {len(lines) - len(shown)} more (--all prints every one)")


def _verdict(report: VerifyReport) -> str:
    """The last line: what failed, or what holding proves; VERIFIED only when the report is
    the one the pinned key signed, byte for byte, and was made from this bundle as it is."""
    code = report.exit_code
    if code:
        names = ", ".join(c.name for c in report.failures)
        other = next((c.summary for c in report.failures if c.fault == "another-bundle"), None)
        which = f"; {other.removeprefix('the PDF came from another bundle: ')}" if other else ""
        return f"{_VERDICT[code]} (failed: {names}{which})."
    signature = next((c for c in report.checks if c.name == "signature"), None)
    if signature is not None and signature.status == "ok":
        how = "every run sealed as it ended" if report.root.sealed else "recorded before sealing"
        return (
            f"VERIFIED: the report is byte for byte the one the key given signed, made from "
            f"this bundle as it is now ({how}), and all that was checked holds."
        )
    when = "" if report.root.sealed else ", recorded before sealing,"
    return (
        f"CONSISTENT, NOT PROVEN: the bundle{when} and what was made from it agree, but "
        "anyone could have produced a consistent bundle; only the report signed with the "
        "consultancy's key (--key KEY.pub), or the seals and root hash noted on site, tie it "
        "to what was measured."
    )


def _say(line: str) -> None:
    """One line on stdout, unwrapped and taken literally (paths hold brackets)."""
    console.print(line, highlight=False, markup=False, soft_wrap=True)
