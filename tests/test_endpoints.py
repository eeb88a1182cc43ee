"""engines/endpoints.py: engine fingerprints from real endpoint answers and a real server."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from real_runs import REAL_RUNS as REAL

from diagnostic.engines.endpoints import INFO_PATHS, fetch_answers, fingerprint, identify

LLAMACPP = REAL / "llamacpp-cpu"
VLLM_RUNS = sorted(p.parent for p in REAL.glob("h200-vllm-*/*/endpoints.json"))


def llamacpp_answers() -> dict[str, object]:
    return {
        "/props": json.loads((LLAMACPP / "ls_props.json").read_text()),
        "/slots": json.loads((LLAMACPP / "ls_slots.json").read_text()),
        "/v1/models": json.loads((LLAMACPP / "ls_models.json").read_text()),
    }


def test_llamacpp_from_recorded_answers() -> None:
    found = identify(llamacpp_answers())
    assert (found.engine.name, found.engine.version, found.model) == (
        "llamacpp",
        "b1-0c1e570",
        "gemma",
    )
    args = found.server_args
    # /props says "none"; /slots knows n-gram speculation is on
    assert args["speculative"] is True and args["speculative.types"] == "none,ngram-simple"
    assert args["n_ctx"] == 4096 and args["total_slots"] == 1
    assert found.endpoints["/props"]["build_info"] == "b1-0c1e570"


def test_llamacpp_without_models_answer_is_still_llamacpp() -> None:
    answers = llamacpp_answers()
    del answers["/v1/models"]
    assert identify(answers).engine.name == "llamacpp"


@pytest.mark.parametrize("run", VLLM_RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_vllm_from_recorded_answers(run: Path) -> None:
    recorded = json.loads((run / "endpoints.json").read_text())
    found = identify({"/version": recorded["version"], "/v1/models": recorded["models"]})
    assert (found.engine.name, found.engine.version) == ("vllm", "0.26.0")
    assert found.model in ("/root/model", "/root/mla")  # the MLA runs served another model
    assert found.server_args["max_model_len"] == 4096


def test_vllm_version_alone_is_vllm() -> None:
    assert identify({"/version": {"version": "0.10.1"}}).engine.name == "vllm"


def test_sglang_server_info_gives_version_and_args() -> None:
    # Shape of SGLang's /server_info (ServerArgs fields plus version and internal_states),
    # trimmed to the keys this reader uses.
    info = {
        "model_path": "meta-llama/Llama-3.1-8B-Instruct",
        "speculative_algorithm": "EAGLE",
        "speculative_num_draft_tokens": 4,
        "disable_cuda_graph": False,
        "version": "0.5.6",
        "internal_states": [{"avg_spec_accept_length": 1.02}],
    }
    for path in ("/server_info", "/get_server_info"):
        found = identify({path: info})
        assert (found.engine.name, found.engine.version) == ("sglang", "0.5.6")
        assert found.server_args["speculative_algorithm"] == "EAGLE"
        assert "internal_states" not in found.server_args and "version" not in found.server_args


def test_nothing_known_is_unknown() -> None:
    found = identify({})
    assert found.engine.name == "unknown" and found.model is None and found.server_args == {}


def test_fetch_tolerates_404_text_and_slow_endpoints() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/version":
            return httpx.Response(200, text="not json")
        if path == "/slots":
            raise httpx.ReadTimeout("slow", request=request)
        if path == "/props":
            return httpx.Response(200, json={"build_info": "b9"})
        return httpx.Response(404)

    with httpx.Client(base_url="http://x", transport=httpx.MockTransport(handler)) as client:
        found = fetch_answers(client)
    assert found.answers == {"/version": "not json", "/props": {"build_info": "b9"}}
    assert found.unreadable == {"/slots": "no whole answer within 10 s"}


def test_unreachable_server_is_reported_not_raised() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    found = fingerprint("http://127.0.0.1:9", transport=httpx.MockTransport(refuse))
    assert found.unreachable and "cannot connect to http://127.0.0.1:9" in found.unreachable


@pytest.mark.engine
def test_real_llama_server_fingerprint(llama_server: str, llama_server_ngram: str) -> None:
    # /slots shows a slot's params (speculative.types) only once it has served a request.
    body = {"prompt": "Hello", "max_tokens": 2}
    httpx.post(f"{llama_server_ngram}/v1/completions", json=body, timeout=60).raise_for_status()
    plain, ngram = fingerprint(llama_server), fingerprint(llama_server_ngram)
    for found in (plain, ngram):
        assert found.unreachable is None
        assert found.engine.name == "llamacpp" and found.engine.version
        assert found.model == "gemma" and {"/props", "/slots", "/v1/models"} <= set(found.endpoints)
        assert set(found.endpoints) <= set(INFO_PATHS)
    assert plain.server_args["speculative"] is False
    assert ngram.server_args["speculative"] is True
    assert "ngram-simple" in ngram.server_args["speculative.types"]
