"""Shared CLI helpers: consoles and the rich progress reporter."""

from __future__ import annotations

from rich.console import Console

console = Console()
console_err = Console(stderr=True)
