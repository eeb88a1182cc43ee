"""Redact secrets (API keys, tokens, passwords) from text, commands, mappings and JSON values."""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Mapping
from typing import Any

from diagnostic.bundle.secret_shapes import (
    SIGNED_PARAMS,
    find_tokens,
    is_secret_name,
    name_strength,
)

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

_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S)
# (needles, pattern, replacement): a pattern runs only on text holding one of its needles
# (lower case), so a long line that cannot hold its secret costs one `in`, not a regex scan
# (the engine's 0.1 µs a character and pattern made a 20 MB answer take minutes).
_PATTERNS: list[tuple[tuple[str, ...], re.Pattern[str], str]] = [
    # Passwords in URLs: scheme://user:password@host (the password may hold an @: the host
    # follows the last one)
    (
        ("://",),
        re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,20}://[^\s:/@]{1,200}:)[^\s/]+(@)"),
        rf"\1{MASK}\2",
    ),
    # HTTP authorisation headers and bearer tokens.
    (
        ("authorization",),
        re.compile(
            r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(bearer|basic|token)?\s*[^\s\"',}]+"
        ),
        rf"\1\2 {MASK}",
    ),
    (("bearer",), re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{MASK}"),
    (
        ("x-api-key",),
        re.compile(r"(?i)\b(x-api-key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
        rf"\1{MASK}",
    ),
    # curl -u user:password, --user=user:password, and -uuser:password
    (
        ("-u",),
        re.compile(r"(?<![\w-])(-u|--user)(\s+|=|(?=[^\s-]))([^\s:]+:)\S+"),
        rf"\1\2\3{MASK}",
    ),
    # Signed URLs and credentials in query strings or form bodies: ?X-Amz-Signature=…&sig=…
    (
        ("=",),
        re.compile(
            r"(?i)((?<=[?&;])(?:"
            + "|".join(re.escape(p) for p in SIGNED_PARAMS)
            + r")=)[^&\s\"'#<>]+"
        ),
        rf"\1{MASK}",
    ),
]
_SECRET_WORDS = ("key", "token", "secret", "pass", "pwd", "auth", "sig", "cookie", "cred", "sas")


# Command-line options whose name says they carry a secret: --api-key X, --hf-token=X.
_OPTION = re.compile(
    r"(?<![\w-])(?P<name>--?[A-Za-z][A-Za-z0-9_-]{0,80})(?![A-Za-z0-9_-])(?P<sep>=|[ \t]+(?!-))"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|\S+)"
)

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]{0,80}"
# NAME=value, NAME: value, "name": "value", name='value' where NAME is a secret name; on one
# line (a docstring's "the key\n:param" is no assignment), and not a path (Token::Number).
# The look-behind starts a name only at its first character, so a long run of word
# characters costs its length once (no quadratic scan of a 100,000-letter word).
_ASSIGN = re.compile(
    rf"(?<![A-Za-z0-9_.-])(?P<q>[\"']?)(?P<name>{_NAME})(?P=q)(?P<sep>[ \t]*[:=][ \t]*)(?![:=])"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|\[[^\]\n]*\]"
    # a value may hold a ; or & (a;b) but ends before ;NAME= or &NAME= (a connection
    # string's or a form body's next part)
    # and before an escape (`str\\n` in a log quoting JSON text)
    rf"|(?:[^\s,;&(){{}}\[\]'\"\\]|\\(?![nrt\"\\])|[;&](?!{_NAME}=))+)"
)

