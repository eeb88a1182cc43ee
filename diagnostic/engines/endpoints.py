"""Engine fingerprint from HTTP: which engine, version, model and server args a server reports.

The answers are data from outside: each is read within a size and the fingerprint's time, and
one that cannot be read (a bomb, JSON nested thousands deep, a stall) is noted, not kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from diagnostic.bundle.gate import plain_json
from diagnostic.common.answers import (
    ACCEPT_ENCODING,
    Deadline,
    NotJson,
    Unreadable,
    parse_json,
    read_body,
)
from diagnostic.schema.bundle import EngineInfo

__all__ = ["INFO_PATHS", "Answers", "Fingerprint", "fetch_answers", "fingerprint", "identify"]

# Info endpoints by engine: vLLM /version, /v1/models (/server_info only in dev mode); SGLang
# /server_info (>= 0.5.6) or /get_server_info, /get_model_info; llama.cpp /props, /slots.
INFO_PATHS = (
    "/version",
    "/v1/models",
    "/server_info",
    "/get_server_info",
    "/get_model_info",
    "/props",
    "/slots",
)
_MAX_TEXT = 64 * 1024
# An info answer is a few KB (llama.cpp's /props with its chat template: tens of KB).
MAX_ANSWER = 4 * 2**20
_OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llamacpp"}


class Fingerprint(BaseModel):
    """What the server's info endpoints say about it."""

    model_config = ConfigDict(extra="forbid")

    engine: EngineInfo = Field(default_factory=EngineInfo, description="Engine name and version")
    model: str | None = Field(None, description="First model id of /v1/models")
    server_args: dict[str, Any] = Field(
        default_factory=dict, description="Server arguments as the engine reports them"
    )
    endpoints: dict[str, Any] = Field(
        default_factory=dict, description="Raw answers (JSON, or text) of the info paths, by path"
    )
    unreachable: str | None = Field(None, description="Why no endpoint could be reached")
    unreadable: dict[str, str] = Field(
        default_factory=dict,
        description="Info paths that answered something diagnose could not read, and why",
    )


@dataclass
class Answers:
    """What the info paths answered: the readable answers, and why the others were not."""

    answers: dict[str, Any] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)


def fetch_answers(
    client: httpx.Client, paths: tuple[str, ...] = INFO_PATHS, *, timeout_s: float = 10.0
) -> Answers:
    """GET each path within `timeout_s` for them all; keep 2xx answers (JSON when it parses,
    else text); skip 404s; note what answered but could not be read, or not in time.

    Raises httpx.ConnectError when the server cannot be reached at all.
    """
    found = Answers()
    with Deadline(timeout_s) as deadline:
        for path in paths:
            if path == "/get_server_info" and "/server_info" in found.answers:
                continue  # same answer under SGLang's newer name
            why, answer = _fetch(client, path, deadline)
            if why is not None:
                found.unreadable[path] = why
            elif answer is not _ABSENT:
                found.answers[path] = answer
    return found


def _fetch(client: httpx.Client, path: str, deadline: Deadline) -> tuple[str | None, Any]:
    """(why it cannot be read, None) or (None, the answer); ConnectError passes through."""
    late = f"no whole answer within {deadline.seconds:g} s"
    if deadline.left() <= 0:
        return f"not asked: the info paths took the whole {deadline.seconds:g} s", None
    try:
        return None, _get(client, path, deadline)
    except httpx.ConnectError:
        raise
    except httpx.TimeoutException:
        return late, None
    except httpx.HTTPError as exc:
        # one broken endpoint must not stop the fingerprint
        return late if deadline.passed else f"{type(exc).__name__}: {str(exc)[:200]}", None
    except Unreadable as exc:
        return str(exc), None


_ABSENT = object()  # a 404 (or any non-2xx): the engine has no such path


def _get(client: httpx.Client, path: str, deadline: Deadline) -> Any:
    timeout = deadline.left()
    with client.stream("GET", path, timeout=timeout, extensions=deadline.extensions) as response:
        if not 200 <= response.status_code < 300:
            return _ABSENT
        body = read_body(response, limit=MAX_ANSWER, deadline=deadline.end)
    try:
        # as the bundle's reader takes it: no NaN, no 400-digit integer, no deep nesting
        return plain_json(parse_json(body))
    except NotJson:
        return body[:_MAX_TEXT].decode("utf-8", "replace")


