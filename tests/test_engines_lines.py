"""diagnostic.engines._lines: the streaming reader (prefilter, numbers, cleaning), fuzzed."""

from __future__ import annotations

import random
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnostic.engines import parse_log
from diagnostic.engines._lines import LineScanner, clean, unwrap
from diagnostic.schema.logfacts import CaptureMode, EngineName
from tests.engine_logs import CASES, REAL_RUNS

ANCHORS = (b"Capturing", b"WARNING", b"accept")


def brute(data: bytes, anchors: tuple[bytes, ...]) -> list[tuple[int, str]]:
    """What the scanner must return, computed the slow obvious way."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [(i, clean(x).text) for i, x in enumerate(lines, 1) if any(a in x for a in anchors)]


def scan(data: bytes, block: int, anchors: tuple[bytes, ...] = ANCHORS) -> list[tuple[int, str]]:
    scanner = LineScanner(anchors, block=block)
    return [(line.number, line.text) for line in scanner.scan(data)]


def test_clean_strips_ansi_crlf_and_collapses_redraws() -> None:
    line = clean(b"\x1b[1;36m(Worker_TP0 pid=1)\x1b[0;0m \rBar:  0%|\rBar: 100%| 9/9\r\n")
    assert line.text == "(Worker_TP0 pid=1) Bar: 100%| 9/9"
    assert "Bar:  0%" in line.raw
    assert clean(b"caf\xe9 \xff").text == "caf\ufffd \ufffd"


def test_numbers_survive_block_boundaries_and_a_missing_last_newline() -> None:
    data = b"".join(
        b"line %d WARNING\n" % i if i % 7 == 0 else b"noise %d\n" % i for i in range(500)
    )
    data += b"last Capturing"
    for block in (16, 64, 1000, 1 << 20):
        assert scan(data, block) == brute(data, ANCHORS)
    scanner = LineScanner(ANCHORS, block=64)
    list(scanner.scan(data))
    assert (scanner.lines, scanner.bytes_read) == (501, len(data))


def test_rare_byte_plan_demotes_when_the_log_changes_character() -> None:
    """First block has no 'W'; later blocks are full of it: results stay exact."""
    data = b"x\n" * 40_000 + b"Wow WARNING W\n" * 30_000 + b"W Capturing\n"
    assert scan(data, 64 << 10) == brute(data, ANCHORS)


def test_overlong_line_is_capped_and_counted() -> None:
    data = b"a\n" + b"WARNING " + b"z" * 5000 + b"\nCapturing after\n"
    scanner = LineScanner(ANCHORS, block=256, max_line=1000)
    got = [(line.number, len(line.text)) for line in scanner.scan(data)]
    assert got == [(2, 1000), (3, len("Capturing after"))]
    assert scanner.lines == 3
    assert "longer than" in scanner.notes[0]


def test_wrapped_line_is_joined_even_across_a_block_boundary() -> None:
    head = b"noise\n" * 20 + b"Capturing config=(a=1, "
    data = head + b"\nb=2,\nc=3)\nnext Capturing\n"
    scanner = LineScanner(
        (b"Capturing",),
        block=32,
        wants_more=lambda t: t.count("(") > t.count(")"),
        continues=lambda t: not t.startswith("next"),
    )
    got = [(line.number, line.text) for line in scanner.scan(data)]
    assert got == [(21, "Capturing config=(a=1, b=2,c=3)"), (24, "next Capturing")]


def test_empty_input() -> None:
    scanner = LineScanner(ANCHORS)
    assert list(scanner.scan(b"")) == []
    assert scanner.lines == 0


_PIECES = st.sampled_from(
    [b"Capturing", b"WARNING", b"accept", b"\r", b"\x1b[1;36m", b"\xff", b"\n", b"x", b" ", b"W"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=300), st.sampled_from([8, 33, 4096]))
def test_scanner_equals_brute_force(pieces: list[bytes], block: int) -> None:
    data = b"".join(pieces)
    assert scan(data, block) == brute(data, ANCHORS)


def _real_lines() -> list[bytes]:
    """Lines of real logs and of every labelled case (the corpora of pasted and wild text)."""
    lines: list[bytes] = []
    for log in sorted(REAL_RUNS.glob("*/*/server.log"))[:3] + sorted(CASES.rglob("*.log")):
        lines += log.read_bytes().split(b"\n")
    return lines


REAL_LINES = _real_lines()


def _check(facts_source: bytes) -> None:
    facts = parse_log(facts_source)
    assert facts.engine in get_args(EngineName)
    assert facts.capture.resolved in get_args(CaptureMode)
    facts.model_dump_json()


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes_never_crash(data: bytes) -> None:
    _check(data)


# What people and tools put before a line, and what ends one in a continued command.
_WRAPPERS = [
    b"vllm-1  | ",
    b"> ",
    b"    ",
    b"- ",
    b'{"log":"',
    b"Mar 02 10:41:07 h u[1]: ",
    b"\xe2\x94\x82 ",
]
_ENDINGS = [b" \\", b" `", b" ^", b" --version", b'"}', b"\xe2\x94\x82"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(min_value=1, max_value=60))
def test_mutated_real_logs_never_crash(rng: random.Random, n: int) -> None:
    """Real and corpus lines shuffled, cut, joined, wrapped in prefixes and continuation marks,
    with junk bytes spliced in."""
    picked = [bytearray(rng.choice(REAL_LINES)) for _ in range(n)]
    for line in picked:
        if line and rng.random() < 0.5:
            at = rng.randrange(len(line))
            line[at:at] = rng.choice(
                [b"\r", b"(", b")", b"'", b"\xff\xfe", b"{", b"\x1b[0m", b" pid=", b'"', b"["]
            )
        if line and rng.random() < 0.3:
            del line[rng.randrange(len(line)) :]
        if rng.random() < 0.2:
            line[0:0] = rng.choice(_WRAPPERS)
        if rng.random() < 0.1:
            line += rng.choice(_ENDINGS)
    _check(b"\n".join(bytes(line) for line in picked))


def test_parse_log_streams_a_file_path(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    facts = parse_log(log)
    assert (facts.engine, facts.lines, facts.capture.reason) == ("unknown", 0, "empty log")


@pytest.mark.parametrize("cut", ["P", "PIECE", "FULL_DEC", "CUDAGraphMode.PI"])
def test_a_mode_name_cut_mid_word_is_no_evidence(cut: str) -> None:
    """A pasted excerpt can end inside the downgrade warning's mode name (hypothesis found
    'cudagraph_mode=P' read as a mode): only a whole name counts; the full line still does."""
    head = (
        "(EngineCore pid=1369) INFO 11-29 10:23:40 [__init__.py:1] vLLM version 0.26.0\n"
        "(EngineCore pid=1369) WARNING 11-29 10:23:44 [compilation.py:1443] "
        "CUDAGraphMode.FULL_AND_PIECEWISE is not supported with spec-decode for attention "
        "backend TritonMLABackend (support: AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); "
        "setting cudagraph_mode="
    )
    assert parse_log((head + cut).encode()).capture.resolved == "UNKNOWN"
    assert parse_log((head + "PIECEWISE").encode()).capture.resolved == "PIECEWISE"


def test_a_config_mode_cut_mid_name_is_no_mode() -> None:
    """The config line's repr spliced mid-name ('<CUDAGraphMode.FULL_AND_PIEC…>', found by
    mutating real lines) configures nothing; the whole name does."""
    line = (
        "(EngineCore_DP0 pid=860) INFO 12-01 09:00:05 [core.py:93] Initializing a V1 LLM engine "
        "(v0.12.0) with config: model='m', compilation_config={'cudagraph_mode': "
        "<CUDAGraphMode.NAME: (2, 1)>}"
    )
    assert parse_log(line.replace("NAME", "FULL_AND_PIEC").encode()).capture.configured is None
    whole = parse_log(line.replace("NAME", "FULL_AND_PIECEWISE").encode()).capture
    assert whole.configured == "FULL_AND_PIECEWISE"


@pytest.mark.parametrize(
    "wrapped",
    [
        "vllm-1  | {line}",  # docker compose
        "Mar 02 10:41:07 gpu-node-07 vllm[48211]: {line}",  # journald
        "2026-02-11 08:14:02.511 | {line}",  # a log shipper's time and pipe
        "2025-01-01T10:00:00.123456789Z {line}",  # docker logs -t
        "[pod/vllm-0/vllm] {line}",  # kubectl logs --prefix
        "> > {line}",  # a quote of a quote
        "    {line}",  # indented code
        "│ {line}   │",  # a k9s frame
        '{{"log":"{line}\\n","stream":"stdout","time":"2026-01-14T09:13:40Z"}}',  # json-file
    ],
)
def test_what_is_put_before_a_line_is_taken_off(wrapped: str) -> None:
    line = "(EngineCore pid=7) INFO 01-14 09:13:46 [gpu_model_runner.py:3480] Graph capturing"
    assert unwrap(wrapped.format(line=line)) == line


def test_unwrap_keeps_engine_lines_that_contain_pipes() -> None:
    for line in (
        "slot print_timing: id  0 | task 0 | draft acceptance = 0.5 (1 accepted / 2 generated)",
        "0.08.799.401 I slot print_timing: id  0 | task 0 |",
        "[2025-06-18 03:44:10 TP0] Decode batch, #running-req: 4",
        " in 4 secs, took 0.33 GiB",  # one leading space: where a terminal wrapped a line
    ):
        assert unwrap(line) == line


def _joined(text: str) -> list[tuple[int, str]]:
    scanner = LineScanner((b"serve", b"--spec", b"llama-server", b"--version", b"- CPU"))
    return [(line.number, line.text) for line in scanner.scan(text.encode())]


def test_commands_continued_in_powershell_cmd_and_as_argument_items() -> None:
    ps = (
        "PS D:\\llama> .\\llama-server.exe -m D:\\m.gguf `\n"
        ">>   -md D:\\d.gguf `\n>>   --draft-max 8\n"
    )
    assert _joined(ps) == [
        (1, "PS D:\\llama> .\\llama-server.exe -m D:\\m.gguf -md D:\\d.gguf --draft-max 8")
    ]
    items = (
        'args:\n  - "serve"\n  - "--speculative-config"\n  - \'{"method": "ngram"}\'\nimage: x\n'
    )
    assert _joined(items) == [(2, '"serve" "--speculative-config" \'{"method": "ngram"}\'')]
    devices = "device_info:\n  - CPU : EPYC (1 MiB)\n  - CUDA0 : H100 (1 MiB)\n"
    assert _joined(devices) == [(2, "- CPU : EPYC (1 MiB)")]  # a list of values: not joined


def test_a_version_query_takes_its_answer() -> None:
    assert _joined("$ vllm --version\n0.10.1.1\n$ vllm serve m\n") == [
        (1, "$ vllm --version 0.10.1.1"),
        (3, "$ vllm serve m"),
    ]


def test_head_anchors_are_looked_for_in_the_head_only() -> None:
    """A paste's or a start-up's lines (platform, versions in dumps) cost nothing in the
    serving lines after the head."""
    data = b"x platform cpu\n" + b"filler\n" * 20 + b"y platform cuda\nz Capturing\n"
    scanner = LineScanner((b"Capturing",), head_anchors=(b"platform",), head_bytes=16, block=64)
    assert [line.number for line in scanner.scan(data)] == [1, 23]


@pytest.mark.parametrize("ending", ["", "\n"])
def test_a_metrics_line_wrapped_before_its_rates_is_joined(ending: str) -> None:
    """Issue 47: a terminal cut the SpecDecoding line (mid-word or before its rates); the
    record is read whole, with or without a newline at the end of the paste."""
    for cut in ("Per-position acceptance rate:\n 0.604", "Per-position accept\nance rate: 0.604"):
        text = (
            "(APIServer pid=1) INFO 05-06 06:21:40 [metrics.py:100] SpecDecoding metrics: "
            "Mean acceptance length: 2.01, Accepted: 200 tokens, Drafted: 600 tokens, "
            f"{cut}, 0.300, 0.100, Avg Draft acceptance rate: 33.3%{ending}"
        )
        facts = parse_log(text.encode())
        assert facts.spec.num_draft_tokens == 3
        assert [a.line for a in facts.acceptance] == [1]  # numbered where the record starts


def test_a_llamacpp_acceptance_line_wrapped_inside_its_counts_is_joined() -> None:
    text = "draft acceptance rate = 0.70312 (   90 accepted /\n  128 generated)\n"
    summary = parse_log(text.encode()).acceptance_summary
    assert summary is not None
    assert (summary.accepted_tokens, summary.drafted_tokens) == (90, 128)


def test_a_warning_wrapped_between_words_keeps_its_meaning() -> None:
    """Issue 47: an issue form re-flowed the downgrade warning over three lines at spaces; the
    joined record loses those spaces, and the phrases vLLM's parser reads get them back."""
    text = (
        "(EngineCore_DP0 pid=3) WARNING 07-23 10:02:11 [compilation.py:1188] "
        "CUDAGraphMode.FULL_AND_PIECEWISE is not\n"
        "supported with spec-decode for attention backend FlashInferBackend; setting\n"
        "cudagraph_mode=PIECEWISE\n"
    )
    facts = parse_log(text.encode())
    assert (facts.spec.enabled, facts.capture.resolved) == (True, "PIECEWISE")
    assert facts.capture.evidence[0].line == 1


