"""diagnose: find out why speculative decoding does not speed up an LLM inference server."""

__version__ = "0.1.0"
