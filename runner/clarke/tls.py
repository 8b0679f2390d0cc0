"""The testbed's PKI: one CA per testbed and a server certificate for the testbed's host
names, as PEM files. Firefox trusts the CA through its profile's NSS database; the
server (origin, OpenLiteSpeed) loads the certificate and key. The CA's key stays beside
them (private, as the server's key is), so that the server role can issue a certificate
per host of a recorded site from the same CA (`issue_host_certificates`), which the
client already trusts."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
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
    ca_key: Path  # the CA's private key: issues the certificates of a site's hosts

    @classmethod
    def at(cls, pki_dir: Path) -> TestbedPki:
        return cls(
            pki_dir / "ca.pem", pki_dir / "server.pem", pki_dir / "server.key", pki_dir / "ca.key"
        )


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


def _write_private(path: Path, data: bytes) -> None:
    """A private key, readable by its owner only from its first byte."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _leaf(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, names: list[str], now: dt.datetime
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A server certificate for `names` (the first is its common name), signed by `ca`."""
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(min(now + VALIDITY, ca.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_san(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return key, leaf


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
    key, leaf = _leaf(ca, ca_key, hosts, now)
    pki = TestbedPki.at(out_dir)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    _write_private(pki.ca_key, _pem_key(ca_key))
    pki.ca_cert.write_bytes(ca_pem)
    pki.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM) + ca_pem)
    _write_private(pki.key, _pem_key(key))
    return pki


CERT_MARGIN = dt.timedelta(days=1)  # a certificate closer to its end than this is renewed


def ensure_testbed_pki(pki_dir: Path, host: str = DEFAULT_HOST, label: str = "") -> TestbedPki:
    """A testbed's CA and server certificate, made by the server role when it starts and
    kept (the client trusts the CA from there); made anew when missing or about to
    expire."""
    pki = TestbedPki.at(pki_dir)
    with contextlib.suppress(OSError, ValueError):
        cert = x509.load_pem_x509_certificate(pki.cert.read_bytes())
        left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
        present = all(p.is_file() for p in (pki.ca_cert, pki.key, pki.ca_key))
        if present and left > CERT_MARGIN:
            return pki
    return issue_testbed_pki(pki_dir, [host], label=label)


def issue_host_certificates(
    pki: TestbedPki, names_of_host: dict[str, list[str]], out_dir: Path
) -> None:
    """For each host, `<host>.pem` (its certificate, then the CA's) and `<host>.key` in
    `out_dir`, issued by the testbed's CA for the names given (a recorded site's
    `certificate_names`; a `*.` wildcard stands for one label). What `out_dir` held is
    replaced. ValueError when a host has no names."""
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{pki.ca_key}: not the testbed CA's EC key")
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    out_dir.mkdir(parents=True, exist_ok=True)
    for host, names in names_of_host.items():
        if not names:
            raise ValueError(f"{host}: no certificate names")
        # The host first: it is the certificate's common name.
        ordered = [host, *(n for n in names if n != host)] if host in names else names
        key, leaf = _leaf(ca, ca_key, ordered, now)
        _write_private(out_dir / f"{host}.key", _pem_key(key))
        (out_dir / f"{host}.pem").write_bytes(
            leaf.public_bytes(serialization.Encoding.PEM) + ca_pem
        )
