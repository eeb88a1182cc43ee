"""Plan files: the TOML contract, sweep expansion, errors naming the fix, presets, TOML output."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from diagnostic.engines.command import without_speculation
from diagnostic.errors import PlanError, TemplateError
from diagnostic.measure.plan.presets import plan_from_preset
from diagnostic.measure.plan.serialise import to_toml
from diagnostic.measure.plan.spec import infer_speculative, load_plan, parse_plan
from diagnostic.measure.plan.templates import substitute

DATA = Path(__file__).parent / "data" / "plan"
ISSUE_PLAN = (DATA / "issue5.toml").read_text()
SAMPLE = Path(__file__).parents[1] / "samples" / "plans" / "llamacpp-cpu.toml"


def _plan(body: str, plan: str = "") -> str:
    return f"[plan]\n{plan}\n{body}"


BASE_ARM = '[[arms]]\nname = "baseline"\nlaunch = "srv --port {port}"\n'


def test_the_issue_plan_expands_to_one_arm_per_k() -> None:
    plan = parse_plan(ISSUE_PLAN, source="plan.toml")
    assert [a.name for a in plan.arms] == [
        "baseline",
        "eagle3-k1",
        "eagle3-k2",
        "eagle3-k3",
        "eagle3-k5",
        "eagle3-k7",
    ]
    k3 = plan.arm("eagle3-k3")
    assert k3.params == {"k": 3}
    assert k3.launch == (
        "vllm serve MODEL --port 8000 --speculative-config "
        """'{"method":"eagle3","model":"D","num_speculative_tokens":3}'"""
    )
    assert k3.speculative is True
    assert plan.arm("baseline").speculative is False
    assert plan.arm("baseline").env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert plan.base_url == "http://127.0.0.1:8000"
    assert plan.baseline == "baseline"


def test_the_manifest_spec_carries_arms_params_and_options() -> None:
    spec = parse_plan(ISSUE_PLAN, source="plan.toml").spec()
    assert spec.order == "blocks" and spec.restarts == 5 and spec.requests == 15
    assert spec.workloads == ["code", "prose"] and spec.baseline == "baseline"
    assert [a.params for a in spec.arms][1:] == [{"k": k} for k in (1, 2, 3, 5, 7)]


def test_manifest_launch_and_env_are_redacted() -> None:
    text = _plan(
        '[[arms]]\nname = "baseline"\n'
        'launch = "srv --port {port} --api-key sk-abcdefghijklmnopqrstu"\n'
        'env = { HF_TOKEN = "hf_abcdefghijklmnopqrstuvwxyz" }\n'
    )
    arm = parse_plan(text, source="p.toml").spec().arms[0]
    assert "sk-abcdefghijklmnopqrstu" not in (arm.launch or "")
    assert arm.env["HF_TOKEN"] != "hf_abcdefghijklmnopqrstuvwxyz"


def test_aa_arm_without_launch_repeats_its_reference() -> None:
    text = _plan(BASE_ARM + '[[arms]]\nname = "baseline-aa"\naa_of = "baseline"\n')
    plan = parse_plan(text, source="p.toml")
    aa = plan.arm("baseline-aa")
    assert aa.launch == plan.arm("baseline").launch == "srv --port 8000"
    assert aa.aa_of == "baseline"
    assert not any("A/A arm" in w for w in plan.warnings)


def test_aa_arm_launched_differently_is_warned() -> None:
    text = _plan(
        BASE_ARM + '[[arms]]\nname = "aa"\naa_of = "baseline"\nlaunch = "srv --port {port} -x"\n'
    )
    assert any("does not launch exactly like" in w for w in parse_plan(text, source="p").warnings)


def test_few_requests_are_warned_not_refused() -> None:
    plan = parse_plan(_plan(BASE_ARM, "requests = 3"), source="p.toml")
    assert plan.options.requests == 3
    assert any("requests = 3 is below 15" in w for w in plan.warnings)


def test_two_sweep_keys_give_the_product() -> None:
    text = _plan(
        BASE_ARM + '[[arms]]\nname = "ng-n{n}-k{k}"\nlaunch = "srv --port {port} -n {n} -k {k}"\n'
        "sweep = { n = [2, 3], k = [1, 4] }\n"
    )
    names = [a.name for a in parse_plan(text, source="p").arms]
    assert names == ["baseline", "ng-n2-k1", "ng-n2-k4", "ng-n3-k1", "ng-n3-k4"]


def test_base_url_and_env_are_templates() -> None:
    text = _plan(
        '[[arms]]\nname = "baseline"\nlaunch = "srv --port {port}"\nenv = { P = "{port}" }\n',
        'port = 9100\nbase_url = "http://localhost:{port}/"',
    )
    plan = parse_plan(text, source="p")
    assert plan.base_url == "http://localhost:9100/"
    assert plan.arm("baseline").env == {"P": "9100"}


@pytest.mark.parametrize(
    ("body", "plan", "needle"),
    [
        (BASE_ARM, "restart = 3", "unknown key `restart` (did you mean `restarts`?)"),
        (BASE_ARM + "colour = 1\n", "", "[[arms]] #1: unknown key `colour`"),
        (BASE_ARM, 'restarts = "5"', "[plan] restarts: input should be a valid integer"),
        (BASE_ARM, "restarts = 0", "[plan] restarts"),
        (BASE_ARM, 'order = "random"', "[plan] order"),
        ('[[arms]]\nname = "baseline"\nlaunch = "srv --port 8000"\n', "", "launch has no {port}"),
        (BASE_ARM + BASE_ARM, "", "two arms are named 'baseline'"),
        (BASE_ARM, 'baseline = "base"', "[plan] baseline = 'base' is not an arm"),
        (
            '[[arms]]\nname = "spec"\nlaunch = "srv --port {port}"\n',
            "",
            "no arm is named 'baseline'",
        ),
        (
            BASE_ARM
            + '[[arms]]\nname = "x"\nlaunch = "srv --port {port} {k}"\nsweep = { k = [1] }\n',
            "",
            "name has no {k}",
        ),
        (
            BASE_ARM + '[[arms]]\nname = "x{k}"\nlaunch = "s --port {port}"\nsweep = { k = [] }\n',
            "",
            "sweep.k is empty",
        ),
        (BASE_ARM + '[[arms]]\nname = "aa"\naa_of = "nope"\n', "", "aa_of = 'nope', which is not"),
        (BASE_ARM + '[[arms]]\nname = "x"\n', "", "missing key `launch`"),
        (
            '[[arms]]\nname = "baseline"\nlaunch = "srv --port {port} -m ${MODEL}"\n',
            "",
            "write $MODEL or ${{MODEL}}",
        ),
        (
            '[[arms]]\nname = "baseline"\nlaunch = "srv --port {port} {\\"a\\": 1}"\n',
            "",
            "write {{ and }} for literal braces",
        ),
        (
            '[[arms]]\nname = "base line"\nlaunch = "srv --port {port}"\n',
            'baseline = "base line"',
            "cannot name a folder",
        ),
        ("", "", "missing key `arms`"),
        (BASE_ARM, 'workloads = ["code", "poetry"]', "unknown workload 'poetry'; use a built-in"),
        (BASE_ARM, 'workloads = ["code", "code"]', "lists a workload twice"),
        (BASE_ARM, "restarts = ", "not valid TOML"),
    ],
)
def test_mistakes_name_the_file_and_the_fix(body: str, plan: str, needle: str) -> None:
    with pytest.raises(PlanError) as err:
        parse_plan(_plan(body, plan), source="site/plan.toml")
    assert str(err.value).startswith("site/plan.toml: ")
    assert needle in str(err.value)


def test_load_plan_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="no such plan file"):
        load_plan(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("template", "values", "expected"),
    [
        ("--port {port}", {"port": 80}, "--port 80"),
        ("'{{\"k\":{k}}}'", {"k": 3}, "'{\"k\":3}'"),
        ("{{{k}}}", {"k": 1}, "{1}"),
        ("--draft-tokens {k+1} --steps {k} {k - 1}", {"k": 3}, "--draft-tokens 4 --steps 3 2"),
        ("$MODEL ${{MODEL}}", {}, "$MODEL ${MODEL}"),
    ],
)
def test_substitute(template: str, values: dict[str, int], expected: str) -> None:
    assert substitute(template, values) == expected


@pytest.mark.parametrize("template", ["{x}", "{", "}", "{k*2}", "{}"])
def test_substitute_rejects_unknown_or_lone_braces(template: str) -> None:
    with pytest.raises(TemplateError):
        substitute(template, {"k": 1})


@given(st.text(alphabet="ab{}$ k", max_size=30))
@settings(max_examples=200, deadline=None)
def test_doubled_braces_always_round_trip(text: str) -> None:
    escaped = text.replace("{", "{{").replace("}", "}}")
    assert substitute(escaped, {"k": 1}) == text


@pytest.mark.parametrize(
    ("launch", "speculative"),
    [
        ("vllm serve M --port 8000", False),
        ('vllm serve M --speculative-config \'{"method":"ngram"}\'', True),
        ("python -m sglang.launch_server --speculative-algorithm EAGLE3", True),
        ("llama-server -m M --spec-type ngram-simple --spec-ngram-simple-size-m 4", True),
        ("llama-server -m M --spec-type none", False),
        ("llama-server -m M -md D --spec-draft-n-max 4", True),
        ("llama-server -m M --metrics", False),
    ],
)
def test_infer_speculative(launch: str, speculative: bool) -> None:
    assert infer_speculative(launch) is speculative


def test_speculative_can_be_given() -> None:
    text = _plan(
        BASE_ARM + '[[arms]]\nname = "env-spec"\nlaunch = "srv --port {port}"\nspeculative = true\n'
    )
    assert parse_plan(text, source="p").arm("env-spec").speculative is True


# -- presets and TOML output ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "method", "drafter", "needle_k3"),
    [
        (
            "vllm",
            "eagle3",
            "D",
            """--speculative-config '{"method":"eagle3","model":"D","num_speculative_tokens":3}'""",
        ),
        ("vllm", "ngram", None, """'{"method":"ngram","num_speculative_tokens":3}'"""),
        (
            "sglang",
            "eagle3",
            "D",
            "--speculative-algorithm EAGLE3 --speculative-draft-model-path D "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
        ),
        # num-draft-tokens counts the verified root: 3 drafts verify 4 tokens
        ("sglang", "ngram", None, "--speculative-algorithm NGRAM --speculative-num-draft-tokens 4"),
        (
            "llamacpp",
            "ngram",
            None,
            "--spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-ngram-simple-size-m 3",
        ),
        ("llamacpp", "draft", "D.gguf", "-md D.gguf --spec-type draft-simple --spec-draft-n-max 3"),
    ],
)
def test_presets_round_trip_through_toml(
    engine: str, method: str, drafter: str | None, needle_k3: str
) -> None:
    file = plan_from_preset(engine, model="org/M", drafter=drafter, method=method, ks=[1, 3, 5])
    text = to_toml(file, header="generated by a test")
    assert tomllib.loads(text)  # valid TOML
    plan = parse_plan(text, source="saved.toml")
    assert plan.file == file
    names = [a.name for a in plan.arms]
    assert names[:2] == ["baseline", "baseline-aa"] and len(names) == 5
    k3 = plan.arms[3]
    assert k3.params == {"k": 3} and k3.speculative
    assert needle_k3 in k3.launch
    assert plan.arm("baseline-aa").launch == plan.arm("baseline").launch
    assert "--port" in plan.arm("baseline").launch


def test_preset_quotes_odd_model_paths_for_the_shell() -> None:
    file = plan_from_preset(
        "vllm", model="/models/my model{1}", method="eagle3", drafter="d'x", ks=[2]
    )
    plan = parse_plan(to_toml(file), source="p")
    assert "'/models/my model{1}'" in plan.arm("baseline").launch
    assert """"model":"d'"'"'x\"""" in plan.arms[-1].launch


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"engine": "trt"}, "unknown engine 'trt'"),
        ({"method": "medusa"}, "has no method 'medusa'"),
        ({"drafter": None}, "needs a drafter"),
        ({"ks": [0, 2]}, "distinct draft lengths >= 1"),
        ({"ks": [2, 2]}, "distinct draft lengths >= 1"),
    ],
)
def test_preset_mistakes(kwargs: dict[str, object], needle: str) -> None:
    args: dict[str, object] = {
        "engine": "vllm",
        "model": "M",
        "method": "eagle3",
        "drafter": "D",
        "ks": [1],
    }
    args.update(kwargs)
    engine = args.pop("engine")
    with pytest.raises(PlanError, match=needle):
        plan_from_preset(engine, **args)  # type: ignore[arg-type]


def test_sglang_knobs_sweep_trees_and_ngram_breadth() -> None:
    tree = plan_from_preset(
        "sglang",
        model="M",
        drafter="D",
        method="eagle3",
        ks=[3],
        knobs={"topk": [4, 8], "draft-tokens": [8, 16]},
    )
    plan = parse_plan(to_toml(tree), source="p")
    arm = plan.arm("eagle3-k3-topk8-draft16")
    assert arm.params == {"k": 3, "topk": 8, "draft": 16}
    assert "--speculative-num-steps 3 --speculative-eagle-topk 8" in arm.launch
    assert arm.launch.endswith("--speculative-num-draft-tokens 16")
    assert len(plan.arms) == 2 + 4
    ngram = plan_from_preset(
        "sglang", model="M", method="ngram", ks=[3], knobs={"bfs-breadth": [1, 10]}
    )
    arm = parse_plan(to_toml(ngram), source="p").arm("ngram-k3-breadth10")
    assert "--speculative-num-draft-tokens 4 --speculative-ngram-max-bfs-breadth 10" in arm.launch


@pytest.mark.parametrize(
    ("knobs", "needle"),
    [
        ({"topk": [4]}, "sweep trees with --knob topk"),  # a tree needs its draft tokens
        ({"draft-tokens": [8]}, "a chain .topk 1. verifies k . 1 tokens"),
        ({"topk": [1, 4], "draft-tokens": [8]}, "all > 1"),
        ({"bfs-breadth": [2]}, "applies to ngram, not to method eagle3"),
        ({"depth": [2]}, "no knob 'depth'"),
        ({"topk": [0]}, "distinct values >= 1"),
    ],
)
def test_sglang_knob_mistakes(knobs: dict[str, list[int]], needle: str) -> None:
    with pytest.raises(PlanError, match=needle):
        plan_from_preset("sglang", model="M", drafter="D", method="eagle3", ks=[3], knobs=knobs)


@pytest.mark.parametrize(
    ("engine", "method", "off"),
    [("sglang", "ngram", "--disable-cuda-graph"), ("vllm", "ngram", "--enforce-eager")],
)
def test_graphs_both_gives_each_arm_a_graphs_off_twin_matched_by_flags(
    engine: str, method: str, off: str
) -> None:
    plan = parse_plan(
        to_toml(plan_from_preset(engine, model="M", method=method, ks=[2], graphs="both")),
        source="p",
    )
    names = [a.name for a in plan.arms]
    assert names == [
        "baseline",
        "baseline-aa",
        f"{method}-k2",
        "baseline-nograph",
        f"{method}-k2-nograph",
    ]
    # each speculative arm differs from its own baseline in speculation flags alone
    for spec, base in ((f"{method}-k2", "baseline"), (f"{method}-k2-nograph", "baseline-nograph")):
        words = without_speculation(plan.arm(spec).launch)
        assert words == without_speculation(plan.arm(base).launch)
        assert (off in words) == base.endswith("nograph")


def test_toml_output_escapes_strings() -> None:
    file = plan_from_preset("llamacpp", model='C:\\m "q".gguf', method="ngram", ks=[2])
    text = to_toml(file)
    assert parse_plan(text, source="p").file == file


def test_the_sample_plan_is_valid() -> None:
    plan = load_plan(SAMPLE)
    names = [a.name for a in plan.arms]
    assert names == [
        "baseline",
        "baseline-aa",
        "ngram-k1",
        "ngram-k2",
        "ngram-k3",
        "ngram-k4",
        "ngram-k6",
        "ngram-k8",
        "selfdraft-k4",
    ]
    o = plan.options
    assert (o.restarts, o.requests, o.warmup, o.max_tokens) == (3, 15, 1, 64)
    assert o.workloads == ["code", "prose"]
    assert plan.arm("baseline-aa").aa_of == "baseline"
    assert "--spec-ngram-simple-size-m 6" in plan.arm("ngram-k6").launch
    assert (
        "-md $MODEL --spec-type draft-simple --spec-draft-n-max 4"
        in plan.arm("selfdraft-k4").launch
    )
    assert plan.warnings == []


# Any text, control characters included (a plan once held \x7f, which hand-written TOML broke).
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
_NAME = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._+=-]{0,12}\Z")
_ARM = st.fixed_dictionaries(
    {"name": _NAME, "launch": st.builds(lambda a, b: f"{a} --port {{port}} {b}", _TEXT, _TEXT)},
    optional={
        "env": st.dictionaries(st.from_regex(r"\A[A-Z_]{1,8}\Z"), _TEXT, max_size=3),
        "speculative": st.booleans(),
    },
)
_PLAN = st.fixed_dictionaries(
    {},
    optional={
        "restarts": st.integers(1, 50),
        "requests": st.integers(1, 500),
        "warmup": st.integers(0, 5),
        "max_tokens": st.integers(1, 4096),
        "port": st.integers(1, 65535),
        "seed": st.integers(-(2**63), 2**63 - 1),
        "health_timeout_s": st.floats(0.001, 1e6, allow_nan=False),
        "order": st.sampled_from(["blocks", "sequential"]),
        "api": st.sampled_from(["completions", "chat"]),
        "model": _TEXT,
        "base_url": st.builds(lambda t: f"http://127.0.0.1:{{port}}/{t}", _TEXT),
        "concurrency": st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True),
    },
)


@settings(max_examples=150, deadline=None)
@given(
    plan=_PLAN,
    arms=st.lists(_ARM, min_size=1, max_size=4, unique_by=lambda a: a["name"]),
    sweep=st.lists(
        st.one_of(st.integers(-99, 99), st.floats(-1e9, 1e9, allow_nan=False), _TEXT),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    header=_TEXT,
)
def test_any_accepted_plan_survives_save_and_load(
    plan: dict[str, object], arms: list[dict[str, object]], sweep: list[object], header: str
) -> None:
    """--save-plan then load: the same PlanFile, whatever the strings hold."""
    swept = {"name": "swept-{v}", "launch": "srv --port {port} {v}", "sweep": {"v": sweep}}
    arms = [{**arms[0], "name": "baseline"}, *arms[1:], swept]
    try:
        accepted = parse_plan(_plan_text(plan, arms), source="h.toml")
    except PlanError:
        reject()  # the CLI refuses it (a clash of names, a lone brace): nothing to save
    text = to_toml(accepted.file, header=f"saved by\n{header}")
    assert parse_plan(text, source="saved.toml").file == accepted.file


def _toml_char(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    return f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c


def _plan_text(plan: dict[str, object], arms: list[dict[str, object]]) -> str:
    """The plan as the CLI would read it, built without the writer under test (JSON is TOML
    for the inline values used here)."""
    import json

    def value(v: object) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, str):
            return '"' + "".join(_toml_char(c) for c in v) + '"'
        return json.dumps(v)

    lines = ["[plan]", *(f"{k} = {value(v)}" for k, v in plan.items())]
    for arm in arms:
        lines += ["", "[[arms]]", *(f"{k} = {value(v)}" for k, v in arm.items())]
    return "\n".join(lines) + "\n"


# -- launch, stop, health and log commands: shell templates with {port} {arm} {restart} -------

CLUSTER_ARMS = """
[[arms]]
name = "tp16-k{k}"
launch = "ssh head 'vllm serve M --port {port} --seed {restart}' # {arm}"
logs = { head = "ssh head cat /var/log/{arm}-{restart}.log" }
sweep = { k = [3] }

