"""End-to-end: JupyterLab + headless Chromium run the quickstart and drive the explorer widget.

Starts `jupyter lab` on 127.0.0.1 (free port, random token) with a temporary root_dir holding a copy of
the quickstart (so autosave never touches the repo), opens it in Debian's chromium through Playwright,
runs all cells, waits for the explorer's Altair chart, switches the protocol and checks that the chart
changed. Screenshots and the server log are kept in `test-artifacts/` at the repo root.

Run: `.venv/bin/python -m pytest -q -s tests/test_notebook_e2e.py`
(`COMPSTRENGTH_E2E_NOTEBOOK=/path/to/other.ipynb` runs the same checks against another notebook.)
"""
import contextlib, json, os, re, secrets, signal, socket, subprocess, sys, time, tomllib
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO/"nbs"/"tutorials"/"01_quickstart.ipynb"   # the notebook under test; adjust here
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO/"test-artifacts"
RUN_TIMEOUT_S = 240     # run all cells until the explorer's chart is drawn
UPDATE_TIMEOUT_S = 60   # protocol change until the new chart is drawn
SERVER_TIMEOUT_S = 90   # jupyter lab start-up
IDLE_GRACE_S = 30       # no cell running and still no chart: widget front-end failed, or a cell raised

EXPLORER, CHART, PROTOCOL, STATUS = ".cs-explorer", ".cs-explorer .cs-chart", ".cs-explorer .cs-protocol select", ".cs-explorer .cs-status"
# Vega's SVG renderer draws into <svg class="marks">; vega-embed's actions menu has svg icons of its own.
CHART_SVG = f"{CHART} svg.marks"

