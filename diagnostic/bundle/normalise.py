"""Text as the secret scanner reads it: encodings and look-alike characters undone, with the
place in the original of every character, so that a secret found in the reading is masked in
the text as written.

What is undone: ANSI escape sequences (colour codes between a name and its value), CR line
ends (a PEM key written with CRLF), percent escapes (`password%3Dhunter2`), backslash escapes
of JSON, Python and Rust strings (`\\"`, `\\n`, `\\u003d`, `\\x3d`), HTML numeric entities,
Unicode compatibility forms (NFKC: fullwidth `＝`, `ｐａｓｓ`), letters of other scripts that look
like Latin ones (Unicode's confusables: a Cyrillic `а` in `pаssword`) and invisible characters
(zero-width spaces, soft hyphens, a BOM). A plain ASCII line holding none of `\\x1b \\r % \\ &`
reads as it is written, at no cost.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["Reading", "needs_reading", "read"]

# Letters of Cyrillic, Greek and other scripts that Unicode's confusables.txt (UTS #39) maps
# to one Latin letter or digit: the ones a secret's name can hide behind (`раsswоrd`).
_CONFUSABLE_SOURCE = (
    "аa бb вB гr дd еe ёe ѐe ђh єe ѕs іi їi јj ԁd ԛq ԝw кk мM нH оo пn рp сc тT уy хx ҳx "
    "һh ӏl ԍG ԌG "
    "АA ВB ЕE ЅS ІI ЈJ КK МM НH ОO РP СC ТT УY ХX ԚQ ԜW "
    "αa βB γy εe ιi κk νv οo ρp σo τt υu χx ωw ΑA ΒB ΕE ΖZ ΗH ΙI ΚK ΜM ΝN ΟO ΡP ΤT ΥY ΧX "
    "ɑa ɡg ɩi ɪI ʏY ʀR ʜH ʟL ᴀA ᴄC ᴅD ᴇE ᴊJ ᴋK ᴍM ᴏO ᴘP ᴛT ᴜU ᴠV ᴡW ᴢZ ꓐB ꓑP ꓒd ꓓD ꓔT ꓖG ꓗK "
    "ꓘK ꓙJ ꓚC ꓛC ꓝF ꓞF ꓟM ꓠN ꓡL ꓢS ꓣR ꓤU ꓦV ꓧH ꓪW ꓫX ꓬY ꓮA ꓰE ꓲI ꓳO ꓴU ꓵV ꓶL ꓸ. ꓹ, "
    "ⅰi ⅴv ⅹx ⅼl ⅽc ⅾd ⅿm ıi ǀl ∣l ߀O ߊl ०o ০o ੦o ૦o ୦o ௦o ౦o ೦o ൦o ๐o ໐o ဝo ၀o"
)
_CONFUSABLES = {pair[0]: pair[1] for pair in _CONFUSABLE_SOURCE.split()}
# Characters that show nothing: a name split by one still reads as the name.
_INVISIBLE = frozenset(
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"
)
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "n": "\n",
    "r": "\n",
    "t": "\t",
    "b": " ",
    "f": " ",
    "0": " ",
    "a": " ",
    "e": " ",
}
_ENTITY = re.compile(r"&#(?:[xX](?P<hex>[0-9a-fA-F]{1,6})|(?P<dec>[0-9]{1,7}));")
_SPECIAL = re.compile(r"[\x1b\r%\\&]|[^\x00-\x7f]")


@dataclass
class Reading:
    """The text as the scanner reads it, and for its character k the span of the original it
    was read from: original[starts[k]:ends[k]]."""

    text: str
    starts: list[int]
    ends: list[int]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original's span that the reading's [start, end) was read from."""
        if start >= end:
            at = (
                self.starts[start]
                if start < len(self.starts)
                else (self.ends[-1] if self.ends else 0)
            )
            return at, at
        return self.starts[start], self.ends[end - 1]


def needs_reading(text: str) -> bool:
    """Whether the text holds anything the reading undoes (else it reads as it is written)."""
    return _SPECIAL.search(text) is not None


def read(text: str) -> Reading:
    """The scanner's reading of `text` (see the module's docstring)."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []

    def emit(chars: str, start: int, end: int) -> None:
        for c in chars:
            out.append(c)
            starts.append(start)
            ends.append(end)

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\x1b":
            m = _ANSI.match(text, i)
            i = m.end() if m else i + 1
            continue
        if c == "\r":
            if i + 1 < n and text[i + 1] == "\n":
                i += 1
                continue
            emit("\n", i, i + 1)
            i += 1
            continue
        if c == "%" and i + 2 < n and text[i + 1] in _HEX and text[i + 2] in _HEX:
            code = int(text[i + 1 : i + 3], 16)
            if 0x20 <= code < 0x7F or code in (0x09, 0x0A):
                emit(chr(code), i, i + 3)
                i += 3
                continue
        if c == "\\" and i + 1 < n:
            step = _escape(text, i)
            if step is not None:
                chars, end = step
                emit(chars, i, end)
                i = end
                continue
        if c == "&" and text.startswith("&#", i):
            m = _ENTITY.match(text, i)
            if m is not None:
                code = int(m["hex"], 16) if m["hex"] else int(m["dec"])
                if 0 < code < 0x110000:
                    emit(_plain(chr(code)), i, m.end())
                    i = m.end()
                    continue
        if c >= "\x80":
            emit(_plain(c), i, i + 1)
        else:
            emit(c, i, i + 1)
        i += 1
    return Reading("".join(out), starts, ends)


def _escape(text: str, i: int) -> tuple[str, int] | None:
    """The characters a backslash escape at text[i] stands for, and where it ends."""
    kind = text[i + 1]
    if kind in ("u", "x"):
        width = 4 if kind == "u" else 2
        digits = text[i + 2 : i + 2 + width]
        if len(digits) == width and all(d in _HEX for d in digits):
            code = int(digits, 16)
            end = i + 2 + width
            if 0xD800 <= code < 0xDC00 and text.startswith("\\u", end):  # a surrogate pair
                low = text[end + 2 : end + 6]
                if (
                    len(low) == 4
                    and all(d in _HEX for d in low)
                    and 0xDC00 <= int(low, 16) < 0xE000
                ):
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
                    end += 6
            if 0xD800 <= code < 0xE000:
                return " ", end
            return _plain(chr(code)), end
        if kind == "u" and text.startswith("{", i + 2):  # Rust's \u{3d}
            close = text.find("}", i + 3, i + 10)
            if close > 0 and all(d in _HEX for d in text[i + 3 : close]) and close > i + 3:
                code = int(text[i + 3 : close], 16)
                if code < 0x110000 and not 0xD800 <= code < 0xE000:
                    return _plain(chr(code)), close + 1
        return None
    if kind in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[kind], i + 2
    return None


def _plain(c: str) -> str:
    """A character as the scanner reads it: invisible ones dropped, look-alikes of Latin
    letters and compatibility forms (fullwidth, ligatures, circled) read as plain ASCII."""
    if c < "\x80":
        return c
    if c in _INVISIBLE:
        return ""
    if c in _CONFUSABLES:
        return _CONFUSABLES[c]
    folded = unicodedata.normalize("NFKC", c)
    if folded != c:
        return "".join(_CONFUSABLES.get(f, f) for f in folded)
    if unicodedata.category(c) == "Zs":  # a no-break or ideographic space
        return " "
    return c
