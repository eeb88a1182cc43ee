"""The one-way layering of DESIGN.md: cli -> stages -> helpers -> models; nothing imports cli."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "diagnostic"

# Lower number = lower layer; a module may import only from its own layer or below.
LAYERS = {
    "models": 0,
    "errors": 0,
    "facts": 0,
    "analysis_models": 0,
    "stats": 1,
    "theory": 1,
    "redact": 1,
    "progress": 1,
    "resources": 1,
    "bundle": 1,
    "engines": 1,
    "client": 1,
    "workloads": 1,
    "environment": 1,
    "launch": 1,
    "plan": 1,
    "schedule": 1,
    "acceptance": 1,
    "engine_timing": 1,
    "pdf": 1,
    "checks": 2,
    "check": 2,
    "collect": 2,
    "analyse": 2,
    "checklist": 2,
    "checklists": 2,
    "sweep": 3,
    "report": 3,
    "cli": 4,
    "__main__": 5,
}
# Modules that must import nothing from the package.
PURE = {"stats", "theory", "models", "errors"}


def _top(module: str) -> str:
    return module.split(".")[1] if module.startswith("diagnostic.") else ""


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {_top(m) for m in found if m.startswith("diagnostic.")}


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).parts
        if rel[0] == "__init__.py":
            continue
        out.append((rel[0].removesuffix(".py"), path))
    return out


def test_every_module_has_a_layer() -> None:
    missing = {name for name, _ in _modules()} - LAYERS.keys()
    assert not missing, f"add these modules to LAYERS: {sorted(missing)}"


def test_imports_flow_one_way() -> None:
    bad = []
    for name, path in _modules():
        for target in _imports(path) - {name}:
            into_cli = target == "cli" and name not in {"cli", "__main__"}
            if into_cli or LAYERS.get(target, 99) > LAYERS[name]:
                bad.append(f"{path.relative_to(PACKAGE)} imports diagnostic.{target}")
    assert not bad, bad


def test_pure_modules_import_nothing_from_the_package() -> None:
    for name, path in _modules():
        if name in PURE and name not in {"models"}:
            assert not _imports(path) - {name}, path
