"""Time from a widget change to an updated chart in the explorer, on cached results (issue 5).

The explorer runs over the default experiment, replayed from the recording of the embedded pool.
Each step sets one control's `.value` (protocol, task, estimator, budget, pool members) the way
a user's click does, and the time is measured until the chart widget holds the new Vega-Lite spec
(`Explorer.refresh`: lookup, values with bootstrap CIs, rank correlation, the chart tables and
the four charts). Steps are first visits (nothing memoised) unless marked "revisit".

Side by side, the path a user without the explorer takes for the same selection: rerun the one
setting with `run_experiment` (replay, warm caches: no model call) and rebuild the same four
charts from its record.
With `--browser`, also the time a user sees: the quickstart runs in a real JupyterLab (the
harness of `tests/test_notebook_e2e.py`), and Playwright switches the explorer's protocol
through every protocol twice, timing each switch from `select_option` until the new chart's
title is drawn in the SVG (first pass: first visits; second pass: memoised revisits).

The Design view (`widgets.DesignView`, the "Design" tab of `explore` over a record with per-item games) is
timed on the committed study's record (`study_results(load_study())`, replayed: 8 players, 4 protocols, 996
systems on 500 items per task): each step sets a control's `.value` (the budget, the size, the task, the cost
measure) and the time is measured until the chart, the recommendation sentence and the table are updated
(`DesignView.refresh`: `design.frontier`, kept per pool, task, protocols and measure, `design.recommend` with the
library's defaults, 20 halvings and 2000 bootstrap resamples, and the chart's spec). `--no-design` skips it.

Usage: .venv/bin/python bench/bench_explorer.py [--repeat 3] [--browser] [--no-design]
"""
import argparse, os, sys, tempfile, time, statistics
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import pandas as pd

import altair as alt
from compstrength.analysis import coalition_table, contribution_table, interaction_table
from compstrength.charts import coalition_lattice, contribution_chart, interaction_heatmap, strength_scatter
from compstrength.experiment import ExperimentConfig, load_config, run_experiment
from compstrength.widgets import DesignView, explore

STEPS = [("protocol", "cascade"), ("task", "arithmetic"), ("estimator", "loo"), ("estimator", "banzhaf"),
         ("estimator", "permutation"), ("budget", 128), ("estimator", "kernel"), ("estimator", "shapley"),
         ("members", ("gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")), ("protocol", "moa"),
         ("protocol", "weighted_vote"), ("task", "gsm8k"), ("protocol", "trained_router"), ("protocol", "logit_fusion"),
         ("members", ("smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")), ("protocol", "cascade")]

# the Design view's steps: (control, value); "limit" ticks "within a budget" (the slider starts at the median cost)
DESIGN_STEPS = [("limit", True), ("budget", 300.0), ("budget", 600.0), ("k", 3), ("budget", 150.0), ("k", 0),
                ("task", "mmlu"), ("budget", 400.0), ("task", "arithmetic1k"), ("budget", 250.0), ("task", "gsm8k"),
                ("budget", 300.0), ("measure", "seconds"), ("measure", "tokens"), ("protocols", ("cascade",))]

ROOT = Path(__file__).resolve().parents[1]


def design_bench(repeat: int) -> tuple:
    "Widget change -> updated Design view, on the committed study's record; (per-step rows, seconds to load the record and build the view)."
    from compstrength.config import load_study
    from compstrength.design import design_games
    from compstrength.study import study_results
    t0 = time.perf_counter()
    games = design_games(study_results(load_study()))
    t_games = time.perf_counter() - t0
    rows, t_build = [], []
    for rep in range(repeat):
        t0 = time.perf_counter()
        dv = DesignView(games, task="gsm8k")
        t_build.append(time.perf_counter() - t0)
        seen = {dv.selection}
        for name, value in DESIGN_STEPS:
            w = getattr(dv, name)
            t0 = time.perf_counter()
            w.value = value
            dt = time.perf_counter() - t0
            assert "updated in" in dv.status.value, dv.status.value
            kind = "task" if name == "task" else "budget" if name in ("limit", "budget") else "other"
            rows.append(dict(rep=rep, change=f"{name} = {value}", kind=kind, revisit=dv.selection in seen, design_s=dt))
            seen.add(dv.selection)
    return pd.DataFrame(rows), t_games, statistics.median(t_build)


