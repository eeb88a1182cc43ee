"""Issue 34: a server's answers are data from outside. Whatever it sends for a request, the
request is a record (failed, with its reason, when it cannot be read); whatever it sends on an
info path or /metrics, the endpoint is noted and the rest goes on; memory stays bounded by the
caps and a server that stalls ends at the timeout. Over real sockets (tests/sse_server.py)."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
import sse_server as srv
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnostic.bundle.store import Bundle
from diagnostic.cli import main
from diagnostic.common.answers import BodyDecoder, Unreadable, parse_json
from diagnostic.engines.endpoints import MAX_ANSWER, fingerprint
from diagnostic.engines.metrics import MAX_METRICS, fetch_metrics
from diagnostic.measure.client import ClientOptions, Job, RequestLabel, StreamClient
from diagnostic.measure.client.sse import SSEStream, StreamFault
from diagnostic.schema.requests import RequestRecord

MODELS = json.dumps({"data": [{"id": "m", "owned_by": "vllm"}]}).encode()


def _request(url: str, **kw: Any) -> RequestRecord:
    label = RequestLabel(arm="a", restart=0, seq=0, workload="w", prompt_id="p", warmup=False)

    async def main() -> RequestRecord:
        options = ClientOptions(base_url=url, max_tokens=4, **kw)
        async with StreamClient(options) as client:
            return await client.request(Job(label=label, prompt="hi"), t0=0.0)

    return asyncio.run(main())


def _served(reply: srv.Reply, **kw: Any) -> RequestRecord:
    with srv.serving(reply) as server:
        return _request(server.url, **kw)


def _stream_of(*payloads: str) -> srv.Reply:
    """A chunked stream of SSE events given as raw JSON text (NaN, 400 digits), then [DONE]."""
    return srv.stream([f"data: {p}\n\n".encode() for p in (*payloads, "[DONE]")])


def _readable(record: RequestRecord) -> None:
    """The record as stored is JSON the bundle's reader takes."""
    from diagnostic.bundle.gate import parse_json as gate_json

    gate_json(record.model_dump_json(), "record")


# -- usage, choices, text, finish_reason: each wrong shape fails its request, named --------

COUNTS = ["-5", "3.7", '"12"', "NaN", "1" + "0" * 400, "1e999", "true", "[]", "{}", "2147483649"]


@pytest.mark.parametrize("key", ["completion_tokens", "prompt_tokens"])
@pytest.mark.parametrize("value", COUNTS)
def test_a_usage_count_that_is_no_count_fails_the_request_naming_it(key: str, value: str) -> None:
    usage = {"completion_tokens": "1", "prompt_tokens": "3", key: value}
    text = ", ".join(f'"{k}": {v}' for k, v in usage.items())
    record = _served(_stream_of(*[f'{{"choices": [{{"text": "t"}}], "usage": {{{text}}}}}'] * 3))
    assert (
        record.error and f"usage.{key} is" in record.error and "not a token count" in record.error
    )
    _readable(record)


@pytest.mark.parametrize(
    ("choices", "says"),
    [
        ('"abc"', "choices is text, not a list"),
        ('{"text": "x"}', "choices is an object, not a list"),
        ('[[{"text": "x"}]]', "choices[0] is a list, not an object"),
        ("[null]", None),  # an empty choice: no output
        ("[1]", "choices[0] is a number, not an object"),
        ('[{"text": 5}]', "choices[0].text is a number, not text"),
        ('[{"text": {"a": 1}}]', "choices[0].text is an object, not text"),
        ('[{"text": ["x"]}]', "choices[0].text is a list, not text"),
        ('[{"text": "x", "finish_reason": 7}]', "finish_reason is a number, not a word"),
        ('[{"text": "x", "finish_reason": "' + "a" * 100_000 + '"}]', "not a word"),
    ],
)
def test_choices_of_the_wrong_shape_fail_the_request_naming_the_field(
    choices: str, says: str | None
) -> None:
    record = _served(_stream_of(*[f'{{"choices": {choices}}}'] * 3))
    assert record.error is not None
    assert says is None or says in record.error, record.error
    _readable(record)


@pytest.mark.parametrize(
    "delta", ['"x"', '{"content": 5}', '{"content": {"a": 1}}', '{"reasoning_content": [1]}']
)
def test_a_chat_delta_of_the_wrong_shape_fails_the_request(delta: str) -> None:
    record = _served(_stream_of(*[f'{{"choices": [{{"delta": {delta}}}]}}'] * 2), api="chat")
    assert record.error and "choices[0].delta" in record.error


