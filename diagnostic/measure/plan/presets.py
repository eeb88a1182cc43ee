"""Plan presets: a k sweep for vLLM, SGLang or llama.cpp without writing launch commands."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Literal

from diagnostic import defaults
from diagnostic.errors import PlanError
from diagnostic.measure.plan.spec import ArmTable, PlanFile, PlanTable

__all__ = ["ENGINES", "GRAPHS", "KNOBS", "METHODS", "Engine", "plan_from_preset"]

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
_CHAINED = ("eagle", "eagle3", "standalone")  # SGLang methods that draft num-steps tokens deep
# Speculation parameters a preset sweeps beside k, by engine: knob -> (placeholder, flag, the
# methods that have it). SGLang's, as clients tune them (--speculative-num-steps is k).
KNOBS: dict[str, dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "vllm": {},
    "sglang": {
        "topk": ("topk", "--speculative-eagle-topk", _CHAINED),
        "draft-tokens": ("draft", "--speculative-num-draft-tokens", _CHAINED),
        "bfs-breadth": ("breadth", "--speculative-ngram-max-bfs-breadth", ("ngram",)),
    },
    "llamacpp": {},
}
# CUDA graphs as a configuration: the flag (or environment) that turns them off per engine.
GRAPHS = ("on", "off", "both")
_NO_GRAPHS: dict[str, tuple[str, dict[str, str]]] = {
    "vllm": ("--enforce-eager", {}),
    "sglang": ("--disable-cuda-graph", {}),
    "llamacpp": ("", {"GGML_CUDA_DISABLE_GRAPHS": "1"}),
}
_K = "@K@"  # stands for {k} while JSON and shell quoting are applied


def plan_from_preset(
    engine: str,
    *,
    model: str,
    method: str,
    ks: Sequence[int],
    drafter: str | None = None,
    knobs: Mapping[str, Sequence[int]] | None = None,
    graphs: str = "on",
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
    """A plan with a baseline, an A/A arm (unless aa=False) and one arm per draft length k
    and value of each engine knob (`knobs`, KNOBS); `graphs` "off" runs every arm without
    CUDA graphs, "both" adds a graphs-off twin of the baseline and of the speculative arms
    (each matched to the other by its flags)."""
    method = _check(engine, method, drafter, ks)
    knobs = _check_knobs(engine, method, dict(knobs or {}))
    if graphs not in GRAPHS:
        raise PlanError(f"--graphs takes one of {', '.join(GRAPHS)}, not {graphs!r}")
    base = f"{server or _SERVERS[engine]} {_base_args(engine, model)} {extra_args}".strip()
    spec = _spec_args(engine, method, drafter, knobs)
    name = f"{method.replace('_', '-')}-k{{k}}" + "".join(
        f"-{KNOBS[engine][knob][0]}{{{KNOBS[engine][knob][0]}}}" for knob in knobs
    )
    sweep: dict[str, list[int | float | str]] = {"k": list(ks)}
    sweep.update({KNOBS[engine][knob][0]: list(values) for knob, values in knobs.items()})
    variants = {"on": [""], "off": ["off"], "both": ["", "off"]}[graphs]
    arms: list[ArmTable] = []
    for variant in variants:
        flag, env = _NO_GRAPHS[engine] if variant else ("", {})
        suffix = "-nograph" if graphs == "both" and variant else ""
        launch = f"{base} {flag}".strip()
        arms.append(ArmTable(name=f"baseline{suffix}", launch=launch, env=env, speculative=False))
        if aa and not suffix:
            arms.append(ArmTable(name="baseline-aa", aa_of="baseline"))
        arms.append(
            ArmTable(
                name=name + suffix,
                launch=f"{launch} {spec}",
                env=env,
                sweep=sweep,
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


def _check_knobs(
    engine: str, method: str, knobs: dict[str, Sequence[int]]
) -> dict[str, Sequence[int]]:
    known = KNOBS[engine]
    for knob, values in knobs.items():
        if knob not in known:
            have = ", ".join(known) or "none"
            raise PlanError(f"{engine} preset has no knob {knob!r} (its knobs: {have})")
        if method not in known[knob][2]:
            raise PlanError(
                f"knob {knob} applies to {', '.join(known[knob][2])}, not to method {method}"
            )
        if not values or any(v < 1 for v in values) or len(set(values)) != len(values):
            raise PlanError(f"knob {knob} needs distinct values >= 1 (got {list(values)})")
    trees = [v > 1 for v in knobs.get("topk", ())]
    if any(trees) != ("draft-tokens" in knobs) or (any(trees) and not all(trees)):
        # SGLang asserts num-draft-tokens == num-steps + 1 for a chain (topk 1)
        raise PlanError(
            "a chain (topk 1) verifies k + 1 tokens, a tree (topk > 1) as many as "
            "--speculative-num-draft-tokens says: sweep trees with --knob topk=… (all > 1) "
            "and --knob draft-tokens=… together, chains with --k alone"
        )
    return knobs


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


def _spec_args(
    engine: str, method: str, drafter: str | None, knobs: Mapping[str, Sequence[int]]
) -> str:
    if engine == "vllm":
        return _vllm_spec(method, drafter)
    if engine == "sglang":
        return _sglang_spec(method, drafter, knobs)
    return _llamacpp_spec(method, drafter)


def _vllm_spec(method: str, drafter: str | None) -> str:
    config: dict[str, str | int] = {"method": method}
    if drafter:
        config["model"] = drafter
    config["num_speculative_tokens"] = _K
    text = json.dumps(config, separators=(",", ":")).replace(f'"{_K}"', _K)
    return f"--speculative-config {_word(text)}"


def _sglang_spec(method: str, drafter: str | None, knobs: Mapping[str, Sequence[int]]) -> str:
    """SGLang's speculation flags: num-draft-tokens counts the verified root, so a chain of k
    drafts verifies k + 1 (NGRAM's k is its draft budget, the root aside)."""
    algorithm = {"eagle": "EAGLE", "eagle3": "EAGLE3", "standalone": "STANDALONE"}.get(method)
    if algorithm is None:
        breadth = " --speculative-ngram-max-bfs-breadth {breadth}" if "bfs-breadth" in knobs else ""
        return "--speculative-algorithm NGRAM --speculative-num-draft-tokens {k+1}" + breadth
    topk = "{topk}" if "topk" in knobs else "1"
    tokens = "{draft}" if "draft-tokens" in knobs else "{k+1}"
    return (
        f"--speculative-algorithm {algorithm} "
        f"--speculative-draft-model-path {_word(drafter or '')} "
        f"--speculative-num-steps {{k}} --speculative-eagle-topk {topk} "
        f"--speculative-num-draft-tokens {tokens}"
    )


def _llamacpp_spec(method: str, drafter: str | None) -> str:
    if method == "ngram":
        # size-n 2: the default of 12 tokens rarely matches (docs/real-engines.md); size-m = k.
        return (
            "--spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-ngram-simple-size-m {k}"
        )
    spec_type = "draft-eagle3" if method == "eagle3" else "draft-simple"
    return f"-md {_word(drafter or '')} --spec-type {spec_type} --spec-draft-n-max {{k}}"
