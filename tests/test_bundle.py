"""Bundle round trips, atomic writes, torn lines, versions, overwrite protection."""

import json
import os
from pathlib import Path

import pytest

from diagnostic.bundle.store import Bundle, run_id
from diagnostic.errors import BundleError
from diagnostic.schema.bundle import (
    SCHEMA_VERSION,
    ArmSpec,
    LaunchInfo,
    Manifest,
    PlanSpec,
    RunInfo,
)
from diagnostic.schema.requests import RequestRecord


def _manifest() -> Manifest:
    plan = PlanSpec(arms=[ArmSpec(name="baseline"), ArmSpec(name="ngram-k3", params={"k": 3})])
    return Manifest(tool_version="0.1.0", plan=plan)


def _record(seq: int, **kw: object) -> RequestRecord:
    base: dict[str, object] = dict(
        arm="baseline",
        restart=0,
        seq=seq,
        workload="code",
        prompt_id=f"code-{seq}",
        warmup=False,
        t_send=float(seq),
        ttft_s=0.1,
        e2e_s=1.0,
        chunk_times_s=[0.1, 0.5, 1.0],
        completion_tokens=3,
        prompt_tokens=7,
        finish_reason="length",
        text="abc",
    )
    base.update(kw)
    return RequestRecord.model_validate(base)


@pytest.fixture
def bundle(tmp_path: Path) -> Bundle:
    b = Bundle.create(tmp_path / "b", _manifest())
    b.write_run(RunInfo(arm="baseline", restart=0, status="ok"))
    return b


def test_round_trip(bundle: Bundle) -> None:
    for seq in range(3):
        bundle.append_request(_record(seq))
    again = Bundle.open(bundle.path)
    assert again.manifest == bundle.manifest
    assert [r.arm for r in again.runs()] == ["baseline"]
    log = again.read_requests("baseline", 0)
    assert [r.seq for r in log.records] == [0, 1, 2]
    assert log.records[0] == _record(0)
    assert log.torn_line is None


