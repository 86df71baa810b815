"""Throwaway certificate authorities for TLS tests: a CA, a server certificate for localhost
and 127.0.0.1, and a client certificate, written as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Any, Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _cert(subject: str, key: Any, issuer: Optional[tuple[x509.Name, Any]] = None, ca: bool = False) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = issuer or (name, key)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(obj: Any) -> bytes:
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def make_pki(directory: Path, name: str = "ca") -> dict[str, Path]:
    """{ca, server_cert, server_key, client_cert, client_key}: PEM files under `directory/name`."""
    d = directory / name
    d.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert(f"loopguard test {name}", ca_key, ca=True)
    files = {"ca": d / "ca.pem"}
    files["ca"].write_bytes(_pem(ca))
    for role in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        files[f"{role}_key"], files[f"{role}_cert"] = d / f"{role}.key", d / f"{role}.pem"
        files[f"{role}_key"].write_bytes(_pem(key))
        files[f"{role}_cert"].write_bytes(_pem(_cert(f"{role}.{name}.test", key, (ca.subject, ca_key))))
    return files
