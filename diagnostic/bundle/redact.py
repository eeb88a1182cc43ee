"""Redact secrets (API keys, tokens, passwords) from text, commands, mappings and JSON values."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MASK",
    "LineRedactor",
    "is_secret_name",
    "redact_echoes",
    "redact_file_text",
    "redact_json",
    "redact_mapping",
    "redact_text",
    "secret_values",
]

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
    # Passwords in URLs: scheme://user:password@host (the password may hold an @: the host
    # follows the last one)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s/]+(@)"), rf"\1{MASK}\2"),
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
    (re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"), MASK),
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), MASK),
    # curl -u user:password
    (re.compile(r"(?<![\w-])(-u|--user)(\s+|=)([^\s:]+:)\S+"), rf"\1\2\3{MASK}"),
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
    r"(?<![\w-])(?P<name>--?[A-Za-z][A-Za-z0-9_-]*)(?P<sep>=|\s+)(?!-)(?P<value>\"[^\"]*\"|'[^']*'|\S+)"
)

# NAME=value, NAME: value, "name": "value", name='value' where NAME is a secret name; on one
# line (a docstring's "the key\n:param" is no assignment), and not a path (Token::Number).
_ASSIGN = re.compile(
    rf"(?P<q>[\"']?)(?P<name>{_NAME})(?P=q)(?P<sep>[ \t]*[:=][ \t]*)(?![:=])"
    r"(?P<value>\"[^\"]*\"|'[^']*'|\[[^\]]*\]"
    # a value may hold a ; (a;b) but ends before ;NAME= (a connection string's next part)
    rf"|(?:[^\s,;(){{}}\[\]'\"]|;(?!{_NAME}=))+)"
)


_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
# A number under a KEY or TOKEN name is a count (SGLang's `#token: 300`) unless it is this long;
# under a PASSWORD or SECRET name it is always the secret.
_COUNT_DIGITS = 10
_ALWAYS_SECRET = ("PASS", "SECRET", "CREDENTIAL")
_NOT_SECRETS = {
    # type names: a generated program's `key: str`
    "str",
    "int",
    "float",
    "bool",
    "bytes",
    "dict",
    "list",
    "Any",
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
    if value in _NOT_SECRETS or MASK in value or _is_count(match.group("name"), value):
        return match.group(0)
    quote = value[0] if value[:1] in "\"'" else ""
    masked = f"{quote}{MASK}{quote}" if quote else MASK
    return match.group(0)[: match.start("value") - match.start(0)] + masked


def _is_count(name: str, value: str) -> bool:
    if not _NUMBER.match(value) or len(value.lstrip("-")) >= _COUNT_DIGITS:
        return False
    upper = name.upper()
    return not any(word in upper for word in _ALWAYS_SECRET)


def redact_text(text: str) -> str:
    """Mask every secret in free text (a log, a command line, an endpoint answer)."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    text = _OPTION.sub(_mask_assignment, text)
    return _ASSIGN.sub(_mask_assignment, text)


# A private key's armour lines; its body between them is base64 (with headers in old PEM).
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----.*")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")
_PEM_HEADER = re.compile(r"^\s*(Proc-Type|DEK-Info|Comment):|^\s*$")


class LineRedactor:
    """Redacts a text one line at a time — a server's log as it is written, or a whole file —
    and masks a private key whose armour and body are on separate lines (a line alone shows
    no secret shape). The only redaction of files: logs, /metrics, copied --log files."""

    def __init__(self) -> None:
        self._in_key = False

    def line(self, line: str) -> str:
        """One line (with its newline, if any), redacted."""
        if self._in_key:
            end = _PEM_END.search(line)
            if end is not None:
                self._in_key = False
                return MASK + redact_text(line[end.end() :])
            body, found = _PEM_BODY.subn(MASK, line)
            if found or _PEM_HEADER.match(line):
                return body
            self._in_key = False  # an ordinary line: the armour held no body
        text = redact_text(line)
        begin = _PEM_BEGIN.search(text)
        if begin is None:
            return text
        self._in_key = True
        newline = text[len(text.rstrip("\r\n")) :]
        return text[: begin.start()] + MASK + newline


def redact_file_text(text: str) -> str:
    """A whole file's text redacted line by line, as LineRedactor redacts a log being written."""
    redactor = LineRedactor()
    return "".join(redactor.line(line) for line in text.splitlines(keepends=True))


_SHORTEST_ECHO = 4
_PIECES = re.compile(r"[\s'\"=:@/,;()\[\]{}<>?&.-]+")


def secret_values(text: str) -> list[str]:
    """The secrets redact_text masks in `text`, as literal strings, longest first: a model
    asked to repeat a prompt echoes `s3cr3t` without the `--api-key` that made it one. They
    are the words, and the pieces of words between `=:@/` and the like, that redaction
    removed (of 4 characters or more: shorter ones are too common to mask everywhere)."""
    masked = redact_text(text)
    words = set(re.findall(r"[^\s'\"]+", text)) | set(_PIECES.split(text))
    found = (w for w in words if len(w) >= _SHORTEST_ECHO and w not in masked)
    return sorted(found, key=lambda w: (-len(w), w))


def redact_echoes(text: str, secrets: list[str]) -> str:
    """`text` redacted, and every literal secret of `secrets` in it masked too."""
    text = redact_text(text)
    for value in secrets:
        text = text.replace(value, MASK)
    return text


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
