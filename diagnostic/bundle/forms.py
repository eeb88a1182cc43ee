"""The forms a secret takes on a line that no name or prefix list foresees: credentials in a
URL (a token as the URL's user, `redis://:PW@`, a Sentry DSN, query values and fragments),
command-line forms (`mysql -pX`, `sshpass -p X`, `docker login -p X`, `wandb login X`, a
value that starts with a dash after `--api-key`), an authorisation scheme followed by its
credential (`SSWS …`, `Bearer ****…`, a Go header map `Authorization:[Bearer …]`), reprs
(Python `b'…'`, Rust `Some("…")`, an argv list `['--api-key', '…']`), PuTTY keys, and the
entropy rule: a key-like run after a key-like name (`BEARER_TOK=…`, `JWT_SIGNING_HMAC=…`)."""

from __future__ import annotations

import re
from collections.abc import Callable

from diagnostic.bundle.secret_shapes import name_strength
from diagnostic.bundle.textrules import MASK, key_like
from diagnostic.bundle.urls import URL_IN_TEXT, redact_url

__all__ = ["redact_forms"]


def _masked(match: re.Match[str], group: str = "value") -> str:
    """The match with its `group` replaced by the mask."""
    start, end = match.start(group) - match.start(0), match.end(group) - match.start(0)
    return match.group(0)[:start] + MASK + match.group(0)[end:]


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if MASK in value or not value.strip("\"'"):
        return match.group(0)
    return _masked(match)


