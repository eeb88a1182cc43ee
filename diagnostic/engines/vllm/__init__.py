"""vLLM: server logs (V0 0.6–0.10, V1 with Model Runner V1 and V2, vllm-ascend), excerpts of
them, and pasted launch commands -> LogFacts.

`parser` reads the start-up and runtime lines, `capture` resolves CUDA-graph capture per
worker, `signals` holds the one-line signals as data and the launch-command reader.
"""

from diagnostic.engines.vllm.parser import (
    ANCHORS,
    ENGINE,
    HEAD_ANCHORS,
    SIGNATURES,
    Parser,
    continues,
    wants_more,
)
from diagnostic.engines.vllm.signals import COMMANDS, SIGNALS

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
