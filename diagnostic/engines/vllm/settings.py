"""vLLM's settings lines (engine config, non-default args, V0 Namespace, version banner) and
pasted launch commands: what was asked for, not what the engine resolved."""

from __future__ import annotations

import re
from typing import Any

from diagnostic.engines import _kv
from diagnostic.engines._common import LogParser, ev, version_in_words
from diagnostic.engines._lines import Line
from diagnostic.engines._signals import set_fact
from diagnostic.engines.command import find_command
from diagnostic.engines.vllm.capture import VWorker
from diagnostic.engines.vllm.signals import IMAGE_WORDS, MARKERS, command_spec
from diagnostic.schema.logfacts import Evidence, LogFacts

__all__ = ["SettingsReader", "prose_version"]

_VERSION_BANNER = re.compile(r"vLLM (?:API )?server version (?P<v>\d[\w.+-]*)")
_SERVING = re.compile(r"serving model (?P<m>\S+)")
_ENGINE_LINE = re.compile(r"Initializing an? (?:(?P<gen>V[01]) )?LLM engine \(v(?P<v>[^)]+)\)")
_MODE_REPR = re.compile(
    r"""['"]cudagraph_mode['"]\s*:\s*(?:<CUDAGraphMode\.(?P<name>\w+)[^>]*>"""
    r"""|\[\s*(?P<a>\d)\s*,\s*(?P<b>\d)\s*\]|(?P<n>\d)|(?P<null>null|None))"""
)
_MODE_NUMBERS = {
    "0": "NONE",
    "1": "PIECEWISE",
    "2": "FULL",
    "2,0": "FULL_DECODE_ONLY",
    "2,1": "FULL_AND_PIECEWISE",
}


