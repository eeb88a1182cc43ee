"""Engine fingerprint from HTTP: which engine, version, model and server args a server reports."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from diagnostic.schema.bundle import EngineInfo

__all__ = ["INFO_PATHS", "Fingerprint", "fetch_answers", "fingerprint", "identify"]

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


def fetch_answers(client: httpx.Client, paths: tuple[str, ...] = INFO_PATHS) -> dict[str, Any]:
    """GET each path; keep 2xx answers (JSON when it parses, else text); skip 404s and errors.

    Raises httpx.ConnectError when the server cannot be reached at all.
    """
    answers: dict[str, Any] = {}
    for path in paths:
        if path == "/get_server_info" and "/server_info" in answers:
            continue  # same answer under SGLang's newer name
        try:
            response = client.get(path)
        except httpx.ConnectError:
            raise
        except httpx.HTTPError:
            continue  # one slow or broken endpoint must not stop the fingerprint
        if 200 <= response.status_code < 300:
            answers[path] = _body(response)
    return answers


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:_MAX_TEXT]


def fingerprint(
    base_url: str,
    *,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> Fingerprint:
    """Ask the server's info endpoints and identify the engine; never raises for HTTP faults."""
    with httpx.Client(
        base_url=base_url, headers=headers, timeout=timeout_s, transport=transport
    ) as client:
        try:
            answers = fetch_answers(client)
        except httpx.ConnectError as exc:
            return Fingerprint(unreachable=f"cannot connect to {base_url}: {exc}")
    return identify(answers)


def identify(answers: dict[str, Any]) -> Fingerprint:
    """Engine, version, model and server args from info answers (pure: no I/O)."""
    name = _engine_name(answers)
    version, args = _READERS.get(name, _unknown)(answers)
    return Fingerprint(
        engine=EngineInfo(name=name, version=version),
        model=_first_model(answers),
        server_args=args,
        endpoints=answers,
    )


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


def _vllm(answers: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    version = (answers.get("/version") or {}).get("version")
    entry = _first_entry(answers)
    args: dict[str, Any] = {k: entry[k] for k in ("root", "max_model_len") if k in entry}
    # /server_info exists only with VLLM_SERVER_DEV_MODE=1 and shows pre-resolution config.
    args.update(_server_info(answers))
    return version, args


def _sglang(answers: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    info = _server_info(answers)
    # internal_states is run-time state (e.g. avg_spec_accept_length), not an argument.
    args = {k: v for k, v in info.items() if k not in ("version", "internal_states")}
    version = info.get("version") or (answers.get("/version") or {}).get("version")
    return version, args


def _llamacpp(answers: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
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


def _unknown(answers: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    version = answers.get("/version")
    return (version.get("version") if isinstance(version, dict) else None), {}


_READERS = {"vllm": _vllm, "sglang": _sglang, "llamacpp": _llamacpp}
