"""A clone stands on its own: no code, test, script or benchmark reads a folder beside the
checkout (a team's shared/ folder, or an environment variable pointing to one). Every input the
tests read lives under tests/data/; documentation lives under docs/."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Written in pieces so that this file does not match itself.
OUTSIDE = re.compile(r"\.\./" + "shared|DIAGNOSE_" + "SHARED")


def tracked(*folders: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--", *folders], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / p for p in out if (ROOT / p).is_file()]


def test_nothing_reads_beside_the_checkout() -> None:
    offenders = []
    for path in tracked("diagnostic", "tests", "scripts", "benchmarks", ".ci", "docs"):
        if path.suffix in (".json", ".jsonl", ".log", ".prom", ".txt", ".gguf", ".png"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [
            f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for n, line in enumerate(text.splitlines(), 1)
            if OUTSIDE.search(line)
        ]
    assert not offenders, "reads outside the repository:\n" + "\n".join(offenders)


def test_real_runs_are_in_the_repository() -> None:
    from real_runs import REAL_RUNS

    assert REAL_RUNS.is_relative_to(ROOT / "tests" / "data")
    assert {p.name for p in REAL_RUNS.iterdir() if p.is_dir()} >= {
        "h200-vllm-0.26",
        "h200-vllm-0.26-mla",
        "llamacpp-cpu",
    }
