"""check_server: does a base URL answer the OpenAI API collect calls, before it measures?"""

from __future__ import annotations

import re
from typing import Any

import httpx

from diagnostic.errors import DiagnosticError
from diagnostic.measure.client import PATHS, Api, auth_headers

__all__ = ["check_server"]

MODELS = "/v1/models"
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
_TAGS = re.compile(r"<[^>]+>")
_SHOWN = 120  # characters of an answer quoted in an error


def check_server(
    base_url: str, *, api: Api, api_key: str | None, model: str | None, timeout_s: float
) -> None:
    """Raise a DiagnosticError naming what answered unless `base_url` serves the OpenAI API
    collect will call: GET /v1/models, then one greedy request of one token to the API (with
    the model collect will send), which must answer JSON with `choices`. A server without
    /v1/models passes when the request does. Nothing is written anywhere."""
    headers = auth_headers(api_key)
    with httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s) as client:
        models = _send(client, "GET", MODELS, base_url)
        listed = _first_model(models)
        path = PATHS[api]
        answer = _send(client, "POST", path, base_url, json=_probe(api, model or listed))
    for response, where in ((models, f"GET {MODELS}"), (answer, f"POST {path}")):
        if response.status_code in (401, 403):
            raise DiagnosticError(
                f"{base_url}{response.url.path}: {where} answered HTTP {response.status_code}: the "
                "server wants an API key; put it in an environment variable and pass "
                "--api-key-env VAR"
            )
    if _json(answer, "choices") is not None:
        return
    said = f"GET {MODELS} answered {_described(models)}; POST {path} answered {_described(answer)}"
    if 503 in (models.status_code, answer.status_code):
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
    client: httpx.Client, method: str, path: str, base_url: str, **kwargs: Any
) -> httpx.Response:
    try:
        return client.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        raise DiagnosticError(
            f"cannot reach {base_url} ({type(exc).__name__}: {exc or 'no answer'}); start the "
            "server or fix the URL"
        ) from None


def _probe(api: Api, model: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"max_tokens": 1, "temperature": 0, "stream": False}
    if model is not None:
        body["model"] = model
    if api == "chat":
        body["messages"] = [{"role": "user", "content": "Hello"}]
    else:
        body["prompt"] = "Hello"
    return body


def _json(response: httpx.Response, key: str) -> Any:
    """`key` of a 2xx JSON object answer, when it is a list; else None."""
    if not 200 <= response.status_code < 300:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    value = body.get(key) if isinstance(body, dict) else None
    return value if isinstance(value, list) else None


def _first_model(response: httpx.Response) -> str | None:
    data = _json(response, "data")
    first = data[0] if data else None
    model = first.get("id") if isinstance(first, dict) else None
    return model if isinstance(model, str) else None


def _described(response: httpx.Response) -> str:
    """'HTTP 404 (text/html: "Error response")': the status, the content type and the start
    of the text (an HTML page's title), so the user sees what is listening."""
    kind = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
    text = response.text
    title = _TITLE.search(text)
    shown = " ".join(_TAGS.sub(" ", title.group(1) if title else text).split())
    if len(shown) > _SHOWN:
        shown = shown[: _SHOWN - 1] + "…"
    return f"HTTP {response.status_code} ({kind}" + (f": {shown!r})" if shown else ")")