_VALUE = r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"';|&]+)"
# mysql -pSECRET (the mysql family reads the password attached to -p), --password=… is an option
_MYSQL = re.compile(
    r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb|mariadb-dump)\b"
    r"[^\n|;&]*?(?<![\w-])-p(?P<value>[^\s\"'-][^\s\"']*|\"[^\"\n]*\"|'[^'\n]*')"
)
# sshpass -p SECRET / -pSECRET
_SSHPASS = re.compile(r"\bsshpass\b(?:[ \t]+-[a-oq-zA-Z]\S*)*[ \t]+-p[ \t]*" + _VALUE)
# docker/podman/helm … login -p SECRET / --password SECRET
_LOGIN = re.compile(
    r"\b(?:docker|podman|nerdctl|buildah|skopeo|oras|crane|helm(?:[ \t]+registry)?)[ \t]+login\b"
    r"[^\n|;&]*?(?<![\w-])(?:-p|--password)(?:[ \t]+|=)" + _VALUE
)
# wandb login KEY, huggingface-cli login TOKEN: the credential is the first word after login
_TOOL_LOGIN = re.compile(
    r"\b(?:wandb|huggingface-cli|hf|neptune|comet|clearml-init|replicate|modal|ngc)[ \t]+login"
    r"(?:[ \t]+--?(?!token\b|key\b|password\b)[\w-]+(?:=\S*)?)*[ \t]+(?:--(?:token|key)[ \t=]+)?"
    r"(?P<value>[^\s\"'-][^\s\"']{7,}|\"[^\"\n]{4,}\"|'[^'\n]{4,}')"
)
# echo SECRET | docker login … --password-stdin
_STDIN = re.compile(
    r"\b(?:echo|printf)[ \t]+(?:-n[ \t]+)?" + _VALUE + r"[ \t]*\|[^\n]*?--password-stdin"
)
# A secret option whose value starts with a dash: --api-key -Kq9…, --password --x9Zq…
_DASH_VALUE = re.compile(
    r"(?<![\w-])(?P<name>--?[A-Za-z][\w-]{0,60})(?:=|[ \t]+)(?P<value>-[^\s\"',]+)"
)
_OPTION_SHAPE = re.compile(r"^--?[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")
# Authorization: SCHEME CREDENTIAL (SSWS, Bearer, Token, Basic, GenieKey …), also a Go header
# map's `Authorization:[Bearer …]` and a credential half-masked (`Bearer ****1a2b…`).
_AUTH_HEADER = re.compile(
    r"(?i)\b(?:proxy-)?authori[sz]ation[\"']?[ \t]*[:=][ \t]*[\"'\[]*"
    r"(?:(?P<scheme>[A-Za-z][\w-]{1,24})[ \t]+)?(?P<value>[^\s\"',}\]]+)"
)
_SCHEMES = (
    r"bearer|ssws|basic|digest|apikey|api-key|genie ?key|splunk|jwt|hmac|aws4-hmac-sha256"
    r"|sharedkey|sharedaccesssignature|negotiate|ntlm"
)
# A scheme's credential, whole or half-masked (`Bearer ****1a2b…`): mixed, or masked in part.
_SCHEME_VALUE = re.compile(
    rf"(?i)(?<![\w-])(?:{_SCHEMES})[ \t]+(?P<value>[*xX•.]*[A-Za-z0-9+/=_~.-]{{6,}}[*]*)"
)
# An argv list's secret option and its value: ['--api-key', 'sk-…'], ["--token", "…"]
_ARGV = re.compile(
    r"(?P<q>[\"']?)(?P<name>--?[A-Za-z][\w-]{0,60})(?P=q)[ \t]*,[ \t]*"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s,\]\"']+)"
)
# redis-cli -a PASSWORD, zip/unzip -P PASSWORD, 7z -pPASSWORD
_TOOL_PASSWORD = re.compile(
    r"\b(?:redis-cli[^\n|;&]*?(?<![\w-])-a|(?:zip|unzip)[^\n|;&]*?(?<![\w-])-P"
    r"|7za?[^\n|;&]*?(?<![\w-])-p(?=\S))[ \t]*" + _VALUE
)
# NAME = b'…', NAME: Some("…"), NAME=SecretString("…"): a repr around the value
_REPR = re.compile(
    r"(?<![A-Za-z0-9_.-])[\"']?(?P<name>[A-Za-z_][\w.-]{0,80})[\"']?[ \t]*[:=][ \t]*"
    r"(?:[bBrRuUfF]{1,2}(?=[\"'])|[A-Z][\w:]{1,30}\((?:[bBrRuU]{0,2})[ \t]*)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*')"
)
# PuTTY key files: the private lines after Private-Lines: N, and the MAC
_PUTTY = re.compile(
    r"(?s)(Private-Lines:[ \t]*\d+[ \t]*\n)(?P<value>(?:[ \t]*[A-Za-z0-9+/=]+[ \t]*\n?)+)"
)
_PUTTY_MAC = re.compile(r"(?i)(?<![\w-])Private-(?:MAC|Hash):[ \t]*(?P<value>[0-9a-fA-F]{16,})")
# The entropy rule: a key-like run after any name that is not plainly an identifier's
# (hash, commit, id): the names no list foresees (BEARER_TOK, OTP_SEED, X_SIGNING_THING).
_KEY_LIKE = re.compile(
    r"(?<![\w.-])[\"']?(?P<name>[A-Za-z_][\w.-]{1,80})[\"']?"
    r"(?P<sep>[ \t]*[:=][ \t]*|\t+|[ \t]{2,})[\"'\[]?"
    r"(?P<value>[A-Za-z0-9+/=_~.-]{12,400})(?![\w+/=~.-])"
)
_HARMLESS_PARTS = frozenset(
    [
        "HASH",
        "SHA",
        "SHA1",
        "SHA256",
        "SHA512",
        "MD5",
        "DIGEST",
        "CHECKSUM",
        "CRC",
        "COMMIT",
        "REV",
        "REVISION",
        "ID",
        "IDS",
        "UUID",
        "GUID",
        "VERSION",
        "BUILD",
        "TRACE",
        "TRACEPARENT",
        "SPAN",
        "REQUEST",
        "ETAG",
        "FINGERPRINT",
        "NAME",
        "MODEL",
        "PATH",
        "FILE",
        "DIR",
        "URL",
        "URI",
        "HOST",
        "ADDR",
        "IMAGE",
        "TAG",
        "BRANCH",
        "REF",
        "DEVICE",
        "GPU",
        "NODE",
        "POD",
        "CONTAINER",
        "UID",
        "PID",
        "PROMPT",
        "TEXT",
        "LAYER",
        "CACHE",
        "SEED",
    ]
)
_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_UPPER_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
# A dotted or slashed identifier of lower-case words: a weight's name, a module path.
_IDENTIFIER_PATH = re.compile(r"^[a-z_][a-z0-9_]*(?:[./:-][a-z0-9_]+)+$")
# `package.module:ClassName`, a Python object's import path (vLLM's model registry, entry
# points): a dotted module of lower-case words, a colon, a capitalised name made of words.
_MODULE_PATH = re.compile(r"^[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+$")
_CLASS_NAME = re.compile(r"^[A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*$")
# A 64-bit address or handle as C prints it (`Agent handle: 0x55d1c0a1b2c0` in a ROCm fault).
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{1,16}$")


