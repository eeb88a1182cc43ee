"""The ssh calls inside a plan's templates, and a plan command's output kept within bounds."""

from __future__ import annotations

from diagnostic.measure.launch import run_shell
from diagnostic.measure.remote import SshCall, ssh_calls, ssh_hosts


def test_ssh_calls_keep_the_consultants_options_and_the_remote_command() -> None:
    command = (
        "ssh -F /tmp/cfg -o BatchMode=yes -J bastion gpu1 'nohup vllm serve m --port 8000 &' && "
        "RAY=1 /usr/bin/ssh -p2222 gpu2 cat /var/log/vllm.log | tail -n 5; echo ssh gpu3"
    )
    assert ssh_calls(command) == [
        SshCall(
            host="gpu1",
            options=("-F", "/tmp/cfg", "-o", "BatchMode=yes", "-J", "bastion"),
            remote="nohup vllm serve m --port 8000 &",
        ),
        SshCall(host="gpu2", options=("-p2222",), remote="cat /var/log/vllm.log"),
    ]
    # `echo ssh gpu3` runs no ssh; an unbalanced quote is left to the plan's `bash -n` check
    assert ssh_hosts(command) == ["gpu1", "gpu2"]
    assert ssh_hosts("ssh gpu1 'cat x") == []
    assert ssh_calls("ssh gpu1 true").pop().argv("-o", "BatchMode=yes") == [
        "ssh",
        "-o",
        "BatchMode=yes",
        "gpu1",
    ]


def test_a_long_output_keeps_its_tail_from_a_whole_line_on() -> None:
    result = run_shell("seq 1 200000", env={}, timeout_s=60, keep_bytes=4096)
    printed = "".join(f"{n}\n" for n in range(1, 200001))
    assert result.returncode == 0 and result.cut
    assert result.stdout_total == len(printed)
    kept = result.stdout.decode()
    assert printed.endswith(kept) and kept.endswith("200000\n")
    assert len(kept) <= 4096 and printed[-len(kept) - 1] == "\n"  # a whole first line
    short = run_shell("echo one; echo two >&2; exit 3", env={}, timeout_s=60, keep_bytes=4096)
    assert (short.returncode, short.stdout, short.cut, short.stderr_tail) == (
        3,
        b"one\n",
        False,
        "two",
    )
