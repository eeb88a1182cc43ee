"""URLs kept to what locates a server: scheme, host, port and path. The userinfo (a password,
a token standing as the user, a Sentry DSN's key, `redis://:PW@`) is never kept; a query keeps
its parameter names and the values of an allow-list alone; a fragment is dropped. In free text
(`strict=False`) a query value or fragment that is plainly no secret (a number, a short word)
is kept too, so that an ordinary log line reads as it was written."""

from __future__ import annotations

import re

from diagnostic.bundle.textrules import MASK, high_entropy

__all__ = ["SAFE_QUERY", "URL_IN_TEXT", "redact_url"]

# Query parameters whose values locate or describe what is fetched, never a credential.
SAFE_QUERY = frozenset(
    {
        "api-version",
        "version",
        "v",
        "revision",
        "ref",
        "branch",
        "format",
        "download",
        "model",
        "lang",
        "page",
        "limit",
        "offset",
        "stream",
        "timeout",
        "name",
        "query",
        "q",
    }
)
# A URL in free text: scheme://[userinfo@]host[:port][/path][?query][#fragment], ending before
# a space, a quote or a closing bracket. The userinfo runs to the last @ before the path (a
# password may hold an @).
URL_IN_TEXT = re.compile(
    r"(?i)\b[a-z][a-z0-9+.-]{0,20}://(?:(?:[^\s/?#\"'<>\[\]{}]|<redacted>)*@)?[^\s/?#\"'<>@{}]*"
    r"(?:/[^\s?#\"'<>{}]*)?(?:\?[^\s#\"'<>{}]*)?(?:#[^\s\"'<>{}]*)?"
)
_PARTS = re.compile(
    r"(?is)^(?P<scheme>[a-z][a-z0-9+.-]{0,20}://)(?P<userinfo>[^/?#]*@)?(?P<host>[^/?#]*)"
    r"(?P<path>/[^?#]*)?(?P<query>\?[^#]*)?(?P<fragment>#.*)?$"
)
_PLAIN = re.compile(r"^(?:-?\d+(?:\.\d+)?|true|false|none|null|[a-z][a-z_-]{0,23})$", re.I)


def redact_url(url: str, *, strict: bool = True) -> str:
    """`url` without its userinfo, with query values masked unless allow-listed (or, not
    strict, plainly no secret) and the fragment dropped (not strict: masked unless a word)."""
    m = _PARTS.match(url)
    if m is None:
        return url
    out = m["scheme"] + (f"{MASK}@" if m["userinfo"] else "")
    out += m["host"] + (m["path"] or "")
    if m["query"]:
        out += "?" + _query(m["query"][1:], strict)
    if m["fragment"]:
        out += _fragment(m["fragment"][1:], strict)
    return out


def _query(query: str, strict: bool) -> str:
    parts = []
    for part in re.split(r"([&;])", query):
        if part in ("&", ";") or not part:
            parts.append(part)
            continue
        name, eq, value = part.partition("=")
        parts.append(
            name + eq + (MASK if eq and value and not _kept(name, value, strict) else value)
        )
    return "".join(parts)


def _kept(name: str, value: str, strict: bool) -> bool:
    if value == MASK or name.lower() in SAFE_QUERY:
        return True
    return not strict and _PLAIN.match(value) is not None and not _secret_name(name)


def _secret_name(name: str) -> bool:
    from diagnostic.bundle.secret_shapes import name_strength

    return name_strength(name.replace("-", "_")) is not None


def _fragment(fragment: str, strict: bool) -> str:
    if not fragment:
        return "#"
    if "=" in fragment:  # an OAuth implicit flow: #access_token=…&state=…
        return "#" + _query(fragment, strict)
    if strict:
        return ""
    plain = re.fullmatch(r"[A-Za-z][\w.:-]{0,40}", fragment) is not None
    return "#" + (fragment if plain and not high_entropy(fragment) else MASK)
