"""llama.cpp: `llama-server` logs, `llama-speculative` summaries, `/completion` timings and
pasted `llama-server` commands -> LogFacts.

`parser` reads the lines, `capture` the backend and CUDA graphs (llama.cpp has no capture
modes and logs CUDA-graph decisions only at debug level: `ggml_backend_cuda_graph_compute:
disabling CUDA graphs due to …`), `signals` holds the one-line signals as data and what the
launch command's flags say of speculation.
"""

from diagnostic.engines.llamacpp.parser import (
    ANCHORS,
    ENGINE,
    HEAD_ANCHORS,
    SIGNATURES,
    Parser,
    continues,
    wants_more,
)
from diagnostic.engines.llamacpp.signals import COMMANDS, SIGNALS

__all__ = [
    "ANCHORS",
    "COMMANDS",
    "ENGINE",
    "HEAD_ANCHORS",
    "SIGNALS",
    "SIGNATURES",
    "Parser",
    "continues",
    "wants_more",
]
