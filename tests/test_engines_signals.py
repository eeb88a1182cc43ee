"""The pieces excerpts are read with: signals as data, pasted commands, cut-off literals."""

from __future__ import annotations

import re

from diagnostic.engines import _kv, detect_engine, parse_log
from diagnostic.engines._lines import Line, LineScanner
from diagnostic.engines._signals import Signal, SignalReader
from diagnostic.engines.command import ShellVariables, find_command
from diagnostic.engines.vllm.signals import MARKERS, command_spec
from diagnostic.schema.logfacts import LogFacts


def test_escaped_json_in_a_vllm_command() -> None:
    cmd = find_command(
        'vllm serve m --speculative_config "{\\"method\\":\\"ngram\\",'
        '\\"num_speculative_tokens\\":4}" --enforce-eager',
        MARKERS,
    )
    assert cmd is not None
    got = command_spec(cmd)
    assert (got["method"], got["k"], got["eager"], got["model"]) == ("ngram", 4, True, "m")


def test_environment_and_image_of_a_container_command() -> None:
    cmd = find_command(
        "docker run --gpus all -e HF_TOKEN=x vllm/vllm-openai:v0.12.0 --model q --port 8000",
        MARKERS,
    )
    assert cmd is not None
    assert (cmd.image_version(), cmd.env, cmd.text("model")) == ("0.12.0", {"HF_TOKEN": "x"}, "q")
    assert find_command("(APIServer pid=1) INFO [vllm.py:9] vllm is starting", MARKERS) is None


def test_shell_continuations_are_one_line() -> None:
    data = b"$ python3 -m sglang.launch_server \\\n    --tp 4 \\\n    --port 1\nnext line\n"
    lines = list(LineScanner((b"sglang",)).scan(data))
    assert [(line.number, line.text) for line in lines] == [
        (1, "$ python3 -m sglang.launch_server --tp 4 --port 1")
    ]


def test_weak_and_if_spec_signals_apply_at_the_end() -> None:
    facts = LogFacts(path="x")
    signals = (
        Signal(
            "n_max",
            {"spec.num_draft_tokens": "{k}"},
            "metric",
            re.compile(r"n_max=(?P<k>\d+)"),
            if_spec=True,
        ),
        Signal("drafted", {"spec.enabled": True}, "metric"),
    )
    reader = SignalReader(signals, facts)

    reader.feed(Line(1, "n_max=8", "n_max=8"))
    assert facts.spec.num_draft_tokens is None
    reader.finish()
    assert facts.spec.num_draft_tokens is None  # speculation never shown: 8 is a default
    reader.feed(Line(2, "drafted", "drafted"))
    reader.finish()
    assert (facts.spec.enabled, facts.spec.num_draft_tokens) == (True, 8)
    assert facts.sources["spec.num_draft_tokens"].line == 1


def test_literal_cut_before_its_brace() -> None:
    text = "{'model': 'm', 'speculative_config': {'method': 'eagle3', 'num_speculative_tokens': 4"
    text += ", 'dra"
    assert _kv.literal_prefix(text) == {
        "model": "m",
        "speculative_config": {"method": "eagle3", "num_speculative_tokens": 4},
    }
    assert _kv.literal_prefix("not a literal") == "not a literal"


def test_any_signal_identifies_the_engine() -> None:
    assert detect_engine(b"n_draft   = 5\nn_accept  = 3\n") == "llamacpp"
    assert detect_engine(b"accept len: 2.1") == "sglang"
    assert detect_engine(b"Speculative metrics: Draft acceptance rate: 0.5") == "vllm"
    assert detect_engine(b"nothing here") is None


def test_every_field_names_its_source() -> None:
    facts = parse_log(
        [
            "$ vllm serve m --speculative-config "
            '\'{"method": "eagle3", "num_speculative_tokens": 3}\'',
            "INFO 01-01 00:00:00 [metrics.py:1] SpecDecoding metrics: Mean acceptance length: 2.0, "
            "Accepted throughput: 1 tokens/s, Drafted throughput: 3 tokens/s, Accepted: 10 tokens, "
            "Drafted: 30 tokens, Per-position acceptance rate: 0.500, 0.300, 0.200, "
            "Avg Draft acceptance rate: 33.3%",
        ]
    )
    kinds = {path: (s.kind, s.line) for path, s in facts.sources.items()}
    assert kinds["spec.enabled"] == ("command", 1)
    assert kinds["spec.num_draft_tokens"] == ("command", 1)
    assert kinds["model"] == ("command", 1)


def test_seventh_round_commands() -> None:
    """Issue 47, seventh round: a script's variable in its command, two flags glued by a lost
    space, a speculative config the text does not spell out, a version in an image tag after
    the engine's name, versions in words."""
    script = parse_log(
        [
            "export CUDA_VISIBLE_DEVICES=0,1",
            'spec=\'{"method": "eagle", "model": "/d", "num_speculative_tokens": 3}\'',
            'vllm serve /m -tp 2 --speculative-config "$spec"',
        ]
    )
    assert (script.spec.enabled, script.spec.method, script.spec.num_draft_tokens) == (
        True,
        "eagle",
        3,
    )
    unset = find_command('vllm serve /m --speculative-config "$SPEC"', MARKERS)
    assert unset is not None and command_spec(unset)["enabled"] is True  # on, method unknown
    glued = find_command(
        "python3 -m sglang.launch_server --model m --keep-mm-feature-on-device--speculative-"
        "algorithm NGRAM",
        [re.compile(r"sglang\.launch_server")],
    )
    assert glued is not None and glued.flags["speculative-algorithm"] == "NGRAM"
    assert glued.flags["keep-mm-feature-on-device"] is True
    tag = find_command(
        "docker run rocm/sgl-dev:sglang-0.5.14-rocm720 python3 -m sglang.launch_server --tp 8",
        [re.compile(r"sglang\.launch_server")],
        image_words=("sglang",),
    )
    assert tag is not None and tag.image_version() == "0.5.14"
    trt = parse_log(["As of TRT-LLM `1.2.0rc2`, N-gram with PP fails:", "trtllm-serve m"])
    assert trt.version == "1.2.0rc2"
    assert parse_log(["Fixed in TensorRT-LLM 1.1.0", "trtllm-serve m"]).version is None
    vllm = parse_log(["- vLLM version: `0.18.1rc1.dev43+gdebd6e768`", "vllm serve m"])
    assert vllm.version == "0.18.1rc1.dev43+gdebd6e768"


def test_unquoted_flags_variable_splits_and_a_variable_program_keeps_its_flags() -> None:
    shell = ShellVariables()
    shell.read('SPEC_ARGS="--spec-type draft-mtp --spec-draft-n-max 4"')
    shell.read('SPEC=\'{"method": "mtp"}\'')
    line = shell.read('"$EXE" -m a.gguf $SPEC_ARGS --x "$SPEC"')
    assert (
        line
        == '"$EXE" -m a.gguf --spec-type draft-mtp --spec-draft-n-max 4 --x \'{"method": "mtp"}\''
    )
    cmd = find_command(line, [re.compile("llama-server")])
    assert cmd is not None and cmd.bare
    assert cmd.argv[:2] == ["-m", "a.gguf"]
