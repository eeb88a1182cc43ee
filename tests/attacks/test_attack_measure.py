"""Issue 46's attacks on measuring: a plan nested 5,000 or 50,000 deep gives one error naming
the file, never a traceback; a server that accepts a request and never answers, freezes
mid-stream, keeps its stream alive without a token or trickles past the request's deadline
stops the run at a deadline, recorded as failed and resumable; a sweep whose server stalls goes
on to the next arm and exits. And a cross-section of issue 34's hostile server (each class of
the attack pass once: a count that is no count, choices that are no list, events nested
100,000 deep, a 300 MB error, an endless error, bombs, /metrics garbage). Servers are
tests/sse_server.py on 127.0.0.1, or tests/attacks/fault_server.py launched by the sweep.
The subprocess timeouts are hang guards, not speed tests."""

from __future__ import annotations

import json
import sys
import threading
import zlib
from pathlib import Path

import pytest
import sse_server as srv
from click.testing import CliRunner, Result
from conftest import free_port, run_diagnose

from diagnostic.bundle.store import Bundle
from diagnostic.cli import main
from diagnostic.engines.endpoints import MAX_ANSWER
from diagnostic.engines.metrics import MAX_METRICS
from diagnostic.measure.plan.depth import deepest

HERE = Path(__file__).resolve().parent
MODELS = json.dumps({"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}).encode()
JSON = b"Content-Type: application/json\r\n"


def _clean(result: Result) -> str:
    """The output, once it is sure no traceback ended the command."""
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return " ".join(result.output.split())


# -- plans ----------------------------------------------------------------------------------

ARM = '[[arms]]\nname = "baseline"\nlaunch = "s --port {port}"\n'


def _nested(kind: str, depth: int) -> str:
    if kind == "inline tables":
        return "{a = " * depth + "1" + "}" * depth
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize("depth", [5_000, 50_000])
@pytest.mark.parametrize("kind", ["inline tables", "arrays"])
def test_a_plan_nested_thousands_deep_is_one_error_naming_the_file(
    kind: str, depth: int, tmp_path: Path
) -> None:
    plan = tmp_path / "deep.toml"
    plan.write_text(f"[plan]\nrequests = 2\n{ARM}sweep = {{ k = {_nested(kind, depth)} }}\n")
    out = _clean(CliRunner().invoke(main, ["sweep", str(plan), "--dry-run"]))
    assert f"Error: {plan}:6: arrays or inline tables nested more than 32 deep" in out


def test_only_brackets_outside_strings_and_comments_nest() -> None:
    deep = "[" * 40
    text = (
        f'a = "{deep}\\"{deep}"\n'  # a basic string with an escaped quote
        f"b = '{deep}'\n# {deep}\n"  # a literal string, a comment
        f"c = \"\"\"\n{deep}\n\"\"\"\nd = '''{deep}'''\n"  # multi-line strings
        "e = [[1], {x = [2]}]\n"
    )
    assert deepest(text) is None
    assert deepest(text + "f = [[[1]]]\n", limit=2) == (8, 3)


@pytest.mark.parametrize(
    "line",
    ["requests = 1000000000000", "max_tokens = 1000000000000000000", "restarts = -1"],
)
def test_absurd_plan_values_are_one_error(line: str, tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(f"[plan]\n{line}\n{ARM}")
    result = CliRunner().invoke(main, ["sweep", str(plan), "--dry-run"])
    assert result.exit_code == 2 and f"Error: {plan}" in _clean(result)


# -- a server that stalls -------------------------------------------------------------------


def _after(n: int, bad: srv.Reply) -> srv.Reply:
    """Whole completions for the first n (collect's probe), then `bad` for every one."""
    lock, seen = threading.Lock(), [0]

    def reply(conn: object, server: srv.Server) -> bool:
        with lock:
            seen[0] += 1
            late = seen[0] > n
        return (bad if late else srv.normal(4))(conn, server)  # type: ignore[arg-type]

    return reply


def _routes(completions: srv.Reply, **more: srv.Reply) -> srv.Reply:
    return srv.routed(
        {
            "/v1/models": srv.answer(MODELS, headers=JSON),
            "/health": srv.answer(b""),
            "/v1/completions": completions,
            **more,
        }
    )


def _collect(url: str, out: Path, *extra: str) -> Result:
    log = out.parent / "empty.log"
    log.touch()
    args = ["collect", url, "-o", str(out), "--workloads", "code", "--requests", "3"]
    args += ["--warmup", "0", "--max-tokens", "4", "--log", str(log), *extra]
    return CliRunner().invoke(main, args)


_KEEP_ALIVE = srv.chunk(b": keep-alive\n\n")
_TOKEN = srv.chunk(srv.text("t", 1))
STALLS = {
    "accepts and never answers": (srv.stall, ["--first-token-timeout", "0.5"], "first token"),
    "freezes after two tokens": (srv.silent_after(2, 60), ["--token-timeout", "0.5"], "no token"),
    "keeps its stream alive without a token": (
        srv.dribble(srv.HEAD % b"" + _KEEP_ALIVE, _KEEP_ALIVE, 0.2),
        ["--first-token-timeout", "0.5"],
        "first token",
    ),
    "trickles tokens past the request's deadline": (
        srv.dribble(srv.HEAD % b"" + _TOKEN, _TOKEN, 0.2),
        ["--timeout", "1"],
        "total timeout",
    ),
    "trickles tokens past the run's deadline": (
        srv.dribble(srv.HEAD % b"" + _TOKEN, _TOKEN, 0.2),
        ["--run-timeout", "1"],
        "the run passed its deadline of 1 s",
    ),
}


@pytest.mark.parametrize("name", list(STALLS))
def test_a_stalled_server_fails_the_run_at_a_deadline_and_resume_continues_it(
    name: str, tmp_path: Path
) -> None:
    bad, options, says = STALLS[name]
    out = tmp_path / "b"
    with srv.serving(_routes(_after(1, bad))) as server:
        result = _collect(server.url, out, *options)
    text = _clean(result)
    assert result.exit_code == 1, text
    assert "so the run was stopped" in text or "the run passed its deadline" in text
    (run,) = Bundle.open(out).runs()
    assert run.status == "failed" and run.failure is not None and says in run.failure
    assert run.seal is not None  # ended, failed: sealed
    with srv.serving(_routes(srv.normal(4))) as server:
        result = _collect(server.url, out, "--resume")
    assert result.exit_code == 0, _clean(result)
    (run,) = Bundle.open(out).runs()
    assert run.status == "ok"


def test_a_sweep_whose_server_stalls_goes_on_and_exits(tmp_path: Path) -> None:
    """Arm `stalls`' server accepts its measured requests and never answers: that start fails
    at the first-token deadline, the next arm is measured, the sweep exits; once the server
    answers again, --resume measures the failed start."""
    flag = tmp_path / "stall-while-this-exists"
    flag.touch()
    server = f"{sys.executable} {HERE / 'fault_server.py'} --port {{port}} --after 1 --while {flag}"
    plan = tmp_path / "plan.toml"
    plan.write_text(
        f'[plan]\nbaseline = "answers"\nport = {free_port()}\nrestarts = 1\nrequests = 2\n'
        "warmup = 0\n"
        'max_tokens = 4\nworkloads = ["code"]\norder = "sequential"\nhealth_timeout_s = 60\n'
        "first_token_timeout_s = 0.5\ntoken_timeout_s = 0.5\nrun_timeout_s = 60\n"
        f'[[arms]]\nname = "stalls"\nlaunch = "exec {server} --fault stall"\n'
        f'[[arms]]\nname = "answers"\nlaunch = "exec {server.replace(str(flag), "/nonexistent")}"\n'
    )
    out = tmp_path / "b"
    done = run_diagnose("sweep", str(plan), "-o", str(out), timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    runs = {r.arm: r for r in Bundle.open(out).runs()}
    assert runs["stalls"].status == "failed" and runs["answers"].status == "ok"
    assert runs["stalls"].failure and "(the first-token deadline)" in runs["stalls"].failure
    flag.unlink()
    again = CliRunner().invoke(main, ["sweep", str(plan), "-o", str(out), "--resume"])
    assert again.exit_code == 0, _clean(again)
    assert all(r.status == "ok" for r in Bundle.open(out).runs())


# -- issue 34's hostile server, one of each class -------------------------------------------


def _bomb(size: int, encoding: str = "gzip") -> srv.Reply:
    wbits = zlib.MAX_WBITS | (16 if encoding == "gzip" else 0)
    comp = zlib.compressobj(9, zlib.DEFLATED, wbits)
    data = comp.compress(b"\0" * size) + comp.flush()
    return srv.answer(data, headers=f"Content-Encoding: {encoding}\r\n".encode())


def _events(*payloads: str) -> srv.Reply:
    return srv.stream([f"data: {p}\n\n".encode() for p in (*payloads, "[DONE]")])


HOSTILE = {
    "usage: a count of 400 digits": {
        "/v1/completions": _events(
            *['{"choices": [{"text": "t"}], "usage": {"completion_tokens": 1' + "0" * 400 + "}}"]
            * 3
        )
    },
    "choices: not a list": {"/v1/completions": _events(*['{"choices": "abc"}'] * 3)},
    "sse event: nested 100,000 deep": {"/v1/completions": _events("[" * 100_000 + "]" * 100_000)},
    "http error: 500 of 300 MB": {
        "/v1/completions": srv.streamed_body(500, b"e" * 65536, 300 * 2**20)
    },
    "http error: 500 without end": {
        "/v1/completions": srv.streamed_body(500, b"e" * 65536, 10**15)
    },
    "endpoint: /v1/models nested 100,000 deep": {
        "/v1/models": srv.answer(b"[" * 100_000 + b"]" * 100_000)
    },
    "endpoint: /version a gzip bomb": {"/version": _bomb(8 * MAX_ANSWER)},
    "metrics: a deflate bomb": {"/metrics": _bomb(4 * MAX_METRICS, "deflate")},
    "metrics: garbage": {"/metrics": srv.answer(bytes(range(256)) * 10)},
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_answer_is_a_record_or_a_note_never_a_traceback(
    name: str, tmp_path: Path
) -> None:
    routes = dict(HOSTILE[name])
    hostile = routes.pop("/v1/completions", None)
    completions = srv.normal(4) if hostile is None else _after(1, hostile)  # the probe passes
    with srv.serving(_routes(completions, **routes)) as server:
        result = _collect(server.url, tmp_path / "b", "--timeout", "10")
    _clean(result)
    assert result.exit_code in (0, 1, 2), result.output
    if result.exit_code != 2:  # collect wrote a bundle: its own reader takes it
        report = CliRunner().invoke(main, ["report", str(tmp_path / "b"), "--format", "json"])
        _clean(report)
        assert report.exit_code in (0, 3), report.output
