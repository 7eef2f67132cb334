"""The report a real run writes, opened in headless Chromium: the sections come in order (the finding first), the
charts draw, the browser console stays clean, no number reads "-0.000", and nothing is fetched from the network.

Reads the report of the session's one replay of the default experiment (conftest's `default_run`: `compstrength run`,
no model call). A full-page screenshot goes to `test-artifacts/report.png` at the repo root.

Run: `.venv/bin/python -m pytest -q -s tests/test_report.py`
"""
import os, re, subprocess, sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO/"test-artifacts"
CHART_TIMEOUT_MS = 60_000
SECTIONS = ["pools", "finding", "settings", "games", "design", "charts", "details", "run-facts"]  # the paper's table of pools first


@pytest.fixture(scope="module")
def report(default_run):
    "report.html of the session's replay of the default config (conftest's `default_run`: no model call)."
    r, res = default_run
    assert r.returncode == 0, r.stderr[-3000:]
    assert " 0 model calls" in r.stdout
    return res/"report.html"


def test_report_file_is_self_contained(report):
    page = report.read_text()
    shown = re.sub(r"<script>.*?</script>", "", page, flags=re.S)       # the page without its inlined scripts
    assert not re.search(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=", shown), "the report loads a file"
    assert "cdn.jsdelivr" not in page and "vegaEmbed" in page
    assert [m for m in re.findall(r'<(?:section|footer) id="([\w-]+)"', page)] == SECTIONS
    assert "-0.000" not in shown


def test_report_in_chromium(report):
    pw = pytest.importorskip("playwright.sync_api")
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); the tests never download a browser"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS/"report.png"
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            console, fetched = [], []
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            page.on("console", lambda m: console.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
            def route(r):  # the network is blocked: only the file itself may load
                if r.request.url.startswith("file://"): return r.continue_()
                fetched.append(r.request.url); return r.abort()
            page.route("**/*", route)
            page.goto(report.as_uri())
            charts = page.locator(".cs-chart")
            frontiers = page.locator(".cs-chart[id^='chart-frontier-']").count()       # pool design: one frontier per pool and task
            assert frontiers >= 1 and charts.count() == 2 + frontiers, f"{charts.count()} chart places, {frontiers} frontiers: expected the scatter, the heatmap and the frontiers"
            page.wait_for_function("() => [...document.querySelectorAll('.cs-chart')].every(c => c.querySelector('svg.marks'))",
                                   timeout=CHART_TIMEOUT_MS)
            marks = page.evaluate("() => [...document.querySelectorAll('.cs-chart svg.marks')].map(s => s.querySelectorAll('path, rect, text').length)")
            assert len(marks) == 2 + frontiers and min(marks) > 20, marks      # drawn, not an empty frame
            order = page.evaluate("() => [...document.querySelectorAll('section[id], footer[id]')].map(e => e.id)")
            assert order == SECTIONS, order
            tops = page.evaluate("() => ['finding', 'settings', 'design', 'charts', 'details'].map(i => document.getElementById(i).getBoundingClientRect().top)")
            assert tops == sorted(tops), tops                                     # and they appear in that order on screen
            finding = page.inner_text("#finding p")
            assert re.match(r"(Of the \d+ settings tested|In the one setting tested|No setting was tested)", finding), finding[:200]
            assert re.search(r"\d+\.\d\d to \d+\.\d\d", finding), "the finding gives a CI"
            design = page.inner_text("#design")
            assert "held out" in design and re.search(r"CI -?\d\.\d{3} to -?\d\.\d{3}", design), design[:300]   # each recommendation with its CI
            page.screenshot(path=str(shot), full_page=True)                        # as a reader first sees it: tables folded
            print(f"\n[report] screenshot: {shot}")
            page.evaluate("() => document.querySelectorAll('#details details').forEach(d => d.open = true)")  # the folded tables count too
            text = page.inner_text("body")
            assert page.locator("#details table").first.is_visible() and "Shapley i − j [CI]" in text
            assert "-0.000" not in text and "−0.000" not in text
            labels = page.evaluate("() => [...document.querySelectorAll('.cs-chart svg text')].map(t => t.textContent)")
            assert any("Spearman ρ" in t for t in labels)
            assert not [t for t in labels if re.search(r"[-−]0\.0+(?!\d)", t)], "a chart prints a negative zero"
            assert not console, "browser errors:\n" + "\n".join(console[-20:])
            assert not fetched, f"the report fetched {fetched[:5]}"
        finally:
            browser.close()