def fingerprint(
    base_url: str,
    *,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> Fingerprint:
    """Ask the server's info endpoints, all within `timeout_s`, and identify the engine; never
    raises for HTTP faults or unreadable answers."""
    with httpx.Client(
        base_url=base_url,
        headers={**ACCEPT_ENCODING, **(headers or {})},
        timeout=timeout_s,
        transport=transport,
    ) as client:
        try:
            found = fetch_answers(client, timeout_s=timeout_s)
        except httpx.ConnectError as exc:
            return Fingerprint(unreachable=f"cannot connect to {base_url}: {exc}")
    return identify(found.answers).model_copy(update={"unreadable": found.unreadable})


def identify(answers: dict[str, Any]) -> Fingerprint:
    """Engine, version, model and server args from info answers (pure: no I/O)."""
    name = _engine_name(answers)
    version, args = _READERS.get(name, _unknown)(answers)
    return Fingerprint(
        engine=EngineInfo(name=name, version=_text(version)),
        model=_first_model(answers),
        server_args=args,
        endpoints=answers,
    )


def _text(value: Any) -> str | None:
    """A version as text: a server may report a number, or something that is no version."""
    if isinstance(value, str):
        return value[:200]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _engine_name(answers: dict[str, Any]) -> str:
    owner = _first_entry(answers).get("owned_by")
    if isinstance(owner, str) and owner.lower() in _OWNERS:
        return _OWNERS[owner.lower()]
    props = answers.get("/props")
    if isinstance(props, dict) and "build_info" in props:
        return "llamacpp"
    info = _server_info(answers)
    if "speculative_algorithm" in info or "model_path" in info:
        return "sglang"
    if isinstance(answers.get("/version"), dict) and "version" in answers["/version"]:
        return "vllm"
    return "unknown"


def _first_entry(answers: dict[str, Any]) -> dict[str, Any]:
    models = answers.get("/v1/models")
    data = models.get("data") if isinstance(models, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return data[0]
    return {}


def _first_model(answers: dict[str, Any]) -> str | None:
    model = _first_entry(answers).get("id")
    return model if isinstance(model, str) else None


def _server_info(answers: dict[str, Any]) -> dict[str, Any]:
    for path in ("/server_info", "/get_server_info"):
        info = answers.get(path)
        if isinstance(info, dict):
            return info
    return {}


def _vllm(answers: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    version = _dict(answers.get("/version")).get("version")
    entry = _first_entry(answers)
    args: dict[str, Any] = {k: entry[k] for k in ("root", "max_model_len") if k in entry}
    # /server_info exists only with VLLM_SERVER_DEV_MODE=1 and shows pre-resolution config.
    args.update(_server_info(answers))
    return version, args


def _sglang(answers: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    info = _server_info(answers)
    # internal_states is run-time state (e.g. avg_spec_accept_length), not an argument.
    args = {k: v for k, v in info.items() if k not in ("version", "internal_states")}
    version = info.get("version") or _dict(answers.get("/version")).get("version")
    return version, args


def _llamacpp(answers: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    props = answers.get("/props") if isinstance(answers.get("/props"), dict) else {}
    assert isinstance(props, dict)
    keys = ("model_path", "model_alias", "total_slots", "build_info", "model_ftype")
    args: dict[str, Any] = {k: props[k] for k in keys if k in props}
    if isinstance(props.get("default_generation_settings"), dict):
        args["n_ctx"] = props["default_generation_settings"].get("n_ctx")
    slots = answers.get("/slots")
    if isinstance(slots, list) and slots and isinstance(slots[0], dict):
        # /props shows speculative.types "none" even with n-gram on; /slots is right.
        slot = slots[0]
        args["speculative"] = slot.get("speculative")
        params = slot.get("params") if isinstance(slot.get("params"), dict) else {}
        assert isinstance(params, dict)
        args.update({k: v for k, v in params.items() if k.startswith("speculative")})
    return props.get("build_info"), args


def _unknown(answers: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    return _dict(answers.get("/version")).get("version"), {}


_READERS = {"vllm": _vllm, "sglang": _sglang, "llamacpp": _llamacpp}
