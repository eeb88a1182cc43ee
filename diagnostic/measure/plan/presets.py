"""Plan presets: a k sweep for vLLM, SGLang or llama.cpp without writing launch commands."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Literal

from diagnostic import defaults
from diagnostic.errors import PlanError
from diagnostic.measure.plan.spec import ArmTable, PlanFile, PlanTable

__all__ = ["ENGINES", "METHODS", "Engine", "plan_from_preset"]

Engine = Literal["vllm", "sglang", "llamacpp"]
ENGINES: tuple[Engine, ...] = ("vllm", "sglang", "llamacpp")

# Method names a consultant types, per engine, and whether each needs a drafter model.
METHODS: dict[str, dict[str, bool]] = {
    "vllm": {"eagle": True, "eagle3": True, "draft_model": True, "mtp": False, "ngram": False},
    "sglang": {"eagle": True, "eagle3": True, "standalone": True, "ngram": False},
    "llamacpp": {"ngram": False, "draft": True, "eagle3": True},
}
_SERVERS = {
    "vllm": "vllm serve",
    "sglang": "python -m sglang.launch_server",
    "llamacpp": "llama-server",
}
_DEFAULT_PORT = {"vllm": 8000, "sglang": 30000, "llamacpp": 8080}
_K = "@K@"  # stands for {k} while JSON and shell quoting are applied


def plan_from_preset(
    engine: str,
    *,
    model: str,
    method: str,
    ks: Sequence[int],
    drafter: str | None = None,
    restarts: int = defaults.RESTARTS,
    requests: int = defaults.REQUESTS,
    warmup: int = defaults.WARMUP,
    max_tokens: int = defaults.MAX_TOKENS,
    workloads: Sequence[str] = defaults.WORKLOADS,
    port: int | None = None,
    server: str | None = None,
    extra_args: str = "",
    aa: bool = True,
    seed: int = defaults.SEED,
    health_timeout_s: float = defaults.HEALTH_TIMEOUT_S,
) -> PlanFile:
    """A plan with a baseline, an A/A arm (unless aa=False) and one arm per draft length k."""
    method = _check(engine, method, drafter, ks)
    base = f"{server or _SERVERS[engine]} {_base_args(engine, model)} {extra_args}".strip()
    spec = _spec_args(engine, method, drafter)
    arms = [ArmTable(name="baseline", launch=base, speculative=False)]
    if aa:
        arms.append(ArmTable(name="baseline-aa", aa_of="baseline"))
    arms.append(
        ArmTable(
            name=f"{method.replace('_', '-')}-k{{k}}",
            launch=f"{base} {spec}",
            sweep={"k": list(ks)},
            speculative=True,
        )
    )
    options = PlanTable(
        restarts=restarts,
        requests=requests,
        warmup=warmup,
        workloads=list(workloads),
        max_tokens=max_tokens,
        baseline="baseline",
        port=port or _DEFAULT_PORT[engine],
        health_timeout_s=health_timeout_s,
        seed=seed,
    )
    return PlanFile(plan=options, arms=arms)


def _check(engine: str, method: str, drafter: str | None, ks: Sequence[int]) -> str:
    if engine not in METHODS:
        raise PlanError(f"unknown engine {engine!r}; use one of: {', '.join(ENGINES)}")
    method = method.lower().replace("-", "_")
    methods = METHODS[engine]
    if method not in methods:
        raise PlanError(
            f"{engine} preset has no method {method!r}; use one of: {', '.join(methods)}"
        )
    if methods[method] and not drafter:
        raise PlanError(f"{engine} method {method} needs a drafter: add --drafter PATH_OR_HF_ID")
    if not ks or any(k < 1 for k in ks) or len(set(ks)) != len(ks):
        raise PlanError(f"--k must list distinct draft lengths >= 1 (got {list(ks)})")
    return method


def _word(text: str) -> str:
    """A shell word for the template: quoted for bash, braces doubled (literal)."""
    return shlex.quote(text).replace("{", "{{").replace("}", "}}").replace(_K, "{k}")


def _base_args(engine: str, model: str) -> str:
    if engine == "vllm":
        return f"{_word(model)} --port {{port}}"
    if engine == "sglang":
        return f"--model-path {_word(model)} --port {{port}} --enable-metrics"
    return f"-m {_word(model)} --host 127.0.0.1 --port {{port}} --metrics"


def _spec_args(engine: str, method: str, drafter: str | None) -> str:
    if engine == "vllm":
        return _vllm_spec(method, drafter)
    if engine == "sglang":
        return _sglang_spec(method, drafter)
    return _llamacpp_spec(method, drafter)


def _vllm_spec(method: str, drafter: str | None) -> str:
    config: dict[str, str | int] = {"method": method}
    if drafter:
        config["model"] = drafter
    config["num_speculative_tokens"] = _K
    text = json.dumps(config, separators=(",", ":")).replace(f'"{_K}"', _K)
    return f"--speculative-config {_word(text)}"


def _sglang_spec(method: str, drafter: str | None) -> str:
    algorithm = {"eagle": "EAGLE", "eagle3": "EAGLE3", "standalone": "STANDALONE"}.get(method)
    if algorithm is None:  # ngram: the draft budget is num-draft-tokens itself
        return "--speculative-algorithm NGRAM --speculative-num-draft-tokens {k}"
    # With topk 1 SGLang drafts a chain of num-steps tokens and verifies num-steps + 1.
    return (
        f"--speculative-algorithm {algorithm} "
        f"--speculative-draft-model-path {_word(drafter or '')} "
        "--speculative-num-steps {k} --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens {k+1}"
    )


def _llamacpp_spec(method: str, drafter: str | None) -> str:
    if method == "ngram":
        # size-n 2: the default of 12 tokens rarely matches (REAL-ENGINE.md); size-m = k.
        return (
            "--spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-ngram-simple-size-m {k}"
        )
    spec_type = "draft-eagle3" if method == "eagle3" else "draft-simple"
    return f"-md {_word(drafter or '')} --spec-type {spec_type} --spec-draft-n-max {{k}}"
