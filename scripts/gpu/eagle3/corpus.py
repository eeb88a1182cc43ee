"""Training text for the EAGLE3 head, made on the machine without a hub (issue 50).

Two kinds of prompts, of the kinds the workloads use (diagnostic/measure/prompts/ holds the
evaluation prompts; none of them is used here, and build() refuses a prompt that shares a line
of 30 characters or more with one of them):

- code: the opening of a function or method of the Python standard library that this
  interpreter ships (its `def` line, its docstring and up to two lines of its body), cut where
  the target should go on writing;
- prose: the first sentences of a paragraph of prose that installed packages ship (the long
  descriptions in their METADATA files, their README and licence-free text files) and of the
  standard library's module docstrings.

Besides the prompts, raw chunks of the same files are returned as text to train on directly.
Everything is ordered by path and drawn with a seeded random.Random, so one interpreter and one
set of packages give one corpus; build() returns its sha256 too.
"""

import ast
import contextlib
import hashlib
import json
import random
import re
import sys
import sysconfig
from email.parser import Parser
from pathlib import Path


def _stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = ("test", "idlelib", "lib2to3", "turtledemo", "site-packages", "dist-packages")
    return sorted(p for p in root.rglob("*.py") if not any(s in p.parts for s in skip))


def _site_dirs() -> list[Path]:
    return sorted({Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))})


def _code_prompts(path: Path, text: str) -> list[str]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if not body or ast.get_docstring(node) is None or len(body) < 3:
            continue
        start = node.lineno - 1
        if node.decorator_list:
            start = node.decorator_list[0].lineno - 1
        end = body[1].lineno  # the docstring, then the first statement's line
        snippet = "".join(lines[start:end])
        indent = len(snippet) - len(snippet.lstrip(" "))
        snippet = "".join(
            ln[indent:] if ln.startswith(" " * indent) else ln for ln in lines[start:end]
        )
        if 80 <= len(snippet) <= 1200:
            out.append(snippet)
    return out


def _paragraphs(text: str) -> list[str]:
    paras = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
    return [
        p
        for p in paras
        if len(p) >= 200 and p.count(" ") >= 30 and not re.search(r"[{}<>|=`#*]{2}|http", p)
    ]


def _prose_prompt(para: str, rng: random.Random) -> str:
    sentences = re.split(r"(?<=[.!?]) ", para)
    n = 1 if len(sentences) < 3 else rng.randint(1, 2)
    return " ".join(sentences[:n])


def _metadata_text(site: Path) -> list[tuple[str, str]]:
    out = []
    for meta in sorted(site.glob("*.dist-info/METADATA")):
        try:
            msg = Parser().parsestr(meta.read_text(errors="replace"))
        except Exception:  # a malformed METADATA is skipped, not fatal
            continue
        body = msg.get_payload()
        if isinstance(body, str) and len(body) > 400:
            out.append((str(meta), body))
    return out


def _held_out(repo: Path) -> list[str]:
    lines = []
    for f in sorted((repo / "diagnostic" / "measure" / "prompts").glob("*.jsonl")):
        for row in f.read_text().splitlines():
            if row.strip():
                lines += [
                    ln.strip()
                    for ln in json.loads(row)["prompt"].splitlines()
                    if len(ln.strip()) >= 30
                ]
    return lines


def build(repo: Path, n_code: int, n_prose: int, n_chunks: int, seed: int = 0) -> dict:
    """Prompts and raw text chunks; the evaluation prompts' lines are refused."""
    rng = random.Random(seed)
    code, prose, chunks, sources = [], [], [], []
    for path in _stdlib_files():
        text = path.read_text(errors="replace")
        code += _code_prompts(path, text)
        chunks.append(text)
        doc = None
        with contextlib.suppress(SyntaxError, ValueError):
            doc = ast.get_docstring(ast.parse(text))
        if doc:
            prose += [_prose_prompt(p, rng) for p in _paragraphs(doc)]
    sources.append(f"stdlib {sysconfig.get_paths()['stdlib']}")
    for site in _site_dirs():
        for _name, body in _metadata_text(site):
            paras = _paragraphs(body)
            prose += [_prose_prompt(p, rng) for p in paras]
            chunks.append("\n\n".join(paras))
        sources.append(f"METADATA under {site}")
    held = _held_out(repo)
    clean = lambda xs: [x for x in xs if not any(h in x for h in held)]  # noqa: E731
    code, prose = sorted(set(clean(code))), sorted(set(clean(prose)))
    chunks = [c for c in clean(chunks) if len(c) >= 2000]
    rng.shuffle(code)
    rng.shuffle(prose)
    rng.shuffle(chunks)
    corpus = {
        "code": code[:n_code],
        "prose": prose[:n_prose],
        "chunks": chunks[:n_chunks],
        "available": {"code": len(code), "prose": len(prose), "chunks": len(chunks)},
        "sources": sources,
        "python": sys.version.split()[0],
    }
    blob = json.dumps([corpus["code"], corpus["prose"], corpus["chunks"]]).encode()
    corpus["sha256"] = hashlib.sha256(blob).hexdigest()
    return corpus


if __name__ == "__main__":
    c = build(Path(__file__).resolve().parents[3], 8, 8, 2)
    print(json.dumps({k: v for k, v in c.items() if k != "chunks"}, indent=1)[:4000])
