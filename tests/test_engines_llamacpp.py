"""diagnostic.engines.llamacpp: real llama-server CPU logs (golden) and written CUDA cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnostic.engines import parse_log
from tests.engine_logs import assert_facts, fixture_cases, real_cases


@pytest.mark.parametrize(("log", "expected"), real_cases("llamacpp"))
def test_real_logs_golden(log: Path, expected: dict[str, Any]) -> None:
    assert_facts(parse_log(log), expected)


@pytest.mark.parametrize(("log", "expected"), fixture_cases("llamacpp-"))
def test_written_cases(log: Path, expected: dict[str, Any]) -> None:
    assert_facts(parse_log(log), expected)


def test_cpu_log_says_there_are_no_cuda_graphs(tmp_path: Path) -> None:
    """The verbose CPU log lists only a CPU device: NONE, and the reason says why."""
    facts = parse_log(real_cases("llamacpp-cpu__server_verbose")[0].values[0])
    assert facts.platform == "cpu"
    assert facts.capture.resolved == "NONE"
    assert "no CUDA graphs: the model runs on the CPU" in facts.capture.reason


def test_default_verbosity_cpu_log_is_unknown_and_says_graphs_reused_is_not_cuda() -> None:
    facts = parse_log(real_cases("llamacpp-cpu__server_k0")[0].values[0])
    assert facts.capture.resolved == "UNKNOWN"
    assert "graphs reused" in facts.capture.reason


def test_2026_per_position_line_belongs_to_its_request() -> None:
    facts = parse_log(
        [
            "0.00.001.000 I srv  llama_server: initializing ...",
            "0.01.848.529 I slot print_timing: id  0 | task 0 | draft acceptance = 0.50000 "
            "(    2 accepted /     4 generated), mean len =  2.00",
            "0.01.848.530 I slot print_timing: id  0 | task 0 |      acc per pos = (0.750, 0.250)",
            "0.01.848.531 I slot print_timing: id  0 | task 7 |      acc per pos = (0.100, 0.100)",
        ]
    )
    sample = facts.acceptance[0]
    assert (sample.mean_acceptance_length, sample.per_position) == (2.0, [0.75, 0.25])
    assert facts.spec.num_draft_tokens == 2


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("Tested on b10549-7a61c02f1 (Vulkan build).", "b10549-7a61c02f1"),
        ("Running b9947 on the 3090 box:", "b9947"),
        ("llama.cpp version 9438, CPU only build.", "b9438"),
        ("version: b10068 (571d0d54)", "b10068-571d0d54"),
    ],
)
def test_builds_as_people_write_them(text: str, version: str) -> None:
    """Issue 47: the build named in prose, in the forms llama.cpp users write it."""
    command = "llama-server -m m.gguf -ngl 99"
    assert parse_log([text, command], engine="llamacpp").version == version


def test_a_build_line_wins_over_prose() -> None:
    lines = [
        "Updated today, now on version 4640.",
        'INFO [ main] build info | tid="1" timestamp=1 build=4640 commit="d47f484d"',
    ]
    assert parse_log(lines, engine="llamacpp").version == "b4640-d47f484d"


def test_spec_type_parameters_give_method_and_draft_max() -> None:
    facts = parse_log(["llama-server -m m.gguf --spec-type mtp:n_min=0,n_max=16,p_min=0.75"])
    assert (facts.spec.enabled, facts.spec.method, facts.spec.num_draft_tokens) == (True, "mtp", 16)


def test_ngram_mod_occupancy_means_speculation() -> None:
    facts = parse_log(
        [
            "slot launch_slot_: id  3 | task 0 | processing task",
            "begin: ngram_mod occupancy = 1/4 (0.00)",
        ]
    )
    assert (facts.spec.enabled, facts.spec.method) == (True, "ngram_mod")


def test_a_placeholder_keeps_the_command_and_names_no_platform() -> None:
    facts = parse_log(["llama-server -m m.gguf -md d.gguf --device <ROCm0|Vulkan0> --draft-max 8"])
    assert (facts.spec.method, facts.spec.num_draft_tokens) == ("draft", 8)
    assert facts.platform == "unknown"


def test_a_version_query_is_no_launch() -> None:
    facts = parse_log(["$ ./llama-server --version", "version: b9812 (0c3e5a1f2)"])
    assert facts.version == "b9812-0c3e5a1f2"
    assert facts.spec.enabled is None  # the query started no server: speculation not said off


def test_a_vision_tower_on_the_cpu_is_not_the_text_model() -> None:
    """Issue 47: the mmproj's `CLIP using CPU backend` and its `offloaded 0/N layers` say where
    the vision tower runs; the text model offloaded to the GPU keeps its CUDA reading."""
    lines = [
        "llama-server -m vl-7b.gguf --mmproj mmproj-f16.gguf -md d.gguf --draft-max 8 -ngl 99",
        "load_tensors: offloaded 29/29 layers to GPU",
        "clip_ctx: CLIP using CPU backend",
        "load_tensors: offloaded 0/33 layers to GPU",
    ]
    facts = parse_log(lines)
    assert facts.platform != "cpu"
    assert facts.capture.resolved == "UNKNOWN"  # a GPU at default verbosity, not NONE


def test_sixth_round_rates_on_the_acceptance_line_and_inline_flags() -> None:
    """Newer builds print the per-position rates on the acceptance line itself (one per draft
    position); flags quoted inline in prose are a command, a trailing backtick no part of it."""
    same_line = parse_log(
        [
            "1.52.118.201 I slot print_timing: id  0 | task 0 | draft acceptance = 0.00158 (    1 "
            "accepted /   633 generated), mean acceptance length =  1.00, acceptance rate per "
            "position = (0.005, 0.000, 0.000)"
        ],
        engine="llamacpp",
    )
    assert same_line.acceptance_summary is not None
    assert same_line.acceptance_summary.per_position == [0.005, 0.0, 0.0]
    assert same_line.spec.num_draft_tokens == 3
    inline = parse_log(
        ["Server flags: `--ctx-size 8192 -ngl 99 --spec-type mtp --spec-draft-n-max 3`."],
        engine="llamacpp",
    )
    assert (inline.spec.enabled, inline.spec.method, inline.spec.num_draft_tokens) == (
        True,
        "mtp",
        3,
    )
    quoted = parse_log(
        ["- `llama-server ... --device CUDA0,CUDA1 --spec-type draft-mtp`"], engine="llamacpp"
    )
    assert (quoted.spec.method, quoted.platform) == ("draft-mtp", "cuda")
    mention = parse_log(["Try `--no-mmap` with it."], engine="llamacpp")
    assert mention.spec.enabled is None  # one flag in backticks is a mention, no launch


def test_seventh_round_forms() -> None:
    """Issue 47, seventh round (each case is in the wild corpus): a router's argument list
    pasted without its header, a build outside git, a server that listens before it loads its
    model (older builds), the issue form's backends field, settings as LLAMA_ARG_* variables."""
    router = parse_log(
        [
            "0.07.112.403 I srv          load:   --model-draft",
            "0.07.112.404 I srv          load:   /m/dflash.gguf",
            "0.07.112.404 I srv          load:   --spec-draft-n-max",
            "0.07.112.404 I srv          load:   15",
            "0.07.112.405 I srv          load:   --spec-type",
            "0.07.112.405 I srv          load:   draft-dflash",
        ],
        engine="llamacpp",
    )
    assert (router.spec.enabled, router.spec.method, router.spec.num_draft_tokens) == (
        True,
        "draft-dflash",
        15,
    )
    early = parse_log(
        [
            "build: 6374 (unknown) with FreeBSD clang version 18.1.6 for x86_64-unknown-freebsd",
            "main: HTTP server is listening, hostname: 192.168.1.40, port: 8088, http threads: 11",
            "main: loading model",
            "srv    load_model: loading model '/tank/m.gguf'",
        ],
        engine="llamacpp",
    )
    assert (early.version, early.spec.enabled) == ("b6374", None)  # its drafter would come later
    form = parse_log(
        ["version: 8173 (2e7e63852)", "### GGML backends", "", "Vulkan"], engine="llamacpp"
    )
    assert (form.platform, form.capture.resolved) == ("vulkan", "NONE")
    two = parse_log(["version: 8173 (2e7e63852)", "### GGML backends", "", "CUDA, Vulkan"])
    assert two.platform == "unknown"  # two GPU backends: the form names no one platform
    env = parse_log(
        [
            "      dockerfile: .devops/intel.Dockerfile",
            "      LLAMA_ARG_MODEL_DRAFT: /models/gemma-4-1B-it-Q4_K_M.gguf",
            "      LLAMA_ARG_DRAFT_MAX: 12",
        ]
    )
    assert (env.engine, env.platform, env.spec.method, env.spec.num_draft_tokens) == (
        "llamacpp",
        "xpu",
        "draft",
        12,
    )
