"""Issue 34: the file system as a careless or hostile user leaves it. A disk that fills up
during collect keeps every record already written and says what to free and to --resume; a
read-only bundle, -o through a symbolic link (dangling or not) and names that cannot name a
file are refused with the rule they break, before anything is written; never a traceback."""

from __future__ import annotations

import errno
import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sse_server as srv
from click.testing import CliRunner, Result

from diagnostic.bundle import requests_file
from diagnostic.bundle.store import Bundle
from diagnostic.cli import main
from diagnostic.common.progress import NullReporter
from diagnostic.errors import BundleError
from diagnostic.measure.collect import CollectConfig, collect
from diagnostic.schema.requests import latest_attempts

MODELS = json.dumps({"data": [{"id": "m", "owned_by": "vllm"}]}).encode()


@pytest.fixture
def server() -> Iterator[str]:
    routes = {"/v1/models": srv.answer(MODELS), "/v1/completions": srv.normal(4)}
    with srv.serving(srv.routed(routes)) as running:
        yield running.url


def _args(url: str, out: Path, *extra: str) -> list[str]:
    empty = out.parent / "empty.log"
    empty.touch()
    return [
        *("collect", url, "-o", str(out), "--workloads", "code", "--requests", "6"),
        *("--warmup", "0", "--max-tokens", "4", "--log", str(empty), *extra),
    ]


def _refused(result: Result, *needles: str) -> str:
    out = result.output.strip()
    assert result.exit_code == 2, out
    assert "Traceback" not in out and out.startswith("Error: "), out
    for needle in needles:
        assert needle in out, out
    return out


# -- a full disk ---------------------------------------------------------------------------


