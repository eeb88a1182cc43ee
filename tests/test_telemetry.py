

def test_a_bundle_with_telemetry_verifies_with_its_report(collected: Path, tmp_path: Path) -> None:
    """Seals cover the telemetry files; the report's analysis (with its telemetry chapter)
    is recomputed from the bundle and agrees."""
    pdf = tmp_path / "r.pdf"
    made = CliRunner().invoke(main, ["report", str(collected), "-o", str(pdf)])
    assert made.exit_code == 0, made.output
    checked = CliRunner().invoke(main, ["verify", str(collected), str(pdf)])
    assert checked.exit_code == 0, checked.output
    (collected / "runs" / "baseline-r0" / "telemetry" / "host.csv").write_text("tampered\n")
    tampered = CliRunner().invoke(main, ["verify", str(collected)])
    assert tampered.exit_code == 3 and "telemetry/host.csv" in tampered.output
