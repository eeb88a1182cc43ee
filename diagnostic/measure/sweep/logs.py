"""A plan's log commands (`logs = {node1 = "ssh node1 cat …"}`) run into a run's log sources."""

from __future__ import annotations

from collections.abc import Mapping

from diagnostic import defaults
from diagnostic.bundle.store import Bundle, log_file, run_id
from diagnostic.common.progress import Reporter
from diagnostic.measure.launch import run_shell
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
) -> RunInfo:
    """Run each log command; its stdout becomes logs/<source>.log (redacted by the bundle),
    replacing an earlier copy: the later one is the complete one. A failing command never
    fails the run: run.json's log_errors says when and why, an earlier copy stays."""
    sources, errors, logs = dict(info.sources), dict(info.log_errors), list(info.logs)
    if not commands:
        return info
    for source, command in commands.items():
        result = run_shell(command, env=env, timeout_s=timeout_s)
        if result.returncode == 0:
            bundle.write_log(info.arm, info.restart, source, result.stdout)
            sources[source] = log_file(source)
            logs += [] if log_file(source) in logs else [log_file(source)]
            errors.pop(source, None)
            continue
        kept = "; the copy taken earlier is kept" if source in sources else ""
        errors[source] = f"{when}: {result.why()}{kept}"
        reporter.note(
            f"{run_id(info.arm, info.restart)}: log command {source!r} failed {when} "
            f"({result.why()}); the run goes on"
        )
    # collect_run may have written run.json since `info` was read: build on the stored one.
    current = bundle.find_run(info.arm, info.restart) or info
    updated = current.model_copy(update={"sources": sources, "log_errors": errors, "logs": logs})
    bundle.write_run(updated)
    return updated
