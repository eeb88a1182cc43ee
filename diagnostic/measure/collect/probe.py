"""check_server: does a base URL answer the OpenAI API collect calls, before it measures?"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx

from diagnostic.common.answers import (
    ACCEPT_ENCODING,
    Deadline,
    NotJson,
    Unreadable,
    parse_json,
    read_body,
)
from diagnostic.errors import DiagnosticError
from diagnostic.measure.client import PATHS, Api, auth_headers

__all__ = ["check_server"]

MODELS = "/v1/models"
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
_TAGS = re.compile(r"<[^>]+>")
_SHOWN = 120  # characters of an answer quoted in an error
_LIMIT = 256 * 1024  # bytes of an answer a probe reads
_SECONDS = 15.0  # the longest a probe waits for one answer


@dataclass(frozen=True)
class _Answer:
    """What one probe request got back, read within bounds."""

    status: int
    kind: str  # the content type, or 'no content type'
    body: bytes  # at most _LIMIT bytes; b"" when it could not be read
    path: str


def check_server(
    base_url: str, *, api: Api, api_key: str | None, model: str | None, timeout_s: float
) -> None:
    """Raise a DiagnosticError naming what answered unless `base_url` serves the OpenAI API
    collect will call: GET /v1/models, then one greedy streamed request of one token to the
    API (with the model collect will send), which must answer a JSON object (an event stream
    of them); a 2xx /v1/models that is no JSON object (an HTML page, an event stream) is no
    OpenAI server. A server without /v1/models passes when the request does. Each answer is
    read within _LIMIT bytes and the timeout (at most _SECONDS), however the server answers.
    Nothing is written anywhere."""
    seconds = min(_SECONDS, timeout_s)
    headers = {**auth_headers(api_key), **ACCEPT_ENCODING}
    limits = httpx.Limits(max_keepalive_connections=0)  # the deadline sees each connection
    with httpx.Client(base_url=base_url, headers=headers, timeout=seconds, limits=limits) as client:
        models = _send(client, "GET", MODELS, base_url, seconds)
        listed = _first_model(models)
        path = PATHS[api]
        answer = _send(client, "POST", path, base_url, seconds, json=_probe(api, model or listed))
    for response, where in ((models, f"GET {MODELS}"), (answer, f"POST {path}")):
        if response.status in (401, 403):
            raise DiagnosticError(
                f"{base_url}{response.path}: {where} answered HTTP {response.status}: the "
                "server wants an API key; put it in an environment variable and pass "
                "--api-key-env VAR"
            )
    if _object(models) is not False and _object(answer) is not False and 200 <= answer.status < 300:
        return  # an API's answer; what collect cannot read in it, each record will say
    said = f"GET {MODELS} answered {_described(models)}; POST {path} answered {_described(answer)}"
    if 503 in (models.status, answer.status):
        raise DiagnosticError(
            f"{base_url} is not ready: {said}; wait until the server has loaded its model, then "
            "collect again"
        )
    if listed is not None or _json(models, "data") is not None:
        raise DiagnosticError(
            f"{base_url} lists models but refused a one-token request: {said}; check --model "
            f"(the server lists {listed or 'none'}) and --api (chat needs a chat template)"
        )
    raise DiagnosticError(
        f"{base_url} does not answer as an OpenAI-compatible server: {said}. Give the base URL "
        "of the inference server's OpenAI API (vLLM, SGLang, llama.cpp's llama-server…; the "
        "part before /v1), and check that the port is the server's and not another service's"
    )


def _send(
    client: httpx.Client, method: str, path: str, base_url: str, seconds: float, **kwargs: Any
) -> _Answer:
    try:
        with (
            Deadline(seconds) as deadline,
            client.stream(method, path, extensions=deadline.extensions, **kwargs) as response,
        ):
            kind = response.headers.get("content-type", "").split(";")[0].strip()
            try:
                body = read_body(response, limit=_LIMIT, deadline=deadline.end)
            except Unreadable:
                body = b""  # the status says enough for a probe
            return _Answer(response.status_code, kind or "no content type", body, path)
    except httpx.HTTPError as exc:
        why = f"no answer within {seconds:g} s" if deadline.passed else f"{type(exc).__name__}"
        raise DiagnosticError(
            f"cannot reach {base_url} ({why}: {exc or 'no answer'}); start the server or fix "
            "the URL"
        ) from None


def _probe(api: Api, model: str | None) -> dict[str, Any]:
    # Streamed, as collect's requests are: the probe calls what the measurement will.
    body: dict[str, Any] = {"max_tokens": 1, "temperature": 0, "stream": True}
    if model is not None:
        body["model"] = model
    if api == "chat":
        body["messages"] = [{"role": "user", "content": "Hello"}]
    else:
        body["prompt"] = "Hello"
    return body


def _object(answer: _Answer) -> bool | None:
    """Whether a 2xx answer is a JSON object (or an event stream of them, for the API):
    False for text that is no JSON (an HTML page); None when it is not a 2xx answer or is
    JSON too deep to read."""
    if not 200 <= answer.status < 300:
        return None
    text = answer.body.lstrip()
    if text.startswith(b"data:") and answer.path != MODELS:
        text = text.split(b"\n", 1)[0].removeprefix(b"data:")
    try:
        return isinstance(parse_json(text), dict)
    except NotJson:
        return False
    except Unreadable:  # JSON too deep or too long to read: collect notes what it cannot read
        return None


def _json(answer: _Answer, key: str) -> Any:
    """`key` of a 2xx JSON object answer (or of the first event of a streamed one), when it is
    a list; else None."""
    if not 200 <= answer.status < 300:
        return None
    text = answer.body.lstrip()
    if text.startswith(b"data:"):  # server-sent events: the first one's JSON
        text = text.split(b"\n", 1)[0].removeprefix(b"data:")
    try:
        body = parse_json(text)
    except Unreadable:
        return None
    value = body.get(key) if isinstance(body, dict) else None
    return value if isinstance(value, list) else None


def _first_model(answer: _Answer) -> str | None:
    data = _json(answer, "data")
    first = data[0] if data else None
    model = first.get("id") if isinstance(first, dict) else None
    return model if isinstance(model, str) else None


def _described(answer: _Answer) -> str:
    """'HTTP 404 (text/html: "Error response")': the status, the content type and the start
    of the text (an HTML page's title), so the user sees what is listening."""
    text = answer.body[: 64 * 1024].decode("utf-8", errors="replace")
    title = _TITLE.search(text)
    shown = " ".join(_TAGS.sub(" ", title.group(1) if title else text).split())
    if len(shown) > _SHOWN:
        shown = shown[: _SHOWN - 1] + "…"
    return f"HTTP {answer.status} ({answer.kind}" + (f": {shown!r})" if shown else ")")