def test_null_choices_and_usage_are_no_output_not_a_fault() -> None:
    record = _served(_stream_of('{"choices": null, "usage": null}'))
    assert record.error == "stream carried no output"


@pytest.mark.parametrize(
    "event",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"choices": [{"text": "x"}], "usage": ' + "[" * 5000 + "]" * 5000 + "}",
        '{"error": ' + "[" * 5000 + "]" * 5000 + "}",
    ],
)
def test_json_nested_thousands_deep_in_an_event_fails_the_request(event: str) -> None:
    record = _served(_stream_of(event))
    assert record.error and "nested too deeply" in record.error


def test_a_nested_error_value_is_shown_as_such() -> None:
    deep = "[" * 500 + "]" * 500  # within json's limit, beyond json.dumps'
    record = _served(_stream_of(f'{{"error": {deep}}}'))
    assert record.error and record.error.startswith("server error in stream")


def test_timings_keep_only_plain_values() -> None:
    timings = '{"predicted_ms": NaN, "n": 1' + "0" * 400 + ', "deep": [[1]], "ok": 2.5}'
    record = _served(
        _stream_of(
            '{"choices": [{"text": "a"}], "usage": {"completion_tokens": 1}}',
            f'{{"choices": [{{"text": "b"}}], "usage": {{"completion_tokens": 2}}, '
            f'"timings": {timings}}}',
        )
    )
    assert record.error is None and record.server_timings == {"ok": 2.5}
    _readable(record)


EVENT_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "choices": EVENT_VALUES
        | st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "text": EVENT_VALUES,
                    "finish_reason": EVENT_VALUES,
                    "delta": EVENT_VALUES,
                },
            ),
            max_size=2,
        ),
        "usage": EVENT_VALUES
        | st.fixed_dictionaries(
            {}, optional={"completion_tokens": EVENT_VALUES, "prompt_tokens": EVENT_VALUES}
        ),
        "timings": EVENT_VALUES,
        "error": EVENT_VALUES,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(FIELDS, min_size=1, max_size=4), api=st.sampled_from(["completions", "chat"])
)
def test_any_event_is_read_or_refused_with_a_reason(events: list[dict[str, Any]], api: str) -> None:
    stream = SSEStream(api=api, t_send=0.0, deadline=1e9, max_bytes=1 << 20)  # type: ignore[arg-type]
    try:
        for i, event in enumerate(events):
            stream.feed(f"data: {json.dumps(event)}\n".encode(), float(i))
        stream.close(9.0)
    except StreamFault as exc:
        assert str(exc)
        return
    assert all(isinstance(t, str) for t in stream.texts)
    assert stream.finish_reason is None or isinstance(stream.finish_reason, str)
    counts = stream.chunk_tokens()
    assert counts is None or all(isinstance(c, int) and c >= 0 for c in counts)


def test_a_line_of_200_mb_ends_at_the_cap_reading_it_once() -> None:
    stream = SSEStream(api="completions", t_send=0.0, deadline=1e9, max_bytes=32 << 20)
    piece = b"x" * 65536
    with pytest.raises(StreamFault, match="output cap"):
        for _ in range(200 * 16):
            stream.feed(piece, 1.0)
    assert len(stream._pending) <= 32 * 16  # pieces kept, never joined over and over


# -- errors with huge bodies, bombs: memory bounded -------------------------------------


