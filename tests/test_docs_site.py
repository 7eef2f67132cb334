"""The documentation site, built offline from the project's notebooks and opened in headless Chromium with the
network blocked: the pages load, nothing is fetched from outside `file://`, and a page's Altair chart draws.

Builds the real site once (`compstrength docs --renderer offline`, which executes every notebook: a few minutes on
2 cores) into a temporary folder. Under `./test.sh` the notebook phase has already built it, executing every notebook
with its slow cells (`--flags slow`), and names it in `COMPSTRENGTH_DOCS_SITE`: these tests then read that site
(built from the same notebooks minutes before, and only when every notebook passed; a notebook changed since is
refused) rather than execute every notebook again. Screenshots go to `test-artifacts/` at the repo root.

Run: `.venv/bin/python -m pytest -q tests/test_docs_site.py`
"""
import json, os, re, subprocess, sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO/"test-artifacts"
BUILD_TIMEOUT_S = 1200
CHART_TIMEOUT_MS = 30_000

# A script or a stylesheet loaded from anywhere but the site itself.
_REMOTE_ASSET = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?\s*(?:[a-z]+:)?//""", re.I)
_CSS_REMOTE = re.compile(r"""@import|url\(\s*["']?\s*(?:[a-z]+:)?//""", re.I)


def _prebuilt() -> Path | None:
    "The site `./test.sh` built from these notebooks, if it names one; refused if incomplete or older than a notebook."
    d = os.environ.get("COMPSTRENGTH_DOCS_SITE")
    if not d: return None
    site = Path(d)
    assert (site/"api.html").exists() and (site/".build-times.json").exists(), \
        f"COMPSTRENGTH_DOCS_SITE={d} is not a finished site: its build failed (see the notebook phase above)"
    built = (site/".build-times.json").stat().st_mtime
    newer = [p.name for p in (REPO/"nbs").rglob("*.ipynb") if p.stat().st_mtime > built]
    assert not newer, f"COMPSTRENGTH_DOCS_SITE={d} is older than {newer}: rebuild it, or unset the variable"
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    "The project's docs, rendered offline into a temporary folder (or the site `./test.sh` just built)."
    if (pre := _prebuilt()) is not None: return pre
    out = tmp_path_factory.mktemp("docs")/"_docs"
    exe = Path(sys.executable).with_name("compstrength")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    r = subprocess.run([str(exe), "docs", "--renderer", "offline", "--out", str(out), "--nbs", str(REPO/"nbs")],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    print(r.stdout[-3000:], r.stderr[-3000:])
    assert r.returncode == 0, f"docs build failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return out


def _pages(site):
    return sorted(site.rglob("*.html"))


def _chart_page(site) -> Path:
    "charts.html if it has a chart, else the first page that has one."
    pages = [site/"charts.html"] + _pages(site)
    return next((p for p in pages if p.exists() and 'class="vega-chart"' in p.read_text()), None)


def _titles(spec) -> set:
    "The chart titles of a Vega-Lite spec (its own and those of its concatenated/layered views)."
    out = set()
    if isinstance(spec, dict):
        t = spec.get("title")
        if isinstance(t, dict): t = t.get("text")
        if isinstance(t, list): t = " ".join(t)
        if isinstance(t, str) and t: out.add(t)
        for k in ("hconcat", "vconcat", "concat", "layer"):
            for sub in spec.get(k, []): out |= _titles(sub)
        if isinstance(spec.get("spec"), dict): out |= _titles(spec["spec"])
    return out


def test_pages_and_api(site):
    "Every notebook is a page in the sidebar; api.html lists the exported symbols, linked to their entries."
    names = {p.relative_to(site).as_posix() for p in _pages(site)}
    assert {"index.html", "api.html", "analysis.html", "attribution.html", "experiment.html", "cli.html", "docs.html"} <= names
    nbs = [p for p in (REPO/"nbs").rglob("*.ipynb") if not any(s.startswith(("_", ".")) for s in p.relative_to(REPO/"nbs").parts)]
    assert len(names) == len(nbs) + 1, (sorted(names), nbs)
    if list((REPO/"nbs"/"tutorials").glob("[!_.]*.ipynb")): assert any(n.startswith("tutorials/") for n in names)
    index = (site/"index.html").read_text()
    for n in names: assert f'href="{n}"' in index, n  # the sidebar lists every page
    api = (site/"api.html").read_text()
    for sym, page in [("attribute", "attribution.html"), ("run_experiment", "experiment.html"), ("values_table", "analysis.html"),
                      ("build_docs", "docs.html")]:
        assert f'<a href="{page}#{sym}"><code>{sym}</code></a>' in api, sym
        assert f'class="api-entry" id="{sym}"' in (site/page).read_text(), sym
    # methods: a `@patch`'d one gets its entry on its page and in api.html, as `Class.method`
    for sym, page in [("CoalitionGame.evaluate", "game.html"), ("ModelClient.acomplete", "models.html")]:
        anchor = sym.lower()
        assert f'<a href="{page}#{anchor}"><code>{sym}</code></a>' in api, sym
        assert f'class="api-entry" id="{anchor}"' in (site/page).read_text(), sym
    att = (site/"attribution.html").read_text()
    entry = att.split('class="api-entry" id="attribute"')[1].split("</div>")[0]
    assert "def attribute(" in re.sub("<[^>]+>", "", entry) and "#" in entry  # the signature with its docments comments


def test_no_remote_assets(site):
    "No page loads a script, style or image from the web (CDN or otherwise); the bundle is one local file."
    assert (site/"vega-bundle.js").stat().st_size > 500_000
    for p in _pages(site):
        t = p.read_text()
        assert not _REMOTE_ASSET.search(t), (p, _REMOTE_ASSET.search(t)[0])
        for src in re.findall(r"""<script\b[^>]*\bsrc=["']([^"']+)""", t): assert src.endswith("vega-bundle.js"), (p, src)
        if 'class="vega-chart"' in t: assert t.count('vega-bundle.js"></script>') == 1, p  # a page with charts loads the bundle …
        assert "window.vegaEmbed=" not in t and len(t) < 2_000_000, p  # … and never inlines it
    assert not _CSS_REMOTE.search((site/"styles.css").read_text())


def test_chart_draws_offline(site):
    "index.html and a page with a chart open in Chromium with every non-file:// request blocked; the chart draws."
    import playwright.sync_api as pw  # a dev dependency; the browser is Debian's, never downloaded
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
    page_with_chart = _chart_page(site)
    assert page_with_chart is not None, "no page of the site has a chart"
    html = page_with_chart.read_text()
    specs = [json.loads(s) for s in re.findall(r'<script type="application/json" id="vega-chart-1-spec">(.*?)</script>', html, re.S)]
    titles = _titles(specs[0])
    ARTIFACTS.mkdir(exist_ok=True)
    blocked, errors = [], []
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            def _route(r):
                if r.request.url.startswith("file://"): return r.continue_()
                blocked.append(r.request.url); return r.abort()
            ctx.route("**/*", _route)
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((site/"index.html").as_uri())
            page.wait_for_selector("nav.sidebar a")
            assert page.locator("main h1").inner_text().strip()
            page.screenshot(path=str(ARTIFACTS/"docs-index.png"), full_page=False)

            page.goto(page_with_chart.as_uri())
            page.wait_for_selector("#vega-chart-1.vega-embed svg g.mark-symbol path, #vega-chart-1.vega-embed svg g[class*='mark-'] > *",
                                   timeout=CHART_TIMEOUT_MS)
            n_charts = html.count('class="vega-chart"')
            page.wait_for_function(f"document.querySelectorAll('.vega-chart svg').length >= {n_charts}", timeout=CHART_TIMEOUT_MS)
            page.locator("#vega-chart-1").scroll_into_view_if_needed()
            drawn = page.evaluate("""() => { const svg = document.querySelector('#vega-chart-1 svg');
                return {marks: svg.querySelectorAll("g[class*='mark-'] > path, g[class*='mark-'] > line, g[class*='mark-'] > rect").length,
                        text: svg.textContent, n: document.querySelectorAll('.vega-chart svg').length}; }""")
            page.screenshot(path=str(ARTIFACTS/"docs-chart.png"), full_page=False)
        finally:
            browser.close()
    assert drawn["marks"] > 0, drawn
    assert drawn["n"] == n_charts, (drawn["n"], n_charts)  # every chart on the page drew
    if titles: assert any(t in drawn["text"] for t in titles), (titles, drawn["text"][:300])
    assert not errors, errors
    assert not blocked, f"requests outside file:// were made: {blocked}"
    assert (ARTIFACTS/"docs-index.png").stat().st_size > 10_000 and (ARTIFACTS/"docs-chart.png").stat().st_size > 10_000