def _class_name(value: str) -> bool:
    """A class's name: capitalised, and mostly words of 3 letters or more (LlamaForCausalLM,
    DeepSeekV4MTP), not a random mix of cases and digits (Xk9vLp2QwErT7yZa)."""
    if not _CLASS_NAME.match(value):
        return False
    words = sum(len(p) for p in _NAME_PARTS.findall(value) if len(p) >= 3 and not p.isdigit())
    return words >= 0.7 * len(value)


def _key_like_name(name: str) -> bool:
    parts = {p.upper() for p in _NAME_PARTS.findall(name)}
    return not (parts & _HARMLESS_PARTS)


def _mask_key_like(match: re.Match[str]) -> str:
    name, value, sep = match.group("name"), match.group("value"), match.group("sep")
    if MASK in value or _IDENTIFIER_PATH.match(value) or value.startswith(("/", "./", "~")):
        return match.group(0)
    if sep == ":" and _MODULE_PATH.match(name) and _class_name(value.rstrip(".")):
        return match.group(0)
    if _ADDRESS.match(value):
        return match.group(0)
    if (
        ":" not in sep
        and "=" not in sep
        and not (_UPPER_NAME.match(name) or name_strength(name) is not None)
    ):
        return match.group(0)  # `word   run` in prose: only an ENV_NAME or a secret's name
    if not _key_like_name(name) or not key_like(value):
        return match.group(0)
    return _masked(match)


def _mask_dash_value(match: re.Match[str]) -> str:
    name, value = match.group("name").lstrip("-"), match.group("value")
    if name_strength(name) is None or MASK in value:
        return match.group(0)
    if _OPTION_SHAPE.match(value) and value.startswith("--"):
        return match.group(0)  # `--api-key --port 8000`: a missing value, the next option
    return _masked(match)


def _mask_secret_argv(match: re.Match[str]) -> str:
    if name_strength(match.group("name").lstrip("-")) is None:
        return match.group(0)
    return _mask_value(match)


def _mask_repr(match: re.Match[str]) -> str:
    if name_strength(match.group("name")) is None:
        return match.group(0)
    return _mask_value(match)


def _mask_auth(match: re.Match[str]) -> str:
    value = match.group("value")
    if MASK in value:
        return match.group(0)
    return _masked(match)


def _mask_scheme_value(match: re.Match[str]) -> str:
    value = match.group("value")
    half_masked = value.startswith(("***", "xxx", "XXX", "•••", "..."))
    core = value.strip("*•.")
    if MASK in value or len(core) < 8 or not (half_masked or _credential(core)):
        return match.group(0)  # `Bearer token`, `Basic authentication`: prose
    return _masked(match)


def _credential(value: str) -> bool:
    """Letters and digits mixed, or both cases, or base64's padding: not a word."""
    digits = any(c.isdigit() for c in value)
    cases = any(c.islower() for c in value) and any(c.isupper() for c in value[1:])
    return digits or cases or value.endswith("=")


# (needles, pattern, replacement): a pattern runs only on text holding one of its needles.
_RULES: list[tuple[tuple[str, ...], re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (("mysql", "mariadb"), _MYSQL, _mask_value),
    (("sshpass",), _SSHPASS, _mask_value),
    (("login",), _LOGIN, _mask_value),
    (("login",), _TOOL_LOGIN, _mask_value),
    (("password-stdin",), _STDIN, _mask_value),
    ((" -", "=-", "\t-"), _DASH_VALUE, _mask_dash_value),
    (("authori",), _AUTH_HEADER, _mask_auth),
    (("-",), _ARGV, _mask_secret_argv),
    (("redis-cli", "zip", "7z"), _TOOL_PASSWORD, _mask_value),
    (("'", '"'), _REPR, _mask_repr),
    (("private-lines",), _PUTTY, _mask_value),
    (("private-mac", "private-hash"), _PUTTY_MAC, _mask_value),
]
_SCHEME_NEEDLES = ("bearer", "ssws", "basic", "digest", "key", "splunk", "jwt", "hmac", "shared")


def redact_forms(text: str) -> str:
    """`text` with the secrets of these forms masked (the other rules ran before)."""
    lower = text.lower()
    if "://" in text:
        text = URL_IN_TEXT.sub(lambda m: redact_url(m.group(0), strict=False), text)
    for needles, pattern, replace in _RULES:
        if any(n in lower for n in needles):
            text = pattern.sub(replace, text)
    if any(n in lower for n in _SCHEME_NEEDLES):
        text = _SCHEME_VALUE.sub(_mask_scheme_value, text)
    if any(c.isdigit() for c in text):
        text = _KEY_LIKE.sub(_mask_key_like, text)
    return text
