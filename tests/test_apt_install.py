"""scripts/apt-install (used by scripts/setup, hence scripts/demo and scripts/test, and by
scripts/real-server): another apt-get holding apt's locks is waited for, with a message.

The real apt-get runs on a private apt state (APT_CONFIG: its own dpkg status copy, lists and
locks, no sources), so a held lock here blocks no one else's apt-get; `bash` is installed, so
`install` has nothing to do once it holds the lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "scripts" / "apt-install"
HOLD_S = 3.0

pytestmark = pytest.mark.skipif(
    shutil.which("apt-get") is None or os.geteuid() != 0,
    reason="apt-get as root (Debian; scripts/setup installs as root)",
)


@pytest.fixture
def apt_env(tmp_path: Path) -> dict[str, str]:
    dpkg, lists, cache = tmp_path / "dpkg", tmp_path / "lists", tmp_path / "cache"
    for folder in (dpkg / "updates", dpkg / "info", lists / "partial", cache / "archives"):
        folder.mkdir(parents=True)
    (cache / "archives" / "partial").mkdir()
    shutil.copy("/var/lib/dpkg/status", dpkg / "status")
    (tmp_path / "sources.list").write_text("")
    (tmp_path / "sources.list.d").mkdir()
    conf = tmp_path / "apt.conf"
    conf.write_text(
        f'Dir::State::status "{dpkg / "status"}";\n'
        f'Dir::State::Lists "{lists}";\n'
        f'Dir::Cache "{cache}";\n'
        f'Dir::Etc::sourcelist "{tmp_path / "sources.list"}";\n'
        f'Dir::Etc::sourceparts "{tmp_path / "sources.list.d"}";\n'
        f'DPkg::Options {{ "--admindir={dpkg}"; }};\n'
    )
    return {**os.environ, "APT_CONFIG": str(conf)}


def _held(lock: Path, seconds: float) -> threading.Thread:
    """Hold an apt lock (fcntl, as apt and dpkg take it) for `seconds`, from now."""
    lock.touch()
    fd = os.open(lock, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)

    def release() -> None:
        time.sleep(seconds)
        os.close(fd)

    holder = threading.Thread(target=release)
    holder.start()
    return holder


@pytest.mark.parametrize(
    ("lock", "step"), [("lists/lock", "update"), ("dpkg/lock-frontend", "install")]
)
def test_a_held_lock_is_waited_for_with_a_message(
    apt_env: dict[str, str], tmp_path: Path, lock: str, step: str
) -> None:
    holder = _held(tmp_path / lock, HOLD_S)
    start = time.monotonic()
    done = subprocess.run(
        [str(SCRIPT), "bash"], env=apt_env, capture_output=True, text=True, timeout=120
    )
    waited = time.monotonic() - start
    holder.join()
    assert done.returncode == 0, done.stderr
    assert waited >= HOLD_S - 0.5  # it did wait for the holder, not fail and not skip
    assert f"Could not get lock {tmp_path / lock}" in done.stderr
    assert f"waiting up to 300 s for it (apt-get {step})" in done.stderr


def test_a_lock_held_past_the_wait_fails_naming_it(apt_env: dict[str, str], tmp_path: Path) -> None:
    holder = _held(tmp_path / "dpkg" / "lock-frontend", HOLD_S)
    done = subprocess.run(
        [str(SCRIPT), "bash"],
        env={**apt_env, "APT_LOCK_WAIT": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    holder.join()
    assert done.returncode == 1
    assert "Unable to acquire the dpkg frontend lock" in done.stderr