def test_a_disk_filling_up_keeps_the_records_and_says_what_to_do(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "b"
    config = CollectConfig(
        base_url=server, out=out, workloads=["code"], requests=6, warmup=0, max_tokens=4
    )
    written = 0
    append = requests_file._append_line

    def fills_up(path: Path, line: str) -> None:
        nonlocal written
        if written == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        append(path, line)
        written += 1

    monkeypatch.setattr(requests_file, "_append_line", fills_up)
    with pytest.raises(BundleError) as caught:
        collect(config, reporter=NullReporter())
    message = str(caught.value)
    assert "disk is full" in message and "--resume" in message and "free" in message
    assert "requests.jsonl" in message
    kept = Bundle.open(out).read_requests("baseline", 0).records
    assert len(kept) == 3  # fsynced before the disk filled: all there

    monkeypatch.setattr(requests_file, "_append_line", append)  # space freed
    done = collect(config.model_copy(update={"resume": True}), reporter=NullReporter())
    records = Bundle.open(out).read_requests("baseline", 0).records
    assert done.status == "ok" and len(latest_attempts(records)) == 6
    assert records[:3] == kept


def _unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    return probe.returncode == 0


NEEDS_MOUNTS = pytest.mark.skipif(not _unshare(), reason="no user and mount namespaces here")


def _in_namespace(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _command(args: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in [sys.executable, "-m", "diagnostic", *args])


@NEEDS_MOUNTS
def test_a_real_full_disk_ends_collect_cleanly_and_resume_finishes_it(
    tmp_path: Path, server: str
) -> None:
    mnt, copy = tmp_path / "mnt", tmp_path / "copy"
    mnt.mkdir()
    args = _args(server, mnt / "b")
    args[args.index("--requests") + 1] = "300"
    args[args.index("--log") + 1] = str(tmp_path / "empty.log")  # outside the small disk
    (tmp_path / "empty.log").touch()
    done = _in_namespace(
        f"mount -t tmpfs -o size=96k tmpfs {mnt} && {_command(args)}; echo exit=$?; "
        f"cp -r {mnt}/b {copy}"
    )
    out = done.stdout + done.stderr
    assert "exit=2" in out and "Traceback" not in out, out
    assert "disk is full" in out and "--resume" in out, out
    kept = Bundle.open(copy).read_requests("baseline", 0).records
    assert 0 < len(kept) < 300
    args = _args(server, copy, "--resume")
    args[args.index("--requests") + 1] = "300"
    again = CliRunner().invoke(main, args)  # on a disk with room: the rest is measured
    assert again.exit_code == 0, again.output
    records = Bundle.open(copy).read_requests("baseline", 0).records
    assert records[: len(kept)] == kept and len(latest_attempts(records)) == 300


@NEEDS_MOUNTS
def test_a_read_only_bundle_is_refused_saying_so(tmp_path: Path, server: str) -> None:
    out = tmp_path / "b"
    first = CliRunner().invoke(main, _args(server, out))
    assert first.exit_code == 0, first.output
    before = sorted(p.name for p in out.rglob("*"))
    run = _command(_args(server, out, "--resume", "--arm", "other"))
    done = _in_namespace(f"mount --bind {out} {out} && mount -o remount,ro,bind {out} && {run}")
    text = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in text, text
    assert "read-only" in text and str(out) in text, text
    assert sorted(p.name for p in out.rglob("*")) == before


def test_a_read_only_folder_is_a_clean_error_where_mounts_cannot_be_made(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_only(path: Path, line: str) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(requests_file, "_append_line", read_only)
    result = CliRunner().invoke(main, _args(server, tmp_path / "b"))
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "read-only" in last and "writable disk" in last


# -- -o through a symbolic link ------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "extra"),
    [("real", ()), ("nowhere", ()), ("file", ()), ("real", ("--force",)), ("/", ("--force",))],
    ids=["to a folder", "dangling", "to a file", "to a folder, --force", "to /, --force"],
)
def test_output_through_a_symbolic_link_is_refused_before_writing(
    tmp_path: Path, server: str, target: str, extra: tuple[str, ...]
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "keep.txt").write_text("mine")
    (tmp_path / "file").write_text("mine")
    link = tmp_path / "b"
    link.symlink_to(target if target == "/" else tmp_path / target)
    _refused(CliRunner().invoke(main, _args(server, link, *extra)), "symbolic link", str(link))
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["keep.txt"]
    assert (tmp_path / "file").read_text() == "mine"


# -- names that cannot name a file ---------------------------------------------------------


@pytest.mark.parametrize(
    ("arm", "says"),
    [("a" * 300, "300 characters long"), ("a/../../x", "cannot name a folder"), ("..", "")],
)
def test_an_arm_name_that_cannot_name_a_folder_is_refused_before_writing(
    tmp_path: Path, server: str, arm: str, says: str
) -> None:
    out = tmp_path / "b"
    _refused(CliRunner().invoke(main, _args(server, out, "--arm", arm)), says, "1 to 64 letters")
    assert not out.exists()


@pytest.mark.parametrize("workload", ["w" * 300, "a/../../x", "a\u0000b", "..", "-x", "a b"])
def test_a_workload_name_that_cannot_name_a_file_is_refused_before_writing(
    tmp_path: Path, server: str, workload: str
) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"workload": workload, "prompt": "hi"}) + "\n")
    out = tmp_path / "b"
    args = _args(server, out, "--prompts", str(prompts))
    args[args.index("--workloads") : args.index("--workloads") + 2] = []
    result = CliRunner().invoke(main, args)
    _refused(result, "workload name", "1 to 64 letters")
    assert "\u0000" not in result.output
    assert not out.exists()


@pytest.mark.parametrize("name", ["a" * 300, "a\\u0000b", "a/b"])
def test_a_plan_arm_name_that_cannot_name_a_folder_is_refused_at_load(
    tmp_path: Path, name: str
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        f'[plan]\nbaseline = "{name}"\n[[arms]]\nname = "{name}"\nlaunch = "s --port {{port}}"\n'
    )
    out = tmp_path / "b"
    result = CliRunner().invoke(main, ["sweep", str(plan), "-o", str(out)])
    _refused(result, str(plan), "1 to 64 letters")
    assert not out.exists()
