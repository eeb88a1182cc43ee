"""Issue 24's adversarial pass, kept: hostile bundles, logs and names give one `Error:` line
naming the file (exit 2), never a traceback, never a file's content, never a secret."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnostic.bundle.redact import MASK
from diagnostic.bundle.store import METRICS_AFTER, Bundle
from diagnostic.cli import main
from diagnostic.errors import BundleError
from diagnostic.report.render import environment
from diagnostic.schema.bundle import ArmSpec, Manifest, PlanSpec, RunInfo
from diagnostic.schema.requests import RequestRecord

ROOT = Path(__file__).parents[1]
ATTACKS = ROOT / "tests" / "data" / "attacks"
SAMPLE = ROOT / "samples" / "llamacpp-cpu-gemma3"
CORPUS = [
    json.loads(line)
    for line in (ROOT / "tests" / "data" / "secrets" / "corpus.jsonl").read_text().splitlines()
]
SECRET = "hunter2-Zq9vXw7Lk3"  # a value no redaction pattern knows by shape
FUZZ = settings(
    max_examples=int(os.environ.get("DIAGNOSE_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _record(**fields: object) -> RequestRecord:
    base: dict[str, object] = {
        "arm": "a",
        "restart": 0,
        "seq": 0,
        "workload": "code",
        "prompt_id": "p",
        "warmup": False,
        "t_send": 0.0,
        "chunk_times_s": [0.1, 0.2],
        "completion_tokens": 2,
    }
    return RequestRecord.model_validate(base | fields)


def _bundle(tmp_path: Path) -> Bundle:
    bundle = Bundle.create(tmp_path / "b", Manifest(tool_version="t"), force=True)
    bundle.write_run(RunInfo(arm="a", restart=0))
    bundle.append_request(_record())
    return bundle


def _one_clear_error(result: Result, *names: str) -> str:
    """The CLI's output for a refusal: exit 2, one `Error:` line naming the file."""
    out = result.output.strip()
    assert result.exit_code == 2, out
    assert "Traceback" not in out and not isinstance(result.exception, RecursionError)
    assert out.startswith("Error: ") and "\n" not in out, out
    for name in names:
        assert name in out
    return out


def _opens_or_refuses(path: Path) -> None:
    try:
        bundle = Bundle.open(path, strict=False)
        for run in bundle.runs():
            bundle.read_requests(run.arm, run.restart)
    except BundleError as exc:
        assert "\n" not in str(exc)


# -- 1, 3, 13: JSON the gate refuses -----------------------------------------------------


@pytest.mark.parametrize(
    "file", ["manifest.json", "runs/a-r0/run.json", "runs/a-r0/requests.jsonl"]
)
def test_deeply_nested_json_is_refused_naming_the_file(tmp_path: Path, file: str) -> None:
    _bundle(tmp_path)
    path = tmp_path / "b" / file
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    result = CliRunner().invoke(main, ["report", str(tmp_path / "b"), "--format", "json"])
    _one_clear_error(result, str(path))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("NaN", "NaN is not a number JSON allows"),
        ("1e999", "not finite"),
        ("9" * 5000, "thousands of digits"),
        ("9" * 30, "out of range"),
    ],
)
def test_numbers_are_checked_at_the_gate(tmp_path: Path, value: str, says: str) -> None:
    bundle = _bundle(tmp_path)
    path = bundle.run_file("a", 0, "requests.jsonl")
    line = _record(seq=1).model_dump_json()
    bad = line.replace('"chunk_times_s":[0.1,0.2]', f'"chunk_times_s":[0.1,{value}]')
    assert bad != line
    path.write_text(path.read_text() + bad + "\n")
    with pytest.raises(BundleError, match=says) as caught:
        bundle.read_requests("a", 0)
    assert f"{path}:2" in str(caught.value)


def test_nan_in_run_json_and_manifest_is_refused(tmp_path: Path) -> None:
    _bundle(tmp_path)
    run = tmp_path / "b" / "runs" / "a-r0" / "run.json"
    data = json.loads(run.read_text())
    data["server_args"] = {"n_draft": "NaN"}
    run.write_text(json.dumps(data).replace('"NaN"', "NaN"))
    with pytest.raises(BundleError, match=f"{run}: NaN"):
        Bundle.open(tmp_path / "b")
    plan = PlanSpec(arms=[ArmSpec(name="a", params={"k": 3})])
    assert plan.arms[0].params == {"k": 3}
    with pytest.raises(ValueError, match="finite"):
        ArmSpec(name="a", params={"k": math.nan})


