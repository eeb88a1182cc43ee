# ruff: noqa: E501  (the generated shapes read best one to a line)
"""The third pass's secret shapes (issue 46), by kind, each kind in several variants: fake
secrets from the caller's seeded generator. `free_text` shapes must be masked wherever they are
printed (a log, a /metrics label, an error body, a server-info answer); `structured` ones are
launch commands, environments and URLs, redacted by construction (bundle/commands, urls)."""

from __future__ import annotations

import base64
import json
import string
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
Case = dict[str, object]
R = Callable[[str, int], str]


def free_text(r: R) -> list[Case]:
    cases: list[Case] = []

    def add(shape: str, text: str, *secrets: str) -> None:
        cases.append({"shape": shape, "text": text, "secrets": list(secrets)})

    def key(n: int = 32) -> str:
        return r(ALNUM, n - 4) + r("0123456789", 2) + r("ABCDEFGHJK", 2)

    # -- credentials in URLs ------------------------------------------------------------
    t = "ghp_" + r(ALNUM, 36)
    add("URL: a GitHub token as the user", f"git clone https://{t}@github.com/org/repo.git", t)
    t = key(40)
    add("URL: a random token as the user", f"fetching https://{t}@models.internal/v1/m.bin", t)
    t = key(24)
    add("URL: oauth2 user and token", f"remote: https://oauth2:{t}@gitlab.example.com/g/p.git", t)
    t = key(30)
    add("URL: x-access-token user", f"origin https://x-access-token:{t}@github.com/o/r (fetch)", t)
    p = key(20)
    add("URL: redis with a password and no user", f"cache at redis://:{p}@10.0.0.5:6379/0", p)
    p = key(18)
    add("URL: rediss default user", f"REDIS_URL=rediss://default:{p}@cache.example.com:6380", p)
    k = r(HEX, 32)
    add(
        "URL: Sentry DSN", f"sentry_sdk.init(dsn='https://{k}@o450123.ingest.sentry.io/5512345')", k
    )
    k2 = r(HEX, 32)
    add(
        "URL: Sentry DSN with a secret", f"SENTRY_DSN=https://{k}:{k2}@sentry.example.com/42", k, k2
    )
    p = key(16)
    add(
        "URL: mongodb+srv", f"mongodb+srv://svc:{p}@cluster0.ab12c.mongodb.net/?retryWrites=true", p
    )
    p = r(ALNUM, 10) + "@" + r(ALNUM, 6)
    add(
        "URL: a password holding an @",
        f"amqp://bob:{p}@rabbit:5672/vhost",
        p.split("@")[0],
        p.split("@")[1],
    )
    p = r(ALNUM, 12)
    add("URL: a URL-encoded password", f"postgresql://app:{p}%40x%21@db:5432/prod", p)
    for q in (
        "api-key",
        "x-api-key",
        "access-token",
        "private_token",
        "client-secret",
        "apikey",
        "auth",
    ):
        k = key(32)
        add(
            f"URL: query key {q}", f"GET https://api.example.com/v2/items?limit=5&{q}={k}&page=2", k
        )
    k = key(40)
    add(
        "URL: fragment with an access token",
        f"redirected to https://app.example.com/cb#access_token={k}&token_type=bearer",
        k,
    )
    k = key(28)
    add("URL: fragment holding a bare key", f"share link https://paste.example.com/v/abc#{k}", k)
    k = key(30)
    add(
        "URL: OAuth code in a query",
        f"callback https://app.example.com/oauth?code={k}&state=xyz",
        k,
    )
    # -- encodings ------------------------------------------------------------------------
    p = key(14)
    add("URL-encoded assignment", f"body=user%3Dalice%26password%3D{p}%26remember%3D1", p)
    t = key(40)
    add("URL-encoded authorization header", f"h=Authorization%3A%20Bearer%20{t}", t)
    p = key(16)
    add(
        "JSON-escaped password in a log string",
        f'msg="{{\\"user\\": \\"a\\", \\"password\\": \\"{p}\\"}}"',
        p,
    )
    p = key(16)
    add("JSON unicode escape for =", f'"PASSWORD\\u003d{p}"', p)
    p = key(16)
    add("Python hex escape for =", f"'DB_PASS\\x3d{p}'", p)
    p = key(18)
    add("ANSI colour between name and value", f"\x1b[33mAPI_KEY\x1b[0m=\x1b[1m{p}\x1b[0m", p)
    p = key(18)
    add(
        "ANSI colour codes around a password",
        f"\x1b[32mINFO\x1b[0m password: \x1b[31m{p}\x1b[0m",
        p,
    )
    p = key(18)
    add("TAB between name and value", f"PASSWORD\t{p}", p)
    p = key(22)
    add("TABs between an env name and value", f"HF_TOKEN\t\t{p}\tset", p)
    p = key(14)
    add("fullwidth equals sign", f"password＝{p}", p)
    p = key(14)
    add("fullwidth name and colon", f"ＰＡＳＳＷＯＲＤ：{p}", p)
    p = key(14)
    add("Cyrillic a in password", f"pаssword={p}", p)
    p = key(14)
    add("Cyrillic o and a in password", f"раsswоrd: {p}", p)
    p = key(20)
    add("Cyrillic e in secret", f"client_sеcret={p}", p)
    p = key(20)
    add("zero-width space inside the name", f"api\u200b_key={p}", p)
    p = key(14)
    add("HTML entity for =", f"password&#61;{p}", p)
    p = key(20)
    add("CRLF line end after the value", f"DB_PASSWORD={p}\r\nNEXT=1\r\n", p)
    # -- command-line forms ---------------------------------------------------------------
    p = key(12)
    add("mysql -pX", f"mysql -h db -u root -p{p} prod < dump.sql", p)
    p = key(12)
    add("mysqldump -pX", f"mysqldump -uroot -p{p} --all-databases", p)
    p = key(12)
    add("mariadb -p'X'", f"mariadb -u app -p'{p}' -e 'select 1'", p)
    p = key(12)
    add("sshpass -p X", f"sshpass -p {p} ssh gpu-node-3 nvidia-smi", p)
    p = key(12)
    add("sshpass -pX", f"sshpass -p{p} scp model.bin node:/data", p)
    p = key(12)
    add("docker login -p X", f"docker login -u deploy -p {p} registry.example.com", p)
    p = key(12)
    add(
        "docker login --password X",
        f"docker login registry.example.com --username ci --password {p}",
        p,
    )
    p = key(12)
    add("podman login -p X", f"podman login -u me -p {p} quay.io", p)
    p = key(12)
    add(
        "echo X | docker login --password-stdin",
        f"echo {p} | docker login -u ci --password-stdin ghcr.io",
        p,
    )
    k = r(HEX, 40)
    add("wandb login X", f"$ wandb login {k}", k)
    t = "hf_" + r(ALNUM, 34)
    add(
        "huggingface-cli login --token X",
        f"huggingface-cli login --token {t} --add-to-git-credential",
        t,
    )
    k = "-" + key(30)
    add("--api-key value starting with a dash", f"vllm serve m --api-key {k} --port 8000", k[1:])
    k = "-" + key(30)
    add("--api-key=value starting with a dash", f"args: --api-key={k} --port 8000", k[1:])
    k = "--" + key(24)
    add("--token value starting with two dashes", f"launcher --token {k} --verbose", k[2:])
    p = key(12)
    add("redis-cli -a X", f"redis-cli -h cache -a {p} ping", p)
    p = key(12)
    add("openssl -passin pass:X", f"openssl rsa -in k.pem -passin pass:{p} -out k2.pem", p)
    p = key(12)
    add("zip -P X", f"zip -P {p} -r weights.zip weights/", p)
    t = key(40)
    add(
        "curl -H Authorization Bearer",
        f"curl -H 'Authorization: Bearer {t}' http://h:8000/v1/models",
        t,
    )
    t = key(32)
    add("curl -H X-API-Key", f'curl -H "X-API-Key: {t}" https://api.example.com', t)
    # -- half-masked and other schemes ------------------------------------------------------
    t = "00" + r(URLSAFE, 40)
    add("Okta SSWS scheme", f"Authorization: SSWS {t}", t)
    t = r(ALNUM, 36)
    add("Bearer with the start masked", f"Authorization: Bearer ****{t}", t)
    t = key(36)
    add("Bearer half-masked in prose", f"using token Bearer ***{t} for the hub", t)
    t = key(40)
    add("GenieKey scheme", f"Authorization: GenieKey {t}", t)
    t = key(36)
    add("Splunk scheme", f"Authorization: Splunk {t}", t)
    t = base64.b64encode(f"alice:{key(14)}".encode()).decode()
    add("Proxy-Authorization Basic", f"Proxy-Authorization: Basic {t}", t)
    t = key(40)
    add(
        "Go header map",
        f"headers=map[Authorization:[Bearer {t}] Content-Type:[application/json]]",
        t,
    )
    t = key(40)
    add(
        "authorization in a JSON header dump", f'{{"headers": {{"authorization": "Token {t}"}}}}', t
    )
    # -- reprs ------------------------------------------------------------------------------
    p = key(18)
    add("Python bytes repr", f"{{'api_key': b'{p}', 'model': 'm'}}", p)
    p = key(18)
    add("Python bytes assignment", f'password=b"{p}"', p)
    p = key(18)
    add("Rust Some repr", f'Config {{ api_key: Some("{p}"), port: 8000 }}', p)
    p = key(18)
    add("Rust SecretString repr", f'token: SecretString::new("{p}")', p)
    p = key(18)
    add("Go map repr", f"cfg=map[password:{p} user:svc]", p)
    p = key(18)
    add("Go struct repr", f"&{{User:svc Password:{p} Port:5432}}", p)
    p = key(30)
    add("Python argv list", f"argv=['vllm', 'serve', 'm', '--api-key', '{p}', '--port', '8000']", p)
    p = "hf_" + r(ALNUM, 34)
    add("JSON argv list", f'"args": ["--model", "m", "--hf-token", "{p}"]', p)
    p = key(30)
    add("argv list without quotes", f"cmdline: [--api-key, {p}, --port, 8000]", p)
    p = key(30)
    add("Namespace repr", f"args=Namespace(model='m', api_key='{p}', port=8000)", p)
    p = "hf_" + r(ALNUM, 34)
    add("environ repr", f"environ({{'HOME': '/root', 'HF_TOKEN': '{p}'}})", p)
    # -- private keys -----------------------------------------------------------------------
    body = [r(B64, 64) for _ in range(3)]
    add(
        "PEM with CRLF line ends",
        "-----BEGIN RSA PRIVATE KEY-----\r\n"
        + "\r\n".join(body)
        + "\r\n-----END RSA PRIVATE KEY-----\r\n",
        *body,
    )
    body = [r(B64, 64) for _ in range(3)]
    add(
        "PEM with escaped CRLF in JSON",
        json.dumps(
            {
                "tls": "-----BEGIN PRIVATE KEY-----\r\n"
                + "\r\n".join(body)
                + "\r\n-----END PRIVATE KEY-----"
            }
        ),
        *body,
    )
    body = [r(B64, 70) for _ in range(3)]
    add(
        "OpenSSH private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        + "\n".join(body)
        + "\n-----END OPENSSH PRIVATE KEY-----",
        *body,
    )
    body = [r(B64, 64) for _ in range(2)]
    add(
        "encrypted PKCS#8 key",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"
        + "\n".join(body)
        + "\n-----END ENCRYPTED PRIVATE KEY-----",
        *body,
    )
    body = [r(B64, 64) for _ in range(2)]
    add(
        "PGP private key block",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
        + "\n".join(body)
        + "\n-----END PGP PRIVATE KEY BLOCK-----",
        *body,
    )
    body = [r(B64, 64) for _ in range(2)]
    add(
        "PEM key cut before its end",
        "key:\n-----BEGIN EC PRIVATE KEY-----\n" + "\n".join(body) + "\n",
        *body,
    )
    for version in (2, 3):
        priv, mac = r(B64, 44), r(HEX, 64)
        putty = (
            f"PuTTY-User-Key-File-{version}: ssh-ed25519\nEncryption: none\nComment: ed25519-key\n"
            f"Public-Lines: 2\n{r(B64, 64)}\n{r(B64, 20)}\nPrivate-Lines: 1\n{priv}\nPrivate-MAC: {mac}\n"
        )
        add(f"PuTTY key file v{version}", putty, priv, mac)
    # -- names no list foresees: the entropy rule and new name parts ---------------------------
    for name in (
        "BEARER_TOK",
        "JWT_SIGNING_HMAC",
        "SESSION_SALT",
        "OTP_SEED",
        "LICENSE_BLOB",
        "WEBHOOK_SIG",
        "ENCRYPTION_MATERIAL",
        "DEPLOY_HOOK_X",
        "CSRF_VALUE",
        "NONCE_BASE",
    ):
        v = key(28)
        add(f"unforeseen name {name}", f"export {name}={v}", v)
    for name, form in (
        ("ACCESS_CODE", "{n}={v}"),
        ("SIM_PIN", "{n}={v}"),
        ("RECOVERY_CODE", "{n}: {v}"),
        ("TOTP_SEED", '"{n}": "{v}"'),
    ):
        v = r("0123456789", 6) if "SEED" not in name else r("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
        add(f"short secret under {name}", form.format(n=name, v=v), v)
    v = key(30)
    add("entropy rule in YAML", f"  signing_material: {v}", v)
    v = key(30)
    add("entropy rule in JSON", f'{{"webhookThing": "{v}"}}', v)
    # -- where the issue found them: /metrics labels, error bodies, server-info answers --------
    k = key(32)
    add(
        "/metrics label holding a key",
        f'vllm:cache_config_info{{api_key="{k}",block_size="16"}} 1.0',
        k,
    )
    k = key(32)
    add(
        "/metrics label with escaped quotes",
        f'sglang:server_info{{args="--api-key \\"{k}\\" --port 30000"}} 1',
        k,
    )
    k = "sk-" + r(ALNUM, 40)
    add(
        "500 error body quoting a key",
        f'{{"error": {{"message": "Incorrect API key provided: {k}", "code": 500}}}}',
        k,
    )
    k = key(30)
    add("error body quoting a header", f'{{"detail": "bad header x-api-key={k}"}}', k)
    k = key(30)
    add(
        "server-info answer with launch args", f'{{"server_args": "vllm serve m --api-key {k}"}}', k
    )
    k = key(30)
    add(
        "server-info answer, escaped JSON string",
        f'{{"config": "{{\\"hf_token\\": \\"{k}\\"}}"}}',
        k,
    )
    return cases


def structured(r: R) -> list[Case]:
    """Launch commands, environments and URLs: masked by construction."""
    cases: list[Case] = []

    def add(shape: str, path: str, text: str, *secrets: str) -> None:
        cases.append({"shape": shape, "path": path, "text": text, "secrets": list(secrets)})

    def word(n: int = 10) -> str:
        return r(string.ascii_lowercase, n)

    for flag in (
        "--license",
        "--custom-auth",
        "--db",
        "--webhook",
        "--admin-api-key",
        "--ssl-keyfile-password",
        "--hf-token",
        "--api-key",
        "--passphrase-file-contents",
        "--x",
    ):
        v = word(12)
        add(
            f"vLLM flag {flag} outside the allow-list",
            "command",
            f"vllm serve meta-llama/Llama-3.1-8B --port 8000 {flag} {v}",
            v,
        )
    for flag in ("-hft", "--api-key", "--ssl-key-file", "--my-plugin-arg"):
        v = word(12)
        add(
            f"llama-server flag {flag}",
            "command",
            f"llama-server -m /m/g.gguf --port 8080 {flag}={v} -ngl 99",
            v,
        )
    v = word(12)
    add(
        "SGLang --admin-api-key",
        "command",
        f"python3 -m sglang.launch_server --model-path m --admin-api-key {v} --tp 2",
        v,
    )
    v = word(12)
    add(
        "trtllm-serve unknown option",
        "command",
        f"trtllm-serve /m --backend pytorch --weird_opt {v}",
        v,
    )
    v = word(12)
    add(
        "docker run env of a secret",
        "command",
        f"docker run --gpus all -e MY_SETTING={v} vllm/vllm-openai:v0.12.0 --model m",
        v,
    )
    v = word(12)
    add(
        "docker run --env=NAME=VALUE",
        "command",
        f"docker run --env=ANYTHING={v} vllm/vllm-openai:latest --model m",
        v,
    )
    v = word(12)
    add(
        "env assignment before the engine",
        "command",
        f"FOO={v} CUDA_VISIBLE_DEVICES=0 vllm serve m",
        v,
    )
    v = word(12)
    add("wrapper script option", "command", f"./serve.sh --auth-thing {v} --port 8000", v)
    v = word(12)
    add("mysql before the launch", "command", f"mysql -p{v} -e 'select 1' && vllm serve m", v)
    v = word(12)
    add("sshpass before the launch", "command", f"sshpass -p {v} ssh node 'vllm serve m'", v)
    v = word(12)
    add("bash -c with a secret option", "command", f"bash -c 'vllm serve m --api-key {v}'", v)
    v = word(12)
    add(
        "allowed flag holding a URL with a password",
        "command",
        f"vllm serve m --otlp-traces-endpoint https://u:{v}@otel:4318",
        v,
    )
    v = word(12)
    add("comment after the command", "command", f"vllm serve m  # password={v}", v)
    for name in ("MY_SETTING", "FOO", "DB", "X", "WEBHOOK"):
        v = word(14)
        add(
            f"environment {name} not on the list",
            "env",
            json.dumps({name: v, "CUDA_VISIBLE_DEVICES": "0"}),
            v,
        )
    v = word(12)
    add("base URL with userinfo", "url", f"http://admin:{v}@10.0.0.7:8000/v1", v)
    v = word(12)
    add("base URL with a query value", "url", f"https://gw.example.com/v1?tenant={v}", v)
    v = word(12)
    add("base URL with a fragment", "url", f"https://gw.example.com/v1#{v}", v)
    return cases
