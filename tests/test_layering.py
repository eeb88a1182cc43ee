"""The one-way layering of the package (docs/architecture.md "Where things are"): each folder
is a stage or a shared layer; a module imports only from its own unit or from lower layers;
nothing imports cli.

A request travels measure.client → measure.collect → bundle → analyse → report; a log travels
bundle → engines → logcheck → report. The numbers below say who may import whom.
"""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "diagnostic"

# Lower number = lower layer. A unit is a top-level module or package of diagnostic/, or a
# sub-package of measure/ (its stages are layered among themselves).
LAYERS = {
    "errors": 0,
    "defaults": 0,
    "schema": 0,
    "common": 1,
    "bundle": 1,
    "engines": 1,
    "analyse": 2,
    "logcheck": 2,
    "measure": 3,
    "measure.client": 3,
    "measure.telemetry": 3,
    "measure.workloads": 3,
    "measure.environment": 3,
    "measure.launch": 3,
    "measure.health": 3,
    "measure.schedule": 3,
    "measure.plan": 4,
    "measure.collect": 4,
    "measure.sweep": 5,
    "checklist": 3,
    "report": 6,
    "verify": 7,
    "cli": 7,
    "__main__": 8,
}
# Modules that import nothing from the package.
PURE = {
    "diagnostic.errors",
    "diagnostic.defaults",
    "diagnostic.analyse.sequential",
    "diagnostic.analyse.stats",
    "diagnostic.analyse.theory",
}


def _unit(module: str) -> str:
    """The LAYERS key of a module: 'diagnostic.measure.collect.run' → 'measure.collect'."""
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return ".".join(parts[:n])
    return ".".join(parts)


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("diagnostic.")}


def _modules() -> list[tuple[str, Path]]:
    return [
        (_module(p), p)
        for p in PACKAGE.rglob("*.py")
        if p.parent != PACKAGE or p.name != "__init__.py"
    ]


def test_every_module_has_a_layer() -> None:
    missing = {_unit(name) for name, _ in _modules()} - LAYERS.keys()
    assert not missing, f"add these units to LAYERS: {sorted(missing)}"


def test_imports_flow_one_way() -> None:
    bad = []
    for name, path in _modules():
        unit = _unit(name)
        for target in {_unit(m) for m in _imports(path)} - {unit, ""}:
            if target in LAYERS and LAYERS[target] > LAYERS[unit]:
                bad.append(f"{path.relative_to(PACKAGE)} imports diagnostic.{target}")
            if target == "cli" and unit not in {"cli", "__main__"}:
                bad.append(f"{path.relative_to(PACKAGE)} imports the CLI")
    assert not bad, bad


def test_pure_modules_import_nothing_from_the_package() -> None:
    for name, path in _modules():
        if name in PURE:
            assert not {m for m in _imports(path) if not m.startswith(name)}, path


def test_layers_name_real_folders() -> None:
    """Every unit in LAYERS exists, so the table cannot drift from the tree."""
    for unit in LAYERS:
        base = PACKAGE.joinpath(*unit.split("."))
        assert base.is_dir() or base.with_suffix(".py").is_file(), unit


MAX_LINES = 500  # past this a module holds more than one idea: split it by idea, not by size


def test_no_module_grows_past_max_lines() -> None:
    """Every module of diagnostic/ stays within MAX_LINES; the failure names each one past it."""
    long = [
        f"{path.relative_to(PACKAGE.parent)} ({lines} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert not long, f"past {MAX_LINES} lines, split by idea: {', '.join(long)}"


def test_the_architecture_map_matches_the_tree() -> None:
    """docs/architecture.md "Where things are": one row per folder of diagnostic/, and every
    file it names exists in that folder."""
    readme = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    section = readme.split("## Where things are", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| `diagnostic/")]
    folders = {r.split("`")[1].removeprefix("diagnostic/").rstrip("/") for r in rows}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages <= folders, f"docs/architecture.md lacks rows for {sorted(packages - folders)}"
    for row in rows:
        folder = PACKAGE / row.split("`")[1].removeprefix("diagnostic/")
        base = folder if folder.is_dir() else PACKAGE
        for name in re.findall(r"`([\w/]+(?:\.py|/))`", row.split("|")[2]):
            found = [b / name for b in (base, PACKAGE, PACKAGE.parent) if (b / name).exists()]
            assert found, (
                f"docs/architecture.md names {name} in the row of {folder.name}/: not in the tree"
            )