_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
# A number under a weak name (KEY, TOKEN) is a count (SGLang's `#token: 300`) unless it is this
# long; under a strong one (PASSWORD, SECRET) it is always the secret.
_COUNT_DIGITS = 10
# Values that are no secret whatever their name: type names (a generated program's
# `key: str`), empty values, placeholders.
_NOT_SECRETS = {
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
_PLACEHOLDER = re.compile(r"^(?:\*+|x{3,}|X{3,}|\.{3}|<[^<>]*>|\$\{?\w+\}?|\{\w*\}|%\(\w+\)s)$")
# Plainly a word: lower case, Capitalised (host-bound too), or a short acronym (CUDA).
_WORD = re.compile(r"^(?:[A-Za-z][a-z]{0,15}(?:-[a-z]{1,15}){0,3}|[A-Z]{2,8})$")
_PATHLIKE = re.compile(r"^(?:/|\./|~/)[\w./-]*$")


def _mask_assignment(match: re.Match[str]) -> str:
    name = match.group("name").lstrip("-")
    strength = name_strength(name)
    value = match.group("value")
    if strength is None or not _secret_value(match, strength, value):
        return match.group(0)
    quote = value[0] if value[:1] in "\"'" else ""
    masked = f"{quote}{MASK}{quote}" if quote else MASK
    return match.group(0)[: match.start("value") - match.start(0)] + masked


def _secret_value(match: re.Match[str], strength: str, value: str) -> bool:
    """Whether the value after a secret name is the secret, not a word of prose or a type."""
    bare = value.strip("\"'")
    if value in _NOT_SECRETS or MASK in value or not bare or _PLACEHOLDER.match(bare):
        return False
    if _NUMBER.match(value):  # a count or a time under a weak name, unless a long integer
        return strength == "strong" or ("." not in value and len(value) >= _COUNT_DIGITS)
    if value[:1] in "\"'":
        return True
    sep = match.group("sep")
    if _WORD.match(value) and ("=" not in sep or sep != sep.strip()):
        # `token: CUDA graphs`, `--api-key is required`, `key = value`: prose; `password:
        # hunter` at the end of its line: a password. Right after `=` (DB_PASS=hunter,
        # --api-key=abc) always a value.
        return strength == "strong" and not _continues(match)
    return not (strength == "weak" and _PATHLIKE.match(value))  # KEY_FILE=/etc/key.pem


def _continues(match: re.Match[str]) -> bool:
    """Whether more words follow the value on its line (prose goes on; an assignment ends)."""
    rest = match.string[match.end() : match.end() + 40]
    return re.match(r"[ \t]+[A-Za-z]", rest) is not None


# `Password for root: x9#…`: the password's name is before the colon, not right before it.
_PASSWORD_FOR = re.compile(
    r"(?i)(?<![\w-])(?:password|passphrase|passwd)[ \t]+for[ \t]+[\w@.-]{1,60}[ \t]*:[ \t]*"
    r"(?P<value>[^\s\"']{6,200})"
)


def _mask_password_for(match: re.Match[str]) -> str:
    if _WORD.match(match.group("value")):
        return match.group(0)
    return match.group(0)[: match.start("value") - match.start(0)] + MASK


# Bare secret words followed by a high-entropy value: `token 8Kq2vZ…`, `password is x9…`.
_WORD_THEN_VALUE = re.compile(
    r"(?i)(?<![\w-])(?:token|secret|password|passwd|passphrase|api[ _-]?key)s?"
    r"(?:[ \t]+(?:is|was|=|:))?[ \t]+(?P<value>[A-Za-z0-9+/=_.~-]{20,200})(?![\w+/=-])"
)


def _mask_high_entropy(match: re.Match[str]) -> str:
    value = match.group("value")
    if not _high_entropy(value):
        return match.group(0)
    return match.group(0)[: match.start("value") - match.start(0)] + MASK


def _high_entropy(value: str) -> bool:
    """Letters and digits mixed, and ≥ 3.5 bits a character: a key, not a word or a path."""
    if not (re.search(r"\d", value) and re.search(r"[A-Za-z]", value)) or "/" in value[:1]:
        return False
    counts = [value.count(c) for c in set(value)]
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts)
    return entropy >= 3.5


# Base64 runs worth decoding: a secret encoded (a GCP service-account JSON, a key) is one.
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{40,}={0,2}(?![A-Za-z0-9+/=_-])")
_DECODED_SECRET = re.compile(r'"private_key"|"type":\s*"service_account"|PRIVATE KEY-----')


def _mask_encoded(match: re.Match[str]) -> str:
    run = match.group(0)
    decoded = _decode(run)
    if decoded is None:
        return run
    if _DECODED_SECRET.search(decoded) or _redact_plain(decoded) != decoded:
        return MASK
    return run


def _decode(run: str) -> str | None:
    """The text a base64 (or base64url) run encodes, when it is mostly printable text."""
    padded = run.rstrip("=") + "=" * (-len(run.rstrip("=")) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        text = raw.decode("utf-8")
    except (ValueError, binascii.Error):
        return None
    printable = sum(c.isprintable() or c in "\n\r\t" for c in text)
    return text if text and printable >= 0.95 * len(text) else None


# Runs of characters long enough to hold a known token (the shortest rule needs 19): the
# rules' alternation is searched in these alone, not at every position of a line (20× faster
# on engine logs).
_CANDIDATE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.+/=~:@-]{15,}")


def _mask_tokens(match: re.Match[str]) -> str:
    run = match.group(0)
    spans = find_tokens(run)
    for start, end in reversed(spans):
        run = run[:start] + MASK + run[end:]
    return run


def _redact_plain(text: str) -> str:
    """Every rule but the base64 one (a decoded run is not decoded again)."""
    if "PRIVATE KEY" in text:
        text = _PEM.sub(MASK, text)
    text = _CANDIDATE.sub(_mask_tokens, text)
    lower = text.lower()
    for needles, pattern, replacement in _PATTERNS:
        if any(n in lower for n in needles):
            text = pattern.sub(replacement, text)
    if not any(word in lower for word in _SECRET_WORDS):
        return text  # no secret's name: no assignment, option or named value to mask
    if "-" in text:
        text = _OPTION.sub(_mask_assignment, text)
    if ":" in text or "=" in text:
        text = _ASSIGN.sub(_mask_assignment, text)
    if "pass" in lower:
        text = _PASSWORD_FOR.sub(_mask_password_for, text)
    return _WORD_THEN_VALUE.sub(_mask_high_entropy, text)


def _redact_line(text: str) -> str:
    return _BASE64.sub(_mask_encoded, _redact_plain(text))


