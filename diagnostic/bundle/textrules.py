"""The rules that find a secret in one line of text by its name or its shape: known token
prefixes (secret_shapes), authorisation headers, signed-URL parameters, secret-named options and
assignments, and base64 runs that decode to a secret. `scan` runs them with the others."""

from __future__ import annotations

import base64
import binascii
import math
import re

from diagnostic.bundle.secret_shapes import (
    SIGNED_PARAMS,
    find_tokens,
    name_strength,
)

__all__ = ["MASK", "WORD", "high_entropy", "key_like", "mask_encoded_runs", "redact_plain"]

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
    # Bearer tokens (an Authorization header, whatever its scheme: forms).
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
_SECRET_WORDS = (
    *("key", "token", "secret", "pass", "pwd", "auth", "sig", "cookie", "cred", "sas", "tok"),
    *("pin", "otp", "salt", "hmac", "code", "seed"),
)


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
    r"(?P<value>[bBrRuU]{0,2}\"[^\"\n]*\"|[bBrRuU]{0,2}'[^'\n]*'|\[[^\]\n]*\]"
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
WORD = re.compile(r"^(?:[A-Za-z][a-z]{0,15}(?:-[a-z]{1,15}){0,3}|[A-Z]{2,8})$")
_PATHLIKE = re.compile(r"^(?:/|\./|~/)[\w./-]*$")
# Lower-case words and numbers joined by . / : (a weight's or a module's name).
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*(?:[./:][a-z0-9_]+){2,}$")


def _mask_assignment(match: re.Match[str]) -> str:
    name = match.group("name").lstrip("-")
    strength = name_strength(name)
    value = match.group("value")
    if strength is None and ("=" in value or " " in value):
        # a name that is no secret's, its value holding others: ssh's -o SetEnv=HF_TOKEN=…,
        # bash -lc '… --api-key …'
        head = match.group(0)[: match.start("value") - match.start(0)]
        return head + match.re.sub(_mask_assignment, value)
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
    if WORD.match(value) and ("=" not in sep or sep != sep.strip()):
        # `token: CUDA graphs`, `--api-key is required`, `key = value`: prose; `password:
        # hunter` at the end of its line: a password. Right after `=` (DB_PASS=hunter,
        # --api-key=abc) always a value.
        return strength == "strong" and not _continues(match)
    # KEY_FILE=/etc/key.pem, key=model.layers.31.mlp.down_proj.weight: a path, a name
    return not (
        strength == "weak" and (_PATHLIKE.match(value) or _IDENTIFIER.match(value))
    )  # KEY_FILE=/etc/key.pem


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
    if WORD.match(match.group("value")):
        return match.group(0)
    return match.group(0)[: match.start("value") - match.start(0)] + MASK


# Bare secret words followed by a high-entropy value: `token 8Kq2vZ…`, `password is x9…`.
_WORD_THEN_VALUE = re.compile(
    r"(?i)(?<![\w-])(?:token|secret|password|passwd|passphrase|api[ _-]?key)s?"
    r"(?:[ \t]+(?:is|was|=|:))?[ \t]+(?P<value>[A-Za-z0-9+/=_.~-]{20,200})(?![\w+/=-])"
)


def _mask_high_entropy(match: re.Match[str]) -> str:
    value = match.group("value")
    if not high_entropy(value):
        return match.group(0)
    return match.group(0)[: match.start("value") - match.start(0)] + MASK


def high_entropy(value: str) -> bool:
    """Letters and digits mixed, and ≥ 3.5 bits a character: a key, not a word or a path."""
    if not (re.search(r"\d", value) and re.search(r"[A-Za-z]", value)) or "/" in value[:1]:
        return False
    counts = [value.count(c) for c in set(value)]
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts)
    return entropy >= 3.5


_SEGMENTS = re.compile(r"[/.:_=,@+-]+")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def key_like(value: str) -> bool:
    """Whether a word looks like a key: a run of 12 or more letters and digits mixed, with
    the entropy of random text (3 bits a character), between the separators of words and
    numbers (`e2e_request_latency_seconds`, a path or a model's name is none)."""
    for part in _SEGMENTS.split(value.lstrip("-")):
        if len(part) < 12 or not any(c.isdigit() for c in part):
            continue
        if not any(c.isalpha() for c in part):
            continue
        words = _WORDS.findall(part)  # Gemma3ForCausalLM: Gemma 3 For Causal LM, no key
        if len(part) / max(len(words), 1) >= 3.0:
            continue
        counts = [part.count(c) for c in set(part)]
        entropy = -sum(n / len(part) * math.log2(n / len(part)) for n in counts)
        if entropy >= 3.0:
            return True
    return False


# Base64 runs worth decoding: a secret encoded (a GCP service-account JSON, a key) is one.
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{40,}={0,2}(?![A-Za-z0-9+/=_-])")
_DECODED_SECRET = re.compile(r'"private_key"|"type":\s*"service_account"|PRIVATE KEY-----')


def _mask_encoded(match: re.Match[str]) -> str:
    run = match.group(0)
    decoded = _decode(run)
    if decoded is None:
        return run
    if _DECODED_SECRET.search(decoded) or redact_plain(decoded) != decoded:
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


def redact_plain(text: str) -> str:
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


def mask_encoded_runs(text: str) -> str:
    """`text` with every base64 run that decodes to a secret masked."""
    return _BASE64.sub(_mask_encoded, text)
