"""Locate the templates and checklists, from an installed wheel or a source checkout."""

from pathlib import Path

from diagnostic.errors import DiagnosticError

_PACKAGE = Path(__file__).resolve().parents[1]  # diagnostic/


def _find(name: str) -> Path:
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise DiagnosticError(
        f"cannot find the {name}/ folder beside {_PACKAGE}; reinstall diagnose (pip install .)"
    )


def templates_dir() -> Path:
    """The folder holding report templates and print CSS."""
    return _find("templates")


def checklists_dir() -> Path:
    """The folder holding checklists and rule files."""
    return _find("checklists")