@pytest.mark.parametrize(
    "text",
    [
        # the flag's JSON value put on the next line
        "vllm serve m --speculative-config\n"
        '\'{"method": "eagle3", "num_speculative_tokens": 3}\'\n',
        # a form re-flowed the JSON at a space
        'vllm serve m --speculative-config \'{"method": "eagle3",\n"num_speculative_tokens": 3}\'',
        # a terminal cut it inside a word
        'vllm serve m --speculative-config \'{"method": "eagle3", '
        '"num_specul\native_tokens": 3}\'\n',
    ],
)
def test_a_command_whose_quoted_value_was_wrapped_is_read_whole(text: str) -> None:
    """Issue 47: a wrap inside or before a command's quoted JSON used to make the command say
    speculation was off (or nothing)."""
    facts = parse_log(text.encode())
    assert (facts.spec.enabled, facts.spec.method, facts.spec.num_draft_tokens) == (
        True,
        "eagle3",
        3,
    )


def test_a_quote_that_never_closes_joins_nothing() -> None:
    records = "".join(f"(APIServer pid=1) INFO 01-01 00:00:0{i} [x.py:1] r{i}\n" for i in range(10))
    facts = parse_log(
        ('vllm serve m --speculative-config \'{"method": "ngram",\n' + records).encode()
    )
    assert facts.lines == 11
    assert facts.spec.method is None  # the config is cut: nothing said about it
