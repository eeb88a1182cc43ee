"""Benchmark: how much of what pasted logs say `diagnose check` reads, per engine and field.

Usage::

    python benchmarks/logscan_wild.py [--corpus DIR] [--about TEXT] [--misses]

Reads every labelled case of the corpus (tests/data/logs/wild by default: texts shaped like
what people paste in public issue threads, each `.log` beside an `.expected.json` written by
hand before the checker ran) with the shipped rules, as `tests/test_check_wild.py` does, and
prints two Markdown tables: the share of labelled fields read right per engine (engine,
version, platform, speculation on/off, method, k, resolved capture), and the findings beyond
the labels (false) or missing from them. `--about TEXT` keeps the cases whose label's `about`
starts with TEXT (`--about "Third round"`: issue 47's excerpts); `--misses` lists each wrong
field. Run it on an older checkout with the same corpus for a before figure.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_check_wild import FIELDS, WILD, Case, load_cases  # noqa: E402

ENGINES = ("vllm", "sglang", "llamacpp", "trtllm", None)


def per_engine(cases: list[Case]) -> str:
    """Markdown: cases and fields read right per engine, then all engines."""
    head = "| engine | cases | " + " | ".join(FIELDS) + " | fields right |"
    rows = [head, "|" + "---|" * (len(FIELDS) + 3)]
    for engine in ENGINES:
        group = [c for c in cases if c.expected["engine"] == engine]
        if group:
            rows.append(_row(str(engine or "none"), group))
    rows.append(_row("**all**", cases))
    return "\n".join(rows)


def _row(label: str, cases: list[Case]) -> str:
    right = Counter(k for c in cases for k in FIELDS if k not in c.wrong())
    n = len(cases)
    cells = " | ".join(f"{right[k]}/{n}" for k in FIELDS)
    total, labelled = sum(right.values()), n * len(FIELDS)
    return f"| {label} | {n} | {cells} | {total}/{labelled} ({total / labelled:.1%}) |"


def findings(cases: list[Case]) -> str:
    """Markdown: false and missed findings per engine, and crashes."""
    rows = ["| engine | labelled findings | false findings | missed findings | crashes |"]
    rows.append("|---|---|---|---|---|")
    for engine in ENGINES:
        group = [c for c in cases if c.expected["engine"] == engine]
        if not group:
            continue
        labelled = sum(len(c.expected["findings"]) for c in group)
        false = sum(len(c.false_findings()) for c in group)
        missed = sum(len(c.missed_findings()) for c in group)
        crashes = sum(c.crash is not None for c in group)
        rows.append(f"| {engine or 'none'} | {labelled} | {false} | {missed} | {crashes} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=WILD, help="folder of labelled cases")
    parser.add_argument("--about", default="", help="keep cases whose label's about starts so")
    parser.add_argument("--misses", action="store_true", help="list every wrong field")
    args = parser.parse_args(argv)
    cases = [c for c in load_cases(args.corpus) if c.expected["about"].startswith(args.about)]
    if not cases:
        print(f"no labelled case in {args.corpus} (about starting {args.about!r})")
        return 1
    print(f"{len(cases)} cases from {args.corpus}\n")
    print(per_engine(cases))
    print()
    print(findings(cases))
    if args.misses:
        for c in cases:
            for field, (got, want) in c.wrong().items():
                print(f"- {c.log.stem}: {field} read {got!r}, labelled {want!r}")
            for rule in c.false_findings():
                print(f"- {c.log.stem}: false finding {rule}")
            for rule in c.missed_findings():
                print(f"- {c.log.stem}: missed finding {rule}")
            if c.crash:
                print(f"- {c.log.stem}: crash {c.crash.splitlines()[-1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