[[arms]]
name = "tp16-aa"
aa_of = "tp16-k3"
"""
CLUSTER_PLAN = """stop = "ssh head pkill -f 'vllm serve.*--port {port}'"
health = "ssh head curl -sf localhost:{port}/health"
logs = { node1 = "ssh node1 cat /var/log/{arm}.log" }
baseline = "tp16-k3"
"""


def test_commands_are_rendered_per_restart_and_shown_with_restart_left_in() -> None:
    plan = parse_plan(_plan(CLUSTER_ARMS, CLUSTER_PLAN), source="p.toml")
    arm = plan.arm("tp16-k3")
    now = arm.commands.at(4)
    assert now.launch == "ssh head 'vllm serve M --port 8000 --seed 4' # tp16-k3"
    assert now.stop == "ssh head pkill -f 'vllm serve.*--port 8000'"
    assert now.health == "ssh head curl -sf localhost:8000/health"
    assert now.logs == {"head": "ssh head cat /var/log/tp16-k3-4.log"}  # the arm's own logs
    assert arm.launch == "ssh head 'vllm serve M --port 8000 --seed {restart}' # tp16-k3"
    spec = plan.spec().arms[0]
    assert spec.logs == {"head": "ssh head cat /var/log/tp16-k3-{restart}.log"}
    assert spec.stop == now.stop and spec.health == now.health
    # the A/A arm repeats its reference's commands under its own name
    aa = plan.arm("tp16-aa").commands.at(1)
    assert aa.launch == "ssh head 'vllm serve M --port 8000 --seed 1' # tp16-aa"
    assert aa.logs == {"head": "ssh head cat /var/log/tp16-aa-1.log"}


def test_plan_wide_commands_apply_to_arms_without_their_own() -> None:
    plan = parse_plan(_plan(BASE_ARM, CLUSTER_PLAN.replace('baseline = "tp16-k3"', "")), source="p")
    commands = plan.arm("baseline").commands.at(0)
    assert commands.logs == {"node1": "ssh node1 cat /var/log/baseline.log"}
    assert commands.stop is not None and commands.health is not None
    plain = parse_plan(_plan(BASE_ARM), source="p").arm("baseline").commands.at(0)
    assert (plain.stop, plain.health, plain.logs) == (None, None, {})  # today's defaults


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (
            'logs = { "../x" = "cat x" }',
            r"\(baseline\): log source name '\.\./x' cannot name a file",
        ),
        ('logs = { "a.log" = "cat x" }', "without .log"),
        ('logs = { a = "cat {node}" }', r"unknown placeholder \{node\}.*\{restart\}"),
        ('stop = "kill {pid}"', r"\[\[arms\]\] #1 \(baseline\): unknown placeholder \{pid\}"),
        ('health = "curl {"', "lone '{'"),
    ],
)
def test_command_mistakes_fail_when_the_plan_loads(extra: str, needle: str) -> None:
    with pytest.raises(PlanError, match=needle):
        parse_plan(_plan(BASE_ARM + extra + "\n"), source="p.toml")


def test_the_ray_sample_plan_is_valid_and_its_commands_parse_in_bash() -> None:
    plan = load_plan(SAMPLE.with_name("vllm-ray-two-nodes.toml"))
    assert [a.name for a in plan.arms] == [
        "baseline",
        "baseline-aa",
        "ngram-k2",
        "ngram-k3",
        "ngram-k5",
    ]
    assert [a.speculative for a in plan.arms] == [False, False, True, True, True]
    k3 = plan.arm("ngram-k3").commands.at(0)
    assert "--tensor-parallel-size 16 --distributed-executor-backend ray" in k3.launch
    assert k3.stop and k3.health and set(k3.logs) == {"gpu2"}
    for command in (k3.launch, k3.stop, k3.health, *k3.logs.values()):
        assert subprocess.run(["bash", "-n", "-c", command], check=False).returncode == 0
    # what the nodes' shells receive (printf in place of ssh): the JSON quoted once more
    echo = re.sub(r"ssh 10\.0\.0\.\d ", "printf '%s\\n' ", k3.launch)
    assert "ssh" not in echo
    remote = subprocess.run(
        ["bash", "-c", echo], capture_output=True, text=True, check=False, timeout=10
    ).stdout
    assert """--speculative-config '{"method":"ngram","num_speculative_tokens":3,""" in remote
