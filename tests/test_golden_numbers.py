"""Golden numbers (issue 18): the sample bundles' figures, computed by an independent script.

tests/golden/independent.py implements the analysis rules (tests/golden/README.md) from the raw
bundle files with numpy and scipy only. (a) The checked-in expected files equal what the
script computes now; (b) the package's analysis gives the same figures (rel. tol. 1e-6; verdicts,
booleans, k and labels exactly), every mismatch of a sample reported in one assertion.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from diagnostic.bundle.store import Bundle

GOLDEN = Path(__file__).resolve().parent / "golden"
_spec = importlib.util.spec_from_file_location("golden_independent", GOLDEN / "independent.py")
assert _spec is not None and _spec.loader is not None
independent = importlib.util.module_from_spec(_spec)
sys.modules["golden_independent"] = independent
_spec.loader.exec_module(independent)

SAMPLES = independent.sample_dirs()
IDS = [p.name for p in SAMPLES]
REL_TOL = 1e-6
# R8/R13: the family's max-|t| critical value is a quantile of the multivariate t — the
# package's from scipy's quasi-Monte Carlo cdf, independent.py's from 2^20 draws of its own
# (and the Pocock per-look level is simulated too): the family's intervals and levels agree to
# this, and a level printed in a label is compared as a number (README, ambiguity 14).
FAMILY_TOL = 5e-3  # of the interval's log half-width for its bounds (the critical value's)
MISSING = "<missing field>"


def expected(sample: Path) -> dict[str, Any]:
    return json.loads(independent.expected_path(sample).read_text(encoding="utf-8"))


def test_every_sample_has_an_expected_file() -> None:
    assert {p.name for p in SAMPLES} == {
        "llamacpp-cpu-adaptive",
        "llamacpp-cpu-gemma3",
        "sglang-h200-gemma3",
        "sglang-h200-gemma3-eagle3",
        "vllm-cpu-0.32",
        "vllm-h200-gemma3",
        "vllm-h200-gemma3-noise",
        "vllm-h200-mla",
        "vllm-h200-mla-remedy",
        "vllm-h200-validation",
    }
    names = {p.name.removesuffix(".expected.json") for p in GOLDEN.glob("*.expected.json")}
    assert names == set(IDS), "regenerate: .venv/bin/python tests/golden/independent.py"


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_expected_file_is_what_the_script_computes(sample: Path) -> None:
    assert independent.rounded(independent.compute(sample)) == expected(sample), (
        f"{independent.expected_path(sample).name} drifted from independent.py; regenerate: "
        ".venv/bin/python tests/golden/independent.py"
    )


# -- (b) the package against the expected files ---------------------------------------------------
def _get(obj: Any, *names: str) -> Any:
    for name in names:
        if obj is MISSING or obj is None:
            return MISSING
        obj = obj.get(name, MISSING) if isinstance(obj, dict) else getattr(obj, name, MISSING)
    return obj


class Diff:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, path: str, want: Any, got: Any) -> None:
        self.lines.append(f"{path}: expected {want!r}, got {got!r}")

    def check(self, path: str, want: Any, got: Any, tol: float = REL_TOL) -> None:
        if got is MISSING:
            self.add(path, want, MISSING)
        elif isinstance(want, float) and not isinstance(got, bool):
            ok = isinstance(got, int | float) and math.isclose(want, got, rel_tol=tol)
            if not ok:
                self.add(path, want, got)
        elif type(want) is not type(got) or want != got:
            self.add(path, want, got)


def _in_family(c: dict[str, Any]) -> bool:
    """Decided with a simulated critical value: a family of several, or a Pocock look."""
    return c["kind"] in ("spec", "after") and not c["withheld"] and c["ci_label"] != "95% CI"


def _words(label: Any) -> Any:
    """A label without its level in brackets ('… (each 99.4%)'): that is ci_level's."""
    return re.sub(r" \([^()]*\)$", "", label) if isinstance(label, str) else label


