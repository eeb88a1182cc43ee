"""Launch commands edited flag by flag: a remedy's settings applied to the command a run was
started with, speculation taken out, the result written back as one shell line.

The words are read as `parse` reads them (flag_spans: `--name value`, `--name=value`, a bare
`--name`) and speculation flags as `speculation` knows them; a value that is JSON (`--compilation-
config '{"cudagraph_mode": …}'`) is edited key by key (`compilation-config.cudagraph_mode`).
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Mapping

from diagnostic.engines.command.parse import ENV_WORD, flag_spans, words
from diagnostic.engines.command.speculation import without_speculation

__all__ = [
    "EditError",
    "changed_flags",
    "edit_command",
    "flag_value",
    "same_launch",
    "shell_line",
]

# Words the shell reads as they stand; `$NAME` stays unquoted so the shell expands it.
_PLAIN = re.compile(r"[\w@%+=:,./$-]+")
PORT = "@PORT@"  # stands for the {port} placeholder until the braces are escaped


class EditError(ValueError):
    """A command that cannot be edited (unbalanced quotes, a JSON flag that is no object)."""


def _name(flag: str) -> str:
    """A flag's name as flag_spans gives it: no dashes, `_` as `-`."""
    return flag.lstrip("-").replace("_", "-")


def flag_value(command: str, flag: str) -> str | bool | None:
    """The value of `flag` (e.g. `--attention-backend`) in a launch command, None if absent."""
    argv = words(command) or []
    found = [value for _, _, name, value in flag_spans(argv) if name == _name(flag)]
    return found[-1] if found else None


def edit_command(
    command: str,
    settings: Mapping[str, str | bool | None],
    *,
    speculation: bool = True,
    env: Mapping[str, str] | None = None,
    port_placeholder: bool = False,
) -> str:
    """`command` with each flag of `settings` set (`--flag`: value, True for a bare flag, None
    to remove it; `--flag.key`: a key of the flag's JSON object), speculation flags removed
    unless `speculation`, `env` assigned before the program (NAME=VALUE), the value of
    `--port` made (or added as) the `{port}` placeholder when `port_placeholder` (every other
    brace doubled, for a plan template)."""
    argv = list(without_speculation(command)) if not speculation else words(command)
    if argv is None:
        raise EditError(f"cannot read the words of {command!r} (an unbalanced quote?)")
    for flag, value in settings.items():
        argv = _set(argv, flag, value)
    if env:
        lead = [f"{k}={v}" for k, v in env.items()]
        argv = lead + [w for w in argv if not (ENV_WORD.match(w) and w.split("=")[0] in env)]
    if port_placeholder:
        argv = _set(argv, "--port", PORT)  # the server listens where the plan measures it
    text = shell_line(argv)
    if port_placeholder:
        text = text.replace("{", "{{").replace("}", "}}").replace(PORT, "{port}")
    return text


def _set(argv: list[str], flag: str, value: str | bool | None) -> list[str]:
    flag, _, key = flag.partition(".")
    spans = [s for s in flag_spans(argv) if s[2] == _name(flag)]
    if key:
        old = spans[-1][3] if spans else None
        value = _json_set(flag, old, key, value)
    out = list(argv)
    for start, end, _, _ in reversed(spans):
        del out[start:end]
    if value is None or value is False:
        return out
    spelled = argv[spans[0][0]].partition("=")[0] if spans else flag
    new = [spelled] if value is True else [spelled, str(value)]
    at = spans[0][0] if spans else len(out)
    return out[:at] + new + out[at:]


def _json_set(flag: str, old: str | bool | None, key: str, value: str | bool | None) -> str:
    """The JSON object of `flag` with `key` set (or removed for None)."""
    try:
        data = json.loads(old) if isinstance(old, str) else {}
    except ValueError:
        raise EditError(f"{flag} {old!r} is not JSON; edit its {key} by hand") from None
    if not isinstance(data, dict):
        raise EditError(f"{flag} {old!r} is not a JSON object; edit its {key} by hand")
    if value is None:
        data.pop(key, None)
    else:
        data[key] = int(value) if isinstance(value, str) and value.isdigit() else value
    return json.dumps(data, separators=(",", ":"))


def shell_line(argv: list[str]) -> str:
    """Words as one line bash reads back to them; `$NAME` words stay unquoted (expanded)."""
    return " ".join(w if _PLAIN.fullmatch(w) else shlex.quote(w) for w in argv)


def changed_flags(before: str, after: str, *, ignore: tuple[str, ...] = ("port",)) -> list[str]:
    """What `after` sets that `before` does not, speculation flags aside: `--name value` for a
    flag added or changed, `without --name` for one removed, `NAME=VALUE` for an assignment
    before the program; [] when either cannot be read."""
    old, new = list(without_speculation(before)), list(without_speculation(after))
    if not old or not new:
        return []
    was = {n: v for _, _, n, v in flag_spans(old)}
    now = {n: v for _, _, n, v in flag_spans(new)}
    out = [w for w in new if ENV_WORD.match(w) and w not in old]
    for name, value in now.items():
        if name not in ignore and was.get(name) != value:
            out.append(f"--{name}" if value is True else f"--{name} {value}")
    out += [f"without --{n}" for n in was if n not in now and n not in ignore]
    return out


def _canonical(command: str, ignore: tuple[str, ...]) -> tuple[object, ...] | None:
    """A command as what it asks for: its assignments and positional words in order, its
    flags as a set (any order, `--a=b` as `--a b`), a JSON value by its keys in any order."""
    argv = words(command)
    if argv is None:
        return None
    spans = flag_spans(argv)
    covered = {i for start, end, _, _ in spans for i in range(start, end)}
    flags = set()
    for _, _, name, value in spans:
        if name in ignore:
            continue
        if isinstance(value, str) and value.lstrip().startswith("{"):
            with contextlib.suppress(ValueError):
                value = json.dumps(json.loads(value), sort_keys=True)
        flags.add((name, value))
    return tuple(a for i, a in enumerate(argv) if i not in covered), frozenset(flags)


def same_launch(a: str, b: str, *, ignore: tuple[str, ...] = ("port",)) -> bool:
    """Whether two launch commands start the same server: the same program, positional words
    and flags, whatever the flags' order or spelling (`--k=v`, `--k v`, `_` for `-`, JSON keys
    in any order); the port aside. False when either cannot be read."""
    ca, cb = _canonical(a, ignore), _canonical(b, ignore)
    return ca is not None and ca == cb
