"""Launch commands as they ran: shell variables expanded from what the bundle recorded.

A variable is expanded only from a recorded value: the values sweep stored with the run
(run.json launch.variables), or the model path the engine itself reported for the flag the
variable stands in (`-m $MODEL`: llama.cpp's /props model_path; `--model $M`: vLLM's
/v1/models root). Anything else stays as written: a report never guesses a value.
"""

from __future__ import annotations

import itertools
import re
import shlex

from diagnostic.schema.bundle import RunInfo

__all__ = ["expand", "launch_values", "recorded_model"]

_VAR = re.compile(r"(?<![\\$])\$(?:\{(?P<braced>[A-Za-z_]\w*)\}|(?P<bare>[A-Za-z_]\w*))")
# Flags whose value is the model path the engine reports back.
_MODEL_FLAGS = ("-m", "--model", "--model-path")


def recorded_model(run: RunInfo) -> str | None:
    """The model path the engine reported (llama.cpp's model_path, vLLM's /v1/models root)."""
    path = run.server_args.get("model_path")
    if isinstance(path, str) and path:
        return path
    for key, answer in run.endpoints.items():
        data = answer.get("data") if "models" in key and isinstance(answer, dict) else None
        if isinstance(data, list) and data and isinstance(data[0], dict):
            root = data[0].get("root")
            if isinstance(root, str) and root:
                return root
    return None


def launch_values(run: RunInfo | None) -> dict[str, str]:
    """Every variable of the run's launch command whose value the bundle recorded."""
    if run is None or run.launch is None:
        return {}
    values = dict(run.launch.variables)
    model = recorded_model(run)
    try:
        tokens = shlex.split(run.launch.command)
    except ValueError:  # unbalanced quotes: nothing can be read after a flag
        tokens = []
    for flag, value in itertools.pairwise(tokens):
        match = _VAR.fullmatch(value)
        if flag in _MODEL_FLAGS and match and model:
            values.setdefault(match["braced"] or match["bare"], model)
    return values


def expand(text: str, values: dict[str, str]) -> str:
    """`text` with each $NAME / ${NAME} of `values` replaced; the others left as written."""
    return _VAR.sub(lambda m: values.get(m["braced"] or m["bare"], m.group()), text)