def redact_text(text: str) -> str:
    """Mask every secret in free text (a log, a command line, an endpoint answer); text of
    several lines goes line by line, as a log does (a key split over two lines, a private
    key's armour apart from its body)."""
    if "\n" not in text:
        return _redact_line(text)
    return redact_file_text(text)


# A private key's armour lines; its body between them is base64 (with headers in old PEM).
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----.*")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")
_PEM_HEADER = re.compile(r"^\s*(Proc-Type|DEK-Info|Comment):|^\s*$")


# A line's end that leaves a secret open: its value cut at the end of the line (masked up to
# there), or a secret's name whose value is on the next line (`--api-key \`, `API_KEY=\`).
_OPEN_END = re.compile(
    r"(?:<redacted>|(?P<name>--?[A-Za-z][\w-]*|[A-Za-z_][\w.-]*[ \t]*[:=]))"
    r"[ \t\"',]*\\?[ \t]*\r?\n?$"
)
# The first run of a line, the rest of a secret cut by a newline (a wrapped key, the next line
# of a wrapped base64 block); never a date or a plain word (the next log line's start).
_HEAD = re.compile(r"^(?P<indent>[ \t]*)(?P<run>[A-Za-z0-9+/=_.~-]{4,})(?=[\s\"',\\]|$)")
_END_CHARS = 120  # of a line's end, looked at for what it leaves open
_DATE = re.compile(r"^\d{4}-\d\d-\d\d")
_TAIL = re.compile(r"(?P<run>[A-Za-z0-9+/=_.~-]{4,})[ \t]*\\?[ \t]*\r?\n?$")


def _spans(tail: str, head: str) -> bool:
    """Whether a known token runs across the join of `tail` and `head` (a key cut in two)."""
    joined = tail[-80:] + head
    cut = len(tail[-80:])
    return any(start < cut < end for start, end in find_tokens(joined))


class LineRedactor:
    """Redacts a text one line at a time — a server's log as it is written, or a whole file —
    and masks what a line alone does not show: a private key whose armour and body are on
    separate lines, a secret cut in two by a newline (the rest of it, and its start when the
    two only make a secret together), a value on the line after its secret name. The only
    redaction of files: logs, /metrics, copied --log files."""

    def __init__(self) -> None:
        self._in_key = False
        self._open = False  # the last line left a secret open
        self._tail = ""  # the last line's final run of token characters

    def line(self, line: str, following: str | None = None) -> str:
        """One line (with its newline, if any), redacted; `following`, the next line when it
        is known (a whole file), lets the start of a secret cut in two be masked too."""
        text = self._redacted(line)
        if following is not None and self._joins(line, following):
            text = _TAIL.sub(lambda m: m.group(0).replace(m.group("run"), MASK), text, count=1)
            self._open = True
        tail = _TAIL.search(line, max(0, len(line) - _END_CHARS))
        self._tail = tail.group("run") if tail else ""
        return text

    def _redacted(self, line: str) -> str:
        head = _HEAD.match(line)
        if head and (self._open or self._joined(head.group("run"))):
            run = head.group("run")
            if not (_WORD.match(run) or _DATE.match(run)):
                line = f"{head.group('indent')}{MASK}{line[head.end() :]}"
        text = self._pem(line)
        self._open = self._leaves_open(text)
        return text

    def _joined(self, head: str) -> bool:
        """Whether the last line's tail and this head make a known token only together."""
        return bool(self._tail) and _spans(self._tail, head)

    def _joins(self, line: str, following: str) -> bool:
        tail, head = _TAIL.search(line, max(0, len(line) - _END_CHARS)), _HEAD.match(following)
        return tail is not None and head is not None and _spans(tail["run"], head["run"])

    @staticmethod
    def _leaves_open(text: str) -> bool:
        end = _OPEN_END.search(text, max(0, len(text) - _END_CHARS))
        if end is None:
            return False
        name = end.group("name")
        return name is None or (name_strength(name.rstrip(":= \t").lstrip("-")) is not None)

    def _pem(self, line: str) -> str:
        if self._in_key:
            end = _PEM_END.search(line)
            if end is not None:
                self._in_key = False
                return MASK + _redact_line(line[end.end() :])
            body, found = _PEM_BODY.subn(MASK, line)
            if found or _PEM_HEADER.match(line):
                return body
            self._in_key = False  # an ordinary line: the armour held no body
        text = _redact_line(line)
        begin = _PEM_BEGIN.search(text)
        if begin is None:
            return text
        self._in_key = True
        newline = text[len(text.rstrip("\r\n")) :]
        return text[: begin.start()] + MASK + newline


def redact_file_text(text: str) -> str:
    """A whole file's text redacted line by line, as LineRedactor redacts a log being written,
    each line seeing the next (a secret cut in two is masked on both lines)."""
    redactor = LineRedactor()
    lines = text.splitlines(keepends=True)
    following: list[str | None] = [*lines[1:], None]
    return "".join(redactor.line(line, nxt) for line, nxt in zip(lines, following, strict=False))


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