def test_layout_matches_design(bundle: Bundle) -> None:
    bundle.append_request(_record(0))
    run = bundle.path / "runs" / run_id("baseline", 0)
    assert (bundle.path / "manifest.json").is_file()
    assert (run / "run.json").is_file() and (run / "requests.jsonl").is_file()
    manifest = json.loads((bundle.path / "manifest.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION == 3


def test_refuses_overwrite_without_force(bundle: Bundle) -> None:
    with pytest.raises(BundleError, match=r"already exists.*--force"):
        Bundle.create(bundle.path, _manifest())
    fresh = Bundle.create(bundle.path, _manifest(), force=True)
    assert fresh.runs() == []


def test_force_never_deletes_a_folder_that_is_not_a_bundle(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("data")
    with pytest.raises(BundleError, match="not a bundle"):
        Bundle.create(tmp_path, _manifest(), force=True)
    assert (tmp_path / "precious.txt").read_text() == "data"


def test_corrupt_line_names_file_and_line(bundle: Bundle) -> None:
    for seq in range(3):
        bundle.append_request(_record(seq))
    path = bundle.run_file("baseline", 0, "requests.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = '{"arm": "baseline", oops\n'
    path.write_text("".join(lines))
    with pytest.raises(BundleError, match=r"requests\.jsonl:2: corrupt"):
        bundle.read_requests("baseline", 0)


def test_torn_last_line_is_reported_dropped_and_repaired(bundle: Bundle) -> None:
    for seq in range(2):
        bundle.append_request(_record(seq))
    path = bundle.run_file("baseline", 0, "requests.jsonl")
    with open(path, "ab") as fh:
        fh.write(_record(2).model_dump_json().encode()[:40])
    log = bundle.read_requests("baseline", 0)
    assert [r.seq for r in log.records] == [0, 1] and log.torn_line == 3
    with pytest.raises(BundleError, match=r"torn.*--resume"):
        bundle.append_request(_record(2))
    assert bundle.drop_torn_line("baseline", 0) == 3
    bundle.append_request(_record(2))
    assert [r.seq for r in bundle.read_requests("baseline", 0).records] == [0, 1, 2]


def test_complete_record_without_newline_is_kept(bundle: Bundle) -> None:
    path = bundle.run_file("baseline", 0, "requests.jsonl")
    path.write_text(_record(0).model_dump_json())
    assert [r.seq for r in bundle.read_requests("baseline", 0).records] == [0]
    assert bundle.drop_torn_line("baseline", 0) is None
    bundle.append_request(_record(1))
    assert len(bundle.read_requests("baseline", 0).records) == 2


def test_newer_schema_is_refused_with_advice(bundle: Bundle) -> None:
    path = bundle.path / "manifest.json"
    data = json.loads(path.read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(data))
    newer = rf"manifest\.json: schema_version {SCHEMA_VERSION + 1} is newer.*upgrade"
    with pytest.raises(BundleError, match=newer):
        Bundle.open(bundle.path)


def test_corrupt_manifest_names_line(bundle: Bundle) -> None:
    (bundle.path / "manifest.json").write_text('{\n  "schema_version": 1,\n  oops\n}')
    with pytest.raises(BundleError, match=r"manifest\.json:3: corrupt JSON"):
        Bundle.open(bundle.path)


def test_missing_bundle_and_manifest(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="no such bundle"):
        Bundle.open(tmp_path / "nope")
    with pytest.raises(BundleError, match=r"manifest\.json: missing"):
        Bundle.open(tmp_path)


def test_unknown_field_strict_error_lenient_kept(bundle: Bundle) -> None:
    path = bundle.run_file("baseline", 0, "requests.jsonl")
    data = json.loads(_record(0).model_dump_json()) | {"future_field": 42}
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(
        BundleError, match=r"requests\.jsonl:1: invalid RequestRecord: future_field"
    ):
        bundle.read_requests("baseline", 0)
    lenient = Bundle.open(bundle.path, strict=False)
    (record,) = lenient.read_requests("baseline", 0).records
    assert record.model_extra == {"future_field": 42}


def test_invalid_run_json_is_reported_on_open(bundle: Bundle) -> None:
    path = bundle.run_dir("baseline", 0) / "run.json"
    data = json.loads(path.read_text()) | {"status": "exploded"}
    path.write_text(json.dumps(data))
    with pytest.raises(BundleError, match=r"run\.json: invalid RunInfo: status"):
        Bundle.open(bundle.path)


def test_arm_names_must_name_folders(bundle: Bundle) -> None:
    with pytest.raises(BundleError, match="cannot name a folder"):
        bundle.run_dir("../evil", 0)


def test_atomic_write_leaves_no_temp_files(bundle: Bundle) -> None:
    for _ in range(3):
        bundle.write_run(RunInfo(arm="baseline", restart=0, status="ok"))
    assert not [p for p in bundle.run_dir("baseline", 0).iterdir() if p.name.startswith(".")]


def test_append_is_fsynced(bundle: Bundle, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    bundle.append_request(_record(0))
    assert synced


def test_secrets_never_enter_the_bundle(bundle: Bundle) -> None:
    info = RunInfo(
        arm="baseline",
        restart=0,
        launch=LaunchInfo(
            command="vllm serve m --api-key sk-live-abcdefghijklmnop1234",
            env={"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz123456", "CUDA_VISIBLE_DEVICES": "0"},
        ),
        server_args={"api_key": "hunter2hunter2", "max_tokens": 7},
    )
    bundle.write_run(info)
    bundle.write_run_file(
        "baseline", 0, "server.log", "args: --hf-token hf_abcdefghijklmnopqrstuv\n"
    )
    with bundle.open_log("baseline", 0, "stream.log") as log:
        log.write_line(b"Authorization: Bearer abcdefghijklmnop\n")
    everything = "".join(p.read_text() for p in bundle.run_dir("baseline", 0).iterdir())
    for secret in ("sk-live", "hf_abc", "hunter2", "abcdefghijklmnop"):
        assert secret not in everything
    stored = bundle.find_run("baseline", 0)
    assert stored is not None
    assert stored.server_args["max_tokens"] == 7
    assert stored.launch is not None and stored.launch.env["CUDA_VISIBLE_DEVICES"] == "0"


def test_log_bytes_that_are_not_utf8_survive(bundle: Bundle) -> None:
    raw = b"ok \xff\xfe line\n"
    path = bundle.write_run_file("baseline", 0, "server.log", raw)
    assert path.read_bytes() == raw
