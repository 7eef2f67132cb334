"""How long `compstrength design` takes on the committed study, and what its held-out answer costs beside the naive pick.

The committed study (configs/study.toml) is replayed once into a temporary results folder (`compstrength run --out`, no model
call), then, side by side in one run:
  1. `compstrength design RESULTS` end to end through the installed command (Python start-up and imports included), 3 runs;
  2. its parts in this process: `design_games` (reading the record), `best_systems` over every setting, `frontier` and
     `recommend` per (pool, task) and set of items;
  3. what a user would otherwise do: the naive in-sample pick, the coalition with the highest mean score per setting, read
     from games.csv.gz with pandas (`read_csv`, `groupby`, `idxmax`): no held-out figure, no CI, no cost;
  4. the start-up of the command (`import compstrength.cli`) beside the LLM client's import (`import compstrength.models`,
     LiteLLM), which `compstrength design` no longer pays.
Writes the printed tables to bench/results/bench_design.txt.

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/bench_design.py [--results DIR] [--repeats 3]
"""
import argparse, os, platform, statistics, subprocess, sys, tempfile, time
from pathlib import Path
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("compstrength")
LINES = []


def say(s: str = ""):
    print(s, flush=True); LINES.append(s)


def replay(root: Path) -> Path:
    "The committed study replayed into a results folder (`compstrength run --out`, a fresh COMPSTRENGTH_HOME: no model call)."
    from bench_replay import fresh_home
    env = {**os.environ, "COMPSTRENGTH_HOME": str(fresh_home(root))}
    t0 = time.perf_counter()
    r = subprocess.run([str(EXE), "run", "--out", str(root/"res")], cwd=REPO, env=env, capture_output=True, text=True)
    if r.returncode: sys.exit(f"compstrength run failed ({r.returncode}):\n{r.stderr[-3000:]}")
    say(f"# replayed the committed study into a results folder in {time.perf_counter() - t0:.1f} s (`compstrength run --out`, no model call)")
    return root/"res"


def timed(f, repeats: int) -> tuple:
    "Seconds of each of `repeats` calls of f, and the last result."
    out, secs = None, []
    for _ in range(repeats):
        t0 = time.perf_counter(); out = f(); secs.append(time.perf_counter() - t0)
    return secs, out


def wall(cmd: list) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if r.returncode: sys.exit(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return time.perf_counter() - t0


def naive_pick(res: Path):
    "What a user would otherwise do: per setting, the coalition with the highest mean score on the items (in sample), from games.csv.gz with pandas."
    import pandas as pd
    g = pd.read_csv(res/"games.csv.gz", dtype={"item": str})
    m = g[g["mask"] > 0].groupby(["pool", "protocol", "task", "mask"], sort=False).score.mean()
    return {k[:3]: (k[3], v) for k, v in m.loc[m.groupby(level=["pool", "protocol", "task"], sort=False).idxmax()].items()}  # setting → (mask, mean)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=None, help="a results folder of `compstrength run` (default: replay the committed study into a temporary one)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(REPO/"bench"/"results"/"bench_design.txt"))
    a = ap.parse_args()
    say(f"# LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/bench_design.py {' '.join(sys.argv[1:])}".rstrip())
    say(f"# {platform.platform()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start "
        f"({time.strftime('%Y-%m-%d %H:%M')}; other jobs may share the cores: compare within this run)")
    with tempfile.TemporaryDirectory() as tmp:
        res = Path(a.results) if a.results else replay(Path(tmp))
        import numpy as np
        from compstrength.design import best_systems, design_games, frontier, recommend
        rows = []
        add = lambda what, secs, note="": rows.append(dict(what=what, secs=secs, note=note))
        add("compstrength design RESULTS (the command, end to end)", [wall([str(EXE), "design", str(res)]) for _ in range(a.repeats)],
            "start-up, imports, reading the record, every recommendation and table, printing")
        add("  start-up: python -c 'import compstrength.cli'", [wall([sys.executable, "-c", "import compstrength.cli"]) for _ in range(a.repeats)],
            "the command's imports (numpy, pandas, scipy, design); no LiteLLM")
        add("  not paid: python -c 'import compstrength.models'", [wall([sys.executable, "-c", "import compstrength.models"]) for _ in range(a.repeats)],
            "the LLM client the command imported before it imported lazily")
        secs, games = timed(lambda: design_games(res), a.repeats)
        add("  design_games(RESULTS)", secs, f"{len(games)} settings, upper bounds left out")
        secs, best = timed(lambda: [best_systems(g) for g in games.values()], a.repeats)
        add("  best_systems, every setting", secs, f"{sum(len(b) for b in best)} rows (every size and 'any'), 20 halvings, 2,000 resamples")
        groups = {}
        for g in games.values(): groups.setdefault((g.pool, g.task, tuple(g.items)), []).append(g)
        secs, _ = timed(lambda: [frontier(gs) for gs in groups.values()], a.repeats)
        add("  frontier, per (pool, task) and item set", secs, f"{len(groups)} groups of settings on the same items")
        secs, recs = timed(lambda: [recommend(gs) for gs in groups.values()], a.repeats)
        add("  recommend, per (pool, task) and item set", secs, "the sentence with its CI, and the table behind it")
        secs, naive = timed(lambda: naive_pick(res), a.repeats)
        add("naive in-sample pick (pandas: read games.csv.gz, groupby, idxmax)", secs, f"{len(naive)} settings: the best coalition on the same items, no CI")
    base = statistics.median(rows[-1]["secs"])
    say(f"\n# seconds of each of {a.repeats} runs, their median, and the median against the naive pick's")
    w = max(len(r["what"]) for r in rows)
    rw = 7 * a.repeats - 1
    say(f"{'':{w}}  {'runs, s':>{rw}}  {'median s':>8}  {'x naive':>7}  what")
    for r in rows:
        med = statistics.median(r["secs"])
        say(f"{r['what']:{w}}  {' '.join(f'{s:6.2f}' for s in r['secs']):>{rw}}  {med:8.2f}  {med / base:7.2f}  {r['note']}")
    say("\n# what the naive pick reports beside what `compstrength design` reports for the same question (best coalition of any size, per setting)")
    say(f"{'setting':<40} {'naive pick: in sample':>22}  {'held out [95% CI]':>24}  {'optimism':>8}")
    for b in best:
        r = b[b["size"].astype(str) == "any"].iloc[0]
        key = (r.pool, r.protocol, r.task)
        say(f"{' × '.join(key):<40} {naive[key][1]:>22.3f}  {f'{r.heldout:.3f} [{r.heldout_ci_low:.3f}, {r.heldout_ci_high:.3f}]':>24}  {r.naive - r.heldout:+8.3f}")
    say(f"\n# load average {os.getloadavg()[0]:.2f} at the end")
    Path(a.out).write_text("\n".join(LINES) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
