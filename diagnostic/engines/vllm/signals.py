"""vLLM's one-line signals (as data) and its launch commands (`vllm serve`, the API server
module, the `vllm/vllm-openai` image)."""

from __future__ import annotations

import json
import re
from typing import Any

from diagnostic.engines import _kv
from diagnostic.engines._signals import Signal
from diagnostic.engines.command import Command

__all__ = ["COMMANDS", "FLAG_HINTS", "IMAGE_WORDS", "MARKERS", "SIGNALS", "command_spec", "mode_of"]

_ON = {"spec.enabled": True}
SIGNALS: tuple[Signal, ...] = (
    # A downgrade or override that names speculation proves it was on (the mode is read by
    # the parser's capture lines).
    Signal("with spec-decode", _ON, "startup"),
    Signal("Dynamic speculative decoding", _ON, "startup"),
    # V0 spec-decode worker: its proposer class names the method (MultiStepWorker serves
    # draft models and EAGLE alike, so it names none).
    Signal("Configuring SpecDecodeWorker", _ON, "startup"),
    Signal("MedusaWorker", {**_ON, "spec.method": "medusa"}, "startup"),
    Signal("NGramWorker", {**_ON, "spec.method": "ngram"}, "startup"),
    Signal("MLPSpeculatorWorker", {**_ON, "spec.method": "mlp_speculator"}, "startup"),
    Signal("SpecDecodeWorker stage times", _ON, "runtime"),
    # Model Runner V2 drafter bars (0.20+): an EAGLE-family or MTP drafter.
    Signal("Capturing eagle", _ON, "startup"),
    Signal("Capturing multi-module MTP", _ON, "startup"),
    # Acceptance at run time (V0, V1, Prometheus).
    Signal(
        "Speculative metrics",
        {**_ON, "spec.num_draft_tokens": "{k}"},
        "metric",
        re.compile(r"Number of speculative tokens: (?P<k>\d+)|"),
    ),
    Signal("SpecDecoding metrics", _ON, "metric"),
    # A traceback through the drafting step (V1 and plugins such as vllm-ascend): the drafter
    # ran. Its file names no method (one proposer serves several).
    Signal(
        "propose",
        _ON,
        "runtime",
        re.compile(
            r"spec_decode/\w+\.py\", line \d+, in propose\b"
            r"|\bin (?:_generate_draft_token_ids|propose_draft_token_ids)\b"
        ),
    ),
    Signal("vllm:spec_decode_num_draft", _ON, "metric"),
    # Speculation named by errors and notices: a SpeculativeConfig that failed validation, a
    # token budget derived from the speculative settings, a run forced onto Model Runner V2.
    Signal("validation error for SpeculativeConfig", _ON, "startup", head=True),
    # SpeculativeConfig's own notices name the method it runs: an alias it rewrites
    # (`method `deepseek_mtp` is deprecated and replaced with mtp`), the MTP branch's warning
    # that k > 1 reruns the same MTP layer.
    Signal(
        "is deprecated and replaced with",
        {**_ON, "spec.method": "{m}"},
        "startup",
        re.compile(r"method `?\w+`? is deprecated and replaced with (?P<m>\w+)"),
    ),
    Signal("forward on same MTP layer", {**_ON, "spec.method": "mtp"}, "startup"),
    Signal("speculative decoding settings", _ON, "startup", head=True),
    Signal(
        "does not yet support: ",
        {**_ON, "spec.method": "{m}"},
        "startup",
        re.compile(
            r"Model Runner V2 does not yet support: (?:speculative method )?'?"
            r"(?:(?P<m>ngram|eagle3?|mtp|draft_model|medusa|suffix|dflash)\b|.*speculat)"
        ),
        head=True,
    ),
    # The version outside the banner: collect_env, pip, a `vLLM version` notice, image tags
    # (with or without suffixes: `v0.26.0-aarch64-ubuntu2404`, `v0.24.0-cu129`). Weak: the
    # banner and the engine line win.
    *(
        Signal(literal, {"version": "{v}"}, "startup", re.compile(rx), weak=True, head=True)
        for literal, rx in (
            ("vLLM Version", r"vLLM Version\s*:\s*v?(?P<v>\d[\w.+-]*)"),
            ("vllm==", r"\bvllm==(?P<v>\d[\w.+-]*)"),
            ("vllm --version", r"vllm --version\s+v?(?P<v>\d+\.\d+[\w.+-]*)"),
            ("Name: vllm", r"Name: vllm Version:\s*(?P<v>\d+\.\d+[\w.+-]*)"),
            ("vLLM version", r"vLLM version:?\s+v?(?P<v>\d+\.\d+[\w.+-]*)"),
            # an issue's environment bullet: ``- vLLM `0.23.1rc1.dev1302+ge765bbc97` (nightly)``
            ("vLLM `", r"\bvLLM\s+`v?(?P<v>\d+\.\d+\.\d+[\w.+-]*)`"),
            ("vllm-openai", r"vllm/vllm-openai(?:-\w+)?:v?(?P<v>\d+\.\d+(?:\.\d+)?(?:rc\d+)?)"),
            ("vllm-ascend", r"vllm-ascend:v?(?P<v>\d+\.\d+(?:\.\d+)?(?:rc\d+)?)"),
        )
    ),
    # The ASCII logo of the start-up banner (0.2x): `▄▄ ▄█ █ … █  version 0.26.0`.
    Signal(
        "█  version",
        {"version": "{v}"},
        "startup",
        re.compile(r"█\s+version\s+(?P<v>\d+\.\d+[\w.+-]*)"),
        head=True,
    ),
    # vllm-ascend: the platform plugin names the mode it compiles for.
    Signal(
        "compilation enabled on NPU",
        {"capture.configured": "{mode}"},
        "startup",
        re.compile(
            r"\b(?P<mode>FULL_AND_PIECEWISE|FULL_DECODE_ONLY|PIECEWISE|FULL|NONE) compilation "
            r"enabled on NPU"
        ),
    ),
)

