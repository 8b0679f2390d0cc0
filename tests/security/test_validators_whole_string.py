"""Issue 48: validators matched their pattern with `re.match` and a `$`, which matches
before a trailing newline, so `--campaign-id $'abc\\n'` passed the id check (and broke
the Kubernetes manifest's YAML), a capture file named `keys.log\\n` was written, a
preference, a URL or a site name with a newline went through. Every validating pattern
now has to match the whole string (`fullmatch`). Each validator is fed a good value
with a newline, a carriage return, a NUL and CRLF after it (the patterns' character
classes refused the last three before too; `$` let the newline through)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from clarke.errors import ClarkeError

SMOKE = Path("campaigns/smoke.yaml")
SUFFIXES = ["\n", "\r", "\x00", "\r\n"]


def _refused(check: Callable[[], object], *errors: type[Exception]) -> bool:
    try:
        check()
    except errors:
        return True
    return False


def campaign_id(s: str, tmp_path: Path) -> bool:
    from clarke.submit.model import SubmitOptions, prepare

    return _refused(lambda: prepare(SubmitOptions(SMOKE, 1, tmp_path, "smoke-t" + s)), ClarkeError)


def site_name(s: str, tmp_path: Path) -> bool:
    from clarke.server.site import check_name

    return _refused(lambda: check_name("wiki" + s), ClarkeError)


def namespace_name(s: str, tmp_path: Path) -> bool:
    from clarke.place.plan import parse_ns

    return parse_ns("clk1-client" + s) is None


def resolve_host(s: str, tmp_path: Path) -> bool:
    from clarke.browser.record import Resolve

    return _refused(lambda: Resolve.parse(f"example.com{s}.=192.0.2.1"), ClarkeError)


def preference(s: str, tmp_path: Path) -> bool:
    from clarke.browser.prefs import check_override

    return _refused(
        lambda: check_override("network.http.pacing.requests.enabled" + s, True), ValueError
    )


def load_url(s: str, tmp_path: Path) -> bool:
    from clarke.browser.load import check_url

    return _refused(lambda: check_url("https://example.com/" + s, None), ValueError)


def agent_token(s: str, tmp_path: Path) -> bool:
    from types import SimpleNamespace

    from clarke.agent.server import make_handler

    # A role stands in by its name alone: the routes' table is made of it.
    role: Any = SimpleNamespace(role="server")
    return _refused(lambda: make_handler(role, "t" * 43 + s), ClarkeError)


def cross_traffic(s: str, tmp_path: Path) -> bool:
    from clarke.campaign.cross import CrossTrafficEntry

    return _refused(
        lambda: TypeAdapter(CrossTrafficEntry).validate_python("udp-cbr" + s), ValidationError
    )


def capture_file(s: str, tmp_path: Path) -> bool:
    """A client agent's file name: written only when it is one the client may send."""
    from clarke.browser.capture import CapturedFiles
    from clarke.run.session.captures import CaptureMode, CapturePolicy, write

    sent = CapturedFiles(files={"keys.log" + s: base64.b64encode(b"k").decode()})
    policy = CapturePolicy(CaptureMode.all, tmp_path / "captures")
    summary = write(policy, "load-1", True, None, sent, [])
    return summary.files == {} and not list((tmp_path / "captures").rglob("keys.log?"))


def root_link(s: str, tmp_path: Path) -> bool:
    """A root link named like a testbed's management link, with a newline after: not a
    testbed's, so `clarke testbed down --all` leaves it alone."""
    from clarke.testbed import lifecycle
    from clarke.testbed.state import Store

    store = Store(tmp_path / "state")
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(lifecycle.netns, "namespaces", lambda: [])
        m.setattr(lifecycle.netns, "owner", lambda ns, link=None: store.owner)
        m.setattr(lifecycle, "_root_links", lambda: ["clk5-mgmt" + s])
        return lifecycle.known_ids(store) == []


def server_address(s: str, tmp_path: Path) -> bool:
    from clarke.server.openlitespeed.tcp import split_address

    return _refused(lambda: split_address("198.18.0.1:443" + s), ValueError)


VALIDATORS = [
    campaign_id, site_name, namespace_name, resolve_host, preference, load_url, agent_token,
    cross_traffic, capture_file, root_link, server_address,
]  # fmt: skip


@pytest.mark.parametrize("suffix", SUFFIXES, ids=repr)
@pytest.mark.parametrize("validator", VALIDATORS, ids=lambda v: v.__name__)
def test_a_trailing_control_character_is_refused(
    validator: Callable[[str, Path], bool], suffix: str, tmp_path: Path
) -> None:
    assert validator(suffix, tmp_path), f"{validator.__name__} took a value ending in {suffix!r}"


@pytest.mark.parametrize("validator", VALIDATORS, ids=lambda v: v.__name__)
def test_the_value_itself_is_taken(validator: Callable[[str, Path], bool], tmp_path: Path) -> None:
    """The same values without the suffix pass (so the refusal is the suffix's)."""
    assert not validator("", tmp_path), f"{validator.__name__} refused its good value"


def test_a_campaign_id_with_a_newline_exits_2_on_both_engines(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for engine in (
        ["slurm", "--results", str(tmp_path / "r"), "--emit"],
        ["k8s", "--emit", "--out", str(tmp_path / "k8s")],
    ):
        code, _, err = run_cli(
            "submit", *engine, str(SMOKE), "--shards", "2", "--campaign-id", "abc\n"
        )
        assert code == 2 and "--campaign-id 'abc\\n'" in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []
