"""Ed25519 signatures of a root hash (bundle/signing.py): keys in PEM or OpenSSH form, from a
file or an environment variable; a wrong key, an edited root or an unusable key said in words."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from diagnostic.bundle.signing import check_signature, private_key, public_key, sign_root
from diagnostic.errors import DiagnosticError

ROOT = "a" * 64
PEM, OPENSSH = serialization.Encoding.PEM, serialization.Encoding.OpenSSH


def _write_private(
    path: Path, key: Any, fmt: serialization.PrivateFormat, password: bytes | None = None
) -> Path:
    encryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    path.write_bytes(key.private_bytes(PEM, fmt, encryption))
    return path


def test_sign_and_check_with_pem_and_openssh_keys(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    pem = _write_private(tmp_path / "key.pem", key, serialization.PrivateFormat.PKCS8)
    ssh = _write_private(tmp_path / "key", key, serialization.PrivateFormat.OpenSSH)
    pub_pem = tmp_path / "key.pub.pem"
    pub_pem.write_bytes(
        key.public_key().public_bytes(PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    pub_ssh = tmp_path / "key.pub"
    pub_ssh.write_bytes(
        key.public_key().public_bytes(OPENSSH, serialization.PublicFormat.OpenSSH)
        + b" consultant@laptop\n"
    )
    one, two = sign_root(private_key(path=pem), ROOT), sign_root(private_key(path=ssh), ROOT)
    assert one == two  # ed25519 is deterministic; both forms are the same key
    assert one.public_key.startswith("ssh-ed25519 ") and one.key_id.startswith("SHA256:")
    for pub in (pub_pem, pub_ssh):
        assert check_signature(one, ROOT, public_key(pub)) is None
    why = check_signature(one, "b" * 64, public_key(pub_ssh))  # another root
    assert why is not None and "does not sign root bbbb" in why


def test_the_key_from_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    key = Ed25519PrivateKey.generate()
    text = key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    monkeypatch.setenv("DIAGNOSE_TEST_KEY", text.decode())
    signed = sign_root(private_key(env="DIAGNOSE_TEST_KEY"), ROOT)
    assert check_signature(signed, ROOT, key.public_key()) is None
    with pytest.raises(DiagnosticError, match=r"DIAGNOSE_UNSET_KEY: the environment variable"):
        private_key(env="DIAGNOSE_UNSET_KEY")


def test_a_wrong_key_names_both_fingerprints() -> None:
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    signed = sign_root(key, ROOT)
    why = check_signature(signed, ROOT, other.public_key())
    assert why is not None and "does not check with the key given (SHA256:" in why
    assert f"signed with {signed.key_id}" in why


def test_unusable_keys_are_refused_with_how_to_make_one(tmp_path: Path) -> None:
    ed = Ed25519PrivateKey.generate()
    cases = {
        "encrypted.pem": _write_private(
            tmp_path / "encrypted.pem", ed, serialization.PrivateFormat.PKCS8, b"pw"
        ),
        "ec.pem": _write_private(
            tmp_path / "ec.pem",
            generate_private_key(SECP256R1()),
            serialization.PrivateFormat.PKCS8,
        ),
        "junk.pem": tmp_path / "junk.pem",
    }
    cases["junk.pem"].write_text("not a key\n")
    expected = {
        "encrypted.pem": "encrypted",
        "ec.pem": "not an ed25519 key",
        "junk.pem": "not a private key",
    }
    for name, path in cases.items():
        with pytest.raises(DiagnosticError, match=expected[name]) as raised:
            private_key(path=path)
        assert "genpkey -algorithm ed25519" in str(raised.value)
    with pytest.raises(DiagnosticError, match="cannot read the key"):
        private_key(path=tmp_path / "missing.pem")
    with pytest.raises(DiagnosticError, match="not a public key"):
        public_key(cases["junk.pem"])


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
def test_the_key_id_is_the_fingerprint_ssh_keygen_prints(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    pub = tmp_path / "key.pub"
    pub.write_bytes(key.public_key().public_bytes(OPENSSH, serialization.PublicFormat.OpenSSH))
    printed = subprocess.run(
        ["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True
    )
    assert sign_root(key, ROOT).key_id == printed.stdout.split()[1]


def test_report_signs_only_the_pdf_and_refuses_a_bad_key_before_rendering(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner
    from verify_bundles import MLA

    from diagnostic.cli import main

    key = _write_private(
        tmp_path / "k.pem", Ed25519PrivateKey.generate(), serialization.PrivateFormat.PKCS8
    )
    result = CliRunner().invoke(
        main, ["report", str(MLA), "-o", str(tmp_path / "a.json"), "--sign-key", str(key)]
    )
    assert result.exit_code == 2 and "signs the PDF deliverable" in " ".join(result.output.split())
    (tmp_path / "junk.pem").write_text("junk\n")
    out = tmp_path / "r.pdf"
    result = CliRunner().invoke(
        main, ["report", str(MLA), "-o", str(out), "--sign-key", str(tmp_path / "junk.pem")]
    )
    assert result.exit_code == 2 and "not a private key" in " ".join(result.output.split())
    assert not out.exists()