class SettingsReader(LogParser):
    """The part of the vLLM parser that reads settings and commands (a base of `Parser`)."""

    def __init__(self, facts: LogFacts) -> None:
        super().__init__(facts)
        self.configured_line: Evidence | None = None
        self.enforce_eager: bool | None = None
        self.generation: str | None = None
        self.command_lines: set[int] = set()
        self.command_ks: set[int] = set()  # draft lengths the pasted commands give

    def _proc(self, key: str) -> VWorker:
        raise NotImplementedError

    def alternatives(self) -> None:
        """Commands that give different draft lengths (`MTP1:` and `MTP2:` side by side) and no
        log line that says which ran: no single k."""
        source = self.facts.sources.get("spec.num_draft_tokens")
        if len(self.command_ks) > 1 and (source is None or source.kind == "command"):
            self.facts.spec.num_draft_tokens = None
            self.facts.sources.pop("spec.num_draft_tokens", None)
            ks = ", ".join(str(k) for k in sorted(self.command_ks))
            self.facts.notes.append(f"the pasted commands give different draft lengths ({ks})")

    def _config(self, proc: VWorker, line: Line) -> None:
        text = line.text
        m = _ENGINE_LINE.search(text)
        if m:
            self.facts.version = self.facts.version or m["v"]
            self.generation = m["gen"] or "V0"
        _, found, config = text.partition("with config:")
        if not found:  # a mutated or wrapped line that lost its "with config:" marker
            return
        kv = _kv.split_kv(config)
        self.facts.model = self.facts.model or _kv.unquote(kv.get("model"))
        tp = kv.get("tensor_parallel_size", "")
        if tp.isdigit():
            self.facts.tensor_parallel_size = int(tp)
        if "enforce_eager" in kv:
            self.enforce_eager = kv["enforce_eager"] == "True"
            if self.enforce_eager:
                proc.eager.append(ev(line, "enforce_eager"))
        self._spec_config(kv.get("speculative_config"), line)
        compilation = kv.get("compilation_config", "")
        mode = _MODE_REPR.search(compilation)
        if mode:
            self.facts.capture.configured = _mode_name(mode)
            self.configured_line = ev(line, "cudagraph_mode")
        elif self.generation == "V1" and '"use_cudagraph"' in compilation:
            # 0.9 printed no cudagraph_mode: use_cudagraph and full_cuda_graph say it.
            full = '"full_cuda_graph":true' in compilation.replace(" ", "")
            graphs = '"use_cudagraph":true' in compilation.replace(" ", "")
            self.facts.capture.configured = (
                "NONE" if not graphs or self.enforce_eager else "FULL" if full else "PIECEWISE"
            )
            self.configured_line = ev(line, "use_cudagraph")
        elif self.generation == "V0" and self.enforce_eager is not None:
            self.facts.capture.configured = "NONE" if self.enforce_eager else "CAPTURED"
            self.configured_line = ev(line, "enforce_eager")

    def _spec_config(self, raw: str | None, line: Line) -> None:
        if raw is None:
            return
        spec = self.facts.spec
        if raw.strip() in ("None", ""):
            spec.enabled = spec.enabled or False
            return
        inner = _kv.split_kv(raw[raw.find("(") + 1 : raw.rfind(")")])
        spec.enabled = True
        spec.method = spec.method or _kv.unquote(inner.get("method"))
        spec.drafter = spec.drafter or _kv.unquote(inner.get("model") or inner.get("draft_model"))
        k = inner.get("num_spec_tokens") or inner.get("num_speculative_tokens") or ""
        if k.isdigit():
            spec.num_draft_tokens = int(k)
        if spec.method is None and spec.drafter:
            spec.method = "draft_model"
        self.facts.spec_evidence.append(ev(line, "speculative_config"))

    def _requested(self, line: Line) -> None:
        text = line.text
        value = _kv.literal_prefix(text[text.index("args: {") + 6 :])
        if not isinstance(value, dict):
            self.facts.notes.append(f"line {line.number}: could not read the non-default args")
            return
        self.facts.requested.update({str(k): v for k, v in value.items()})
        self.facts.model = self.facts.model or _str(value.get("model"))
        sc = value.get("speculative_config")
        if isinstance(sc, dict) and sc:
            self._speculative(sc, line)
        elif self.facts.spec.enabled is None and _whole_dict(text, value):
            # All the user set (not a cut line): no speculative config means speculation off.
            self.facts.spec.enabled = False
            self.facts.spec_evidence.append(ev(line))

    def _speculative(self, sc: dict[Any, Any], line: Line) -> None:
        """Speculation from a speculative config dict (non-default args, the offline API)."""
        spec = self.facts.spec
        spec.enabled = True
        spec.method = spec.method or _str(sc.get("method"))
        spec.drafter = spec.drafter or _str(sc.get("model"))
        k = sc.get("num_speculative_tokens")
        if isinstance(k, int) and spec.num_draft_tokens is None:
            spec.num_draft_tokens = k
        self.facts.spec_evidence.append(ev(line))

    def _api_config(self, line: Line) -> None:
        """The offline API's keyword: `LLM(…, speculative_config={"method": "ngram", …})`."""
        text = line.text
        at = text.find("{", text.index("speculative_config="))
        if at == -1:
            return
        closes = [i for i in range(len(text) - 1, at, -1) if text[i] == "}"]
        found = (_kv.literal(text[at : i + 1]) for i in closes)  # the dict, then the call's `)`
        sc = next((v for v in found if isinstance(v, dict)), None) or _kv.literal_prefix(text[at:])
        if isinstance(sc, dict) and sc:
            self._speculative(sc, line)

    def _namespace(self, line: Line) -> None:
        text = line.text
        body = text[text.index("args: Namespace(") + 16 : text.rfind(")")]
        kv = {k: _kv.literal(v) for k, v in _kv.split_kv(body).items()}
        self.facts.requested.update(kv)
        self.facts.model = self.facts.model or _str(kv.get("model"))
        drafter = _str(kv.get("speculative_model"))
        off = "speculative_model" in kv and not kv.get("speculative_config")
        if not drafter and off and self.facts.spec.enabled is None:
            self.facts.spec.enabled = False  # the args name no drafter and no config
        if drafter:
            spec = self.facts.spec
            spec.enabled, spec.drafter = True, spec.drafter or drafter
            spec.method = spec.method or ("ngram" if drafter == "[ngram]" else "draft_model")
            k = kv.get("num_speculative_tokens")
            if isinstance(k, int):
                spec.num_draft_tokens = spec.num_draft_tokens or k
            self.facts.spec_evidence.append(ev(line))

    def _banner(self, line: Line) -> None:
        m = _VERSION_BANNER.search(line.text)
        if m:
            self.facts.version = self.facts.version or m["v"]
            serving = _SERVING.search(line.text)
            if serving:
                self.facts.model = self.facts.model or serving["m"].rstrip(",")

    def command(self, line: Line, *, launch: bool = False) -> bool:
        """A pasted launch command: what was configured (not what the engine resolved)."""
        cmd = find_command(line.text, MARKERS, launch=launch, image_words=IMAGE_WORDS)
        if cmd is None:
            return False
        self.kind = "command"
        self.command_lines.add(line.number)
        got = command_spec(cmd)
        facts, spec = self.facts, self.facts.spec
        set_fact(facts, "version", got["version"])
        set_fact(facts, "model", got["model"])
        set_fact(facts, "capture.configured", "NONE" if got["eager"] else got["configured"])
        if got["eager"]:
            self._proc("command").eager.append(ev(line, "--enforce-eager"))
        if got["enabled"] is not None and (spec.enabled is None or got["enabled"]):
            spec.enabled = got["enabled"]
        for path, key in (("method", "method"), ("num_draft_tokens", "k"), ("drafter", "drafter")):
            set_fact(facts, f"spec.{path}", got[key])
        if got["k"] is not None:
            self.command_ks.add(got["k"])
        facts.spec_evidence.append(ev(line, "--speculative"))
        facts.requested.update({k: v for k, v in cmd.flags.items()})
        return True


def _whole_dict(text: str, value: dict[object, object]) -> bool:
    """The non-default args line read whole (not closed by `literal_prefix` after a cut) and
    naming no V0 drafter either."""
    whole = _kv.literal(text[text.index("args: {") + 6 :])
    return isinstance(whole, dict) and "speculative_model" not in value


def _mode_name(m: re.Match[str]) -> str | None:
    if m["name"]:  # a repr cut or spliced mid-name ('FULL_AND_PIEC') names no mode
        return m["name"] if m["name"] in _MODE_NUMBERS.values() else None
    if m["a"] is not None:
        return _MODE_NUMBERS.get(f"{m['a']},{m['b']}")
    if m["n"] is not None:
        return _MODE_NUMBERS.get(m["n"])
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


# The running version said in words ("on the vllm v0.11.0 image", "detected via vLLM
# 0.22.1+empty", "- vLLM version: `0.18.1rc1.dev43+gdebd6e768`").
_PROSE_VERSION = re.compile(
    r"\b(?i:vllm)(?:\s+(?i:version))?(?::\s*|\s+)`?v?(?P<v>\d+\.\d+\.\d+(?:[\w.+-]*\w)?)(?![\w.])"
)


def prose_version(text: str) -> str | None:
    """The first vLLM version in the words of a line that is not a version something changed at."""
    return version_in_words(text, _PROSE_VERSION)
