# ruff: noqa: E501  (the generated shapes read best one to a line)
"""Redaction measured: recall on a corpus of secret shapes, false positives on real text.

    python benchmarks/redaction.py            # recall and false-positive rate, as a table
    python benchmarks/redaction.py --write    # regenerate tests/data/secrets/shapes.jsonl
    python benchmarks/redaction.py --show-fp  # every ordinary line that redaction changed

The corpus (tests/data/secrets/shapes.jsonl plus the older corpus.jsonl) holds fake secrets
generated here from a fixed seed, each in the shape a service really issues (prefix, alphabet,
length: gitleaks' rules and the services' own documentation) and in the context a server or a
launch prints it (an environment dump, a command line, a URL, a JSON config). A shape is
recalled when none of its secret strings survives `redact_file_text`, the redaction of every
log and file a bundle stores. The false-positive rate is over the lines of real text that hold
no secret: the recorded engine logs of tests/data/real-runs and tests/data/logs, the samples' logs,
the samples' generated prose (the model outputs in requests.jsonl) and the project's own prose
(README.md, docs/*.md); a line counts as a false positive when redaction changed it at all.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import string
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from diagnostic.bundle.redact import (  # noqa: E402
    MASK,
    redact_command,
    redact_env,
    redact_file_text,
    redact_url,
)

sys.path.insert(0, str(ROOT / "benchmarks"))
import redaction_shapes  # noqa: E402

SHAPES = ROOT / "tests" / "data" / "secrets" / "shapes.jsonl"
STRUCTURED = ROOT / "tests" / "data" / "secrets" / "structured.jsonl"
OLD = ROOT / "tests" / "data" / "secrets" / "corpus.jsonl"
ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def generate(seed: int = 34) -> list[dict[str, object]]:
    """Every shape of the corpus: (shape, text, secrets that must not survive)."""
    rng = random.Random(seed)
    r = lambda alphabet, n: _r(rng, alphabet, n)  # noqa: E731
    cases: list[dict[str, object]] = []

    def add(shape: str, text: str, *secrets: str) -> None:
        cases.append({"shape": shape, "text": text, "secrets": list(secrets)})

    # -- signed URLs -------------------------------------------------------------------
    sig, cred = r(HEX, 64), "AKIA" + r(string.ascii_uppercase + string.digits, 16)
    add(
        "S3 presigned URL (SigV4)",
        f"INFO loading weights from https://bucket.s3.us-east-1.amazonaws.com/m.safetensors?"
        f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={cred}%2F20260101%2Fus-east-1%2Fs3"
        f"%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
        f"&X-Amz-Signature={sig}",
        sig,
        cred,
    )
    tok = r(B64, 300)
    add(
        "S3 presigned URL with session token",
        f"GET https://b.s3.amazonaws.com/k?X-Amz-Security-Token={tok}&X-Amz-Signature={sig[:40]}x",
        tok,
        sig[:40],
    )
    old_sig = r(B64, 27) + "%3D"
    add(
        "S3 presigned URL (SigV2)",
        f"url=https://b.s3.amazonaws.com/o?AWSAccessKeyId={cred}&Expires=1767225600&Signature={old_sig}",
        old_sig,
        cred,
    )
    gsig = r(HEX, 512)
    add(
        "GCS signed URL (V4)",
        "downloading https://storage.googleapis.com/bkt/model.gguf?X-Goog-Algorithm=GOOG4-RSA-SHA256"
        "&X-Goog-Credential=svc%40proj.iam.gserviceaccount.com%2F20260101%2Fauto%2Fstorage%2Fgoog4_"
        f"request&X-Goog-Date=20260101T000000Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host"
        f"&X-Goog-Signature={gsig}",
        gsig,
    )
    gsig2 = r(B64, 340) + "%3D%3D"
    add(
        "GCS signed URL (V2)",
        f"https://storage.googleapis.com/bkt/o?GoogleAccessId=svc@p.iam.gserviceaccount.com"
        f"&Expires=1767225600&Signature={gsig2}",
        gsig2,
    )
    sas = r(B64, 43) + "%3D"
    add(
        "Azure SAS URL",
        "blob https://acct.blob.core.windows.net/c/model.bin?sv=2022-11-02&ss=b&srt=sco&sp=rl"
        f"&se=2026-12-31T00:00:00Z&st=2026-01-01T00:00:00Z&spr=https&sig={sas}",
        sas,
    )
    sas2 = r(B64, 43) + "%3D"
    add(
        "Azure SAS connection string",
        f"AZURE_STORAGE_CONNECTION_STRING=BlobEndpoint=https://a.blob.core.windows.net/;"
        f"SharedAccessSignature=sv=2022-11-02&ss=b&sig={sas2}",
        sas2,
    )
    akey = r(B64, 86) + "=="
    add(
        "Azure storage account key",
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={akey};EndpointSuffix=core.windows.net",
        akey,
    )
    cf = r(URLSAFE, 120)
    add(
        "CloudFront signed URL",
        f"https://d111.cloudfront.net/m.bin?Expires=1767225600&Signature={cf}&Key-Pair-Id=K2JCJMDEHXQW5F",
        cf,
    )
    # -- GCP service accounts ----------------------------------------------------------
    pem_body = "\\n".join(r(B64, 64) for _ in range(4))
    kid = r(HEX, 40)
    sa = {
        "type": "service_account",
        "project_id": "proj-123",
        "private_key_id": kid,
        "private_key": f"-----BEGIN PRIVATE KEY-----\\n{pem_body}\\n-----END PRIVATE KEY-----\\n",
        "client_email": "svc@proj-123.iam.gserviceaccount.com",
        "client_id": "1" + r(string.digits, 20),
    }
    sa_text = json.dumps(sa).replace("\\\\n", "\\n")
    add("GCP service-account JSON on one line", f"GOOGLE_CREDENTIALS={sa_text}", kid, pem_body[:64])
    add(
        "GCP service-account JSON pretty-printed",
        json.dumps(sa, indent=2).replace("\\\\n", "\\n"),
        kid,
        pem_body[:64],
    )
    raw_sa = json.dumps({**sa, "private_key": sa["private_key"].replace("\\n", "\n")}, indent=2)
    b64_sa = base64.b64encode(raw_sa.encode()).decode()
    add(
        "GCP service-account JSON in base64",
        f"GOOGLE_APPLICATION_CREDENTIALS_JSON={b64_sa}",
        b64_sa,
    )
    add(
        "GCP service-account JSON in base64, bare",
        f"decoded credentials from {b64_sa} (base64)",
        b64_sa,
    )
    wrapped = "\n".join(b64_sa[i : i + 76] for i in range(0, len(b64_sa), 76))
    add(
        "GCP service-account JSON in base64 wrapped at 76 columns",
        f"credentials:\n{wrapped}\nend",
        *[b64_sa[i : i + 76] for i in range(76, len(b64_sa) - 76, 76)],
    )
    # -- Google, OAuth, JWT ------------------------------------------------------------
    ya = "ya29.a0" + r(URLSAFE, 150)
    add("Google OAuth access token", f"Authorization header set from gcloud: {ya}", ya)
    add("Google OAuth token in JSON", json.dumps({"access_token": ya, "expires_in": 3599}), ya)
    rt = "1//0" + r(URLSAFE, 100)
    add("Google OAuth refresh token", f"refresh with {rt}", rt)
    gcs = "GOCSPX-" + r(URLSAFE, 28)
    add("Google OAuth client secret", f'"client_secret": "{gcs}"', gcs)
    aiza = "AIza" + r(URLSAFE, 35)
    add(
        "Google API key in a URL",
        f"https://generativelanguage.googleapis.com/v1/m?key={aiza}",
        aiza,
    )

    def jwt() -> str:
        head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
        body = base64.urlsafe_b64encode(
            json.dumps({"sub": r(LOWER_ALNUM, 12), "exp": 1767225600}).encode()
        )
        return f"{head}.{body.decode().rstrip('=')}.{r(URLSAFE, 43)}"

    j = jwt()
    add("JWT bare", f"session {j} accepted", j)
    j = jwt()
    add("JWT in a cookie", f"Cookie: session={j}; theme=dark", j)
    j = jwt()
    add("JWT as id_token query parameter", f"/callback?id_token={j}&state=x", j)
    unsigned = jwt().rsplit(".", 1)[0] + "."
    add("JWT unsigned (alg none)", f"token={unsigned}", unsigned[:-1])
    # -- chat services and webhooks ----------------------------------------------------
    slack_hook = f"T{r(string.ascii_uppercase + string.digits, 8)}/B{r(string.ascii_uppercase + string.digits, 10)}/{r(ALNUM, 24)}"
    add(
        "Slack webhook",
        f"notify https://hooks.slack.com/services/{slack_hook} on failure",
        slack_hook.rsplit("/", 1)[1],
    )
    for prefix in ("xoxb", "xoxp", "xoxa", "xoxr", "xoxs"):
        t = f"{prefix}-{r(string.digits, 12)}-{r(string.digits, 13)}-{r(ALNUM, 24)}"
        add(f"Slack token {prefix}", f"SLACK={t}", t)
    xapp = f"xapp-1-A{r(string.ascii_uppercase + string.digits, 10)}-{r(string.digits, 13)}-{r(HEX, 64)}"
    add("Slack app-level token", f"socket mode with {xapp}", xapp)
    dhook = f"{r(string.digits, 19)}/{r(URLSAFE, 68)}"
    add(
        "Discord webhook",
        f"posting to https://discord.com/api/webhooks/{dhook}",
        dhook.split("/")[1],
    )
    add(
        "Discord webhook (discordapp.com)",
        f"https://discordapp.com/api/webhooks/{dhook}",
        dhook.split("/")[1],
    )
    dbot = f"M{r(URLSAFE, 25)}.{r(URLSAFE, 6)}.{r(URLSAFE, 38)}"
    add("Discord bot token", f"bot login {dbot}", dbot)
    teams = f"{r(HEX, 8)}-{r(HEX, 4)}@{r(HEX, 8)}/IncomingWebhook/{r(HEX, 32)}/{r(HEX, 8)}"
    add(
        "Microsoft Teams webhook", f"https://corp.webhook.office.com/webhookb2/{teams}", teams[-41:]
    )
    tg = f"{r(string.digits, 10)}:AA{r(URLSAFE, 33)}"
    add("Telegram bot token", f"TELEGRAM_BOT={tg}", tg)
    # -- AI and developer services -----------------------------------------------------
    prefixed = [
        ("Groq", "gsk_", ALNUM, 52),
        ("Docker Hub PAT", "dckr_pat_", URLSAFE, 27),
        ("PyPI token", "pypi-AgEIcHlwaS5vcmc", URLSAFE, 70),
        ("Databricks", "dapi", HEX, 32),
        ("Replicate", "r8_", ALNUM, 37),
        ("Stripe webhook secret", "whsec_", ALNUM, 32),
        ("Stripe live secret key", "sk_live_", ALNUM, 24),
        ("Stripe restricted key", "rk_live_", ALNUM, 24),
        ("OpenAI project key", "sk-proj-", URLSAFE, 48),
        ("OpenAI service-account key", "sk-svcacct-", URLSAFE, 48),
        ("Anthropic key", "sk-ant-api03-", URLSAFE, 93),
        ("OpenRouter key", "sk-or-v1-", HEX, 64),
        ("DeepSeek key", "sk-", HEX, 32),
        ("Hugging Face token", "hf_", ALNUM, 34),
        ("GitHub PAT", "ghp_", ALNUM, 36),
        ("GitHub fine-grained PAT", "github_pat_", ALNUM + "_", 82),
        ("GitLab PAT", "glpat-", URLSAFE, 20),
        ("GitLab deploy token", "gldt-", URLSAFE, 20),
        ("npm token", "npm_", ALNUM, 36),
        ("NVIDIA NGC key", "nvapi-", URLSAFE, 64),
        ("Shopify access token", "shpat_", HEX, 32),
        ("Twilio API key", "SK", HEX, 32),
        ("Mailgun key", "key-", LOWER_ALNUM, 32),
        ("DigitalOcean token", "dop_v1_", HEX, 64),
        ("Linear key", "lin_api_", ALNUM, 40),
        ("Notion integration secret", "ntn_", string.digits, 11),
        ("Postman key", "PMAK-", HEX, 24),
        ("Pulumi token", "pul-", HEX, 40),
        ("Vault token", "hvs.", URLSAFE, 90),
        ("Doppler token", "dp.st.", ALNUM, 43),
        ("Sentry user token", "sntryu_", HEX, 64),
        ("Grafana service account", "glsa_", ALNUM, 32),
        ("New Relic key", "NRAK-", string.ascii_uppercase + string.digits, 27),
        ("Square token", "sq0atp-", URLSAFE, 22),
        ("Figma token", "figd_", URLSAFE, 40),
        ("Perplexity key", "pplx-", ALNUM, 48),
        ("xAI key", "xai-", ALNUM, 80),
        ("Fireworks key", "fw_", ALNUM, 24),
        ("Together key", "tgp_v1_", URLSAFE, 43),
        ("Pinecone key", "pcsk_", ALNUM + "_", 70),
        ("Supabase token", "sbp_", HEX, 40),
        ("Netlify token", "nfp_", ALNUM, 36),
        ("Alibaba AccessKey id", "LTAI", ALNUM, 20),
        ("Tencent SecretId", "AKID", ALNUM, 32),
        ("Heroku token", "HRKU-", URLSAFE, 60),
        ("Atlassian API token", "ATATT3", URLSAFE, 186),
        ("AWS session key id", "ASIA", string.ascii_uppercase + string.digits, 16),
    ]
    contexts = [
        "export {name}_KEY={t}",
        "Using credentials {t} for the hub",
        '{{"auth": {{"value": "{t}"}}}}',
        "python -m app --token-file /dev/null # {t}",
    ]
    for i, (service, prefix, alphabet, n) in enumerate(prefixed):
        token = prefix + r(alphabet, n)
        if service == "Notion integration secret":
            token += r(ALNUM, 35)
        if service == "Postman key":
            token += "-" + r(HEX, 34)
        if service == "Grafana service account":
            token += "_" + r(HEX, 8)
        name = service.split()[0].upper().replace(".", "")
        add(service, contexts[i % len(contexts)].format(name=name, t=token), token)

    # -- passwords in variables and options ------------------------------------------------
    def pw() -> str:
        return r(ALNUM, 10) + rng.choice("!#%^*_-") + r(string.digits, 2)

    for var in (
        "DB_PASS",
        "MYSQL_PWD",
        "SSH_PASSPHRASE",
        "PGPASSWORD",
        "REDIS_PASS",
        "POSTGRES_PASSWORD",
        "MONGO_INITDB_ROOT_PASSWORD",
        "KEYSTORE_PASS",
        "SMTP_PASSWD",
        "LDAP_BIND_CREDENTIALS",
        "CLIENT_SECRET",
        "WANDB_API_KEY",
        "COHERE_API_KEY",
        "MISTRAL_API_KEY",
    ):
        p = pw()
        add(f"{var} in an environment dump", f"env: HOME=/root {var}={p} PATH=/usr/bin", p)
    for option in ("--db-pass", "--password", "--passphrase", "--redis-password", "--secret"):
        p = pw()
        add(f"{option} VALUE", f"server {option} {p} --port 8000", p)
        p = pw()
        add(f"{option}=VALUE", f"server {option}={p} --port 8000", p)
    p = pw()
    add("yaml password", f"database:\n  user: app\n  password: {p}\n  host: db", p)
    p = pw()
    add("ini password", f"[db]\nuser = app\npassword = {p}\n", p)
    p = r(ALNUM, 12)
    add("password in JSON with spaces", f'{{"password" : "{p}", "user": "x"}}', p)
    p = pw()
    add("password with a word before it", f"Password for root: {p}", p)
    # -- curl, forms, URLs ---------------------------------------------------------------------
    p = pw()
    add("curl -u without a space", f"curl -ualice:{p} https://api.internal/v1", p)
    p = pw()
    add("curl --user=", f"curl --user=alice:{p} https://api.internal/v1", p)
    p = pw()
    add("curl -u with a space", f"curl -u alice:{p} https://h", p)
    p = pw()
    add("form body", f"POST /login body: username=alice&password={p}&remember=1", p)
    p = pw()
    add("form body, password first", f"-d 'password={p}&user=alice'", p)
    p = pw()
    add(
        "form body with client_secret",
        f"grant_type=client_credentials&client_id=abc&client_secret={p}",
        p,
    )
    p = pw()
    add("database URL", f"DATABASE_URL=postgresql://app:{p}@db.internal:5432/prod", p)
    p = pw()
    add("amqp URL", f"broker amqp://guest:{p}@rabbit:5672//", p)
    # -- keys split over two lines, base64 -------------------------------------------------
    key = "sk-proj-" + r(URLSAFE, 48)
    add(
        "key split over two lines (wrapped)",
        f"OPENAI_API_KEY={key[:30]}\n{key[30:]}\nnext",
        key[:30],
        key[30:],
    )
    key = "hf_" + r(ALNUM, 34)
    add(
        "key split mid-prefix",
        f"token printed as hf_{key[3:9]}\n{key[9:]} by the launcher",
        key[9:],
    )
    key = r(ALNUM, 40)
    add(
        "secret option value on the next line",
        f"vllm serve m --api-key \\\n  {key} --port 8000",
        key,
    )
    key = "ghp_" + r(ALNUM, 36)
    enc = base64.b64encode(key.encode()).decode()
    add("GitHub token base64-encoded", f"GIT_AUTH_B64={enc}", enc)
    key = "sk-ant-api03-" + r(URLSAFE, 60)
    enc = base64.b64encode(f"ANTHROPIC_API_KEY={key}\n".encode()).decode()
    add("env file base64-encoded", f"secret data: {enc}", enc)
    p = pw()
    enc = base64.b64encode(f'{{"user":"a","password":"{p}"}}'.encode()).decode()
    add("JSON with a password, base64", f"payload {enc}", enc)
    enc = base64.b64encode(f"alice:{pw()}".encode()).decode()
    add("basic auth in a config", f'"auth": "{enc}"', enc)
    enc = base64.urlsafe_b64encode(("hf_" + r(ALNUM, 34)).encode()).decode().rstrip("=")
    add("token base64url without padding", f"t={enc}", enc)
    # -- headers and misc --------------------------------------------------------------
    k = r(ALNUM, 32)
    add("x-goog-api-key header", f"x-goog-api-key: {k}", k)
    k = r(ALNUM, 40)
    add("api-key header (Azure OpenAI)", f"api-key: {k}", k)
    k = r(HEX, 40)
    add("Cookie header", f"Cookie: sessionid={k}; csrftoken={r(ALNUM, 32)}", k)
    k = r(ALNUM, 44)
    add("token after the word token", f"Logged in with token {k}", k)
    k = "AGE-SECRET-KEY-1" + r("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
    add("age secret key", f"key: {k}", k)
    cases += redaction_shapes.free_text(r)
    return cases


def generate_structured(seed: int = 46) -> list[dict[str, object]]:
    """The launch commands, environments and URLs redacted by construction."""
    rng = random.Random(seed)
    return redaction_shapes.structured(lambda alphabet, n: _r(rng, alphabet, n))


def load_corpus() -> list[dict[str, object]]:
    """The corpus: shapes.jsonl, the older corpus.jsonl (one secret each) and the launch
    commands, environments and URLs of structured.jsonl."""
    cases = [json.loads(line) for line in SHAPES.read_text().splitlines()]
    for line in OLD.read_text().splitlines():
        old = json.loads(line)
        cases.append({"shape": old["shape"], "text": old["text"], "secrets": [old["secret"]]})
    if STRUCTURED.is_file():
        cases += [json.loads(line) for line in STRUCTURED.read_text().splitlines()]
    return cases


def redacted(case: dict[str, object]) -> str:
    """The case's text as the bundle stores it: by the path its structure takes (a command,
    an environment, a URL) or as free text."""
    text, path = str(case["text"]), case.get("path", "text")
    if path == "command":
        return redact_command(text)
    if path == "env":
        return json.dumps(redact_env(json.loads(text)))
    if path == "url":
        return redact_url(text)
    return redact_file_text(text)


def leaked(case: dict[str, object]) -> list[str]:
    """The case's secret strings that survive redaction."""
    out = redacted(case)
    return [s for s in case["secrets"] if str(s) in out]  # type: ignore[union-attr]