# JS: the titles (and all text) of the chart's SVG, so that axis labels listing every protocol can't fake a title.
_TITLES_JS = """(sel) => { const svg = document.querySelector(sel); if (!svg) return null;
  const titles = [...svg.querySelectorAll('.role-title-text text, .role-title text')].map(t => t.textContent);
  return {titles: [...new Set(titles)], text: svg.textContent, html: svg.outerHTML}; }"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def _skip_flags():
    "nbdev's test flags (`tst_flags` in pyproject.toml): cells flagged with them are not run, as in nbdev_test."
    cfg = tomllib.loads((REPO/"pyproject.toml").read_text())
    return cfg.get("tool", {}).get("nbdev", {}).get("tst_flags", "notest slow").split()


def _copy_notebook(src: Path, dst: Path):
    "Copy the notebook without the cells nbdev_test skips (`#| slow`, `#| notest`) and empty code cells; returns the flags dropped."
    nb = json.loads(src.read_text())
    flag_re = re.compile(r"^\s*#\s*\|\s*(%s)\b" % "|".join(map(re.escape, _skip_flags())), re.M)
    src_of = lambda c: "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
    keep, dropped = [], []
    for c in nb["cells"]:
        if c["cell_type"] == "code" and (not src_of(c).strip() or flag_re.search(src_of(c))):
            dropped.append((flag_re.search(src_of(c)) or [None, "empty"])[1]); continue
        keep.append(c)
    nb["cells"] = keep
    dst.write_text(json.dumps(nb, indent=1))
    return dropped


def _user_settings(d: Path):
    "JupyterLab user settings for the test: no news/update toasts, every cell attached to the DOM, kernel started on open."
    settings = {"@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
                "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none", "autoStartDefaultKernel": True}}
    for rel, val in settings.items():
        (d/rel).parent.mkdir(parents=True, exist_ok=True)
        (d/rel).write_text(json.dumps(val))


@contextlib.contextmanager
def lab_server(nb: Path, tmp: Path):
    "A JupyterLab server on 127.0.0.1 whose root_dir (under `tmp`) holds a copy of `nb`; yields (base_url, token, notebook name)."
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); the tests never download a browser"
    assert nb.exists(), f"notebook under test not found: {nb}"
    ARTIFACTS.mkdir(exist_ok=True)
    root = tmp/"root"; root.mkdir()
    dropped = _copy_notebook(nb, root/nb.name)
    if dropped: print(f"\n[e2e] left out of the run: {len(dropped)} code cells ({', '.join(sorted(set(dropped)))})")
    _user_settings(tmp/"user-settings")
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "JUPYTERLAB_SETTINGS_DIR": str(tmp/"user-settings"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp/"workspaces"),
           "JUPYTER_RUNTIME_DIR": str(tmp/"runtime"), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--ServerApp.allow_root=True",   # the CI container runs as root
           # nothing fetched from the internet: no news, no update check, no PyPI extension manager
           "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly"]
    log = open(ARTIFACTS/"jupyterlab.log", "w")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    hdr = {"Authorization": f"token {token}"}
    try:
        deadline = time.monotonic() + SERVER_TIMEOUT_S
        while True:
            assert proc.poll() is None, f"jupyter lab exited with {proc.returncode}; see {ARTIFACTS/'jupyterlab.log'}"
            try:
                if httpx.get(f"{base}/api/status", headers=hdr, timeout=2).status_code == 200: break
            except httpx.HTTPError: pass
            assert time.monotonic() < deadline, f"jupyter lab not up after {SERVER_TIMEOUT_S} s; see {ARTIFACTS/'jupyterlab.log'}"
            time.sleep(0.5)
        yield base, token, nb.name
    finally:
        # Kernels run in sessions of their own: let the server shut them down before killing its group.
        try: httpx.post(f"{base}/api/shutdown", headers=hdr, timeout=10)
        except httpx.HTTPError: pass
        try: proc.wait(20)
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                try: os.killpg(proc.pid, sig)
                except ProcessLookupError: break
                try: proc.wait(wait); break
                except subprocess.TimeoutExpired: pass
        log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    "A JupyterLab server with a copy of the notebook under test (see `lab_server`)."
    (ARTIFACTS/"lab-failure.png").unlink(missing_ok=True)
    with lab_server(Path(os.environ.get("COMPSTRENGTH_E2E_NOTEBOOK", NOTEBOOK)), tmp_path_factory.mktemp("lab")) as x:
        yield x


def _notebook_problems(page, console):
    "Visible error/stderr outputs, cell prompts and browser errors, for assertion messages."
    outs = page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea-output')]
      .filter(o => o.dataset.mimeType === 'application/vnd.jupyter.stderr' || /Error|Traceback/.test(o.textContent))
      .map(o => (o.dataset.mimeType || '') + ': ' + o.textContent.slice(-2000))""")
    prompts = page.evaluate("() => [...document.querySelectorAll('.jp-InputArea-prompt')].map(p => p.textContent.trim())")
    parts = [f"cell prompts: {prompts}"]
    if outs: parts.append("notebook error/stderr outputs:\n" + "\n---\n".join(outs))
    if console: parts.append("browser errors:\n" + "\n".join(console[-30:]))
    return "\n".join(parts)


def _fail(page, console, msg):
    try: page.screenshot(path=str(ARTIFACTS/"lab-failure.png"), full_page=True)
    except Exception as e: msg += f"\n(failure screenshot failed: {e})"
    try: msg += "\n" + _notebook_problems(page, console)
    except Exception as e: msg += f"\n(could not read the notebook's outputs: {e})"
    pytest.fail(msg + f"\nscreenshot: {ARTIFACTS/'lab-failure.png'}, server log: {ARTIFACTS/'jupyterlab.log'}", pytrace=False)


def _accept_dialog(page):
    "Accept a dialog (kernel selection, say) if one is showing."
    dlg = page.locator(".jp-Dialog .jp-mod-accept")
    if dlg.count() and dlg.first.is_visible(): dlg.first.click()


