"""detect-secrets (Yelp, Apache-2.0, github.com/Yelp/detect-secrets) where one of its
detectors covers a kind: its regex detectors for cloud and service credentials (AWS, Azure
storage, Artifactory, Cloudant, IBM Cloud and COS, Mailchimp, npm, OpenAI, PyPI, SendGrid,
Slack, Softlayer, Square, Stripe, Telegram, Twilio, Discord, GitHub, GitLab), JSON web tokens,
basic-auth URLs, quoted keyword assignments and quoted high-entropy strings. Each finds
secret values in a line; every occurrence of a value found is masked.

Left out: its private-key detector (it finds the armour, not the key: the PEM rules mask the
body) and its public-IP detector (an address is no secret). The library loads on first use
(it takes 0.15 s to import)."""

from __future__ import annotations

import functools
import re
from typing import Any

from diagnostic.bundle.textrules import MASK

__all__ = ["DETECTORS", "detected", "mask_detected"]

DETECTORS = (
    "aws.AWSKeyDetector",
    "azure_storage_key.AzureStorageKeyDetector",
    "artifactory.ArtifactoryDetector",
    "basic_auth.BasicAuthDetector",
    "cloudant.CloudantDetector",
    "discord.DiscordBotTokenDetector",
    "github_token.GitHubTokenDetector",
    "gitlab_token.GitLabTokenDetector",
    "ibm_cloud_iam.IbmCloudIamDetector",
    "ibm_cos_hmac.IbmCosHmacDetector",
    "jwt.JwtTokenDetector",
    "mailchimp.MailchimpDetector",
    "npm.NpmDetector",
    "openai.OpenAIDetector",
    "pypi_token.PypiTokenDetector",
    "sendgrid.SendGridDetector",
    "slack.SlackDetector",
    "softlayer.SoftlayerDetector",
    "square_oauth.SquareOAuthDetector",
    "stripe.StripeDetector",
    "telegram_token.TelegramBotTokenDetector",
    "twilio.TwilioKeyDetector",
    "high_entropy_strings.Base64HighEntropyString",
    "high_entropy_strings.HexHighEntropyString",
)
_SHORTEST = 8  # a value found shorter than this is masked only where it was found as a word
# Characters a line must hold for any detector to find something: a run of 8 token characters.
_WORTH = re.compile(r"[A-Za-z0-9_+/=-]{8}")


@functools.cache
def _filters() -> tuple[Any, ...]:
    """detect-secrets' own heuristics of what is no secret: a UUID, a sequence (abcdef…,
    0123…), a template (${VAR}, <key>), an indirect reference, text with no letter or digit."""
    from detect_secrets.filters import heuristic as h

    return (
        h.is_potential_uuid,
        h.is_sequential_string,
        h.is_templated_secret,
        h.is_prefixed_with_dollar_sign,
        h.is_not_alphanumeric_string,
    )


# An identifier's or a digest's key right before a value: "id": "…", request_id=…, traceId: …,
# "head_sha256": "…", checksum=…, commit: …
_ID_KEY = re.compile(
    r"(?i)(?:\b|_)(?:id|sha\d*|hash|digest|checksum|md5|commit|etag|fingerprint)[\"']?"
    r"[ \t]*[:=][ \t]*[\"']?$"
)


def _an_id(value: str, line: str) -> bool:
    """Whether the value stands right after an identifier's or a digest's key (a
    completion's "id":"chatcmpl-…" is random, a file's "sha256": "…" is a digest; neither is
    a secret): detect-secrets' own heuristic, which reads only `id` at a line's start and
    `_id`, widened to JSON and camelCase keys and to digests."""
    at = line.find(value)
    return at > 0 and _ID_KEY.search(line, max(0, at - 40), at) is not None


@functools.cache
def _plugins() -> tuple[Any, ...]:
    import importlib

    found = []
    for dotted in DETECTORS:
        module, name = dotted.rsplit(".", 1)
        cls = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        found.append(cls())
    return tuple(found)


def detected(text: str) -> list[str]:
    """The secret values detect-secrets' detectors find in `text` (one line), longest first."""
    if _WORTH.search(text) is None:
        return []
    values: set[str] = set()
    for plugin in _plugins():
        limit = getattr(plugin, "entropy_limit", None)
        for value in plugin.analyze_string(text):
            if not isinstance(value, str) or len(value) < _SHORTEST or MASK in value:
                continue
            if limit is not None and plugin.calculate_shannon_entropy(value) <= limit:
                continue  # the high-entropy detectors yield every quoted string
            if any(rule(value) for rule in _filters()):
                continue
            if limit is not None and _an_id(value, text):
                continue  # a random identifier or a digest, quoted after its key
            values.add(value)
    return sorted(values, key=lambda v: (-len(v), v))


def mask_detected(text: str) -> str:
    """`text` with every value detect-secrets finds masked."""
    for value in detected(text):
        text = text.replace(value, MASK)
    return text
