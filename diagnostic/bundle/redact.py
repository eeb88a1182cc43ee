"""Redact secrets from what a bundle or a report writes: one path for every file.

By construction where the structure is known (commands): a launch, stop, health or log command
keeps the values of the options its engine documents as safe, an environment the values of
allow-listed names, a URL its scheme, host, port and path. Free text (logs, /metrics labels,
error bodies, server-info answers, notes) is read with encodings undone and scanned (scan,
lines). `redact_json` applies both to a JSON value by its keys: the one gate of manifest.json,
run.json, findings.json, analysis.json, checklist.json and the report's attachments."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from diagnostic.bundle.commands import redact_command as _redact_command
from diagnostic.bundle.commands import redact_env as _redact_env
from diagnostic.bundle.commands import redact_variables as _redact_variables
from diagnostic.bundle.lines import LineRedactor, redact_file_text
from diagnostic.bundle.scan import scan_line
from diagnostic.bundle.secret_shapes import is_secret_name
from diagnostic.bundle.textrules import MASK
from diagnostic.bundle.urls import redact_url

__all__ = [
    "MASK",
    "LineRedactor",
    "is_secret_name",
    "redact_attachment",
    "redact_command",
    "redact_commands",
    "redact_echoes",
    "redact_env",
    "redact_file_text",
    "redact_json",
    "redact_mapping",
    "redact_text",
    "redact_url",
    "redact_variables",
    "secret_values",
]


def redact_text(text: str) -> str:
    """Mask every secret in free text (a log, a message, an endpoint's answer); text of
    several lines goes line by line, as a log does (a key split over two lines, a private
    key's armour apart from its body)."""
    if "\n" not in text:
        return scan_line(text)
    return redact_file_text(text)


def redact_command(command: str, *, launch: bool = True) -> str:
    """A launch command as a bundle stores it: option values kept only where the engine's
    documentation lists the option as safe, the rest scanned. Not a `launch` (a stop, health
    or log command), the engine launches it holds are redacted so and the rest scanned."""
    return _redact_command(command, redact_text, launch=launch)


def redact_commands(commands: Mapping[str, str]) -> dict[str, str]:
    """Commands by name (a plan's log commands by source), each redacted as a command that
    is no launch."""
    return {name: redact_command(command, launch=False) for name, command in commands.items()}


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """An arm's environment: values kept for allow-listed names alone (and scanned)."""
    return _redact_env(env, redact_text)


def redact_variables(command: str, variables: Mapping[str, str]) -> dict[str, str]:
    """The values of the shell variables `command` names, kept where the command keeps them."""
    return _redact_variables(redact_command(command), variables, redact_text)


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
    """Mask values of secret-named keys and secrets inside the others (a mapping of free
    texts; an environment goes through redact_env)."""
    return {k: MASK if is_secret_name(k) else redact_text(v) for k, v in mapping.items()}


# Keys whose values have a known structure, wherever they stand in a JSON value: a launch
# (an arm's, or a run's `command` beside its env), other commands (stop, health, a telemetry
# source's), URLs.
_OTHER_COMMANDS = frozenset({"stop", "health", "command"})
_URL_KEYS = frozenset({"base_url", "url", "endpoint"})


def redact_json(value: Any) -> Any:
    """Mask secrets anywhere in a JSON-like value: strings under a command's key (launch,
    command, stop, health; an arm's logs) as commands, an env as an environment, the
    variables beside a command by that command, a URL's key as a URL, a secret-named key's
    value whole, every other string as free text."""
    if isinstance(value, Mapping):
        return {k: _keyed(value, str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_attachment(text: str) -> str:
    """A file a report embeds (analysis.json, deliverable.json) redacted like the bundle's
    JSON files: by its keys when it is JSON, as free text otherwise; returned unchanged,
    byte for byte, when it held nothing to mask."""
    try:
        value = json.loads(text)
    except ValueError:
        return redact_text(text)
    redacted = _signatures_kept(value, redact_json(value))
    if redacted == value:
        return text
    return json.dumps(redacted, indent=2, ensure_ascii=False) + "\n"


# A signature block diagnose wrote (schema.seal.RootSignature): public key material by
# construction (a public key, its fingerprint, a signature), never a secret, and `verify`
# must read it back byte for byte.
_SIGNATURE_KEYS = frozenset({"algorithm", "public_key", "key_id", "signature"})


def _signatures_kept(original: Any, redacted: Any) -> Any:
    """`redacted` with every signature block of `original` put back where it was."""
    if isinstance(original, dict) and set(original) == _SIGNATURE_KEYS:
        return original if original["algorithm"] == "ed25519" else redacted
    if isinstance(original, dict) and isinstance(redacted, dict):
        return {k: _signatures_kept(original.get(k), v) for k, v in redacted.items()}
    if isinstance(original, list) and isinstance(redacted, list):
        return [_signatures_kept(o, r) for o, r in zip(original, redacted, strict=False)]
    return redacted


def _keyed(parent: Mapping[str, Any], key: str, value: Any) -> Any:
    if is_secret_name(key) and value not in (None, "", False, MASK):
        return MASK
    if isinstance(value, str):
        if key == "launch" or (key == "command" and "env" in parent):
            return redact_command(value)
        if key in _OTHER_COMMANDS:
            return redact_command(value, launch=False)
        if key in _URL_KEYS and "://" in value:
            return redact_url(redact_text(value))
        return redact_text(value)
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
        if key == "env":
            return redact_env(value)
        if key == "logs":
            return redact_commands(value)
        if key == "variables" and isinstance(parent.get("command"), str):
            return redact_variables(parent["command"], value)
    return redact_json(value)