def _wait_kernel_idle(page, base, token, nbname, timeout_s=120):
    "Wait until the server has an idle kernel for the notebook and the page shows it idle (accepting dialogs)."
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _accept_dialog(page)
        try: sessions = httpx.get(f"{base}/api/sessions", headers={"Authorization": f"token {token}"}, timeout=5).json()
        except httpx.HTTPError: sessions = []
        if any(s.get("path", "").endswith(nbname) and (s.get("kernel") or {}).get("execution_state") == "idle" for s in sessions) \
           and page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status="idle"]').count():
            return True
        page.wait_for_timeout(500)
    return False


def _wait_run_started(page, timeout_s=60):
    "Wait until some code cell is executing or executed ([*]: or [n]:), accepting dialogs."
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _accept_dialog(page)
        if page.evaluate("() => [...document.querySelectorAll('.jp-InputArea-prompt')].some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"):
            return True
        page.wait_for_timeout(300)
    return False


_STATE_JS = """(sel) => { const s = document.querySelector(sel);
  const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent);
  return {chart: !!(s && [...s.querySelectorAll('text')].some(t => t.textContent.trim())),
          busy: prompts.some(p => p.includes('[*]')), done: prompts.every(p => /\\[\\d+\\]/.test(p))}; }"""


def _wait_run(page, timeout_s=RUN_TIMEOUT_S, grace_s=IDLE_GRACE_S):
    """Wait until every code cell has run and the explorer's chart is drawn; `None`, or what went wrong.
    Gives up early once no cell has been running for `grace_s` (Run All stops at the first error)."""
    deadline, idle_since, chart_s = time.monotonic() + timeout_s, None, None
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        st = page.evaluate(_STATE_JS, CHART_SVG)
        if st["chart"] and chart_s is None: chart_s = time.monotonic() - t0
        if st["chart"] and st["done"] and not st["busy"]: return None
        idle_since = None if st["busy"] else (idle_since or time.monotonic())
        if idle_since and time.monotonic() - idle_since > grace_s:
            if not st["done"]: return f"Run All stopped before the last cell (an error?); explorer chart drawn: {st['chart']}"
            return f"all cells ran but no explorer chart ({CHART_SVG}) with text appeared within {grace_s} s"
        page.wait_for_timeout(500)
    return f"Run All Cells not finished with the explorer chart ({CHART_SVG}) drawn within {timeout_s} s (chart drawn after {chart_s} s)"


def _chart(page):
    return page.evaluate(_TITLES_JS, CHART_SVG)


def open_and_run(page, console, base, token, nbname) -> float:
    "Open the notebook, wait for its kernel, Run → Run All Cells, wait for the explorer's chart; seconds taken by the run."
    from playwright.sync_api import Error as PWError
    page.goto(f"{base}/lab/tree/{nbname}?token={token}", wait_until="domcontentloaded", timeout=120_000)
    try: page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=120_000)
    except PWError: _fail(page, console, "the notebook did not open in JupyterLab within 120 s")
    if not _wait_kernel_idle(page, base, token, nbname): _fail(page, console, "the kernel did not become idle within 120 s")
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator('.lm-Menu-item[data-command="runmenu:run-all"], .lm-Menu-item[data-command="notebook:run-all-cells"]').first.click()
    t_run = time.monotonic()
    if not _wait_run_started(page): _fail(page, console, "Run → Run All Cells did not start executing any cell within 60 s")
    if err := _wait_run(page): _fail(page, console, err)
    return time.monotonic() - t_run


