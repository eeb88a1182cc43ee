"""The ssh calls inside a plan's templates, and a plan command's output kept within bounds."""

from __future__ import annotations

import pytest

from diagnostic.bundle.redact import redact_command, redact_text
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
    assert ssh_hosts("ssh gpu1 'cat x") == ["gpu1"]
    assert ssh_calls("ssh gpu1 true").pop().argv("-o", "BatchMode=yes") == [
        "ssh",
        "-o",
        "BatchMode=yes",
        "gpu1",
    ]


@pytest.mark.parametrize(
    ("command", "host", "options", "remote"),
    [
        # ssh's getopt: letters run together, the last one's value the next word
        ("ssh -vp 2222 gpu1 true", "gpu1", ("-vp", "2222"), "true"),
        ("ssh -tt -i key root@gpu1 top", "root@gpu1", ("-tt", "-i", "key"), "top"),
        (
            "ssh -o ConnectTimeout=5 -J jump gpu1 :",
            "gpu1",
            ("-o", "ConnectTimeout=5", "-J", "jump"),
            ":",
        ),
        # options after the host are ssh's too, `--` ends them
        ("ssh gpu1 -p 2222 -l root nvidia-smi", "gpu1", ("-p", "2222", "-l", "root"), "nvidia-smi"),
        ("ssh gpu1 -- nvidia-smi -L", "gpu1", (), "nvidia-smi -L"),
        ("ssh -- gpu1 -p 2", "gpu1", (), "-p 2"),
        ("ssh -p2222 'root@[::1]' true", "root@[::1]", ("-p2222",), "true"),
        ("ssh ssh://root@gpu1:2222 true", "ssh://root@gpu1:2222", (), "true"),
        # quotes as bash reads them; ssh joins the words, the node's shell splits them again
        (
            "ssh gpu1 $'tail -n 5 \\'/srv/my logs/x.log\\''",
            "gpu1",
            (),
            "tail -n 5 '/srv/my logs/x.log'",
        ),
        ("ssh gpu1 bash -lc 'vllm serve m'", "gpu1", (), "bash -lc vllm serve m"),
        ('ssh gpu1 "cat /srv/x.log" 2>/dev/null > local.log', "gpu1", (), "cat /srv/x.log"),
        # a here-document is what runs there
        ("ssh gpu1 <<'EOF'\nvllm serve m\nEOF", "gpu1", (), "vllm serve m\n"),
        ("ssh gpu1 bash -s <<-EOF\n\tcd /srv\n\tEOF\n", "gpu1", (), "\tcd /srv\n"),
        ("ssh gpu1 bash <<< 'nvidia-smi'", "gpu1", (), "nvidia-smi\n"),
        # behind a wrapper, after a keyword, in a tunnel
        ("if timeout 30 ssh gpu1 true; then :; fi", "gpu1", (), "true"),
        ("HF_TOKEN=x sshpass -p pw /usr/bin/ssh gpu1 true", "gpu1", (), "true"),
        ("ssh -fN -L 8000:localhost:8000 gpu1", "gpu1", ("-fN", "-L", "8000:localhost:8000"), ""),
    ],
)
def test_ssh_calls_read_ssh_as_ssh_reads_it(
    command: str, host: str, options: tuple[str, ...], remote: str
) -> None:
    [call] = ssh_calls(command)
    assert (call.host, call.options, call.remote, call.hop) == (host, options, remote, "")


def test_the_nodes_a_command_reaches_through_hops_and_containers() -> None:
    # a hop: the ssh inside the remote command reaches gpu1 from the login node
    hop = "ssh login 'ssh -p 2 gpu1 \"cat /x\"' && ssh a true\nssh b true"
    assert [(c.host, c.hop) for c in ssh_calls(hop)] == [
        ("login", ""),
        ("gpu1", "login"),
        ("a", ""),
        ("b", ""),
    ]
    assert ssh_hosts(hop) == ["login", "gpu1", "a", "b"]
    # an ssh inside a container or a job step starts there; a word that only says ssh is none
    assert [(c.host, c.hop) for c in ssh_calls("kubectl exec pod -- ssh gpu1 true")] == [
        ("gpu1", "kubectl")
    ]
    assert [(c.host, c.hop) for c in ssh_calls("srun -w n1 ssh gpu1 true")] == [("gpu1", "srun")]
    assert ssh_hosts("echo ssh gpu3; grep ssh /etc/passwd") == []
    # a tunnel is checked as a login: forwards, -N, -f and control commands left out
    tunnel = ssh_calls("ssh -fNv -L 8000:localhost:8000 -S ctl -O exit gpu1").pop()
    assert tunnel.login_options() == ["-v", "-S", "ctl"]


def test_a_long_output_keeps_its_tail_from_a_whole_line_on() -> None:
    result = run_shell("seq 1 200000", env={}, timeout_s=60, keep_bytes=4096)
    printed = "".join(f"{n}\n" for n in range(1, 200001))
    assert result.returncode == 0 and result.cut
    assert result.stdout_total == len(printed)
    kept = result.stdout.decode()
    assert printed.endswith(kept) and kept.endswith("200000\n")
    assert len(kept) <= 4096 and printed[-len(kept) - 1] == "\n"  # a whole first line
    short = run_shell("echo one; echo two >&2; exit 3", env={}, timeout_s=60, keep_bytes=4096)
    # one line of 200 kB on stderr, no newline: its end said, within bounds
    line = run_shell("head -c 200000 /dev/zero | tr '\\0' e >&2; exit 1", env={}, timeout_s=60)
    assert line.stderr_tail == "e" * 2000
    assert (short.returncode, short.stdout, short.cut, short.stderr_tail) == (
        3,
        b"one\n",
        False,
        "two",
    )


@pytest.mark.parametrize(
    "command",
    [
        "HF_TOKEN={s} ssh gpu1 vllm serve m",
        "ssh gpu1 'HF_TOKEN={s} vllm serve m'",
        "ssh gpu1 $'HF_TOKEN={s} vllm serve m'",
        "ssh gpu1 <<'EOF'\nexport HF_TOKEN={s}\nvllm serve m\nEOF",
        "ssh gpu1 \"bash -lc 'vllm serve m --api-key {s} --port 8000'\"",
        "ssh gpu1 bash -lc 'vllm serve m --api-key {s}'",
        "ssh -o SetEnv=API_KEY={s} gpu1 vllm serve m",
        "ssh gpu1 docker run -e HF_TOKEN={s} vllm/vllm-openai --model m",
    ],
)
def test_a_secret_in_an_ssh_command_is_masked_wherever_it_stands(command: str) -> None:
    secret = "s3cr3t-of-the-site-0042"
    command = command.replace("{s}", secret)
    for shown in (
        redact_command(command),
        redact_command(command, launch=False),
        redact_text(command),
    ):
        assert secret not in shown and "<redacted>" in shown
