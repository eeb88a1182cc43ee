"""How a run's requests are made: options, request labels, jobs and the JSON payload."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from diagnostic import defaults
from diagnostic.bundle.redact import redact_text
from diagnostic.errors import DiagnosticError

Api = Literal["completions", "chat"]
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


class ClientOptions(BaseModel):
    """How every request of a run is made (the same for every arm)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="Server base URL, e.g. http://127.0.0.1:8000")
    api: Api = Field("completions", description="OpenAI API: completions or chat")
    model: str | None = Field(None, description="Model name sent; None leaves it out")
    max_tokens: int = Field(
        defaults.MAX_TOKENS, ge=1, description="Output length asked of every request"
    )
    seed: int = Field(defaults.SEED, description="Sampler seed (greedy anyway)")
    force_length: bool = Field(
        True, description="Send ignore_eos and min_tokens so every answer has max_tokens tokens"
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra request fields merged into every payload"
    )
    api_key: str | None = Field(None, exclude=True, repr=False, description="Bearer token")
    connect_timeout_s: float = Field(
        defaults.CONNECT_TIMEOUT_S, gt=0, description="Connect timeout"
    )
    read_timeout_s: float = Field(
        defaults.READ_TIMEOUT_S, gt=0, description="Longest silence between bytes"
    )
    total_timeout_s: float = Field(
        defaults.REQUEST_TIMEOUT_S, gt=0, description="Longest time for one request"
    )
    first_token_timeout_s: float = Field(
        defaults.FIRST_TOKEN_TIMEOUT_S,
        gt=0,
        description="Longest time from sending a request to its first token",
    )
    token_timeout_s: float = Field(
        defaults.TOKEN_TIMEOUT_S, gt=0, description="Longest wait between two tokens"
    )
    max_output_bytes: int = Field(
        defaults.MAX_OUTPUT_BYTES,
        ge=1024,
        description="Stream bytes kept per request before giving up",
    )

    def timeout(self) -> httpx.Timeout:
        """httpx timeouts: read is the gap between bytes; the total is checked per chunk."""
        return httpx.Timeout(
            connect=self.connect_timeout_s,
            read=self.read_timeout_s,
            write=self.read_timeout_s,
            pool=self.total_timeout_s,
        )


@dataclass(frozen=True)
class RequestLabel:
    """Where a request belongs: copied into its record."""

    arm: str
    restart: int
    seq: int
    workload: str
    prompt_id: str
    warmup: bool
    concurrency: int = 1
    attempt: int = 1


@dataclass(frozen=True)
class Job:
    """One request to make: its label and its prompt (text, or chat messages)."""

    label: RequestLabel
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None


def server_url(url: str) -> str:
    """The server's base URL as given, once it is one: http(s) with a host, no credentials (a
    user name and password would reach the bundle and clash with the API key's header), and
    not the OpenAI API's own path (`…/v1`: diagnose adds /v1/completions itself, so every
    request would 404). Refused, with the URL to give instead."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise DiagnosticError(
            f"{redact_text(url)}: not a URL ({exc}); give the server's base URL, "
            "e.g. http://127.0.0.1:8000"
        ) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise DiagnosticError(
            f"{redact_text(url)}: not an http:// or https:// URL; give the server's base URL "
            f"with its scheme, e.g. {_with_scheme(url, parsed)}"
        )
    if parsed.userinfo:
        clean = parsed.copy_with(userinfo=b"")
        raise DiagnosticError(
            f"{clean} was given with a user name and password in it: diagnose refuses "
            "credentials in a URL (they would be stored with the bundle); give the URL "
            f"without them ({clean}) and an API key with --api-key-env VAR"
        )
    api = _API_PATH.search(parsed.path)
    if api:
        base = str(parsed.copy_with(path=parsed.path[: api.start()] or "/", query=None))
        raise DiagnosticError(
            f"{redact_text(url)}: give the server's base URL, without "
            f"{api.group(0).rstrip('/')}: "
            f"{base.rstrip('/')} (diagnose calls {PATHS['completions']} and "
            f"{PATHS['chat']} below it, and reads /metrics and the engine's info endpoints "
            "at its root)"
        )
    return url


def _with_scheme(url: str, parsed: httpx.URL) -> str:
    if parsed.host:  # ftp://host:8000
        return str(parsed.copy_with(scheme="http"))
    return f"http://{url}" if "://" not in url else "http://127.0.0.1:8000"


# The OpenAI API's path at the end of a URL: what clients of the openai package call base_url.
_API_PATH = re.compile(r"/v1(?:/(?:completions|chat/completions|models))?/*$")


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The Authorization header for an API key (nothing when there is none)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def build_payload(options: ClientOptions, job: Job) -> dict[str, Any]:
    """The JSON body of one greedy, streamed, fixed-length request."""
    body: dict[str, Any] = {
        "max_tokens": options.max_tokens,
        "temperature": 0,
        "seed": options.seed,
        "stream": True,
        # vLLM sends usage in every chunk with continuous_usage_stats: tokens per chunk.
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if options.model is not None:
        body["model"] = options.model
    if options.force_length:
        body["ignore_eos"] = True
        body["min_tokens"] = options.max_tokens
    if options.api == "chat":
        body["messages"] = job.messages or [{"role": "user", "content": job.prompt or ""}]
    else:
        body["prompt"] = job.prompt if job.prompt is not None else _flatten(job.messages)
    body.update(options.extra_body)
    return body


def _flatten(messages: list[dict[str, Any]] | None) -> str:
    return "\n\n".join(str(m.get("content", "")) for m in messages or [])
