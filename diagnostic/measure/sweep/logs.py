"""A plan's log commands (`logs = {node1 = "ssh node1 cat …"}`) run into a run's log sources."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from diagnostic import defaults
from diagnostic.bundle.disk import size_text
from diagnostic.bundle.store import Bundle, log_file, run_id
from diagnostic.common.progress import Reporter
from diagnostic.measure.launch import ShellResult, run_shell
from diagnostic.schema.bundle import RunInfo

__all__ = ["capture_logs"]


def capture_logs(
    bundle: Bundle,
    info: RunInfo,
    commands: Mapping[str, str],
    *,
    env: Mapping[str, str],
    when: str,
    reporter: Reporter,
    timeout_s: float = defaults.SHELL_TIMEOUT_S,
    keep_bytes: int = defaults.LOG_KEEP_BYTES,
) -> RunInfo:
    """Run each log command; its stdout becomes logs/<source>.log (redacted by the bundle),
    replacing an earlier copy: the later one is the complete one. A failing command never
    fails the run: run.json's log_errors says when and why, an earlier copy stays."""
    sources, errors, logs = dict(info.sources), dict(info.log_errors), list(info.logs)
    notes = dict(info.log_notes)
    if not commands:
        return info
    for source, command in commands.items():
        result = run_shell(command, env=env, timeout_s=timeout_s, keep_bytes=keep_bytes)
        if result.returncode == 0:
            earlier = bundle.log_sources(info).get(source)
            data, note = _joined(result, earlier, when)
            bundle.write_log(info.arm, info.restart, source, data)
            sources[source] = log_file(source)
            logs += [] if log_file(source) in logs else [log_file(source)]
            errors.pop(source, None)
            notes.pop(source, None)
            if note:
                notes[source] = note
                reporter.note(f"{run_id(info.arm, info.restart)}: log {source!r}: {note}")
            continue
        kept = "; the copy taken earlier is kept" if source in sources else ""
        errors[source] = f"{when}: {result.why()}{kept}"
        reporter.note(
            f"{run_id(info.arm, info.restart)}: log command {source!r} failed {when} "
            f"({result.why()}); the run goes on"
        )
    # collect_run may have written run.json since `info` was read: build on the stored one.
    current = bundle.find_run(info.arm, info.restart) or info
    updated = current.model_copy(
        update={"sources": sources, "log_errors": errors, "log_notes": notes, "logs": logs}
    )
    bundle.write_run(updated)
    return updated


def _joined(result: ShellResult, earlier: Path | None, when: str) -> tuple[bytes, str | None]:
    """The copy to keep of a log just fetched, and what it leaves out. A log only grows while
    its server runs: one shorter than the copy taken before was rotated (or truncated) in
    between, so the earlier copy (with the start-up lines) is kept ahead of the new one."""
    notes = []
    if result.cut:
        notes.append(
            f"{when}: {size_text(result.stdout_total)} printed, only the last "
            f"{size_text(len(result.stdout))} kept (from a whole line on)"
        )
    before = earlier.stat().st_size if earlier is not None and earlier.is_file() else 0
    data = result.stdout
    if result.stdout_total < before and earlier is not None:
        notes.append(
            f"{when}: {size_text(result.stdout_total)}, shorter than the "
            f"{size_text(before)} copied before: the log was rotated or truncated in between; "
            "the earlier copy is kept ahead of the new one (lines written between the two "
            "fetches may be missing)"
        )
        data = earlier.read_bytes() + data
    return data, "; ".join(notes) or None