def _page(browser):
    "A page of the lab's size that collects the browser's errors: (page, the list they go to)."
    page, console = browser.new_page(viewport={"width": 1600, "height": 1500}), []
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.on("console", lambda m: console.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    return page, console


def test_quickstart_explorer_e2e(lab):
    from playwright.sync_api import sync_playwright, Error as PWError
    base, token, nbname = lab
    t_start = time.monotonic()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page, console = _page(browser)
            run_s = open_and_run(page, console, base, token, nbname)
            # a refresh may still be in flight: let the status settle
            try: page.wait_for_function("(sel) => /updated in [0-9.]+ s\\s*$/.test(document.querySelector(sel)?.textContent ?? '')",
                                        arg=STATUS, timeout=UPDATE_TIMEOUT_S*1000, polling=200)
            except PWError: _fail(page, console, f"the explorer's status ({STATUS}) never said 'updated in X.XX s'")
            explorer = page.locator(EXPLORER).first   # the JS helpers use querySelector: the first explorer too
            sel = page.locator(PROTOCOL).first
            if not sel.count(): _fail(page, console, f"no protocol dropdown ({PROTOCOL}) in the explorer")
            # ipywidgets 8 sets option.value to the label as given (textContent has spaces turned into NBSPs)
            options = sel.evaluate("s => [...s.options].map(o => o.value)")
            current = sel.evaluate("s => s.value")
            assert len(options) >= 2, f"the protocol dropdown offers {options}: need two protocols to switch between"
            # the notebook may have switched protocols itself: wait for the chart of the selected one
            try: page.wait_for_function(f"([sel, cur]) => {{ const c = ({_TITLES_JS})(sel); return !!c && (c.titles.length ? c.titles : [c.text]).some(t => t.includes(cur)); }}",
                                        arg=[CHART_SVG, current], timeout=UPDATE_TIMEOUT_S*1000, polling=200)
            except PWError: _fail(page, console, f"the chart does not name the selected protocol {current!r}; titles: {(_chart(page) or {}).get('titles')}")
            explorer.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            page.screenshot(path=str(ARTIFACTS/"lab-before.png"))
            explorer.screenshot(path=str(ARTIFACTS/"explorer-before.png"))
            before = _chart(page)

            old_titles = [t for t in before["titles"] if current in t] or [t for t in before["titles"] if t]
            # a protocol whose name is not part of the current title (majority_vote vs vote, say)
            new = next((o for o in options if o != current and not any(o in t for t in old_titles)), None)
            assert new, f"no protocol in {options} that is absent from the current titles {old_titles}"

            sel.select_option(value=new)
            t0 = time.monotonic()
            try:
                page.wait_for_function(f"""([sel, nw, old]) => {{ const c = ({_TITLES_JS})(sel); if (!c) return false;
                    const ts = c.titles.length ? c.titles : [c.text];
                    return ts.some(t => t.includes(nw)) && !old.some(o => ts.includes(o)); }}""",
                    arg=[CHART_SVG, new, old_titles], timeout=UPDATE_TIMEOUT_S*1000, polling="raf")
            except PWError: _fail(page, console, f"chart did not switch from {current!r} to {new!r} within {UPDATE_TIMEOUT_S} s; "
                                                 f"old titles {old_titles}, now {(_chart(page) or {}).get('titles')}")
            update_s = time.monotonic() - t0
            try: page.wait_for_function("([sel, nw]) => { const t = document.querySelector(sel)?.textContent ?? '';"
                                        " return t.includes(nw) && /updated in [0-9.]+ s\\s*$/.test(t); }",
                                        arg=[STATUS, new], timeout=10_000, polling=100)
            except PWError: pass   # the status need not name the protocol: report whatever it says
            status = page.locator(STATUS).first.text_content().strip()
            page.wait_for_timeout(300)
            explorer.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS/"lab-after.png"))
            explorer.screenshot(path=str(ARTIFACTS/"explorer-after.png"))
            after = _chart(page)

            assert after["html"] != before["html"], "the chart's SVG did not change after switching the protocol"
            assert any(new in t for t in after["titles"] or [after["text"]]), f"{new!r} not in the new chart's titles {after['titles']}"
            print(f"\n[e2e] notebook {nbname}: all cells run, chart drawn, {run_s:.1f} s after Run All Cells; "
                  f"protocol {current!r} -> {new!r}: browser saw the new chart after {update_s:.2f} s "
                  f"(status: {status!r}); total {time.monotonic()-t_start:.1f} s; artefacts in {ARTIFACTS}")
            if console: print("[e2e] browser errors (not fatal):\n  " + "\n  ".join(console[-10:]))
        finally:
            browser.close()


