"""`sweep --dry-run`'s check of every node a plan reaches over ssh, before the day starts:
it connects (never prompting), finds the programs and paths the plan names there, and reads
the node's clock against this machine's."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, ConfigDict, Field

from diagnostic.bundle.redact import redact_command, redact_text
from diagnostic.measure.plan.spec import Plan
from diagnostic.measure.remote import (
    CONTAINERS,
    PREFIXES,
    SHELLS,
    SshCall,
    is_assignment,
    simple_commands,
    ssh_calls,
)

__all__ = ["NodeCheck", "check_nodes"]

CONNECT_TIMEOUT_S = 10
_LINE = 500  # of ssh's last words, at most this many characters
# ssh's own words for why it could not log in, and what they mean on site.
_PLAIN = [
    (
        "Host key verification failed",
        "ssh refused the node: its host key is not the one known for it (changed, or never "
        "seen). Ask the site whether the node was reinstalled before removing the old key "
        "(ssh-keygen -R HOST)",
    ),
    (
        "Permission denied",
        "the node accepts no key this machine offers (and no password is asked for: "
        "BatchMode): ssh-add the key, or set IdentityFile for the host in ~/.ssh/config",
    ),
    ("Connection refused", "no ssh server answers on that host and port"),
    ("timed out", "no answer within {wait:g} s (ConnectTimeout)"),
    ("Could not resolve hostname", "the host name is not known here (DNS, ~/.ssh/config)"),
]


class NodeCheck(BaseModel):
    """One node the plan reaches over ssh, as found before the sweep."""

    model_config = ConfigDict(extra="forbid")

    node: str = Field(description="The host as the plan names it (an ssh_config alias too)")
    command: str = Field(description="The ssh command the check ran (its options as the plan's)")
    reached: bool = Field(description="Whether ssh logged in and ran the check")
    problem: str | None = Field(None, description="Why it could not, in plain words")
    missing: list[str] = Field(
        default_factory=list, description="Programs and paths the plan names there, not found"
    )
    found: list[str] = Field(default_factory=list, description="Those found")
    clock_offset_s: float | None = Field(
        None, description="The node's clock minus this machine's, seconds"
    )
    clock_bound_s: float | None = Field(
        None, description="The offset is within this much (half the round trip)"
    )
    via: str | None = Field(
        None,
        description="Not checked from here: its ssh runs on this node or in this container "
        "or job step (a hop, docker exec, kubectl exec, srun)",
    )

    @property
    def ok(self) -> bool:
        """Reached, and everything the plan names there found (or not to be checked here)."""
        return self.via is not None or (self.reached and not self.missing)


def check_nodes(plan: Plan, *, timeout_s: float = 60.0) -> list[NodeCheck]:
    """Check every node the plan's commands (every arm's launch, stop, health, logs and
    telemetry, at restart 0) reach over ssh from here, all at once; in the order the plan
    names them. An ssh that runs on another node (a hop) or in a container is not checked."""
    calls: dict[tuple[str, tuple[str, ...]], list[SshCall]] = {}
    elsewhere: dict[str, SshCall] = {}
    for arm in plan.arms:
        c = arm.commands.at(0)
        for command in [c.launch, c.stop, c.health, *c.logs.values(), *c.telemetry.values()]:
            for call in ssh_calls(command or ""):
                if call.hop:
                    elsewhere.setdefault(call.host, call)
                else:
                    calls.setdefault((call.host, tuple(call.login_options())), []).append(call)
    # a file one command writes on a node (the launch's log, its pid file) need not exist
    # before the first start for another to read it: its folder must
    written: dict[str, set[str]] = {}
    for (host, _), found in calls.items():
        written.setdefault(host, set()).update(*(_named(call.remote)[1] for call in found))
    with ThreadPoolExecutor(max_workers=max(len(calls), 1)) as pool:
        checks = list(
            pool.map(lambda found: _check(found, written[found[0].host], timeout_s), calls.values())
        )
    checked = {check.node for check in checks}
    return checks + [
        NodeCheck(
            node=host,
            command=redact_command(shlex.join(call.argv()), launch=False),
            reached=False,
            via=call.hop,
        )
        for host, call in elsewhere.items()
        if host not in checked
    ]


def _check(calls: list[SshCall], written: set[str], timeout_s: float) -> NodeCheck:
    named = [word for call in calls for word in _named(call.remote)[0]]
    names = [word for word in dict.fromkeys(named) if word not in written]
    script = "; ".join(
        [
            'echo "clock $(date +%s.%N)"',
            *(f"if {_test(word)}; then echo found; else echo missing; fi" for word in names),
        ]
    )
    node = calls[0].host
    options = calls[0].login_options()
    shown = redact_command(shlex.join(["ssh", *options, node]), launch=False)
    # as this machine's shell gives them to ssh: `-F $SITE/ssh_config`, `-i ~/.ssh/site`
    options = [os.path.expanduser(os.path.expandvars(word)) for word in options]
    target = os.path.expanduser(os.path.expandvars(node))
    wait = _connect_timeout(options, target)
    if isinstance(wait, str):  # ssh cannot read the options or the config
        return NodeCheck(node=node, command=shown, reached=False, problem=f"ssh: {wait}")
    # BatchMode first: ssh keeps the first value it is given. The plan's own ConnectTimeout
    # (or its ssh_config's) stands; without one, CONNECT_TIMEOUT_S.
    argv = ["ssh", "-o", "BatchMode=yes", *options]
    if wait is None:
        argv += ["-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]
    argv.append(target)
    sent = time.time()
    try:
        done = subprocess.run(
            [*argv, script],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
            check=False,
            start_new_session=True,  # no terminal to prompt on
        )
    except subprocess.TimeoutExpired:
        return NodeCheck(
            node=node, command=shown, reached=False, problem=f"no answer within {timeout_s:g} s"
        )
    except OSError as exc:
        return NodeCheck(node=node, command=shown, reached=False, problem=f"ssh: {exc}")
    back = time.time()
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    # the first line the check printed: a login may print before it (a .bashrc's echo)
    at = next((i for i, line in enumerate(lines) if line.startswith("clock ")), None)
    if done.returncode != 0 or at is None:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        err = redact_text(said[-1][:_LINE]) if said else f"exit {done.returncode}"
        plain = next((words for key, words in _PLAIN if key in err), None)
        plain = plain and plain.format(wait=wait or CONNECT_TIMEOUT_S)
        problem = f"{plain} (ssh: {err})" if plain else f"ssh: {err}"
        return NodeCheck(node=node, command=shown, reached=False, problem=problem)
    try:
        offset: float | None = round(float(lines[at].split()[1]) - (sent + back) / 2, 3)
    except (IndexError, ValueError):  # a date without %N (BSD): no offset, the rest stands
        offset = None
    answers = lines[at + 1 :]
    found = [w for w, a in zip(names, answers, strict=False) if a.strip() == "found"]
    return NodeCheck(
        node=node,
        command=shown,
        reached=True,
        missing=[w for w in names if w not in found],
        found=found,
        clock_offset_s=offset,
        clock_bound_s=round((back - sent) / 2, 3) if offset is not None else None,
    )


def _connect_timeout(options: list[str], node: str) -> float | str | None:
    """The ConnectTimeout ssh will use for `node` with these options and its config (`ssh
    -G`, which connects nowhere): seconds, None when none is set, or why ssh refused."""
    try:
        done = subprocess.run(
            ["ssh", "-G", *options, node],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CONNECT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        return redact_text(said[-1][:_LINE]) if said else f"exit {done.returncode}"
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "connecttimeout" and value.isdigit():
            return float(value)
    return None


def _named(remote: str) -> tuple[list[str], set[str]]:
    """The programs a remote command runs and the absolute paths it names (relative ones
    after a `cd` to an absolute folder, as that folder's), and the files it writes into (an
    output redirection: its folder is what must exist). Inside `bash -c '…'` too; nothing
    past an ssh or a container's program (those paths are on another machine)."""
    named: list[str] = []
    written: set[str] = set()
    folder = ""
    for simple in simple_commands(remote):
        words = simple.words
        at = _program(words)
        program = words[at] if at is not None else ""
        if program == "cd" and len(words) > 1 and words[1].startswith("/"):
            folder = words[1]
            named.append(folder)
            continue
        if program and not _expands(program):
            named.append(_under(folder, program) if "/" in program else program)
        for arrow, path in simple.redirects:
            path = _under(folder, path)
            if path.startswith("/"):
                _redirected(arrow.lstrip("0123456789&")[:1], path, named, written)
        base = program.rsplit("/", 1)[-1]
        if base == "ssh" or base in CONTAINERS:
            continue
        script = _shell_script(words[at + 1 :]) if at is not None and base in SHELLS else None
        if script is not None:
            inner, files = _named(script)
            named += inner
            written |= files
            continue
        args = words if at is None else words[at + 1 :]
        named += [w for w in args if w.startswith("/") and not _expands(w)]
    return named, written


