"""The testbed PKI issues a certificate per host of a recorded site from the testbed's
CA: a TLS client that trusts only that CA completes a handshake for each name the
archive's certificate_names cover, and fails for a name they do not."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509

from clarke import tls

NAMES = {
    "www.site.test": ["www.site.test"],
    "img.cdn.test": ["*.cdn.test", "cdn.test"],
}


def _handshake(ca: Path, cert: Path, key: Path, server_name: str) -> None:
    """A TLS 1.3 handshake in memory: a server with cert and key, a client that trusts
    only `ca` and asks for `server_name` (verified, as a browser verifies it)."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(ca))
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=server_name)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, end in (("client", client), ("server", server)):
            if done[name]:
                continue
            try:
                end.do_handshake()
                done[name] = True
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError(f"handshake for {server_name} did not finish")


def test_host_certificates_come_from_the_testbed_ca(tmp_path: Path) -> None:
    pki = tls.issue_testbed_pki(tmp_path / "pki", label="unit")
    out = tmp_path / "certs"
    tls.issue_host_certificates(pki, NAMES, out)
    assert sorted(p.name for p in out.iterdir()) == [
        "img.cdn.test.key",
        "img.cdn.test.pem",
        "www.site.test.key",
        "www.site.test.pem",
    ]
    for host in NAMES:
        assert stat.S_IMODE((out / f"{host}.key").stat().st_mode) == 0o600
        chain = x509.load_pem_x509_certificates((out / f"{host}.pem").read_bytes())
        assert [c.subject for c in chain[1:]] == [
            x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()).subject
        ]
        san = chain[0].extensions.get_extension_for_class(x509.SubjectAlternativeName)
        assert sorted(san.value.get_values_for_type(x509.DNSName)) == sorted(NAMES[host])
    _handshake(pki.ca_cert, out / "www.site.test.pem", out / "www.site.test.key", "www.site.test")
    for name in ("img.cdn.test", "fonts.cdn.test", "cdn.test"):
        _handshake(pki.ca_cert, out / "img.cdn.test.pem", out / "img.cdn.test.key", name)
    # A wildcard stands for one label only; another host's name is not covered.
    for name in ("a.img.cdn.test", "www.site.test"):
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(pki.ca_cert, out / "img.cdn.test.pem", out / "img.cdn.test.key", name)


def test_another_testbeds_ca_is_not_trusted(tmp_path: Path) -> None:
    pki = tls.issue_testbed_pki(tmp_path / "one", label="one")
    other = tls.issue_testbed_pki(tmp_path / "other", label="other")
    tls.issue_host_certificates(pki, NAMES, tmp_path / "certs")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(
            other.ca_cert,
            tmp_path / "certs/www.site.test.pem",
            tmp_path / "certs/www.site.test.key",
            "www.site.test",
        )


def test_a_pki_without_the_ca_key_is_made_anew(tmp_path: Path) -> None:
    """A testbed PKI written before the CA's key was kept cannot issue a site's
    certificates: ensure_testbed_pki makes a new one."""
    first = tls.ensure_testbed_pki(tmp_path)
    ca_before = first.ca_cert.read_bytes()
    assert tls.ensure_testbed_pki(tmp_path).ca_cert.read_bytes() == ca_before  # kept
    first.ca_key.unlink()
    again = tls.ensure_testbed_pki(tmp_path)
    assert again.ca_key.is_file()
    assert again.ca_cert.read_bytes() != ca_before
    assert stat.S_IMODE(again.ca_key.stat().st_mode) == 0o600