# ---- The Design view (`widgets.DesignView`) over the committed study's record, through `explore`'s "Design" tab ----

DESIGN, DESIGN_CHART_SVG = ".cs-design", ".cs-design .cs-design-chart svg.marks"
DESIGN_SENTENCE, DESIGN_STATUS = ".cs-design .cs-design-recommendation", ".cs-design .cs-design-status"
DESIGN_SCREENSHOT = REPO/"bench"/"results"/"explorer_design.png"   # committed evidence: a copy of design-view.png
DESIGN_CELLS = [
    "from compstrength.widgets import explore\nres = {res!r}   # the committed study's results folder (the session's replay of the main job: no model call)",
    "ex = explore(res, design=dict(task='gsm8k'))   # the explorer, and a Design tab: ex.design\nex",
]


@pytest.fixture(scope="module")
def design_lab(tmp_path_factory, default_run):
    "A JupyterLab server with a notebook that opens `explore` (and its Design tab) on the committed study's results folder."
    r, res = default_run
    assert r.returncode == 0, r.stderr[-3000:]
    tmp = tmp_path_factory.mktemp("design")
    nb = tmp/"design_view.ipynb"
    nb.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "python3", "language": "python"}},
                              "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
                                        for i, s in enumerate(c.format(res=str(res)) for c in DESIGN_CELLS)]}))
    (ARTIFACTS/"lab-failure.png").unlink(missing_ok=True)
    with lab_server(nb, tmp) as x:
        yield x


def _design_state(page):
    "The Design view's chart SVG (all text, and its markup), its recommendation and its status line."
    return page.evaluate("""([svg, sen, st]) => { const s = document.querySelector(svg);
      return {text: s ? s.textContent : null, html: s ? s.outerHTML : null,
              sentence: document.querySelector(sen)?.textContent ?? null, status: document.querySelector(st)?.textContent ?? null}; }""",
                         [DESIGN_CHART_SVG, DESIGN_SENTENCE, DESIGN_STATUS])


def _wait_design(page, console, what, pred_js, arg, timeout_s=UPDATE_TIMEOUT_S):
    "Wait until `pred_js(state, arg)` holds for the Design view's state; seconds it took."
    from playwright.sync_api import Error as PWError
    t0 = time.monotonic()
    try: page.wait_for_function(f"""([svg, sen, st, arg]) => {{ const s = document.querySelector(svg);
            const state = {{text: s ? s.textContent : '', sentence: document.querySelector(sen)?.textContent ?? '',
                           status: document.querySelector(st)?.textContent ?? ''}};
            return ({pred_js})(state, arg); }}""", arg=[DESIGN_CHART_SVG, DESIGN_SENTENCE, DESIGN_STATUS, arg],
                                timeout=timeout_s*1000, polling="raf")
    except PWError: _fail(page, console, f"the Design view did not show {what} within {timeout_s} s; now: {_design_state(page)}")
    return time.monotonic() - t0


def _updated_s(status: str) -> float:
    m = re.search(r"updated in ([0-9.]+) s\s*$", status or "")
    assert m, f"no 'updated in X s' in the Design view's status {status!r}"
    return float(m.group(1))