def ordinary_lines() -> Iterator[tuple[str, str]]:
    """(source, line) for every line of real text that holds no secret."""
    data = ROOT / "tests" / "data"
    folders = [data / "real-runs", data / "logs", ROOT / "samples"]
    for prose in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:  # our own prose
        for line in prose.read_text(encoding="utf-8").splitlines():
            yield prose.name, line
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.suffix not in (".log", ".txt", ".jsonl", ".prom", ".md"):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if path.name == "requests.jsonl":
                for line in text.splitlines():
                    for prose_line in json.loads(line).get("text", "").splitlines():
                        yield f"{path.parent.name}/requests.jsonl", prose_line
                continue
            for line in text.splitlines():
                yield str(path.relative_to(path.parents[2])), line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="regenerate shapes.jsonl")
    parser.add_argument("--show-fp", action="store_true", help="print every false positive")
    args = parser.parse_args()
    if args.write:
        cases = generate()
        SHAPES.write_text("".join(json.dumps(c) + "\n" for c in cases))
        print(f"wrote {len(cases)} shapes to {SHAPES.relative_to(ROOT)}")
        structured = generate_structured()
        STRUCTURED.write_text("".join(json.dumps(c) + "\n" for c in structured))
        print(f"wrote {len(structured)} shapes to {STRUCTURED.relative_to(ROOT)}")
        return
    corpus = load_corpus()
    missed = [(c["shape"], leaked(c)) for c in corpus]
    missed = [(shape, left) for shape, left in missed if left]
    lines = changed = 0
    for source, line in ordinary_lines():
        if not line.strip():
            continue
        lines += 1
        out = redact_file_text(line)
        if out != line:
            changed += 1
            if args.show_fp:
                print(f"FP {source}: {line[:160]!r}\n   -> {out[:160]!r}")
    for shape, left in missed:
        print(f"missed: {shape}: {left}")
    print(
        "\n| corpus shapes | recalled | recall | ordinary lines | changed | false-positive rate |"
    )
    print("|---|---|---|---|---|---|")
    n = len(corpus)
    print(
        f"| {n} | {n - len(missed)} | {(n - len(missed)) / n:.1%} | {lines} | {changed} "
        f"| {changed / max(lines, 1):.4%} |"
    )
    assert MASK  # the mask a redacted secret shows


if __name__ == "__main__":
    main()
