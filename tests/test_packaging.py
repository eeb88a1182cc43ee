"""An installed wheel finds its templates and checklists without a source checkout."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.slow
def test_wheel_carries_templates_and_checklists(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import diagnostic, diagnostic.common.resources as r;"
        "print(diagnostic.__file__); print(r.templates_dir()); print(r.checklists_dir())"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=elsewhere,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert all(line.startswith(str(site)) for line in out), out
    for folder, installed in (("templates", Path(out[1])), ("checklists", Path(out[2]))):
        expected = {p.relative_to(ROOT / folder) for p in (ROOT / folder).rglob("*") if p.is_file()}
        got = {p.relative_to(installed) for p in installed.rglob("*") if p.is_file()}
        assert expected <= got, expected - got
    help_out = subprocess.run(
        [sys.executable, "-m", "diagnostic", "--help"],
        cwd=elsewhere,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "collect" in help_out and "report" in help_out
