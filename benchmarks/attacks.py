"""The attack pass of issue 34, as one command: a hostile server, a careless or hostile user.

Every case runs the real command line (`diagnose collect`, `sweep`, `report`) in a child
process against tests/sse_server.py answering as the case says, or with the file system, plan
or names the case gives, then reads the bundle back (`diagnose report --format json`). A run
is *clean* when every command ended with exit 0, 1 or 2 and no Python traceback; a *traceback*
when any printed one (or died of a signal); a *hang* when it outlived the harness' limit. The
child's peak memory is measured too (a bomb must not cost more than the caps).

    python benchmarks/attacks.py [--only REGEX] [--limit-s 60] [--list] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import sse_server as srv  # noqa: E402

DIAGNOSE = [sys.executable, "-m", "diagnostic"]
MODELS = json.dumps(
    {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm"}]}
).encode()
METRICS = b"# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total 5\n"


def _usage(completion: str = "1", prompt: str = "3") -> str:
    return f'{{"prompt_tokens": {prompt}, "completion_tokens": {completion}}}'


def _events(*payloads: str) -> list[bytes]:
    """SSE events of raw JSON text (NaN and 400 digits are not Python JSON)."""
    return [f"data: {p}\n\n".encode() for p in payloads]


def _good_events(n: int = 4) -> list[bytes]:
    return srv.stream_body(n)


def good_routes() -> dict[str, srv.Reply]:
    """A small, well-behaved vLLM-like server."""
    return {
        "/v1/models": srv.answer(MODELS, headers=b"Content-Type: application/json\r\n"),
        "/version": srv.answer(b'{"version": "0.0-attack"}'),
        "/metrics": srv.answer(METRICS),
        "/health": srv.answer(b""),
        "/v1/completions": srv.stream(_good_events()),
        "/v1/chat/completions": srv.stream(_chat_events()),
    }


def _chat_events() -> list[bytes]:
    deltas = [
        json.dumps({"choices": [{"delta": {"content": f"t{i}"}}], "usage": json.loads(_usage())})
        for i in range(4)
    ]
    return _events(*deltas, '{"choices": [], "usage": ' + _usage("4") + "}", "[DONE]")


def _bomb(encoding: str, size: int = 1024**3) -> bytes:
    """`size` zero bytes compressed (gzip or deflate; 'gzip, gzip' twice)."""
    block = b"\0" * (64 * 1024 * 1024)
    if encoding == "deflate":
        comp = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS)
    else:
        comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [comp.compress(block) for _ in range(size // len(block))]
    data = b"".join(parts) + comp.flush()
    if encoding == "gzip, gzip":
        data = gzip.compress(data, 9)
    return data


_BOMBS: dict[str, bytes] = {}


def _bombed(encoding: str) -> bytes:
    if encoding not in _BOMBS:  # a few seconds each: main() makes them before the cases
        _BOMBS[encoding] = _bomb(encoding)
    return _BOMBS[encoding]


def bomb(encoding: str) -> srv.Reply:
    """An answer that inflates to 1 GiB (`gzip, gzip`: twice compressed, far more)."""

    def reply(conn: socket.socket, server: srv.Server) -> bool:
        head = f"Content-Encoding: {encoding}\r\n".encode()
        return srv.answer(_bombed(encoding), headers=head)(conn, server)

    return reply


def stream_bomb(encoding: str) -> srv.Reply:
    """An SSE stream that inflates to 1 GiB."""

    def reply(conn: socket.socket, server: srv.Server) -> bool:
        head = f"Content-Encoding: {encoding}\r\n".encode()
        return srv.stream([_bombed(encoding)], headers=head)(conn, server)

    return reply


def deep(n: int, inner: str = "1") -> str:
    return "[" * n + inner + "]" * n


@dataclass
class Case:
    """One attack: its class, its name, and how to run it."""

    klass: str
    name: str
    run: Callable[[Path, float], list[list[str] | str]]  # commands run in order; str: shell
    routes: dict[str, srv.Reply] | None = None
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    free_port: bool = False  # no server: the command starts its own on a free port


def collect_case(
    klass: str, name: str, routes: dict[str, srv.Reply], *extra: str, timeout: str = "5"
) -> Case:
    def run(tmp: Path, url: float) -> list[list[str] | str]:
        out = str(tmp / "b")
        return [
            _collect_to(out, url, "--timeout", timeout, *extra),
            [*DIAGNOSE, "report", out, "--format", "json", "-o", str(tmp / "a.json")],
        ]

    return Case(klass, name, run, {**good_routes(), **routes})


def server_cases() -> Iterator[Case]:
    values = ["-5", "3.7", '"12"', "NaN", "1" + "0" * 400, "1e999", "true", "null", "[]", "{}"]
    for field_name in ("completion_tokens", "prompt_tokens"):
        for value in values:
            usage = _usage(value, "3") if field_name == "completion_tokens" else _usage("1", value)
            events = [
                *(
                    f'{{"choices": [{{"text": "t{i}"}}], "usage": {usage}}}'.encode()
                    for i in range(3)
                )
            ]
            reply = srv.stream(_events(*(e.decode() for e in events), "[DONE]"))
            yield collect_case("usage", f"{field_name}={value[:12]}", {"/v1/completions": reply})
    choices = [
        "null",
        '"abc"',
        '{"text": "x"}',
        '[[{"text": "x"}]]',
        "[null]",
        "[1]",
        '["x"]',
        '[{"text": 5}]',
        '[{"text": {"a": 1}}]',
        '[{"text": ["x"]}]',
        '[{"text": "x", "finish_reason": 7}]',
        '[{"text": "x", "finish_reason": {"a": 1}}]',
        '[{"text": "x", "finish_reason": "' + "a" * 100_000 + '"}]',
    ]
    for value in choices:
        body = [f'{{"choices": {value}, "usage": {_usage()}}}' for _ in range(3)]
        reply = srv.stream(_events(*body, "[DONE]"))
        yield collect_case("choices", f"choices={value[:24]}", {"/v1/completions": reply})
    for value in ['"x"', '{"content": 5}', '{"content": {"a": 1}}', '{"reasoning_content": [1]}']:
        body = [f'{{"choices": [{{"delta": {value}}}]}}' for _ in range(3)]
        reply = srv.stream(_events(*body, "[DONE]"))
        yield collect_case(
            "choices", f"chat delta={value}", {"/v1/chat/completions": reply}, "--api", "chat"
        )
    events = {
        "event nested 1000": deep(1000),
        "event nested 100000": deep(100_000),
        "usage nested 5000": f'{{"choices": [{{"text": "x"}}], "usage": {deep(5000)}}}',
        "timings nested 5000": '{"choices": [{"text": "x"}], "timings": {"a": ' + deep(5000) + "}}",
        "timings NaN": '{"choices": [{"text": "x"}], "timings": {"predicted_ms": NaN}}',
        "timings 400 digits": '{"choices": [{"text": "x"}], "timings": {"n": 1' + "0" * 400 + "}}",
        "event a number": "5",
        "event a 400-digit number": "1" + "0" * 400,
        "error nested": f'{{"error": {deep(5000)}}}',
        "error huge": '{"error": "' + "e" * 5_000_000 + '"}',
        "text 10 MB": '{"choices": [{"text": "' + "x" * 10_000_000 + '"}]}',
    }
    for name, payload in events.items():
        reply = srv.stream(_events(payload, payload, "[DONE]"))
        yield collect_case("sse event", name, {"/v1/completions": reply})
    line = srv.streamed_body(200, b"data: " + b"x" * 65536, 200 * 1024**2)
    yield collect_case("sse event", "one line of 200 MB", {"/v1/completions": line})
    errors = {
        "500 1 KB": srv.answer(b"e" * 1024, status=500),
        "500 300 MB": srv.streamed_body(500, b"e" * 65536, 300 * 1024**2),
        "500 endless": srv.streamed_body(500, b"e" * 65536, 10**15),
        "400 nested json": srv.answer(deep(100_000).encode(), status=400),
        "200 html": srv.answer(b"<html>hello</html>"),
        "garbage status line": srv.raw(b"HTTP/9 WHAT\r\n\r\n"),
        "lying chunk size": srv.raw(srv.HEAD % b"" + b"ffffff\r\nshort\r\n"),
    }
    for name, reply in errors.items():
        yield collect_case("http error", name, {"/v1/completions": reply})
    json_head = b"Content-Type: application/json\r\n"
    for path in ("/v1/models", "/version", "/props"):
        for n in (1000, 100_000):
            yield collect_case(
                "endpoint", f"{path} nested {n}", {path: srv.answer(deep(n).encode())}
            )
    bad_models = {
        "huge 200 MB": srv.streamed_body(200, b"x" * 65536, 200 * 1024**2, headers=json_head),
        "NaN": srv.answer(b'{"data": [{"id": "m", "max_model_len": NaN}]}'),
        "Infinity": srv.answer(b'{"data": [{"id": "m", "max_model_len": Infinity}]}'),
        "400 digits": srv.answer(b'{"data": [{"id": "m", "max_model_len": 1' + b"0" * 400 + b"}]}"),
        "data a string": srv.answer(b'{"data": "m"}'),
        "data [1]": srv.answer(b'{"data": [1]}'),
        "id 5": srv.answer(b'{"data": [{"id": 5, "owned_by": {}}]}'),
        "gzip bomb": bomb("gzip"),
        "deflate bomb": bomb("deflate"),
        "double gzip bomb": bomb("gzip, gzip"),
    }
    for name, reply in bad_models.items():
        yield collect_case("endpoint", f"/v1/models {name}", {"/v1/models": reply})
    yield collect_case("endpoint", "/version gzip bomb", {"/version": bomb("gzip")})
    yield collect_case(
        "endpoint", "/props 400 digits", {"/props": srv.answer(b'{"n": 1' + b"0" * 400 + b"}")}
    )
    bad_metrics = {
        "gzip bomb": bomb("gzip"),
        "deflate bomb": bomb("deflate"),
        "double gzip bomb": bomb("gzip, gzip"),
        "huge 300 MB": srv.streamed_body(200, b"# x\n" * 16384, 300 * 1024**2),
        "garbage": srv.answer(bytes(range(256)) * 10),
        "NaN counter": srv.answer(b"# TYPE vllm:x counter\nvllm:x_total NaN\n"),
        "400 digits": srv.answer(b"vllm:x_total 1" + b"0" * 400 + b"\n"),
        "not utf-8": srv.answer(b"vllm:x_total 1 \xff\xfe\n"),
    }
    for name, reply in bad_metrics.items():
        yield collect_case("metrics", f"/metrics {name}", {"/metrics": reply})
    for encoding in ("gzip", "deflate", "gzip, gzip"):
        yield collect_case(
            "bomb", f"stream {encoding} bomb", {"/v1/completions": stream_bomb(encoding)}
        )


def stall_cases() -> Iterator[Case]:
    ok_head = srv.HEAD % b""
    stalls: dict[str, dict[str, srv.Reply]] = {
        "completion accepts then stalls": {"/v1/completions": srv.stall},
        "completion headers then stalls": {"/v1/completions": srv.silent_after(0, 3600)},
        "completion dribbles a byte every 0.5 s": {
            "/v1/completions": srv.dribble(ok_head + srv.chunk(srv.text("a", 1)), b"")
        },
        "completion dribbles its headers": {
            "/v1/completions": srv.dribble(b"HTTP/1.1 200 OK\r\n", b"X")
        },
        "/v1/models stalls": {"/v1/models": srv.stall},
        "/v1/models dribbles": {
            "/v1/models": srv.dribble(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n")
        },
        "/version stalls": {"/version": srv.stall},
        "/version dribbles": {
            "/version": srv.dribble(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n")
        },
        "/metrics stalls": {"/metrics": srv.stall},
        "/metrics dribbles": {
            "/metrics": srv.dribble(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n")
        },
    }
    for name, routes in stalls.items():
        yield collect_case("stall", name, routes, timeout="5")
    no_usage = _events(*(json.dumps({"choices": [{"text": f"t{i}"}]}) for i in range(3)), "[DONE]")
    yield collect_case(
        "stall",
        "/tokenize stalls",
        {"/v1/completions": srv.stream(no_usage), "/tokenize": srv.stall},
    )


def _collect_to(out: str, url: object, *extra: str) -> list[str]:
    """collect of two short requests; --log of an empty file: no log found on the host."""
    empty = Path(out).parent / "empty.log"
    empty.touch()
    return [
        *DIAGNOSE,
        "collect",
        str(url),
        "-o",
        out,
        "--workloads",
        "code",
        "--requests",
        "2",
        "--warmup",
        "0",
        "--max-tokens",
        "4",
        "--log",
        str(empty),
        *extra,
    ]


def fs_cases() -> Iterator[Case]:
    def link_to(target: Callable[[Path], Path | str]) -> Callable[[Path], None]:
        def setup(tmp: Path) -> None:
            (tmp / "real").mkdir()
            (tmp / "b").symlink_to(target(tmp))

        return setup

    links = {
        "-o symlink to an empty folder": (lambda t: t / "real", ()),
        "-o dangling symlink": (lambda t: t / "nowhere", ()),
        "-o symlink to a file": (lambda t: Path("/etc/hostname"), ()),
        "-o symlink loop": (lambda t: t / "b", ()),
        "-o symlink with --force": (lambda t: t / "real", ("--force",)),
        "-o symlink to / with --force": (lambda t: Path("/"), ("--force",)),
    }
    for name, (target, extra) in links.items():

        def run(tmp: Path, url: object, extra: tuple[str, ...] = extra) -> list[list[str] | str]:
            return [_collect_to(str(tmp / "b"), url, *extra)]

        yield Case("file system", name, run, good_routes(), setup=link_to(target))
    names = {
        "arm of 300 characters": ("--arm", "a" * 300),
        "arm with /": ("--arm", "a/../../x"),
        "arm ..": ("--arm", ".."),
    }
    for name, args in names.items():

        def run(tmp: Path, url: object, args: tuple[str, ...] = args) -> list[list[str] | str]:
            return [_collect_to(str(tmp / "b"), url, *args)]

        yield Case("names", name, run, good_routes())
    workloads = {
        "workload of 300 characters": "w" * 300,
        "workload with /": "a/../../x",
        "workload with NUL": "a\u0000b",
        "workload ..": "..",
        "workload empty": "",
    }
    for name, workload in workloads.items():

        def run(tmp: Path, url: object, workload: str = workload) -> list[list[str] | str]:
            prompts = tmp / "p.jsonl"
            prompts.write_text(json.dumps({"workload": workload, "prompt": "hi"}) + "\n")
            cmd = _collect_to(str(tmp / "b"), url, "--prompts", str(prompts))
            cmd[cmd.index("--workloads") : cmd.index("--workloads") + 2] = []
            return [cmd]

        yield Case("names", name, run, good_routes())
    plan_names = {
        "plan arm of 300 characters": "a" * 300,
        "plan arm with NUL": "a\\u0000b",
        "plan arm with /": "a/b",
    }
    for name, arm in plan_names.items():

        def run(tmp: Path, url: object, arm: str = arm) -> list[list[str] | str]:
            plan = tmp / "plan.toml"
            plan.write_text(
                f'[plan]\nbaseline = "{arm}"\n[[arms]]\nname = "{arm}"\n'
                'launch = "sleep 60 --port {port}"\n'
            )
            return [[*DIAGNOSE, "sweep", str(plan), "-o", str(tmp / "b")]]

        yield Case("names", name, run)

    def unshared(script: str) -> str:
        return f"unshare -rm sh -c {shlex_quote(script)}"

    def disk_full(tmp: Path, url: object) -> list[list[str] | str]:
        mnt = tmp / "mnt"
        mnt.mkdir()
        args = _collect_to(str(mnt / "b"), url)
        args[args.index("--log") + 1] = str(tmp / "empty.log")  # outside the small disk
        (tmp / "empty.log").touch()
        cmd = " ".join(shlex_quote(c) for c in args)
        cmd = cmd.replace("--requests 2", "--requests 400")
        return [unshared(f"mount -t tmpfs -o size=96k tmpfs {mnt} && {cmd}")]

    yield Case("file system", "disk fills up during collect", disk_full, good_routes())

    def read_only(tmp: Path, url: object) -> list[list[str] | str]:
        mnt = tmp / "ro"
        mnt.mkdir()
        cmd = " ".join(shlex_quote(c) for c in _collect_to(str(mnt / "b"), url))
        return [unshared(f"mount --bind {mnt} {mnt} && mount -o remount,ro,bind {mnt} && {cmd}")]

    yield Case("file system", "read-only -o folder", read_only, good_routes())

    def read_only_resume(tmp: Path, url: object) -> list[list[str] | str]:
        out = tmp / "b"
        first = _collect_to(str(out), url)
        again = " ".join(shlex_quote(c) for c in [*_collect_to(str(out), url), "--resume"])
        report = " ".join(
            shlex_quote(c) for c in [*DIAGNOSE, "report", str(out), "--format", "json"]
        )
        ro = f"mount --bind {out} {out} && mount -o remount,ro,bind {out}"
        return [first, unshared(f"{ro} && {again}; {report}")]

    yield Case(
        "file system", "read-only bundle, --resume and report", read_only_resume, good_routes()
    )


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def plan_cases() -> Iterator[Case]:
    absurd = {
        "requests 10^12": "requests = 1000000000000",
        "warmup 10^12": "warmup = 1000000000000",
        "max_tokens 10^18": "max_tokens = 1000000000000000000",
        "restarts -1": "restarts = -1",
        "restarts 10^9": "restarts = 1000000000",
        "port -1": "port = -1",
        "port 70000": "port = 70000",
        "port 10^18": "port = 1000000000000000000",
        "concurrency 10^9": "concurrency = 1000000000",
        "health_timeout_s inf": "health_timeout_s = inf",
        "health_timeout_s 1e308": "health_timeout_s = 1e308",
        "seed 10^30": "seed = 1000000000000000000000000000000",
        "seed -10^30": "seed = -1000000000000000000000000000000",
    }
    for name, line in absurd.items():

        def run(tmp: Path, url: object, line: str = line) -> list[list[str] | str]:
            plan = tmp / "plan.toml"
            plan.write_text(
                f'[plan]\n{line}\n[[arms]]\nname = "baseline"\nlaunch = "sleep 1 --port {{port}}"\n'
            )
            return [[*DIAGNOSE, "sweep", str(plan), "--dry-run"]]

        yield Case("plan", name, run)

    def product(tmp: Path, url: object) -> list[list[str] | str]:
        values = ", ".join(str(i) for i in range(400))
        plan = tmp / "plan.toml"
        plan.write_text(
            '[plan]\n[[arms]]\nname = "baseline"\nlaunch = "s --port {port}"\n'
            '[[arms]]\nname = "x{a}-{b}-{c}"\nlaunch = "s --port {port} {a} {b} {c}"\n'
            f"sweep = {{ a = [{values}], b = [{values}], c = [{values}] }}\n"
        )
        return [[*DIAGNOSE, "sweep", str(plan), "--dry-run"]]

    yield Case("plan", "sweep of 64 million arms", product)
    yield from launch_cases()


def launch_cases() -> Iterator[Case]:
    """Sweeps of one start whose launch, health or stop command misbehaves (short timeouts)."""
    cases = {
        "launch daemonises and exits": (
            f"setsid timeout 40 {sys.executable} benchmarks/paced_server.py --port {{port}}"
            " > /dev/null 2>&1 < /dev/null & echo started; exit 0",
            {},
        ),
        "launch daemonises holding its output": (
            f"setsid timeout 40 {sys.executable} benchmarks/paced_server.py --port {{port}} &"
            " exit 0",
            {},
        ),
        "health command never returns": ("sleep 300 # {port}", {"health": "sleep 100000"}),
        "health command daemonises holding its pipe": (
            "sleep 300 # {port}",
            {"health": "setsid sleep 100000 & exit 1"},
        ),
        "stop command never returns": (
            "exec sleep 300 # {port}",
            {"health": "true", "stop": "sleep 100000"},
        ),
        "stop command daemonises holding its pipe": (
            "exec sleep 300 # {port}",
            {"health": "true", "stop": "setsid sleep 100000 & exit 0"},
        ),
    }
    for name, (launch, extra) in cases.items():

        def run(
            tmp: Path, url: object, launch: str = launch, extra: dict[str, str] = extra
        ) -> list[list[str] | str]:
            port = str(url).rsplit(":", 1)[1]
            lines = [
                "[plan]",
                f"port = {port}",
                "restarts = 1",
                "requests = 1",
                "warmup = 0",
                "max_tokens = 4",
                'workloads = ["code"]',
                "health_timeout_s = 8",
                "command_timeout_s = 5",  # the plan states its commands' timeout
                *(f"{k} = {json.dumps(v)}" for k, v in extra.items()),
                "[[arms]]",
                'name = "baseline"',
                f"launch = {json.dumps(launch + ' # --port {port}')}",
            ]
            plan = tmp / "plan.toml"
            plan.write_text("\n".join(lines) + "\n")
            return [[*DIAGNOSE, "sweep", str(plan), "-o", str(tmp / "b")]]

        yield Case("launch", name, run, free_port=True)


def all_cases() -> list[Case]:
    return [*server_cases(), *stall_cases(), *fs_cases(), *plan_cases()]


# -- running ------------------------------------------------------------------------------


@dataclass
class Outcome:
    case: str
    klass: str
    verdict: str  # clean, traceback, hang, unreadable (a bundle written that reads back refused)
    codes: list[int | None]
    seconds: float
    max_rss_mb: float
    last: str


def _run_one(
    command: list[str] | str, limit_s: float, env: dict[str, str]
) -> tuple[int | None, str, float]:
    """Exit code (None: killed at the limit), output, peak RSS (MB) of one command."""
    shell = isinstance(command, str)
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            command,
            shell=shell,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env={**os.environ, "COLUMNS": "200", **env},
            start_new_session=True,
        )
        deadline = time.monotonic() + limit_s
        code: int | None = None
        rss = 0.0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                rss = usage.ru_maxrss / 1024
                proc.returncode = code
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                rss = usage.ru_maxrss / 1024
                proc.returncode = -9
                break
            time.sleep(0.05)
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything the command left behind
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    return code, text, rss


def run_case(case: Case, limit_s: float) -> Outcome:
    tmp = Path(tempfile.mkdtemp(prefix="attack-"))
    started = time.monotonic()
    codes: list[int | None] = []
    verdict, last, peak = "clean", "", 0.0
    try:
        with _maybe_serving(case.routes, case.free_port) as url:
            if case.setup:
                case.setup(tmp)
            for command in case.run(tmp, url):  # type: ignore[arg-type]
                left = max(limit_s - (time.monotonic() - started), 1.0)
                code, text, rss = _run_one(command, left, case.env)
                codes.append(code)
                peak = max(peak, rss)
                lines = [x for x in text.strip().splitlines() if x.strip()]
                last = lines[-1][:160] if lines else ""
                if code is None:
                    verdict = "hang"
                    break
                refused = "edited or damaged" in text or "collect again" in text
                if len(codes) == 2 and codes[0] in (0, 1) and code == 2 and refused:
                    verdict = "unreadable"  # collect wrote a bundle its own reader refuses
                if "Traceback (most recent call last)" in text or code not in (0, 1, 2, 130):
                    verdict = "traceback"
                    found = [x for x in lines if re.match(r"^\w*(Error|Exception)\b", x)]
                    last = (found[-1] if found else last)[:160]
                    break
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    return Outcome(case.name, case.klass, verdict, codes, time.monotonic() - started, peak, last)


@contextmanager
def _maybe_serving(routes: dict[str, srv.Reply] | None, free_port: bool) -> Iterator[str]:
    if routes is None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1] if free_port else 9
        yield f"http://127.0.0.1:{port}"
        return
    with srv.serving(srv.routed(routes)) as server:
        yield server.url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run the cases whose class or name matches this regex")
    parser.add_argument("--limit-s", type=float, default=60.0, help="a run past this hangs")
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    parser.add_argument("--json", type=Path, help="write every outcome here")
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cases = [
        c for c in all_cases() if not args.only or re.search(args.only, f"{c.klass}: {c.name}")
    ]
    if args.list:
        for c in cases:
            print(f"{c.klass}: {c.name}")
        return
    if any("bomb" in c.name for c in cases):  # made before any server waits on one
        for encoding in ("gzip", "deflate", "gzip, gzip"):
            _bombed(encoding)
    outcomes = []
    for case in cases:
        outcome = run_case(case, args.limit_s)
        outcomes.append(outcome)
        print(
            f"{outcome.verdict:9} {outcome.seconds:6.1f}s {outcome.max_rss_mb:7.0f}MB "
            f"{case.klass}: {case.name} {outcome.codes} {outcome.last}",
            flush=True,
        )
    _table(outcomes)
    if args.json:
        args.json.write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))


def _table(outcomes: list[Outcome]) -> None:
    classes = sorted({o.klass for o in outcomes})
    print("\n| class | runs | clean | traceback | hang | unreadable bundle | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for k in [*classes, None]:
        rows = [o for o in outcomes if k is None or o.klass == k]
        verdicts = ("clean", "traceback", "hang", "unreadable")
        count = {v: sum(o.verdict == v for o in rows) for v in verdicts}
        peak = max((o.max_rss_mb for o in rows), default=0)
        print(
            f"| {k or '**all**'} | {len(rows)} | {count['clean']} | {count['traceback']} | "
            f"{count['hang']} | {count['unreadable']} | {peak:.0f} |"
        )


if __name__ == "__main__":
    main()