def test_a_record_stored_twice_is_an_error_naming_the_line(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    path = bundle.run_file("a", 0, "requests.jsonl")
    path.write_text(path.read_text() * 2)
    with pytest.raises(
        BundleError, match=r"requests.jsonl:2: .*recorded twice \(first on line 1\)"
    ):
        bundle.read_requests("a", 0)
    path.write_text(path.read_text().splitlines(keepends=True)[0])
    bundle.append_request(_record(seq=0, attempt=2))  # a retry is no duplicate
    assert [r.attempt for r in bundle.read_requests("a", 0).records] == [1, 2]


def test_a_record_of_another_run_is_an_error(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    path = bundle.run_file("a", 0, "requests.jsonl")
    path.write_text(path.read_text() + _record(arm="b", seq=1).model_dump_json() + "\n")
    with pytest.raises(BundleError, match="a record of b-r0 in the requests of a-r0"):
        bundle.read_requests("a", 0)


def test_aa_of_naming_no_arm_is_an_error(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    manifest = json.loads((bundle.path / "manifest.json").read_text())
    manifest["plan"]["arms"] = [{"name": "a"}, {"name": "a-aa", "aa_of": "nope"}]
    (bundle.path / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(main, ["report", str(bundle.path), "--format", "json"])
    _one_clear_error(result, "manifest.json", "'nope'")


def test_k_nan_in_a_plan_is_an_error(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[plan]\nbaseline = "b"\n[[arms]]\nname = "b"\nlaunch = "s --port {port}"\n'
        '[[arms]]\nname = "n-k{k}"\nlaunch = "s --port {port} -k {k}"\nsweep = { k = [nan] }\n'
    )
    result = CliRunner().invoke(main, ["sweep", str(plan), "--dry-run"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "[[arms]] #2" in result.output and "finite" in result.output


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "9" * 5000]),
)
FIELDS = st.sampled_from(
    ["t_send", "ttft_s", "e2e_s", "completion_tokens", "prompt_tokens", "seq", "restart"]
)


@FUZZ
@given(field=FIELDS, number=NUMBERS, nest=st.integers(0, 3000))
def test_any_number_or_nesting_in_a_record_loads_or_fails_clearly(
    tmp_path: Path, field: str, number: object, nest: int
) -> None:
    bundle = _bundle(tmp_path)
    path = bundle.run_file("a", 0, "requests.jsonl")
    data = json.loads(path.read_text())
    text = json.dumps(data).replace(f'"{field}": {json.dumps(data[field])}', f'"{field}": {{}}')
    value = number if isinstance(number, str) else json.dumps(number)
    deep = "[" * nest + value + "]" * nest
    path.write_text(text.replace("{}", deep, 1) + "\n")
    _opens_or_refuses(bundle.path)


# -- 2: user text printed literally -----------------------------------------------------


def test_error_quoting_markup_prints_it_literally(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('[plan]\n[[arms]]\nname = "[/red]x"\nlaunch = "s --port {port}"\n')
    result = CliRunner().invoke(main, ["sweep", str(plan), "--dry-run"])
    assert "[/red]x" in _one_clear_error(result, str(plan))


def test_a_label_with_markup_prints_literally() -> None:
    from rich.console import Console

    from diagnostic.cli._common import print_labelled

    console = Console(record=True, width=200)
    print_labelled(console, "Error:", "bold red", "arm '[/red]x' at [[arms]] #2 [bold]")
    assert console.export_text().strip() == "Error: arm '[/red]x' at [[arms]] #2 [bold]"


# -- 4, 5: links and garbage in a bundle ------------------------------------------------


@pytest.mark.parametrize("name", ["garbled.prom", "shadow-line.prom", "nan-counter.prom"])
def test_a_bad_metrics_file_is_refused_without_its_content(tmp_path: Path, name: str) -> None:
    bundle = _bundle(tmp_path)
    target = bundle.run_file("a", 0, METRICS_AFTER)
    shutil.copy(ATTACKS / name, target)
    result = CliRunner().invoke(main, ["report", str(bundle.path), "--format", "json"])
    out = _one_clear_error(result, str(target))
    assert "topsecret" not in out and "root:" not in out and "IHDR" not in out


@pytest.mark.parametrize("file", [f"runs/a-r0/{METRICS_AFTER}", "runs/a-r0/server.log", "runs"])
def test_a_symlink_in_a_bundle_is_never_followed(tmp_path: Path, file: str) -> None:
    bundle = _bundle(tmp_path)
    secret = tmp_path / "shadow"
    secret.write_text((ATTACKS / "shadow-line.prom").read_text())
    link = bundle.path / file
    if file == "runs":
        shutil.rmtree(link)
        link.symlink_to("/")
    else:
        link.symlink_to(secret)
    for command in (["report", str(bundle.path), "--format", "json"], ["check", str(bundle.path)]):
        out = _one_clear_error(CliRunner().invoke(main, command), str(link), "symbolic link")
        assert "topsecret" not in out


def test_the_bundle_hash_reads_only_the_bundles_own_files(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    before = bundle.content_hash()
    (bundle.path / "runs" / "elsewhere").symlink_to("/")  # never walked
    (bundle.path / "runs" / "a-r0" / "x.log").symlink_to("/etc/hostname")
    assert bundle.content_hash() == before


def test_a_pipe_in_a_bundle_is_refused(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    os.mkfifo(bundle.run_file("a", 0, "server.log"))
    out = _one_clear_error(CliRunner().invoke(main, ["check", str(bundle.path)]))
    assert "not a regular file" in out


# -- 6: special files given to check ----------------------------------------------------


def test_check_on_a_proc_file_or_a_pipe_is_a_clean_error(tmp_path: Path) -> None:
    _one_clear_error(CliRunner().invoke(main, ["check", "/proc/self/maps"]), "/proc/self/maps")
    pipe = tmp_path / "server.log"
    os.mkfifo(pipe)
    _one_clear_error(CliRunner().invoke(main, ["check", str(pipe)]), str(pipe))


# -- 8: request records redacted at the gate, on reading, and when rendering ------------


def test_request_texts_are_redacted_deterministically_when_stored(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    for seq, case in enumerate(CORPUS, start=1):
        bundle.append_request(
            _record(seq=seq, prompt_id=case["text"], text=case["text"], error=case["text"])
        )
    raw = bundle.run_file("a", 0, "requests.jsonl").read_text()
    for case in CORPUS:
        assert case["secret"] not in raw, case["shape"]
    texts = [r.text for r in bundle.read_requests("a", 0).records[1:]]
    again = _bundle(tmp_path / "again")
    for seq, case in enumerate(CORPUS, start=1):
        again.append_request(_record(seq=seq, text=case["text"]))
    assert [r.text for r in again.read_requests("a", 0).records[1:]] == texts  # same → same


def test_a_clients_unredacted_records_are_redacted_on_reading(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    path = bundle.run_file("a", 0, "requests.jsonl")
    line = _record(seq=1, text="token=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345").model_dump_json()
    path.write_text(path.read_text() + line + "\n")
    (record,) = [r for r in bundle.read_requests("a", 0).records if r.seq == 1]
    assert "hf_" not in record.text and MASK in record.text


def test_the_report_templates_redact_every_value() -> None:
    template = environment().from_string("{{ a }} {{ b }} {{ n }}")
    html = template.render(a="PASSWORD=918273645546372819", b="<sk-abcdefghijklmnop1234>", n=3)
    assert "918273645546372819" not in html and "sk-abc" not in html
    assert "&lt;" in html and html.endswith(" 3")  # escaping still holds


# -- 9, 10: one redaction for logs written line by line and whole ------------------------


def test_private_keys_in_a_log_are_masked_line_by_line_and_whole(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    data = (ATTACKS / "pem-in-log.log").read_bytes()
    with bundle.open_log("a", 0, "server.log") as log:
        for line in data.splitlines(keepends=True):
            log.write_line(line)
    whole = bundle.write_run_file("a", 0, "copied.log", data)
    lined = bundle.run_file("a", 0, "server.log").read_bytes()
    assert lined == whole.read_bytes()
    text = lined.decode()
    for body in (
        "MIIEowIBAAKCAQEAu1SU1",
        "VTLw7onLRnrq0",
        "b3BlbnNzaC1rZXktdjEAAAAABG5v",
        "QyNTUxOQ",
    ):
        assert body not in text
    assert "server is listening" in text and "main: loading model" in text


@FUZZ
@given(case=st.sampled_from(CORPUS), before=st.text(max_size=30), after=st.text(max_size=30))
def test_every_secret_shape_is_masked_in_any_context(
    case: dict[str, str], before: str, after: str
) -> None:
    from diagnostic.bundle.redact import redact_file_text, redact_text

    text = f"{before} {case['text']} {after}"
    assert case["secret"] not in redact_text(text), case["shape"]
    assert case["secret"] not in redact_file_text(text), case["shape"]


def test_the_corpus_has_thirty_shapes() -> None:
    assert len({c["shape"] for c in CORPUS}) >= 30


# -- the real sample through the gate: nothing refused, nothing changed but secrets ------


def test_the_samples_pass_the_gate(tmp_path: Path) -> None:
    for sample in ("llamacpp-cpu-gemma3", "vllm-h200-mla", "vllm-h200-validation"):
        bundle = Bundle.open(ROOT / "samples" / sample)
        assert sum(len(bundle.read_requests(r.arm, r.restart).records) for r in bundle.runs())
    copy = tmp_path / "s"
    shutil.copytree(SAMPLE, copy)
    assert Bundle.open(copy).content_hash() == Bundle.open(SAMPLE).content_hash()


def test_a_prompts_secret_echoed_without_its_name_is_masked(tmp_path: Path) -> None:
    from diagnostic.bundle.redact import secret_values

    bundle = _bundle(tmp_path)
    out_of_context = {"password with @ in URL", "password with @ and : in URL"}  # p@ss alone
    cases = [c for c in CORPUS if c["shape"] not in out_of_context]
    for seq, case in enumerate(cases, start=1):
        echo = f"Sure: {case['secret']} and more"
        bundle.append_request(_record(seq=seq, text=echo), secret_values(case["text"]))
    raw = bundle.run_file("a", 0, "requests.jsonl").read_text()
    assert [c["shape"] for c in cases if c["secret"] in raw] == []
