"""The testbed's PKI: one CA per testbed and a server certificate for the testbed's host
names, as PEM files. Firefox trusts the CA through its profile's NSS database; the
server (origin, OpenLiteSpeed) loads the certificate and key."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_HOST = "www.clarke.test"
VALIDITY = dt.timedelta(days=30)


@dataclass(frozen=True)
class TestbedPki:
    ca_cert: Path
    cert: Path  # the server certificate
    key: Path  # the server's private key (PKCS#8, unencrypted)


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Clarke testbed"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _san(hosts: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def issue_testbed_pki(out_dir: Path, hosts: list[str] | None = None, label: str = "") -> TestbedPki:
    """Write ca.pem, server.pem (leaf, then CA) and server.key into `out_dir`."""
    hosts = hosts or [DEFAULT_HOST]
    out_dir.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)  # tolerate clock skew
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"Clarke testbed CA {label}".strip())
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_san(hosts), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pki = TestbedPki(out_dir / "ca.pem", out_dir / "server.pem", out_dir / "server.key")
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    pki.ca_cert.write_bytes(ca_pem)
    pki.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM) + ca_pem)
    pki.key.touch(mode=0o600)
    pki.key.write_bytes(_pem_key(key))
    return pki


CERT_MARGIN = dt.timedelta(days=1)  # a certificate closer to its end than this is renewed


def ensure_testbed_pki(pki_dir: Path, host: str = DEFAULT_HOST, label: str = "") -> TestbedPki:
    """A testbed's CA and server certificate, made by the server role when it starts and
    kept (the client trusts the CA from there); made anew when missing or about to
    expire."""
    pki = TestbedPki(pki_dir / "ca.pem", pki_dir / "server.pem", pki_dir / "server.key")
    with contextlib.suppress(OSError, ValueError):
        cert = x509.load_pem_x509_certificate(pki.cert.read_bytes())
        left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
        if pki.ca_cert.is_file() and pki.key.is_file() and left > CERT_MARGIN:
            return pki
    return issue_testbed_pki(pki_dir, [host], label=label)