def _peak_mb(run: Any) -> tuple[Any, float]:
    tracemalloc.start()
    try:
        result = run()
        return result, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _bomb(size: int = 512 * 2**20, wbits: int = 16 + zlib.MAX_WBITS) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = b"\0" * (16 * 2**20)
    return b"".join(comp.compress(block) for _ in range(size // len(block))) + comp.flush()


def test_an_error_with_a_300_mb_body_keeps_its_start() -> None:
    reply = srv.streamed_body(500, b"e" * 65536, 300 * 2**20)
    record, peak = _peak_mb(lambda: _served(reply))
    assert record.error and record.error.startswith("HTTP 500: eee") and len(record.error) <= 1000
    assert peak < 64, f"{peak:.0f} MB held for an error body"


@pytest.mark.parametrize("encoding", ["gzip", "gzip, gzip"])
def test_a_compressed_stream_bomb_ends_at_the_output_cap(encoding: str) -> None:
    data = _bomb()
    if encoding == "gzip, gzip":  # compressed twice: the inner bomb is itself compressed
        comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        data = comp.compress(data) + comp.flush()
    head = f"Content-Encoding: {encoding}\r\n".encode()
    reply = srv.stream([data], headers=head)
    record, peak = _peak_mb(lambda: _served(reply, max_output_bytes=4 << 20))
    assert record.error and ("larger than" in record.error or "output cap" in record.error)
    assert peak < 128, f"{peak:.0f} MB held for a bomb"


def test_the_decoder_bounds_each_step_of_stacked_codings() -> None:
    inner = _bomb(64 * 2**20)
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    outer = comp.compress(inner) + comp.flush()
    decoder = BodyDecoder("gzip, gzip", 1 << 20)
    with pytest.raises(Unreadable, match="larger than 1 MiB"):
        for i in range(0, len(outer), 4096):
            decoder.feed(outer[i : i + 4096])
    with pytest.raises(Unreadable, match="did not ask for"):
        BodyDecoder("br", 1 << 20)


@pytest.mark.parametrize("path", ["/metrics", "/v1/models"])
@pytest.mark.parametrize("wbits", [16 + zlib.MAX_WBITS, zlib.MAX_WBITS], ids=["gzip", "deflate"])
def test_bombs_on_metrics_and_models_are_noted_within_bounded_memory(path: str, wbits: int) -> None:
    coding = b"gzip" if wbits > zlib.MAX_WBITS else b"deflate"
    size = max(MAX_ANSWER, MAX_METRICS) * 4
    bomb = srv.answer(_bomb(size, wbits), headers=b"Content-Encoding: " + coding + b"\r\n")
    routes = {"/v1/models": srv.answer(MODELS), path: bomb}
    with srv.serving(srv.routed(routes)) as server:
        if path == "/metrics":
            with httpx.Client(base_url=server.url, timeout=10) as client:
                snap, peak = _peak_mb(lambda: fetch_metrics(client))
            assert snap.text is None and snap.error and "larger than" in snap.error
        else:
            found, peak = _peak_mb(lambda: fingerprint(server.url))
            assert path not in found.endpoints and "larger than" in found.unreadable[path]
    assert peak < 200, f"{peak:.0f} MB held for a bomb on {path}"


@pytest.mark.parametrize("path", ["/v1/models", "/version", "/props"])
def test_info_answers_nested_thousands_deep_are_noted_and_the_rest_kept(path: str) -> None:
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    routes = {"/version": srv.answer(b'{"version": "0.26"}'), path: srv.answer(deep)}
    with srv.serving(srv.routed(routes)) as server:
        found = fingerprint(server.url)
    assert "nested too deeply" in found.unreadable[path] and path not in found.endpoints
    if path != "/version":
        assert found.endpoints["/version"] == {"version": "0.26"}


@pytest.mark.parametrize(
    "body",
    [
        b'{"version": {"a": 1}}',
        b'{"version": 7}',
        b"[1, 2]",
        b'{"version": "1", "n": 1' + b"0" * 400 + b"}",
        b'{"version": "1", "x": NaN}',
        b'{"version": "1", "x": ' + b"[" * 200 + b"]" * 200 + b"}",
    ],
)
def test_odd_info_answers_identify_what_they_can_and_store_readably(
    body: bytes, tmp_path: Path
) -> None:
    from diagnostic.schema.bundle import Manifest, RunInfo

    routes = {"/version": srv.answer(body), "/v1/models": srv.answer(b'{"data": "m"}')}
    with srv.serving(srv.routed(routes)) as server:
        found = fingerprint(server.url)
    assert found.engine.version is None or isinstance(found.engine.version, str)
    bundle = Bundle.create(tmp_path / "b", Manifest(tool_version="t"))
    info = RunInfo(arm="a", restart=0, engine=found.engine, endpoints=found.endpoints)
    bundle.write_run(info.model_copy(update={"server_args": found.server_args}))
    (stored,) = Bundle.open(tmp_path / "b").runs()
    assert stored.engine == found.engine


@pytest.mark.parametrize(
    "body",
    [
        bytes(range(256)) * 10,
        b"# TYPE vllm:x counter\nvllm:x_total NaN\n",
        b"vllm:x_total 1" + b"0" * 400 + b"\n",
        b"# TYPE vllm:spec_accept_length gauge\nvllm:spec_accept_length 1" + b"0" * 400 + b"\n",
        b"vllm:x_total 1 \xff\xfe\n",
        b'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="999999999"} 1\n',
    ],
)
def test_metrics_the_reader_would_refuse_are_not_kept(body: bytes) -> None:
    from diagnostic.bundle.gate import metrics_problem

    with (
        srv.serving(srv.routed({"/metrics": srv.answer(body)})) as server,
        httpx.Client(base_url=server.url, timeout=10) as client,
    ):
        snap = fetch_metrics(client)
    if snap.text is not None:  # kept: then the reader takes it, and nothing is huge
        assert metrics_problem(snap.text) is None
        assert snap.counters is not None and len(snap.counters.accepted_per_pos) < 1000
    else:
        assert snap.error and "not kept" in snap.error


# -- stalls end at the timeout -------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        srv.stall,
        srv.silent_after(0, 3600),
        srv.dribble(b"HTTP/1.1 200 OK\r\n", b"X", 0.2),
        srv.dribble(srv.HEAD % b"" + srv.chunk(srv.text("a", 1)), b"", 0.2),
    ],
    ids=["accepts then stalls", "headers then stalls", "dribbles headers", "dribbles body"],
)
def test_a_request_to_a_server_that_stalls_ends_at_the_total_timeout(reply: srv.Reply) -> None:
    record = _served(reply, total_timeout_s=1.0)
    assert record.error and "timeout" in record.error


