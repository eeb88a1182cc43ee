"""Fuzz the bundle loader: whatever bytes a bundle's files hold, opening and reading it either
works or raises BundleError (one clear line), never another exception."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnostic.bundle.store import Bundle
from diagnostic.errors import BundleError
from diagnostic.schema.bundle import Manifest, RunInfo
from diagnostic.schema.requests import RequestRecord

EXAMPLES = int(os.environ.get("DIAGNOSE_FUZZ_EXAMPLES", "60"))
RECORD = RequestRecord(
    arm="a", restart=0, seq=0, workload="code", prompt_id="p", warmup=False, t_send=0.0,
    chunk_times_s=[0.1, 0.2], completion_tokens=2,
).model_dump_json()  # fmt: skip


def _make(tmp: Path) -> Bundle:
    bundle = Bundle.create(tmp / "b", Manifest(tool_version="t"), force=True)
    bundle.write_run(RunInfo(arm="a", restart=0))
    bundle.append_request(RequestRecord.model_validate_json(RECORD))
    return bundle


def _mutate(data: bytes, cut: int, junk: bytes) -> bytes:
    cut = cut % (len(data) + 1)
    return data[:cut] + junk + data[cut + len(junk) :]


def _load(path: Path) -> None:
    try:
        bundle = Bundle.open(path, strict=True)
        for run in bundle.runs():
            bundle.read_requests(run.arm, run.restart)
    except BundleError as exc:
        assert "\n" not in str(exc).strip() and str(path) in str(exc)


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
FILES = st.sampled_from(["manifest.json", "runs/a-r0/run.json", "runs/a-r0/requests.jsonl"])
JUNK = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"\xff\xfe", b"{", b"}", b'"schema_version": 99', b"null", b"\n\n", b"[]"]),
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(name=FILES, cut=st.integers(min_value=0, max_value=4000), junk=JUNK)
def test_mutated_bundles_load_or_fail_clearly(
    tmp_path: Path, name: str, cut: int, junk: bytes
) -> None:
    bundle = _make(tmp_path)
    path = bundle.path / name
    path.write_bytes(_mutate(path.read_bytes(), cut, junk))
    _load(bundle.path)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
))  # fmt: skip
def test_any_json_in_a_record_line_loads_or_fails_clearly(tmp_path: Path, value: object) -> None:
    bundle = _make(tmp_path)
    line = json.dumps(value) + "\n"
    with open(bundle.run_file("a", 0, "requests.jsonl"), "a") as fh:
        fh.write(line)
    _load(bundle.path)
