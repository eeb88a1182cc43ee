"""`diagnose collect`: measure a running server's decode speed into a bundle."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import click
from rich import box
from rich.table import Table
from rich.text import Text

from diagnostic import defaults
from diagnostic.cli._common import (
    RichReporter,
    api_key_from_env,
    api_key_option,
    console,
    console_err,
    engagement_from,
    engagement_options,
    number_option,
    output_option,
    print_labelled,
)
from diagnostic.measure.collect import CollectConfig, CollectRecap, collect, preflight
from diagnostic.measure.serverlog import server_logs
from diagnostic.measure.telemetry import TelemetrySettings

_NO_LOG = (
    "Warning: no server log is kept: none was given and none found for {url} (scripts/"
    "real-server's, a container's, the listening process' stdout/stderr on this host), so the "
    "report will say the server logs were not checked. Add --log PATH (the server's log file)."
)


def _workload_names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise click.BadParameter("give at least one workload name", param_hint="--workloads")
    return names


@click.command("collect")
@click.argument("base_url")
@output_option("Bundle folder.", required=True)
@click.option("--arm", default="baseline", show_default=True, help="Name of this server config.")
@number_option(
    "--restart",
    0,
    0,
    "Restart index, when the server was restarted by hand for another sample.",
    maximum=defaults.LIMIT_RESTARTS,
)
@click.option("--workloads", help="Comma-separated workloads (default: code,prose, or the files').")
@click.option(
    "--prompts",
    "prompts",
    multiple=True,
    type=click.Path(path_type=Path),
    help="JSONL prompt file: {prompt}, {messages} or Spec-Bench question.jsonl (repeatable).",
)
@number_option(
    "--requests",
    defaults.REQUESTS,
    1,
    "Measured requests per workload.",
    maximum=defaults.LIMIT_REQUESTS,
)
@number_option(
    "--warmup",
    defaults.WARMUP,
    0,
    "Discarded warm-up requests per workload.",
    maximum=defaults.LIMIT_WARMUP,
)
@number_option(
    "--max-tokens",
    defaults.MAX_TOKENS,
    1,
    "Output tokens forced on every request (keep it equal across arms).",
    maximum=defaults.LIMIT_MAX_TOKENS,
)
@number_option(
    "--concurrency",
    defaults.CONCURRENCY,
    1,
    "Requests in flight.",
    maximum=defaults.LIMIT_CONCURRENCY,
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    help=f"Processes the streams are spread over [default: one per "
    f"{defaults.STREAMS_PER_PROCESS} streams, at most one per core].",
)
@click.option(
    "--api",
    type=click.Choice(["completions", "chat"]),
    default="completions",
    show_default=True,
    help="OpenAI API to call.",
)
@click.option("--model", help="Model name to send (default: the server's first model).")
@click.option(
    "--log",
    "logs",
    multiple=True,
    metavar="[NAME=]PATH",
    help="Log to copy into the run as logs/NAME.log, redacted (repeatable; PATH may be a "
    "glob: one source per file, NAME-<stem>; without NAME: server, server-2, …; without "
    "--log: the one the host says a local server writes, else none, with a warning).",
)
@click.option(
    "--telemetry",
    is_flag=True,
    help="Sample this machine's GPUs (NVML) and CPU from before the warm-up to after the "
    "last request into runs/<run>/telemetry/ (no NVML: recorded as absent).",
)
@click.option(
    "--telemetry-node",
    "telemetry_remote",
    multiple=True,
    metavar="NAME=COMMAND|URL",
    help="A node's telemetry too: a command printing nvidia-smi --query-gpu CSV for the whole "
    "run (ssh node nvidia-smi … --format=csv -lms 500), or a DCGM exporter URL. Repeatable.",
)
@number_option(
    "--telemetry-interval",
    defaults.TELEMETRY_INTERVAL_S,
    defaults.TELEMETRY_MIN_INTERVAL_S,
    "Seconds between telemetry samples.",
    dest="telemetry_interval_s",
    maximum=defaults.TELEMETRY_MAX_INTERVAL_S,
)
@number_option(
    "--telemetry-quiet",
    defaults.QUIET_WINDOW_S,
    0.0,
    "With --telemetry: seconds of the quiet window before the first request (VM steal and a "
    "probe thread's CPU share, which no arm can move; 0: none).",
    dest="telemetry_quiet_s",
    maximum=defaults.QUIET_MAX_S,
)
@api_key_option
@number_option(
    "--timeout",
    defaults.REQUEST_TIMEOUT_S,
    1,
    "Seconds one request may take.",
    dest="timeout_s",
    maximum=defaults.LIMIT_TIMEOUT_S,
)
@number_option(
    "--first-token-timeout",
    defaults.FIRST_TOKEN_TIMEOUT_S,
    0.1,
    "Seconds from sending a request to its first token; past it the server has stalled and "
    "the run stops (failed; --resume continues it).",
    dest="first_token_timeout_s",
    maximum=defaults.LIMIT_TIMEOUT_S,
)
@number_option(
    "--token-timeout",
    defaults.TOKEN_TIMEOUT_S,
    0.1,
    "Seconds between two tokens of a stream; past it the server has stalled and the run "
    "stops (failed; --resume continues it).",
    dest="token_timeout_s",
    maximum=defaults.LIMIT_TIMEOUT_S,
)
@number_option(
    "--run-timeout",
    defaults.RUN_TIMEOUT_S,
    1,
    "Seconds the run's requests may take in all; past it the run stops (failed; --resume "
    "continues it).",
    dest="run_timeout_s",
    maximum=defaults.LIMIT_TIMEOUT_S,
)
@click.option(
    "--as-found",
    is_flag=True,
    help="This arm is the client's configuration as found: the report's before-and-after "
    "leads with it.",
)
@click.option("--resume", is_flag=True, help="Continue an interrupted collect of this run.")
@click.option("--force", is_flag=True, help="Replace an existing bundle.")
@engagement_options("stored in the bundle's manifest")
def command(
    base_url: str,
    output: Path,
    arm: str,
    restart: int,
    workloads: str | None,
    prompts: tuple[Path, ...],
    requests: int,
    warmup: int,
    max_tokens: int,
    concurrency: int,
    processes: int | None,
    api: str,
    model: str | None,
    logs: tuple[str, ...],
    telemetry: bool,
    telemetry_remote: tuple[str, ...],
    telemetry_interval_s: float,
    telemetry_quiet_s: float,
    api_key_env: str | None,
    timeout_s: float,
    first_token_timeout_s: float,
    token_timeout_s: float,
    run_timeout_s: float,
    as_found: bool,
    resume: bool,
    force: bool,
    **engagement: str | None,
) -> None:
    """Measure a running server's decode speed into a bundle.

    Greedy, fixed-length, streamed requests (warm-up, then measured) per workload; each
    record is stored as it completes, so --resume continues an interrupted collect. Run it
    once per server configuration (--arm), and again with --restart N after restarting the
    server by hand.

    \b
    Example:
      diagnose collect http://127.0.0.1:8000 -o bundle --arm baseline
      diagnose collect http://127.0.0.1:8000 -o bundle --arm ngram-k3 --log server.log
      diagnose collect http://127.0.0.1:8000 -o bundle --arm load --concurrency 1024
      diagnose collect http://head:8000 -o bundle --log head=/var/log/vllm.log \\
        --log 'node=/mnt/logs/node*.log'

    Without --log, collect keeps the log a local server writes when the host says where:
    scripts/real-server's log, `docker logs` of the container publishing the port, or the
    listening process' stdout/stderr when they are files; else it warns.
    """
    config = CollectConfig(
        base_url=base_url,
        out=output,
        arm=arm,
        restart=restart,
        workloads=_workload_names(workloads),
        prompts=list(prompts),
        requests=requests,
        warmup=warmup,
        max_tokens=max_tokens,
        concurrency=concurrency,
        processes=processes,
        api="chat" if api == "chat" else "completions",
        model=model,
        logs=list(logs),
        api_key=api_key_from_env(api_key_env),
        resume=resume,
        force=force,
        timeout_s=timeout_s,
        first_token_timeout_s=first_token_timeout_s,
        token_timeout_s=token_timeout_s,
        run_timeout_s=run_timeout_s,
        engagement=engagement_from(engagement),
        telemetry=_telemetry(telemetry, telemetry_remote, telemetry_interval_s, telemetry_quiet_s),
        as_found=as_found,
    )
    preflight(config)  # a bad URL, bundle or server: one error, before any warning or bar
    with _with_found_logs(config) as config, RichReporter() as reporter:
        summary = collect(config, reporter=reporter, checked=True)
    _print_summary(summary)
    if summary.status != "ok":
        sys.exit(1)


def _telemetry(
    local: bool, nodes: tuple[str, ...], interval_s: float, quiet_s: float
) -> TelemetrySettings | None:
    """--telemetry (this machine) and --telemetry-node NAME=COMMAND|URL (a node)."""
    if not (local or nodes):
        return None
    remote = {}
    for item in nodes:
        name, sep, command = item.partition("=")
        if not sep or not name or not command:
            raise click.BadParameter(
                f"{item!r}: give NAME=COMMAND or NAME=URL", param_hint="--telemetry-node"
            )
        remote[name] = command
    try:
        return TelemetrySettings(local=local, interval_s=interval_s, quiet_s=quiet_s, remote=remote)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--telemetry-node") from None


@contextlib.contextmanager
def _with_found_logs(config: CollectConfig) -> Iterator[CollectConfig]:
    """`config`, with the logs the host says the server writes when --log gave none (said on
    stderr); without any, a bold warning naming the flag to add."""
    if config.logs:
        yield config
        return
    with server_logs(config.base_url) as found:
        if found is None:
            console_err.print(Text(_NO_LOG.format(url=config.base_url), style="bold yellow"))
            yield config
            return
        shown = ", ".join(str(p) for p in found.paths)
        console_err.print(
            f"Server log: {shown} ({found.how}); --log PATH keeps another.",
            markup=False,
            highlight=False,
        )
        yield config.model_copy(update={"logs": found.paths})


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else format(value, pattern)


def _print_summary(summary: CollectRecap) -> None:
    title = f"{summary.run}: {summary.engine} {summary.version or ''} {summary.model or ''}"
    table = Table(title=Text(title.strip()), box=box.SIMPLE_HEAD)
    table.add_column("workload", no_wrap=True)
    for name in ("reqs", "errors", "mean decode tok/s", "median TTFT ms", "tokens /chunk"):
        table.add_column(name, justify="right")
    for w in summary.workloads:
        ttft = None if w.ttft_s is None else w.ttft_s * 1000
        row: list[Text | str] = [
            Text(w.workload),
            str(w.requests),
            str(w.failures),
            _fmt(w.decode_tps, ".1f"),
            _fmt(ttft, ".0f"),
            _fmt(w.tokens_per_chunk, ".2f"),
        ]
        table.add_row(*row)
    console.print(table)
    t = summary.engine_timing
    if t is not None:  # the engine's own clock over the same requests: client overhead
        console.print(
            f"Engine's own decode timing: {t.engine_tps:.1f} tok/s against the client's "
            f"{t.client_tps:.1f}, token-weighted over {t.client_requests} requests with "
            f"warm-ups (client/engine "
            f"{t.ratio:.4f}; {t.source}).",
            highlight=False,
        )
    sources = sorted({s for w in summary.workloads for s in w.token_sources} - {"usage"})
    if sources:
        console.print(f"Tokens counted from: {', '.join(sources)} (the server sent no usage).")
    if summary.resumed:
        console.print(f"Resumed: {summary.resumed} requests were already in the bundle.")
    console.print(f"Bundle: {summary.bundle}  status: {summary.status}", markup=False)
    if summary.failure:
        print_labelled(console, "Run failed:", "bold red", summary.failure)
