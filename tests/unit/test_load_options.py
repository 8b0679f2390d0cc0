"""`clarke load` offers every declared dimension as an option, parsed by the dimension,
and makes one cell of them as a campaign's matrix makes its cells (run/single.py)."""

from __future__ import annotations

import pytest

from clarke.campaign import dimensions
from clarke.campaign.dimensions import BROWSER, CONNECTIONS, CROSS_TRAFFIC, HTTP, MODEL, SITE
from clarke.errors import InputError
from clarke.run.single import cell_of, option_name
from clarke.vocab import Browser, HttpVersion


def test_every_declared_dimension_is_an_option_of_clarke_load(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli("load", "--help")
    assert code == 0, err
    for d in dimensions.seal():
        assert f"  {option_name(d)} " in out, f"{option_name(d)} is not an option of clarke load"


def test_a_cell_of_the_values_given_and_every_other_dimension_at_its_default() -> None:
    given = {d.name: d.parse(v) for d, v in [(HTTP, "1.1"), (dimensions.PROFILE, "lan")]}
    given |= {MODEL.name: "uniform", dimensions.SIZE.name: "100k"}
    given[dimensions.CC.name] = dimensions.CC.parse("bbr")
    cell = cell_of(given)
    assert cell[HTTP] is HttpVersion.h1 and cell[CONNECTIONS] == 1  # the study's HTTP/1.1
    assert cell.page == "uniform-100k" and not cell[CROSS_TRAFFIC].active
    chromium = cell_of(given | {BROWSER.name: Browser.chromium})
    assert chromium[CONNECTIONS] == 6  # Chromium's own, which it has no setting for
    assert cell_of(given | {CROSS_TRAFFIC.name: CROSS_TRAFFIC.parse("bulk-cubic")})[
        CROSS_TRAFFIC
    ].active


def test_a_value_where_its_dimension_does_not_apply_is_refused_naming_the_option() -> None:
    given = {HTTP.name: HttpVersion.h2, dimensions.PROFILE.name: "lan", dimensions.CC.name: "bbr"}
    with pytest.raises(InputError, match="--model: does not apply"):
        cell_of(given | {SITE.name: "some/site", MODEL.name: "uniform"})
    with pytest.raises(InputError, match="--http is required"):
        cell_of({dimensions.PROFILE.name: "lan"})


def test_options_are_parsed_by_their_dimension(run_cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run_cli("load", "--connections", "0")
    assert code == 2 and "--connections" in err and "Traceback" not in err, err
    code, _, err = run_cli("load", "--cross-traffic", "nope")
    assert code == 2 and "--cross-traffic" in err, err
    code, _, err = run_cli("load", "--page", "uniform-1m", "--site", "x")
    assert code == 2 and "--page" in err, err


def test_a_load_of_a_cell_keeps_its_values_typed_and_one_by_hand_is_read_once() -> None:
    """PageLoad holds the cell's own values (no text the session parses back); a load
    written with text has it read into the vocabularies, an unknown one refused naming
    what is allowed."""
    from clarke.errors import UnknownName
    from clarke.run.session.settings import PageLoad
    from clarke.vocab import CongestionControl

    given = {HTTP.name: HttpVersion.h3, dimensions.PROFILE.name: "lan"}
    given |= {dimensions.CC.name: CongestionControl.bbr, BROWSER.name: Browser.chromium}
    given |= {MODEL.name: "uniform", dimensions.SIZE.name: "100k"}
    load = PageLoad.of_cell(cell_of(given), "l")
    assert (load.http, load.cc, load.browser) == (
        HttpVersion.h3,
        CongestionControl.bbr,
        Browser.chromium,
    )
    by_hand = PageLoad("uniform-100k", "1.1", "cubic", 1, browser="firefox")  # type: ignore[arg-type]
    assert by_hand.http is HttpVersion.h1 and by_hand.cc is CongestionControl.cubic
    assert by_hand.browser is Browser.firefox
    with pytest.raises(UnknownName, match=r"unknown http '4'; allowed: 1.1, 2, 3"):
        PageLoad("uniform-100k", "4", "cubic", 1)  # type: ignore[arg-type]
