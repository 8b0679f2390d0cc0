"""A recorded site on the server role (server/site.py): the runner stages an archive
under the pages directory's sites/, the server reads it by that name, places its
origins on its LAN and issues their certificates from the testbed CA; bad names and
broken archives are refused naming what is wrong; OpenLiteSpeed says why it replays no
site."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509

from clarke import tls
from clarke.contract import ServerConfig
from clarke.errors import InputError, ValidationFailed
from clarke.place import Place
from clarke.place.plan import plan
from clarke.server import site
from clarke.server.openlitespeed import OlsSettings, settings_from_body
from clarke.sites import archive, staging
from clarke.sites.archive import Exchange, Origin, SiteArchive, Source
from clarke.sites.placement import FIRST_ORIGIN_HOST

BODY = b"<!doctype html><title>t</title>"


def _write_site(directory: Path) -> Path:
    sha = archive.sha256_of(BODY)
    (directory / archive.BODIES).mkdir(parents=True)
    (directory / archive.BODIES / sha).write_bytes(BODY)
    archive.write(
        directory,
        SiteArchive(
            name="t",
            start_url="https://www.site.test/",
            source=Source(kind="har"),
            origins=[
                Origin(
                    host="www.site.test",
                    address="192.0.2.1",
                    protocols=["h2"],
                    certificate_names=["www.site.test"],
                ),
                Origin(
                    host="static.site.test",
                    address="192.0.2.1",
                    protocols=["h2"],
                    certificate_names=["*.site.test"],
                ),
                Origin(
                    host="img.cdn.test",
                    address=None,
                    protocols=["h2"],
                    certificate_names=["img.cdn.test"],
                ),
            ],
            exchanges=[
                Exchange(
                    method="GET", url="https://www.site.test/", status=200, body=sha, size=len(BODY)
                ),
            ],
        ),
    )
    return directory


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return Place("netns", "server", plan(3), tmp_path / "run", tmp_path / "pages", tmp_path / "pki")


def test_a_staged_site_is_placed_and_given_certificates(place: Place, tmp_path: Path) -> None:
    source = _write_site(tmp_path / "archive")
    name = staging.stage(source, place.pages_dir)
    assert name.startswith("t-") and (place.pages_dir / "sites" / name / "site.json").is_file()
    assert staging.stage(source, place.pages_dir) == name  # there already: kept
    placed = site.prepare(place, name)
    lan = place.plan.gw_lan.prefix
    first = str(lan.network_address + FIRST_ORIGIN_HOST)
    second = str(lan.network_address + FIRST_ORIGIN_HOST + 1)
    # Recorded at one address: they share one (they may coalesce); the other its own
    # (placement.py's order: the origins without an address, by host, come first).
    assert placed.placement.addresses == {
        "img.cdn.test": first,
        "www.site.test": second,
        "static.site.test": second,
    }
    assert all(ipaddress.IPv4Address(a) in lan for a in placed.placement.distinct)
    assert placed.listen() == [f"{a}:443" for a in placed.placement.distinct]
    assert placed.zone()["names"] == placed.placement.zone_names()
    ca = x509.load_pem_x509_certificate(tls.TestbedPki.at(place.pki_dir).ca_cert.read_bytes())
    for host, names in [
        ("www.site.test", ["www.site.test"]),
        ("static.site.test", ["*.site.test"]),
        ("img.cdn.test", ["img.cdn.test"]),
    ]:
        leaf = x509.load_pem_x509_certificates((placed.certs_dir / f"{host}.pem").read_bytes())[0]
        leaf.verify_directly_issued_by(ca)
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert san.get_values_for_type(x509.DNSName) == names
        assert (placed.certs_dir / f"{host}.key").is_file()


@pytest.mark.parametrize("bad", ["", "../t", "T", "a/b", ".t", 5, ["t"]])
def test_a_site_name_is_a_plain_directory_name(bad: object) -> None:
    with pytest.raises(InputError, match="site must be the name of a directory"):
        site.check_name(bad)
    assert site.check_name(None) is None
    assert site.check_name("t-0123456789ab") == "t-0123456789ab"


def test_a_missing_or_broken_site_is_refused_naming_it(place: Place, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no site 'nothing'"):
        site.prepare(place, "nothing")
    name = staging.stage(_write_site(tmp_path / "archive"), place.pages_dir)
    for body in (place.pages_dir / "sites" / name / archive.BODIES).iterdir():
        body.unlink()  # a hard link: the source keeps its own
    with pytest.raises(ValidationFailed, match=r"exchanges\[0\].*missing from bodies/"):
        site.prepare(place, name)


def test_the_site_request_keeps_null_and_checks_the_name() -> None:
    assert ServerConfig(site=None).body() == {"site": None}
    assert ServerConfig(site="t-0123").body() == {"site": "t-0123"}
    assert ServerConfig.model_validate({"tcp_cc": "bbr"}).body() == {"tcp_cc": "bbr"}
    with pytest.raises(ValueError):
        ServerConfig(site="../etc")


def test_openlitespeed_says_why_it_replays_no_site() -> None:
    current = OlsSettings()
    assert settings_from_body({"site": None}, current) == current
    with pytest.raises(InputError, match=r"does not replay recorded sites.*use the origin server"):
        settings_from_body({"site": "t-0123"}, current)
