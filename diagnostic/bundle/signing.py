"""Ed25519 signatures of a bundle's root hash (the `cryptography` library): the private key comes
from a file or an environment variable and is never stored; the report carries the signature."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from diagnostic.bundle.seal import ROOT_FORMAT
from diagnostic.errors import DiagnosticError
from diagnostic.schema.seal import RootSignature

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

__all__ = [
    "check_signature",
    "key_id",
    "openssh_public_key",
    "parse_openssh",
    "private_key",
    "public_key",
    "sign_root",
    "signed_message",
]

_KEY_HELP = (
    "give an unencrypted ed25519 private key in PEM (openssl genpkey -algorithm ed25519 -out "
    "key.pem) or OpenSSH form (ssh-keygen -t ed25519 -N '' -f key)"
)


def signed_message(root: str) -> bytes:
    """The bytes signed: the root hash with its format, so a signature means nothing else."""
    return f"{ROOT_FORMAT} {root}\n".encode("ascii")


def private_key(*, path: Path | None = None, env: str | None = None) -> Ed25519PrivateKey:
    """The signing key from a file, or from an environment variable holding the key's text."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data, where = _key_bytes(path, env)
    loaders = (serialization.load_pem_private_key, serialization.load_ssh_private_key)
    for load in loaders:
        try:
            key = load(data, password=None)
        except TypeError as exc:  # encrypted: a password is needed
            raise DiagnosticError(f"{where}: the key is encrypted ({exc}); {_KEY_HELP}") from None
        except (ValueError, UnsupportedAlgorithm):
            continue
        if not isinstance(key, Ed25519PrivateKey):
            raise DiagnosticError(f"{where}: not an ed25519 key; {_KEY_HELP}")
        return key
    raise DiagnosticError(f"{where}: not a private key diagnose can read; {_KEY_HELP}")


def public_key(path: Path) -> Ed25519PublicKey:
    """A public key from a file: PEM, or one OpenSSH line (ssh-ed25519 AAAA…)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data, where = _key_bytes(path, None)
    for load in (serialization.load_pem_public_key, serialization.load_ssh_public_key):
        try:
            key = load(data.strip())
        except (ValueError, UnsupportedAlgorithm):
            continue
        if not isinstance(key, Ed25519PublicKey):
            raise DiagnosticError(f"{where}: not an ed25519 public key")
        return key
    raise DiagnosticError(
        f"{where}: not a public key diagnose can read; give the ed25519 public key in PEM "
        "(openssl pkey -in key.pem -pubout) or OpenSSH form (key.pub)"
    )


def _key_bytes(path: Path | None, env: str | None) -> tuple[bytes, str]:
    if env is not None:
        value = os.environ.get(env)
        if not value:
            raise DiagnosticError(f"--sign-key-env {env}: the environment variable is not set")
        return value.encode("utf-8"), f"the key in ${env}"
    if path is None:
        raise DiagnosticError("give a key file or an environment variable holding the key")
    try:
        return Path(path).read_bytes(), str(path)
    except OSError as exc:
        raise DiagnosticError(f"{path}: cannot read the key ({exc.strerror or exc})") from None


def openssh_public_key(key: Ed25519PublicKey) -> str:
    """A public key in OpenSSH form (ssh-ed25519 AAAA…)."""
    from cryptography.hazmat.primitives import serialization

    raw = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return raw.decode("ascii")


def parse_openssh(text: str) -> Ed25519PublicKey | None:
    """An ed25519 public key from its OpenSSH line; None when the line is no such key."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_ssh_public_key(text.strip().encode("ascii"))
    except (ValueError, UnsupportedAlgorithm, UnicodeEncodeError):
        return None
    return key if isinstance(key, Ed25519PublicKey) else None


def key_id(openssh: str) -> str:
    """The key's fingerprint as `ssh-keygen -lf key.pub` prints it: SHA256:<base64>."""
    blob = base64.b64decode(openssh.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def sign_root(key: Ed25519PrivateKey, root: str) -> RootSignature:
    """Sign a root hash; the signature names the public key that checks it."""
    openssh = openssh_public_key(key.public_key())
    signature = base64.b64encode(key.sign(signed_message(root))).decode("ascii")
    return RootSignature(public_key=openssh, key_id=key_id(openssh), signature=signature)


def check_signature(signature: RootSignature, root: str, key: Ed25519PublicKey) -> str | None:
    """None when `signature` signs `root` with `key`; else why not, in words."""
    from cryptography.exceptions import InvalidSignature

    given = key_id(openssh_public_key(key))
    try:
        raw = base64.b64decode(signature.signature, validate=True)
        key.verify(raw, signed_message(root))
    except (InvalidSignature, ValueError):
        if given != signature.key_id:
            return (
                f"the signature does not check with the key given ({given}); the report says "
                f"it was signed with {signature.key_id}"
            )
        return f"the signature does not sign root {root} with the key given ({given})"
    return None
