"""`sweep --dry-run`'s check of every node a plan reaches over ssh, before the day starts:
it connects (never prompting), finds the programs and paths the plan names there, and reads
the node's clock against this machine's."""

from __future__ import annotations

import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, ConfigDict, Field

from diagnostic.bundle.redact import redact_text
from diagnostic.measure.plan.spec import Plan
from diagnostic.measure.remote import (
    PREFIXES,
    SEPARATORS,
    SshCall,
    is_assignment,
    shell_words,
    ssh_calls,
)

__all__ = ["NodeCheck", "check_nodes"]

CONNECT_TIMEOUT_S = 10
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
    ("timed out", f"no answer within {CONNECT_TIMEOUT_S} s (ConnectTimeout)"),
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

    @property
    def ok(self) -> bool:
        """Reached, and everything the plan names there found."""
        return self.reached and not self.missing


def check_nodes(plan: Plan, *, timeout_s: float = 60.0) -> list[NodeCheck]:
    """Check every node the plan's commands (every arm's launch, stop, health, logs and
    telemetry, at restart 0) reach over ssh, all at once; in the order the plan names them."""
    calls: dict[tuple[str, tuple[str, ...]], list[SshCall]] = {}
    for arm in plan.arms:
        c = arm.commands.at(0)
        for command in [c.launch, c.stop, c.health, *c.logs.values(), *c.telemetry.values()]:
            for call in ssh_calls(command or ""):
                calls.setdefault((call.host, call.options), []).append(call)
    with ThreadPoolExecutor(max_workers=max(len(calls), 1)) as pool:
        return list(pool.map(lambda found: _check(found, timeout_s), calls.values()))


def _check(calls: list[SshCall], timeout_s: float) -> NodeCheck:
    named, written = [], set()
    for call in calls:
        words, files = _named(call.remote)
        named += words
        written |= files
    # a log the launch writes need not exist before the first start: its folder must
    names = [word for word in dict.fromkeys(named) if word not in written]
    script = "; ".join(
        [
            'echo "clock $(date +%s.%N)"',
            *(f"if {_test(word)}; then echo found; else echo missing; fi" for word in names),
        ]
    )
    argv = calls[0].argv("-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}")
    shown = shlex.join(argv)
    node = calls[0].host
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
    if done.returncode != 0 or not lines or not lines[0].startswith("clock "):
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        err = redact_text(said[-1]) if said else f"exit {done.returncode}"
        plain = next((words for key, words in _PLAIN if key in err), None)
        problem = f"{plain} (ssh: {err})" if plain else f"ssh: {err}"
        return NodeCheck(node=node, command=shown, reached=False, problem=problem)
    try:
        offset: float | None = round(float(lines[0].split()[1]) - (sent + back) / 2, 3)
    except (IndexError, ValueError):  # a date without %N (BSD): no offset, the rest stands
        offset = None
    answers = lines[1:]
    found = [w for w, a in zip(names, answers, strict=False) if a == "found"]
    return NodeCheck(
        node=node,
        command=shown,
        reached=True,
        missing=[w for w in names if w not in found],
        found=found,
        clock_offset_s=offset,
        clock_bound_s=round((back - sent) / 2, 3) if offset is not None else None,
    )


def _named(remote: str) -> tuple[list[str], set[str]]:
    """The programs a remote command runs and the absolute paths it names, and the files it
    writes into (an output redirection: its folder is what must exist)."""
    words = shell_words(remote)
    named: list[str] = []
    written: set[str] = set()
    first, redirect = True, ""
    for word in words:
        if word in SEPARATORS:
            first = True
            continue
        if "$" in word or "`" in word:
            first = False
            continue
        arrow = word.lstrip("0123456789&")
        if arrow[:1] in "<>" and arrow:
            target = arrow.lstrip("<>&")
            redirect = "" if target else arrow[:1]
            if target.startswith("/"):
                _redirected(arrow[:1], target, named, written)
            continue
        if redirect:
            if word.startswith("/"):
                _redirected(redirect, word, named, written)
            redirect = ""
            continue
        if first:
            if is_assignment(word) or word in PREFIXES:
                continue
            named.append(word)
            first = False
        elif word.startswith("/"):
            named.append(word)
    return named, written


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
    if any(c in word for c in "*?["):
        return f"ls -d {word} >/dev/null 2>&1"
    return f"test -e {shlex.quote(word)}"
