"""`diagnose report --format csv`: requests.csv, restarts.csv and comparisons.csv of a real
sample bundle, checked against its analysis.json and its requests.jsonl files."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from diagnostic.analyse.requests import REQUEST_COLUMNS
from diagnostic.cli import main
from diagnostic.report.export import CSV_FILES

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "vllm-h200-mla"
KEYS = ["arm", "baseline", "workload", "concurrency", "kind"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """(bundle, CSV folder, analysis.json) of a copy of the MLA sample."""
    bundle = tmp_path_factory.mktemp("export") / "mla"
    shutil.copytree(SAMPLE, bundle)
    out = bundle.parent / "tables"
    runner = CliRunner()
    result = runner.invoke(main, ["report", str(bundle), "--format", "csv", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert all(f"Wrote {out / name}" in result.output for name in CSV_FILES)
    result = runner.invoke(main, ["report", str(bundle), "--format", "json"])
    assert result.exit_code == 0, result.output
    return bundle, out, json.loads((bundle / "analysis.json").read_text())


def _same(csv_value: Any, json_value: Any) -> bool:
    if json_value is None:
        return bool(pd.isna(csv_value))
    if isinstance(json_value, bool):
        return bool(csv_value) is json_value
    if isinstance(json_value, int | float):
        return float(csv_value) == float(json_value)  # exactly: CSV floats keep every digit
    return str(csv_value) == str(json_value)


def test_comparisons_csv_numbers_equal_analysis_json(
    exported: tuple[Path, Path, dict[str, Any]],
) -> None:
    _, out, analysis = exported
    frame = pd.read_csv(out / "comparisons.csv", keep_default_na=False, na_values=[""])
    assert len(frame) == len(analysis["comparisons"])
    rows = frame.set_index(KEYS)
    assert rows.index.is_unique
    checked = 0
    for comparison in analysis["comparisons"]:
        row = rows.loc[tuple(comparison[k] for k in KEYS)]
        flat = pd.json_normalize(comparison).iloc[0].to_dict()
        for column, value in flat.items():
            if column in KEYS or column not in row.index or isinstance(value, list):
                continue
            if isinstance(value, float) and math.isnan(value):
                value = None  # json_normalize's gap: the object was null
            assert _same(row[column], value), (column, row[column], value)
            checked += 1
    assert checked > 20 * len(analysis["comparisons"])
    for column in ("ratio", "ci_low", "ci_high", "verdict", "p_adjusted"):
        assert column in frame.columns


def test_requests_csv_has_one_row_per_record(exported: tuple[Path, Path, dict[str, Any]]) -> None:
    bundle, out, analysis = exported
    frame = pd.read_csv(out / "requests.csv", keep_default_na=False, na_values=[""])
    assert list(frame.columns) == [c for c in REQUEST_COLUMNS if c != "error"]
    lines = {
        run.parent.name: sum(1 for line in run.read_text().splitlines() if line.strip())
        for run in bundle.glob("runs/*/requests.jsonl")
    }
    assert len(frame) == sum(lines.values()) > 0
    per_run = frame.groupby(["arm", "restart"]).size()
    assert {f"{a}-r{r}": n for (a, r), n in per_run.items()} == lines
    # Exclusions counted by run and reason are the analysis' own.
    excluded = frame[frame["excluded"].notna()]
    counts = excluded.groupby(["arm", "restart", "excluded"]).size()
    expected = {
        (i["arm"], i["restart"], i["reason"]): i["count"] for i in analysis["exclusions"]["items"]
    }
    assert {k: int(v) for k, v in counts.items()} == expected
    # Measured requests per arm, workload and concurrency are those behind its estimate.
    measured = frame[frame["excluded"].isna()].groupby(["arm", "workload", "concurrency"]).size()
    for arm in analysis["arms"]:
        for w in arm["workloads"]:
            if w["workload"] != "all":
                n = measured.get((arm["id"], w["workload"], w["concurrency"]), 0)
                assert n == w["decode_tps"]["n_requests"], (arm["id"], w["workload"])
    assert frame.loc[frame["excluded"].isna(), "decode_tps"].gt(0).all()


def test_restarts_csv_are_the_restart_summaries(
    exported: tuple[Path, Path, dict[str, Any]],
) -> None:
    _, out, analysis = exported
    frame = pd.read_csv(out / "restarts.csv")
    summaries = pd.json_normalize(
        analysis["arms"], record_path=["workloads", "restarts"]
    ).sort_values(["arm", "workload", "concurrency", "restart"], ignore_index=True)
    frame = frame.sort_values(["arm", "workload", "concurrency", "restart"], ignore_index=True)
    assert len(frame) == len(summaries) > 0
    for column in ("n_requests", "mean", "median", "sd", "cv", "ttft_median_s"):
        pd.testing.assert_series_equal(frame[column], summaries[column], check_dtype=False)
    assert (frame["n_outliers"] == summaries["outliers"].map(len)).all()
    assert frame["restart"].dtype.kind == "i" and frame["block"].dtype.kind == "i"


def test_out_must_be_a_folder(exported: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    bundle, _, _ = exported
    target = tmp_path / "file.csv"
    target.write_text("x")
    result = CliRunner().invoke(main, ["report", str(bundle), "--format", "csv", "-o", str(target)])
    assert result.exit_code == 2
    text = " ".join(result.output.split())  # rich wraps the message
    assert text.startswith("Error:") and "not a folder" in text


def test_telemetry_csv_equals_the_analysis_windows(tmp_path: Path) -> None:
    """The H200 remedy sweep recorded NVML and host telemetry: telemetry.csv has one row per
    run, window, source and variable with the analysis' own median and worst; a bundle
    without telemetry writes no telemetry.csv (the MLA sample above)."""
    from diagnostic.analyse.core import analyse
    from diagnostic.bundle.store import Bundle
    from diagnostic.report.export import TELEMETRY_CSV, write_csv

    bundle = Bundle.open(SAMPLE.parent / "vllm-h200-mla-remedy")
    analysis = analyse(bundle)
    written = write_csv(bundle, analysis, tmp_path / "tables")
    assert tmp_path / "tables" / TELEMETRY_CSV in written
    frame = pd.read_csv(tmp_path / "tables" / TELEMETRY_CSV)
    assert analysis.telemetry is not None
    stats = [(w, s) for w in analysis.telemetry.windows for s in w.stats]
    assert len(frame[~frame.variable.str.startswith("reason.")]) == len(stats)
    rows = frame.set_index(["arm", "restart", "window", "source", "variable"])
    for w, s in stats[:: max(1, len(stats) // 50)]:
        row = rows.loc[(w.arm, w.restart, w.window, w.source, s.variable)]
        assert (row["median"], row["worst"], row["samples"]) == (s.median, s.worst, s.samples)
    clock = frame[(frame.source == "nvml") & (frame.variable == "sm_clock_mhz")]
    assert set(clock["median"]) == {1980.0}


def test_no_telemetry_no_telemetry_csv(exported: tuple[Path, Path, dict[str, Any]]) -> None:
    _, out, _ = exported
    assert not (out / "telemetry.csv").exists()