def _on_margin(c: dict[str, Any], delta: float) -> bool:
    """A bound within FAMILY_TOL (of the log half-width) of a verdict threshold."""
    half = math.log(c["ci_high"] / c["ci_low"]) / 2
    bounds = (c["ci_low"], c["ci_high"])
    edges = (1 + delta, 1 / (1 + delta))
    return any(abs(math.log(b / t)) < FAMILY_TOL * half for b in bounds for t in edges)


def _within_process(estimate: Any) -> Any:
    flag = _get(estimate, "within_process")
    if flag is not MISSING:
        return flag
    method = _get(estimate, "method")
    return MISSING if method is MISSING else "within-process" in str(method)


def _check_comparisons(
    diff: Any,
    section: str,
    wanted: list[dict[str, Any]],
    comps: Any,
    delta: float,
    at_margin: set[str],
) -> None:
    """One list of comparisons (the plan's, or the before-and-after) against the expected."""
    comps = [] if comps is MISSING else comps
    got_comps = {(_get(c, "arm"), _get(c, "workload"), _get(c, "concurrency")): c for c in comps}
    want_keys = set()
    for c in wanted:
        key = (c["arm"], c["workload"], c["concurrency"])
        want_keys.add(key)
        name = f"{section}[{c['arm']} {c['workload']}@{c['concurrency']}]"
        if key not in got_comps:
            diff.add(name, f"a comparison vs {c['baseline']} ({c['kind']})", MISSING)
            continue
        knife = _in_family(c) and _on_margin(c, delta)
        if knife:
            at_margin.add(f"{c['workload']}@{c['concurrency']}")
        for field in (
            "baseline",
            "kind",
            "matched",
            "ratio",
            "ci_low",
            "ci_high",
            "ci_level",
            "ci_label",
            "verdict",
            "withheld",
        ):
            if field == "verdict" and knife:
                continue  # either side of the margin is within the level's Monte-Carlo error
            simulated = field in ("ci_low", "ci_high", "ci_level") and _in_family(c)
            tol = FAMILY_TOL if simulated else REL_TOL
            mine, theirs = c[field], _get(got_comps[key], field)
            if simulated and field != "ci_level" and isinstance(theirs, float):
                half = math.log(c["ci_high"] / c["ci_low"]) / 2  # the critical value's scale
                if abs(math.log(theirs / mine)) > FAMILY_TOL * half:
                    diff.add(f"{name}.{field}", mine, theirs)
                continue
            if field == "ci_label":
                mine, theirs = _words(mine), _words(theirs)
            diff.check(f"{name}.{field}", mine, theirs, tol)
        stopping = _get(got_comps[key], "stopping")
        for field, got_field in (
            ("look", "look_number"),
            ("futility_p", "futility_p"),
            ("futile", "futile"),
        ):
            if field in c:  # adaptive designs only (R13, R14)
                diff.check(f"{name}.stopping.{got_field}", c[field], _get(stopping, got_field))
    for key in sorted(set(got_comps) - want_keys, key=str):
        diff.add(f"{section}[{key[0]} {key[1]}@{key[2]}]", "absent", "present")


