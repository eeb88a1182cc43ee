"""What a secret looks like, as data: token prefixes of known services, signed-URL query
parameters, and the words that make a variable, option or key name a secret's name.

The token rules follow the rule list of gitleaks (github.com/gitleaks/gitleaks,
config/gitleaks.toml, MIT licence) and the plugins of detect-secrets (github.com/Yelp/
detect-secrets, Apache-2.0): the same services and prefixes, rewritten here for Python's re,
each anchored on its prefix so that a log line is scanned once. Add a service by adding a line.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "SIGNED_PARAMS",
    "TOKENS",
    "TOKEN_RULES",
    "find_tokens",
    "is_secret_name",
    "name_strength",
]

# (service, pattern): a token that is a secret wherever it appears, by its shape alone.
TOKEN_RULES: list[tuple[str, str]] = [
    ("OpenAI, Anthropic, DeepSeek, OpenRouter", r"sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{16,}"),
    ("Hugging Face", r"hf_[A-Za-z0-9]{20,}"),
    ("Hugging Face organisation", r"api_org_[A-Za-z0-9]{30,}"),
    ("Stripe secret and restricted keys", r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("Stripe webhook secret", r"whsec_[A-Za-z0-9+/=]{24,}"),
    ("npm", r"npm_[A-Za-z0-9]{36}\b"),
    ("GitHub", r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}"),
    ("GitHub fine-grained", r"github_pat_[A-Za-z0-9_]{30,}"),
    ("GitLab", r"gl(?:pat|dt|rt|cbt|ptt|ft|imt|agent|oas|soat)-[A-Za-z0-9_-]{20,}"),
    ("GitLab runner", r"GR1348941[A-Za-z0-9_-]{20,}"),
    ("Slack token", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    ("Slack app token", r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+"),
    ("Slack config token", r"xoxe\.xox[bp]-\d-[A-Za-z0-9]{100,}"),
    ("Slack webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}"),
    ("Discord webhook", r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{40,}"),
    ("Discord bot token", r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"),
    ("Microsoft Teams webhook", r"webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]{20,}"),
    ("Groq", r"gsk_[A-Za-z0-9]{40,}"),
    ("Docker Hub", r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}"),
    ("PyPI", r"pypi-AgE[A-Za-z0-9_-]{40,}"),
    ("Databricks", r"dapi[a-f0-9]{32}(?:-\d)?\b"),
    ("Replicate", r"r8_[A-Za-z0-9]{30,}"),
    ("SendGrid", r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}"),
    ("Google API key", r"AIza[0-9A-Za-z_-]{35}"),
    ("Google OAuth access token", r"ya29\.[0-9A-Za-z_-]{20,}"),
    ("Google OAuth refresh token", r"1//0[0-9A-Za-z_-]{30,}"),
    ("Google OAuth client secret", r"GOCSPX-[A-Za-z0-9_-]{20,}"),
    (
        "AWS access key id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA)[0-9A-Z]{16}\b",
    ),
    ("Azure AD client secret", r"[A-Za-z0-9_~.]{3}\d[Q]~[A-Za-z0-9_~.-]{31,34}"),
    ("NVIDIA", r"nvapi-[A-Za-z0-9_-]{20,}"),
    ("JSON Web Token", r"ey[A-Za-z0-9_-]{10,}\.ey[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"),
    ("Shopify", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("Twilio", r"SK[0-9a-f]{32}\b"),
    ("Mailgun", r"key-[0-9a-zA-Z]{32}\b"),
    ("Mailchimp", r"[0-9a-f]{32}-us\d{1,2}\b"),
    ("Telegram bot", r"\d{8,10}:AA[0-9A-Za-z_-]{33}"),
    ("DigitalOcean", r"do[opr]_v1_[a-f0-9]{64}"),
    ("Linear", r"lin_api_[A-Za-z0-9]{40}"),
    ("Notion", r"(?:secret_[A-Za-z0-9]{43}|ntn_[0-9]{11}[A-Za-z0-9]{30,})"),
    ("Postman", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    ("Pulumi", r"pul-[a-f0-9]{40}"),
    ("Terraform Cloud", r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),
    ("HashiCorp Vault", r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    ("Doppler", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    ("Sentry", r"sntry[su]_[A-Za-z0-9+/=_-]{40,}"),
    ("Grafana", r"(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})"),
    ("New Relic", r"NRAK-[A-Z0-9]{27}"),
    ("Square", r"(?:sq0atp|sq0csp)-[0-9A-Za-z_-]{22,60}"),
    ("Dropbox", r"sl\.[A-Za-z0-9_-]{130,}"),
    ("Figma", r"figd_[A-Za-z0-9_-]{40}"),
    ("age", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("Perplexity", r"pplx-[A-Za-z0-9]{40,}"),
    ("xAI", r"xai-[A-Za-z0-9]{60,}"),
    ("Fireworks", r"fw_[A-Za-z0-9]{20,}"),
    ("Together", r"tgp_v1_[A-Za-z0-9_-]{40,}"),
    ("LangSmith", r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"),
    ("Pinecone", r"pcsk_[A-Za-z0-9_]{40,}"),
    ("Supabase", r"sbp_[a-f0-9]{40}"),
    ("Netlify", r"nfp_[A-Za-z0-9]{36}"),
    ("Fly.io", r"fo1_[A-Za-z0-9_-]{40,}"),
    ("Atlassian", r"ATATT3[A-Za-z0-9_=-]{150,}"),
    ("Bitbucket", r"ATBB[A-Za-z0-9_=.-]{32,}"),
    ("JFrog", r"AKCp[A-Za-z0-9]{69}"),
    ("Alibaba Cloud", r"LTAI[A-Za-z0-9]{20}\b"),
    ("Tencent Cloud", r"AKID[A-Za-z0-9]{32}\b"),
    ("Yandex", r"(?:y0_[A-Za-z0-9_-]{55}|AQVN[A-Za-z0-9_-]{35,38})"),
    ("Heroku", r"HRKU-[A-Za-z0-9_-]{60}"),
    ("Anyscale", r"esecret_[A-Za-z0-9]{26,}"),
    ("Modal", r"(?:ak|as)-[A-Za-z0-9]{22}\b"),
    ("Cloudflare origin CA", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
]
TOKENS = re.compile("|".join(f"(?:{pattern})" for _, pattern in TOKEN_RULES))
# Where a token may start: the start of a run, or after a character that is no letter or
# digit. Trying the rules there alone (a match, not a search) is what makes them cheap: their
# alternation tried at every position of a line costs a millisecond a line.
_STARTS = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]")


def find_tokens(run: str) -> list[tuple[int, int]]:
    """(start, end) of every known token in `run` (a run of characters without spaces)."""
    found: list[tuple[int, int]] = []
    end = 0
    for start in _STARTS.finditer(run):
        if start.start() < end:
            continue
        match = TOKENS.match(run, start.start())
        if match is not None:
            found.append(match.span())
            end = match.end()
    return found


# Query parameters that carry a signature or a credential (S3/GCS presigned URLs, Azure SAS,
# CloudFront, OAuth), or a key: `?X-Amz-Signature=…&sig=…`; the value is masked, the name kept.
SIGNED_PARAMS = (
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "x-goog-signature",
    "x-goog-credential",
    "signature",
    "sig",
    "googleaccessid",
    "awsaccesskeyid",
    "key-pair-id",
    "policy",
    "access_token",
    "refresh_token",
    "id_token",
    "token",
    "api_key",
    "apikey",
    "key",
    "secret",
    "client_secret",
    "password",
    "passwd",
    "pwd",
    "auth",
)

# Name parts that make a name a secret's: always (a password) or most of the time (a key,
# which is sometimes a word in prose: `token: CUDA graphs`).
_STRONG = {
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "PASSPHRASE",
    "SECRET",
    "SECRETS",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "PRIVATEKEY",
    "PRIVKEY",
    "PASSCODE",
    "OTP",
    "TOTP",
    "HOTP",
    "SALT",
    "HMAC",
    "PIN",
}
# Parts that are a secret's only beside one of these (ACCESS_CODE, OTP_SEED), a word otherwise
# (status_code, random_seed).
_STRONG_WITH = {
    "CODE": {
        "ACCESS",
        "AUTH",
        "AUTHORIZATION",
        "VERIFICATION",
        "RECOVERY",
        "BACKUP",
        "PAIRING",
        "INVITE",
        "ACTIVATION",
        "LICENSE",
        "SECURITY",
        "MFA",
        "SMS",
        "LOGIN",
        "UNLOCK",
    },
    "SEED": {"OTP", "TOTP", "HOTP", "MFA", "TWOFA", "MNEMONIC", "WALLET", "RECOVERY"},
}
# A PIN beside these is the verb (pin_memory, PIN_THREADS).
_PIN_WORDS = {"MEMORY", "MEM", "THREADS", "THREAD", "CPU", "CPUS", "VERSION", "NUMA", "CORES"}
_WEAK = {
    "KEY",
    "APIKEY",
    "ACCESSKEY",
    "SECRETKEY",
    "MASTERKEY",
    "ACCOUNTKEY",
    "SIGNINGKEY",
    "TOKEN",
    "AUTH",
    "AUTHORIZATION",
    "COOKIE",
    "SIG",
    "SIGNATURE",
    "SAS",
    "TOK",
}
# Parts beside TOKEN or KEY that make the name something else: bos_token, token_ids,
# kv_cache_key, sort_key, max_token_len.
_HARMLESS_BEFORE = {
    "BOS",
    "EOS",
    "PAD",
    "UNK",
    "SEP",
    "CLS",
    "NEXT",
    "STOP",
    "SPECIAL",
    "MASK",
    "START",
    "END",
    "FIRST",
    "LAST",
    "NUM",
    "MAX",
    "MIN",
    "DRAFT",
    "OUTPUT",
    "INPUT",
    "PROMPT",
    "IMAGE",
    "AUDIO",
    "VIDEO",
    "SORT",
    "CACHE",
    "KV",
    "HASH",
    "PRIMARY",
    "FOREIGN",
    "PARTITION",
    "ROUTING",
    "DICT",
    "MAP",
    "LOOKUP",
    "GROUP",
    "PUBLIC",
    "PUB",
    "BY",
    "PER",
}
_HARMLESS_AFTER = {
    "ID",
    "IDS",
    "COUNT",
    "COUNTS",
    "LEN",
    "LENGTH",
    "SOURCE",
    "TYPE",
    "TYPES",
    "SIZE",
    "LIMIT",
    "BUDGET",
    "NUM",
    "INDEX",
    "POS",
    "THROUGH",
    "FILE",
    "PATH",
    "NAME",
    "ERROR",
    # quantities (SGLang's tbo_token_distribution_threshold=0.48, *_token_usage, …)
    "DISTRIBUTION",
    "THRESHOLD",
    "RATIO",
    "RATE",
    "USAGE",
    "BUCKETS",
}
_NOT_A_NAME = {"PWD", "OLDPWD"}  # the shell's working folders
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@functools.lru_cache(maxsize=4096)
def name_strength(name: str) -> str | None:
    """'strong' when a variable, option or key name says its value is a secret always
    (DB_PASS, MYSQL_PWD, SSH_PASSPHRASE, client_secret), 'weak' when usually (api_key,
    HF_TOKEN, Authorization), None when not (max_tokens, bos_token, AUTHOR, PWD)."""
    if name.upper().lstrip("-") in _NOT_A_NAME:
        return None
    parts = [p.upper() for p in _PARTS.findall(name)]
    found: str | None = None
    for i, part in enumerate(parts):
        before = parts[i - 1] if i else ""
        after = parts[i + 1] if i + 1 < len(parts) else ""
        if part == "PIN" and (after in _PIN_WORDS or before in _PIN_WORDS):
            continue
        if (part in _STRONG or part.endswith(("PASSWORD", "SECRET"))) and after != "THROUGH":
            return "strong"
        if before in _STRONG_WITH.get(part, ()):
            return "strong"
        weak = part in _WEAK or part.endswith(("TOKEN", "APIKEY"))
        # a key's id names a key (private_key_id, aws_access_key_id); a token's is a number
        harmless_after = after in _HARMLESS_AFTER and not (after == "ID" and "KEY" in part)
        if weak and before not in _HARMLESS_BEFORE and not harmless_after:
            found = "weak"
    return found


def is_secret_name(name: str) -> bool:
    """True when a variable, option or key name says its value is a secret."""
    return name_strength(name) is not None