@pytest.mark.parametrize("path", ["/v1/models", "/version", "/metrics"])
def test_info_paths_that_stall_or_dribble_are_noted_at_the_timeout(path: str) -> None:
    dribble = srv.dribble(b"HTTP/1.1 200 OK\r\nX-Slow: ", b"x", 0.2)
    routes = {"/v1/models": srv.answer(MODELS), path: dribble, "/props": srv.stall}
    with srv.serving(srv.routed(routes)) as server:
        if path == "/metrics":
            with httpx.Client(base_url=server.url, timeout=1.0) as client:
                snap = fetch_metrics(client)
            assert snap.error and "within 1 s" in snap.error
        else:
            found = fingerprint(server.url, timeout_s=1.5)
            assert "within 1.5 s" in found.unreadable[path]
            assert set(found.unreadable) >= {"/props", path}


# -- through the command line: a failed run, a readable bundle, never a traceback ---------


def _good(routes: dict[str, srv.Reply]) -> srv.Reply:
    base = {
        "/v1/models": srv.answer(MODELS),
        "/version": srv.answer(b'{"version": "0.26"}'),
        "/metrics": srv.answer(b"vllm:generation_tokens_total 5\n"),
        "/v1/completions": srv.normal(4),
    }
    return srv.routed({**base, **routes})


@pytest.mark.parametrize(
    ("routes", "noted"),
    [
        ({"/v1/completions": _stream_of('{"choices": "x"}')}, None),
        ({"/v1/models": srv.answer(b"[" * 100_000)}, "GET /v1/models"),
        ({"/metrics": srv.answer(b"# TYPE vllm:x counter\nvllm:x_total NaN\n")}, "GET /metrics"),
    ],
    ids=["choices a string", "models nested deep", "metrics NaN counter"],
)
def test_collect_records_what_it_cannot_read_and_the_bundle_reads_back(
    tmp_path: Path, routes: dict[str, srv.Reply], noted: str | None
) -> None:
    out = tmp_path / "b"
    (tmp_path / "empty.log").touch()
    with srv.serving(_good(routes)) as server:
        args = [server.url, "-o", str(out), "--workloads", "code", "--requests", "2"]
        args += ["--warmup", "0", "--max-tokens", "4", "--log", str(tmp_path / "empty.log")]
        result = CliRunner().invoke(main, ["collect", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    if noted:
        assert noted in result.output
    bundle = Bundle.open(out)
    (run,) = bundle.runs()
    bundle.read_requests(run.arm, run.restart)
    report = CliRunner().invoke(main, ["report", str(out), "--format", "json"])
    assert report.exit_code in (0, 1, 3), report.output  # 3: every request failed, said so


def test_parse_json_says_why() -> None:
    for text, says in [
        (b"[" * 100_000, "nested too deeply"),
        (b"1" * 5000, "thousands of digits"),
        (b"\xff", "not UTF-8"),
        (b"{", "not JSON"),
    ]:
        with pytest.raises(Unreadable, match=says):
            parse_json(text)