COMMANDS: tuple[bytes, ...] = (b"vllm serve", b"vllm.entrypoints", b"vllm/vllm-openai")
# Flags only vLLM takes: a line with one is read as (part of) a launch command even without
# the program (argument lists of manifests, backend arguments, a custom image).
FLAG_HINTS: tuple[str, ...] = (
    "--speculative-config",
    "--speculative_config",
    "--speculative-model",
    "--num-speculative-tokens",
    "--num_speculative_tokens",
    "--enforce-eager",
    "--compilation-config",
    "--compilation_config",
    "docker run",
)
IMAGE_WORDS = ("vllm",)
MARKERS = (
    re.compile(r"(?:\S*/)?vllm"),
    re.compile(r"\S*vllm\.entrypoints\.openai\.api_server"),
    re.compile(r"\S*vllm/vllm-openai(?::\S*)?"),
)
_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")


# A placeholder where a JSON value goes (`"num_speculative_tokens":K`, `"model": <drafter>`).
_PLACEHOLDER_VALUE = re.compile(
    r"(?<=:)\s*(?!(?:true|false|null)\b)(?:<[^<>\"]*>|[A-Za-z_$][\w$.-]*)(?=\s*[,}])"
)


def _json(value: str | bool | None) -> Any:
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except ValueError:
        pass
    mended = _PLACEHOLDER_VALUE.sub("null", value)  # the rest of the config stays readable
    try:
        return json.loads(mended) if mended != value else _kv.literal(value)
    except ValueError:
        return _kv.literal(value)


def mode_of(compilation: Any) -> str | None:
    """The cudagraph_mode a compilation config asks for (a dict or its JSON), when it names one."""
    if isinstance(compilation, str):
        compilation = _json(compilation)
    mode = compilation.get("cudagraph_mode") if isinstance(compilation, dict) else None
    return mode if mode in _MODES else None


def command_spec(cmd: Command) -> dict[str, Any]:
    """What a launch command configures: model, speculation (method, k, drafter), eager, mode.

    Speculation is off when a whole command has no speculative flag; unknown for a bare
    list of flags or when the rest comes from a `--config` file the text does not show."""
    out: dict[str, Any] = {
        "version": cmd.image_version(),
        "model": cmd.text("model") or _served(cmd),
        "eager": cmd.flag("enforce-eager") is True,
        "configured": mode_of(cmd.text("compilation-config", "O")),
        "enabled": None if cmd.bare or cmd.flag("config") is not None else False,
        "method": None,
        "k": None,
        "drafter": None,
    }
    written = cmd.text("speculative-config")
    spec = _json(written) or _dotted(cmd, "speculative-config.")
    read = isinstance(spec, dict) and bool(spec)
    if isinstance(written, str) and written.strip() not in ("", "{}") and not read:
        out["enabled"] = True  # a value not spelled out here (`"$SPEC"` assigned elsewhere)
    if read:
        k = spec.get("num_speculative_tokens")
        out.update(
            enabled=True,
            method=spec.get("method") or ("draft_model" if spec.get("model") else None),
            k=k if isinstance(k, int) else None,
            drafter=spec.get("model"),
        )
    drafter = cmd.text("speculative-model")  # V0 flags
    if drafter:
        out.update(
            enabled=True,
            method="ngram" if drafter == "[ngram]" else "draft_model",
            drafter=None if drafter == "[ngram]" else drafter,
            k=cmd.number("num-speculative-tokens"),
        )
    return out


def _dotted(cmd: Command, prefix: str) -> dict[str, Any]:
    """`--speculative_config.method ngram --speculative_config.num_speculative_tokens 4` as a
    dict (vLLM reads dotted sub-arguments into the JSON config)."""
    out: dict[str, Any] = {}
    for name, value in cmd.flags.items():
        if name.startswith(prefix) and isinstance(value, str):
            key = name[len(prefix) :].replace("-", "_")
            out[key] = int(value) if value.isdigit() else value
    return out


def _served(cmd: Command) -> str | None:
    args = cmd.positional
    return args[1] if len(args) > 1 and args[0] == "serve" else None