def package_mismatches(sample: Path, want: dict[str, Any]) -> list[str]:
    from diagnostic.analyse.core import analyse

    a = analyse(Bundle.open(sample))
    diff = Diff()

    left = _get(a, "left_out_runs")
    if left is MISSING:
        diff.add("left_out_runs", want["left_out_runs"], MISSING)
    else:  # the run ids; the reason is free text
        diff.check(
            "left_out_runs[].run",
            [r["run"] for r in want["left_out_runs"]],
            [_get(r, "run") for r in left],
        )

    arms = {_get(r, "id"): r for r in (_get(a, "arms") if _get(a, "arms") is not MISSING else [])}
    for arm, rows in want["arms"].items():
        if arm not in arms:
            diff.add(f"arms[{arm}]", "present", MISSING)
            continue
        got_rows = {
            f"{_get(w, 'workload')}@{_get(w, 'concurrency')}": w
            for w in (_get(arms[arm], "workloads") or [])
        }
        for cell, fields in rows.items():
            if cell not in got_rows:
                diff.add(f"arms[{arm}].workloads[{cell}]", "present", MISSING)
                continue
            est = _get(got_rows[cell], "decode_tps")
            for field in ("estimate", "ci_low", "ci_high", "n_restarts"):
                diff.check(
                    f"arms[{arm}][{cell}].decode_tps.{field}", fields[field], _get(est, field)
                )
            diff.check(
                f"arms[{arm}][{cell}].decode_tps.within_process",
                fields["within_process"],
                _within_process(est),
            )

    delta = Bundle.open(sample).manifest.plan.margin
    at_margin: set[str] = set()  # cells whose family verdict sits on the margin (ambiguity 14)
    for section in ("comparisons", "before_after"):
        _check_comparisons(diff, section, want.get(section, []), _get(a, section), delta, at_margin)

    diff.check("family_size", want["family_size"], _get(a, "family_size"))
    diff.check("aa_check", want["aa_check"], _get(a, "aa_check"))

    sweep = _get(a, "sweep", "workloads")
    got_k = {}
    if sweep is not MISSING:
        got_k = {f"{_get(w, 'workload')}@{_get(w, 'concurrency')}": w for w in sweep}
    for cell, k in want["best_k"].items():
        if cell in at_margin:
            continue  # best k follows the verdicts of its cell
        if cell not in got_k:
            diff.add(f"sweep.workloads[{cell}].best_k", k, MISSING)
        else:
            diff.check(f"sweep.workloads[{cell}].best_k", k, _get(got_k[cell], "best_k"))
    return diff.lines


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_package_analysis_gives_the_golden_numbers(sample: Path) -> None:
    lines = package_mismatches(sample, expected(sample))
    assert not lines, f"{sample.name}: {len(lines)} mismatches\n" + "\n".join(lines)


# -- the rules' edge cases the samples do not exercise ------------------------------------------
def test_speculation_flags_and_their_values_are_removed() -> None:
    launch = (
        "srv -m M --port 1 -md D --spec-type=ngram --draft-max 8 -ngld 99 --draft --metrics "
        "--speculative-config '{\"k\": 3}' --num-speculative-tokens 3"
    )
    assert independent.without_speculation(launch) == ["srv", "-m", "M", "--port", "1", "--metrics"]
    assert independent.carries_speculation(launch)
    assert not independent.carries_speculation("srv -m M --spectacle 1 --drafty x")


def _record(**kw: Any) -> dict[str, Any]:
    rec = {
        "workload": "code",
        "warmup": False,
        "error": None,
        "completion_tokens": 5,
        "chunk_times_s": [0.0, 1.0, 2.0],
        "chunk_tokens": None,
    }
    rec.update(kw)
    return rec


def test_decode_interval() -> None:
    assert independent.decode_tps(_record()) == 2.0  # (5 − 1) / 2
    assert independent.decode_tps(_record(chunk_tokens=[3, 1, 1])) == 1.0
    assert independent.decode_tps(_record(chunk_times_s=[1.0])) is None
    assert independent.decode_tps(_record(chunk_times_s=[1.0, 1.0])) is None
    assert independent.decode_tps(_record(completion_tokens=1)) is None
    assert not independent.is_measured(_record(), 6)
    assert not independent.is_measured(_record(warmup=True), 5)
    assert independent.is_measured(_record(), 5)


def test_torn_last_line_and_left_out_runs(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "a-r0"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"arm": "a", "restart": 0, "status": "ok"}))
    good = [json.dumps(_record()) for _ in range(9)]
    bad = json.dumps(_record(error="boom"))
    (run / "requests.jsonl").write_text("\n".join([*good, bad]) + '\n{"torn')
    (runs,) = independent.load_runs(tmp_path)
    assert len(runs["records"]) == 10 and runs["left_out"] is None  # 1 of 10: not > 10%
    (run / "requests.jsonl").write_text("\n".join([*good[:8], bad, bad]) + "\n")
    assert independent.load_runs(tmp_path)[0]["left_out"]
    (run / "requests.jsonl").write_text("\n".join(good) + "\n")
    (run / "run.json").write_text(json.dumps({"arm": "a", "restart": 0, "status": "failed"}))
    assert independent.load_runs(tmp_path)[0]["left_out"] == "run status failed"
