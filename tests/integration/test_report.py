"""The HTML report of a recorded campaign, rendered in headless Chromium: every figure
is present and drawn, and every section is there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import need

pytestmark = [pytest.mark.browser, pytest.mark.slow]
RECORDED = Path("tests/data/recorded-lan")
FIGURES = ("plt-size-structure", "cc", "fcp-lcp-structure", "plt-structure")


def test_report_renders_every_figure(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    need(chromium is not None and driver is not None, "Debian's chromium and chromium-driver")
    out = tmp_path / "report.html"
    code, _, err = run_cli("report", str(RECORDED), "--out", str(out))
    assert code == 0, err
    html = out.read_text()
    assert "<script" not in html and "http://" not in html.split("<body>")[1].split("<svg")[0]

    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1300,2000",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        opts.add_argument(arg)
    browser = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
    try:
        browser.get(out.as_uri())
        figures = browser.execute_script("""
            return [...document.querySelectorAll('figure.plot')].map(f => {
              const svg = f.querySelector('svg'); const r = svg.getBoundingClientRect();
              return {id: f.id, w: r.width, h: r.height,
                      marks: svg.querySelectorAll('path, rect, line, use').length,
                      caption: f.querySelector('figcaption').textContent};
            });""")
        headings = browser.execute_script(
            "return [...document.querySelectorAll('h2')].map(h => h.textContent)"
        )
        browser.save_screenshot(str(tmp_path / "report.png"))
    finally:
        browser.quit()
    assert [f["id"] for f in figures] == [f"fig-{k}" for k in FIGURES]
    for f in figures:
        assert f["w"] > 300 and f["h"] > 150, f
        assert f["marks"] > 30, f  # axes, ticks, lines, bars: a drawn plot, not an empty one
    for section in (
        "Figures",
        "Summary per cell",
        "Protocol overhead",
        "Connections",
        "The link as measured",
        "Software",
        "Campaign parameters",
    ):
        assert section in headings, headings
    assert any(h.startswith("Failed attempts") for h in headings)