def _program(words: list[str]) -> int | None:
    """Where a simple command's program stands, past `VAR=value` and wrappers (nohup, exec,
    sudo, env …); None when a wrapper's options hide it (`nice -n 5 x`)."""
    for i, word in enumerate(words):
        if is_assignment(word) or word in PREFIXES:
            continue
        return None if word.startswith("-") else i
    return None


def _shell_script(args: list[str]) -> str | None:
    """The script of `bash -c SCRIPT` (`-lc`, `-c` among other options), from its arguments."""
    for i, word in enumerate(args):
        if not word.startswith("-"):
            return None
        if "c" in word[1:] and not word.startswith("--"):
            return args[i + 1] if i + 1 < len(args) else None
    return None


def _under(folder: str, path: str) -> str:
    """A relative path as the folder the command `cd`'d into names it."""
    if not folder or path.startswith("/") or _expands(path):
        return path
    return f"{folder.rstrip('/')}/{path.removeprefix('./')}"


def _expands(word: str) -> bool:
    """Whether the node's shell changes the word before running it ($VAR, `cmd`, ~)."""
    return "$" in word or "`" in word or word.startswith("~")


def _redirected(arrow: str, path: str, named: list[str], written: set[str]) -> None:
    if arrow == "<":
        named.append(path)
    else:
        named.append(path.rsplit("/", 1)[0] or "/")
        written.add(path)


def _test(word: str) -> str:
    """A shell test that `word` exists on the node: a program on PATH, or a path (a glob
    matching anything)."""
    if not word.startswith("/"):
        return f"command -v {shlex.quote(word)} >/dev/null 2>&1"
    if any(c in word for c in "*?["):  # the glob's letters unquoted, the rest quoted
        parts = re.split(r"([*?[\]])", word)
        pattern = "".join(p if p in "*?[]" else shlex.quote(p) for p in parts if p)
        return f"ls -d {pattern} >/dev/null 2>&1"
    return f"test -e {shlex.quote(word)}"
