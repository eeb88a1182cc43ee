"""The report as the paying client reads it, on the three recorded samples (issue 23)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnostic.bundle.store import Bundle
from diagnostic.measure.collect.stage import CollectConfig, _add_arm, _manifest
from diagnostic.measure.plan.serialise import to_toml
from diagnostic.measure.plan.spec import parse_plan
from diagnostic.measure.sweep.runner import _values
from diagnostic.report.build import report_context
from diagnostic.report.launch import expand, launch_values
from diagnostic.report.view import ReportContext
from diagnostic.schema.bundle import Engagement

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NAMES = ("llamacpp-cpu-gemma3", "vllm-h200-mla", "vllm-h200-validation")


@pytest.fixture(scope="module")
def contexts() -> dict[str, ReportContext]:
    """Each sample's report context, as `diagnose report` builds it (findings.json stored)."""
    return {n: report_context(Bundle.open(SAMPLES / n, strict=False)) for n in NAMES}


# -- item 1: the title block ----------------------------------------------------------------
def test_cover_leaves_out_what_was_not_recorded(contexts: dict[str, ReportContext]) -> None:
    for name, ctx in contexts.items():
        c = ctx.cover
        assert (c.client, c.site, c.consultant) == (None, None, None), name  # samples have none
        assert c.model and "$" not in c.model, name
        assert c.drafter is None or "$" not in c.drafter, name
    # llama.cpp answers with the alias (-a gemma); the file it loaded is what was recorded.
    assert contexts["llamacpp-cpu-gemma3"].cover.model.endswith("gemma-3-270m-q4_k_m.gguf")


def test_report_options_override_the_bundle(tmp_path: Path) -> None:
    given = Engagement(client="ACME", site="cluster-a", consultant="J. Doe")
    ctx = report_context(Bundle.open(SAMPLES / NAMES[1], strict=False), engagement=given)
    assert (ctx.cover.client, ctx.cover.site, ctx.cover.consultant) == (
        "ACME",
        "cluster-a",
        "J. Doe",
    )
    stored = Engagement(client="Old", site="s1")
    assert stored.merged(Engagement(client="New")) == Engagement(client="New", site="s1")


def test_launch_commands_expand_only_recorded_values(contexts: dict[str, ReportContext]) -> None:
    cpu = {kv.key: kv.value for kv in contexts["llamacpp-cpu-gemma3"].engine_args}
    # -m $MODEL: llama.cpp reported its model_path; $LLAMA_SERVER was never recorded.
    assert "-m /root/.cache/diagnose/models/gemma-3-270m-q4_k_m.gguf" in cpu["baseline"]
    assert cpu["baseline"].startswith("$LLAMA_SERVER ")
    assert "-md /root/.cache/diagnose/models/" in cpu["selfdraft-k4"]
    mla = {kv.key: kv.value for kv in contexts["vllm-h200-mla"].engine_args}
    assert "--model /root/mla-model " in mla["fa-base"]  # vLLM's /v1/models root
    assert expand("a $X ${Y} $$Z \\$X", {"X": "1", "Y": "2"}) == "a 1 2 $$Z \\$X"
    assert launch_values(None) == {}


def test_sweep_records_the_values_of_its_launch_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAG_TEST_MODEL", "/models/m.gguf")
    monkeypatch.delenv("DIAG_TEST_UNSET", raising=False)
    launch = "srv -m $DIAG_TEST_MODEL -md ${DRAFT} --x $DIAG_TEST_UNSET"
    assert _values(launch, {"DRAFT": "/d.gguf"}) == {
        "DIAG_TEST_MODEL": "/models/m.gguf",
        "DRAFT": "/d.gguf",
    }


def test_plan_engagement_table_round_trips() -> None:
    text = (
        '[plan]\nrestarts = 3\n[engagement]\nclient = "ACME"\nsite = "dc-1"\n'
        '[[arms]]\nname = "baseline"\nlaunch = "srv --port {port}"\n'
    )
    plan = parse_plan(text, source="plan.toml")
    assert plan.file.engagement == Engagement(client="ACME", site="dc-1")
    again = parse_plan(to_toml(plan.file), source="again.toml")
    assert again.file.engagement == plan.file.engagement
    with pytest.raises(Exception, match="clinet"):
        parse_plan(text.replace("client", "clinet"), source="typo.toml")


def test_collect_stores_and_adds_engagement(tmp_path: Path) -> None:
    first = CollectConfig(
        base_url="http://127.0.0.1:1", out=tmp_path, engagement=Engagement(client="ACME")
    )
    manifest = _manifest(first, ["code"])
    assert manifest.engagement == Engagement(client="ACME")
    later = first.model_copy(update={"arm": "ngram", "engagement": Engagement(site="dc-2")})
    assert _add_arm(manifest, later).engagement == Engagement(client="ACME", site="dc-2")