def browser_bench() -> pd.DataFrame:
    "Protocol switches in the explorer of the quickstart, in JupyterLab in headless Chromium."
    sys.path.insert(0, str(ROOT/"tests"))
    import test_notebook_e2e as e2e
    from playwright.sync_api import sync_playwright
    rows = []
    with tempfile.TemporaryDirectory() as tmp, e2e.lab_server(e2e.NOTEBOOK, Path(tmp)) as (base, token, nbname):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=e2e.CHROMIUM, headless=True)
            try:
                page, console = browser.new_page(viewport={"width": 1600, "height": 1500}), []
                e2e.open_and_run(page, console, base, token, nbname)
                sel = page.locator(e2e.PROTOCOL).first
                options = sel.evaluate("s => [...s.options].map(o => o.value)")
                current = sel.evaluate("s => s.value")
                page.wait_for_function("([sel, cur]) => [...(document.querySelector(sel)?.querySelectorAll('.role-title-text text, .role-title text') ?? [])].some(t => t.textContent.startsWith(cur + ' ×'))",
                                       arg=[e2e.CHART_SVG, current], timeout=60_000)
                order = [o for o in options if o != current] + [current]
                for rep in range(2):
                    for new in order:
                        t0 = time.perf_counter()
                        sel.select_option(value=new)
                        page.wait_for_function("([sel, nw]) => [...(document.querySelector(sel)?.querySelectorAll('.role-title-text text, .role-title text') ?? [])].some(t => t.textContent.startsWith(nw + ' ×'))",
                                               arg=[e2e.CHART_SVG, new], timeout=60_000, polling="raf")
                        rows.append(dict(revisit=rep == 1, protocol=new, browser_s=time.perf_counter() - t0))
            finally:
                browser.close()
    return pd.DataFrame(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="passes over the steps (fresh explorer each pass)")
    ap.add_argument("--browser", action="store_true", help="also time protocol switches in JupyterLab in headless Chromium")
    ap.add_argument("--no-design", action="store_true", help="skip the Design view's timings (they load the committed study's record)")
    a = ap.parse_args()
    cfg = load_config()
    cache = tempfile.mkdtemp()
    res = run_experiment(cfg, cache_dir=cache, progress=False)
    rows = []
    for rep in range(a.repeat):
        ex = explore(res, protocol="majority_vote")
        seen = {ex.selection}
        for name, value in STEPS:
            w = getattr(ex, name)
            t0 = time.perf_counter()
            w.value = value
            dt = time.perf_counter() - t0
            assert "updated in" in ex.status.value and "all cached" in ex.status.value, ex.status.value
            revisit = ex.selection in seen
            seen.add(ex.selection)
            rows.append(dict(rep=rep, change=f"{name} = {value if name != 'members' else len(value)}",
                             revisit=revisit, explorer_s=dt))
    df = pd.DataFrame(rows)
    # the path without the explorer: rerun the one setting from warm caches, rebuild the chart
    base = []
    for proto, task in [("cascade", "arithmetic"), ("moa", "gsm8k"), ("logit_fusion", "gsm8k"), ("majority_vote", "gsm8k")]:
        raw = cfg.model_dump(exclude={"path"})  # the config as data: one setting of it is a smaller config
        raw["protocols"] = {k: {**v.pop("params"), **{x: y for x, y in v.items() if y is not None}}
                            for k, v in raw["protocols"].items() if k == proto}
        c = ExperimentConfig.model_validate({**raw, "run": {**raw["run"], "protocols": [proto]},
                                             "tasks": [t for t in raw["tasks"] if t["name"] == task]})
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            r = run_experiment(c, cache_dir=cache, progress=False)
            o = r["outcomes"]
            alt.vconcat(alt.hconcat(strength_scatter(r["values"], r["correlations"]), coalition_lattice(coalition_table(o))),
                        alt.hconcat(interaction_heatmap(interaction_table(o)), contribution_chart(contribution_table(o)))).to_dict()
            base.append(time.perf_counter() - t0)
    first = df[~df.revisit].explorer_s
    print(f"## Explorer: widget change -> updated chart, on cached results ({a.repeat} passes x {len(STEPS)} changes)\n")
    per = df.groupby("change", sort=False).explorer_s.median().mul(1000).round(1).rename("median ms").to_frame()
    print(per.to_string())
    print()
    med_first, med_rev = statistics.median(first), statistics.median(df[df.revisit].explorer_s) if df.revisit.any() else float("nan")
    med_base = statistics.median(base)
    out = pd.DataFrame([
        dict(path="explorer, first visit of a selection", median_s=round(med_first, 3), p90_s=round(first.quantile(0.9), 3), n=len(first)),
        dict(path="explorer, revisit (memoised)", median_s=round(med_rev, 3),
             p90_s=round(df[df.revisit].explorer_s.quantile(0.9), 3), n=int(df.revisit.sum())),
        dict(path="without it: run_experiment on the setting (warm cache) + the same charts", median_s=round(med_base, 3),
             p90_s=round(pd.Series(base).quantile(0.9), 3), n=len(base))])
    print(out.to_string(index=False))
    print(f"\nratio (rerun path / explorer first visit): {med_base / med_first:.2f}x;  "
          f"share of first-visit changes under 0.5 s: {(first < 0.5).mean():.0%}")
    if a.browser:
        b = browser_bench()
        print("\n## In the browser: protocol switch -> new chart drawn (JupyterLab, headless Chromium)\n")
        print(b.groupby("revisit").browser_s.agg(median="median", p90=lambda s: s.quantile(0.9), max="max", n="count")
              .round(3).rename(index={False: "first visit", True: "revisit (memoised)"}).to_string())


    if not a.no_design:
        d, t_games, t_build = design_bench(a.repeat)
        print(f"\n## Design view: widget change -> updated chart, recommendation and table, on the committed study's record "
              f"({a.repeat} passes x {len(DESIGN_STEPS)} changes; defaults: 20 halvings, 2000 bootstrap resamples)\n")
        print(f"record loaded and read by design_games in {t_games:.1f} s; DesignView built (first frontier and recommendation) in {t_build:.3f} s (median)\n")
        print(d.groupby("change", sort=False).design_s.agg(["median", "max"]).mul(1000).round(1).add_suffix(" ms").to_string())
        print()
        first = d[~d.revisit]
        summ = [dict(path=f"design view, {k} change, first visit", median_s=round(x.design_s.median(), 3), p90_s=round(x.design_s.quantile(0.9), 3),
                     max_s=round(x.design_s.max(), 3), n=len(x)) for k, x in first.groupby("kind", sort=False)]
        if d.revisit.any():
            x = d[d.revisit]
            summ.append(dict(path="design view, revisit (memoised)", median_s=round(x.design_s.median(), 3), p90_s=round(x.design_s.quantile(0.9), 3),
                             max_s=round(x.design_s.max(), 3), n=len(x)))
        print(pd.DataFrame(summ).to_string(index=False))
        print(f"\nshare of Design view changes under 1 s: {(d.design_s < 1).mean():.0%}")


if __name__ == "__main__":
    main()
