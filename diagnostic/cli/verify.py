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
    0: "VERIFIED",
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
    "--public-key",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The consultancy's ed25519 public key (PEM or OpenSSH .pub): check the report's "
    "signature of the root hash with it.",
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
      signature  the root's ed25519 signature, with --public-key

    A bundle recorded before sealing (five of the samples in samples/) is said to be one:
    "recorded before sealing: integrity not provable, consistency checked".

    Figures count as equal within a relative 1e-9; created_at, tool_version and bundle (the
    path) are not compared. Differences are named by path, e.g. `comparisons[arm=ngram-k3,
    baseline=base, workload=code, concurrency=1, kind=spec].ci_low: stored 1.0312, recomputed
    1.0298`, list items matched by what identifies them, not by position.

    \b
    Exit codes (the highest that applies):
      0  verified: everything checked holds
      1  the deliverable (PDF, analysis.json, findings.json) does not follow from the bundle
      2  an input cannot be read
      3  the bundle's integrity fails: it is not as it was recorded
      4  the report PDF was made from another bundle

    \b
    Examples:
      diagnose verify acme                                   # the bundle, its analysis.json
      diagnose verify acme acme-report.pdf                   # the deliverable itself
      diagnose verify acme acme-report.pdf --public-key consultancy.pub
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
    code = report.exit_code
    if code:
        names = ", ".join(c.name for c in report.failures)
        other = next((c.summary for c in report.failures if c.fault == "another-bundle"), None)
        which = f"; {other.removeprefix('the PDF came from another bundle: ')}" if other else ""
        return f"{_VERDICT[code]} (failed: {names}{which})."
    if not report.root.sealed:
        return f"{_VERDICT[0]}, consistency only: the bundle was recorded before sealing."
    return f"{_VERDICT[0]}: every run sealed as it ended, and all that was checked holds."


def _say(line: str) -> None:
    """One line on stdout, unwrapped and taken literally (paths hold brackets)."""
    console.print(line, highlight=False, markup=False, soft_wrap=True)
