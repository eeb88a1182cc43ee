"""Redact secrets (API keys, tokens, passwords) from text, commands, mappings and JSON values."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret_name", "redact_json", "redact_mapping", "redact_text"]

MASK = "<redacted>"

# Names of variables, arguments or JSON keys whose values are secrets.
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
# Parts of names that contain a secret word but hold no secret (max_tokens, TOKENIZERS_...).
_HARMLESS_PARTS = re.compile(
    r"TOKENS|TOKENIZER|TOKEN_SOURCE|TOKEN_IDS?\b|(BOS|EOS|PAD|UNK|SEP|CLS|NEXT|STOP|SPECIAL)_TOKEN"
)

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private keys, whole block.
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
        MASK,
    ),
    # Passwords in URLs: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(@)"), rf"\1{MASK}\2"),
    # HTTP authorisation headers and bearer tokens.
    (
        re.compile(
            r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(bearer|basic|token)?\s*[^\s\"',}]+"
        ),
        rf"\1\2 {MASK}",
    ),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{MASK}"),
    (re.compile(r"(?i)\b(x-api-key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"), rf"\1{MASK}"),
    # Well-known token shapes.
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), MASK),
    (re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b"), MASK),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}\b"), MASK),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"), MASK),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MASK),
    (re.compile(r"\bnvapi-[A-Za-z0-9_-]{20,}\b"), MASK),
    (re.compile(r"\bey[A-Za-z0-9_-]{10,}\.ey[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b"), MASK),
    # Query parameters: ?token=…&api_key=…
    (
        re.compile(r"(?i)([?&](?:access_token|token|api_?key|key|secret|password)=)[^&\s\"']+"),
        rf"\1{MASK}",
    ),
]

# Command-line options whose name says they carry a secret: --api-key X, --hf-token=X.
_OPTION = re.compile(
    r"(?P<name>--?[A-Za-z][A-Za-z0-9_-]*)(?P<sep>=|\s+)(?!-)(?P<value>\"[^\"]*\"|'[^']*'|\S+)"
)

# NAME=value, NAME: value, "name": "value", name='value' where NAME is a secret name.
_ASSIGN = re.compile(
    rf"(?P<q>[\"']?)(?P<name>{_NAME})(?P=q)(?P<sep>\s*[:=]\s*)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|\[[^\]]*\]|[^\s,;(){}\[\]'\"]+)"
)


_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_NOT_SECRETS = {
    "None",
    "null",
    "''",
    '""',
    "[]",
    "false",
    "False",
    "true",
    "True",
    "Bearer",
    "Basic",
}


def is_secret_name(name: str) -> bool:
    """True when a variable, option or key name says its value is a secret."""
    upper = _HARMLESS_PARTS.sub("", name.upper())
    return any(word in upper for word in _SECRET_WORDS)


def _mask_assignment(match: re.Match[str]) -> str:
    if not is_secret_name(match.group("name").lstrip("-")):
        return match.group(0)
    value = match.group("value")
    if value in _NOT_SECRETS or MASK in value or _NUMBER.match(value):
        return match.group(0)
    quote = value[0] if value[:1] in "\"'" else ""
    masked = f"{quote}{MASK}{quote}" if quote else MASK
    return match.group(0)[: match.start("value") - match.start(0)] + masked


def redact_text(text: str) -> str:
    """Mask every secret in free text (a log, a command line, an endpoint answer)."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    text = _OPTION.sub(_mask_assignment, text)
    return _ASSIGN.sub(_mask_assignment, text)


def redact_mapping(mapping: Mapping[str, str]) -> dict[str, str]:
    """Mask values of secret-named keys (an environment) and secrets inside the others."""
    return {k: MASK if is_secret_name(k) else redact_text(v) for k, v in mapping.items()}


def redact_json(value: Any) -> Any:
    """Mask secrets anywhere in a JSON-like value (dict keys by name, strings by shape)."""
    if isinstance(value, Mapping):
        return {
            k: MASK
            if is_secret_name(str(k)) and value[k] not in (None, "", False)
            else redact_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_json(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