def test_design_view_e2e(design_lab):
    "Open the Design tab of `explore` on the committed study, change the budget and the task in the browser; the recommendation and the chart follow, each update under 1 s in the kernel."
    from playwright.sync_api import sync_playwright
    base, token, nbname = design_lab
    t_start = time.monotonic()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page, console = _page(browser)
            run_s = open_and_run(page, console, base, token, nbname)
            tab = page.locator(".cs-tabs .lm-TabBar-tab", has_text=re.compile(r"^\s*Design\s*$"))   # the widget's tab, not the notebook's
            if not tab.count(): _fail(page, console, "explore(...) over the study's record shows no 'Design' tab")
            tab.first.click()
            _wait_design(page, console, "the frontier of gsm8k with a recommendation",
                         "(s) => s.text.includes('mixed × gsm8k') && s.sentence.includes('On gsm8k') && /updated in [0-9.]+ s\\s*$/.test(s.status)", None)
            view = page.locator(DESIGN).first
            if not view.is_visible(): _fail(page, console, "the Design tab was clicked but its view is hidden")
            view.scroll_into_view_if_needed()
            before = _design_state(page)
            assert "within" not in before["sentence"] and "no budget" in before["text"], before
            marks = page.evaluate("(sel) => document.querySelector(sel).querySelectorAll('g.mark-symbol path').length", DESIGN_CHART_SVG)
            assert marks > 100, f"the chart draws {marks} systems: the frontier of 996 systems is not drawn"

            # a budget, through the browser: tick "within a budget" (the slider starts at the median cost), then type 300 into the slider's readout
            page.locator(".cs-design-limit input[type=checkbox]").first.click()
            _wait_design(page, console, "a budget in the recommendation", "(s) => / within [0-9.,]+ tokens per item /.test(s.sentence) && s.text.includes('budget ')", None)
            readout = page.locator(".cs-design-budget .widget-readout").first
            readout.click(); page.keyboard.press("Control+A"); page.keyboard.type("300")
            t0 = time.monotonic(); page.keyboard.press("Enter")
            budget_s = _wait_design(page, console, "the recommendation within 300 tokens per item",
                                    "(s) => s.sentence.includes('within 300 tokens per item') && s.text.includes('budget 300 tokens per item')", None)
            page.wait_for_timeout(300)
            budget_kernel_s = _updated_s(_design_state(page)["status"])
            view.screenshot(path=str(ARTIFACTS/"design-view.png"))
            after = _design_state(page)
            assert after["sentence"] != before["sentence"] and after["html"] != before["html"], "the budget changed neither the recommendation nor the chart"
            chosen = re.search(r"within 300 tokens per item is (\S+) ", after["sentence"]).group(1)
            assert f"recommended: {chosen} " in after["text"], (chosen, after["text"][:400])

            # the task, through its dropdown: a new frontier and a new recommendation
            page.locator(".cs-design-task select").first.select_option(value="mmlu")
            task_s = _wait_design(page, console, "the frontier of mmlu", "(s) => s.text.includes('mixed × mmlu') && s.sentence.includes('On mmlu')", None)
            page.wait_for_timeout(300)
            task_kernel_s = _updated_s(_design_state(page)["status"])
            mmlu = _design_state(page)
            assert mmlu["html"] != after["html"] and mmlu["sentence"] != after["sentence"]
            view.screenshot(path=str(ARTIFACTS/"design-view-mmlu.png"))
            assert budget_kernel_s < 1 and task_kernel_s < 1, (budget_kernel_s, task_kernel_s)
            import shutil; shutil.copyfile(ARTIFACTS/"design-view.png", DESIGN_SCREENSHOT)
            print(f"\n[e2e] {nbname}: all cells run in {run_s:.1f} s; Design tab: budget -> 300 tokens: the browser saw the new "
                  f"recommendation and chart after {budget_s:.2f} s (kernel update {budget_kernel_s:.2f} s; recommended {chosen}); "
                  f"task -> mmlu: {task_s:.2f} s (kernel {task_kernel_s:.2f} s); total {time.monotonic()-t_start:.1f} s; "
                  f"screenshots {ARTIFACTS/'design-view.png'}, {DESIGN_SCREENSHOT}")
            if console: print("[e2e] browser errors (not fatal):\n  " + "\n  ".join(console[-10:]))
        finally:
            browser.close()
