"""What the study of configs/study.toml costs to collect, and what is left: model calls and hours, per task, before
and during collection, from the recording and the collection's own log (no model is called).

Own answers (the protocols that reuse them): per task, the requests every pool needs — its players' answers to the
dev items and to the test items up to the stopping rule's first check (`min_items`) and up to the cap — less what
the recording holds; a player in several pools is asked once. Hours: the requests left times the seconds per model
call the collection log measured on this machine for the same kind of batch (`log.ndjson`: seconds / model calls of
every batch that called a model), in two kinds: batches of players that give the final answer only (a few tokens
each), and batches with players that show their working (hundreds of tokens); a task with both kinds of players is
charged each at its rate. A rate is the median over the logged batches of that kind, with its range.

The protocols that call per coalition: every (pool, task) experiment the recording does not hold yet, counted by
bench_text_budget's stand-in client (the distinct calls its live run would make) and timed at the measured
generation rates (see bench_text_budget.py).

    .venv/bin/python bench/bench_grid_cost.py [--config configs/study.toml]
"""
import argparse, json, sys, time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def batch_rates(log: Path) -> dict:
    "kind ('direct' or 'working') -> seconds per model call of each logged batch of that kind: 'working' when its calls average over 30 generated tokens (some player shows its working)."
    if not log.exists(): return {}
    rows = [json.loads(l) for l in log.read_text().splitlines() if l.strip()]
    out = {"direct": [], "working": []}
    for r in rows:
        if not r.get("model_calls") or not r.get("seconds"): continue
        out["working" if r["completion_tokens"] / r["model_calls"] > 30 else "direct"].append(r["seconds"] / r["model_calls"])
    return {k: np.array(v) for k, v in out.items() if v}


def own_answers_left(cfg, have: dict) -> pd.DataFrame:
    "Per task and kind of player: requests to the first check (min_items) and to the cap, and how many the recording holds."
    from compstrength.config import study_players
    from compstrength.experiment import item_order
    from compstrength.protocols import dev_task
    from compstrength.study import batch_requests
    from compstrength.tasks import load_task
    specs = {s.name: s for s in study_players(cfg)}
    e, rows = cfg.evaluation, []
    for t in cfg.tasks:
        pools = cfg.adaptive_players(t.name)
        if not pools: continue
        task = load_task(t.name, split="test")
        order, dev = item_order(task, e.seed)[:cfg.cap(t.name)], dev_task(task, cfg.n_dev, e.seed).items
        players = [specs[n] for n in dict.fromkeys(n for ns in pools.values() for n in ns)]
        for kind in ("direct", "working"):
            ps = [p for p in players if (p.style == "direct") == (kind == "direct")]
            if not ps: continue
            need_min = [k for *_, k in batch_requests(task, [*dev, *order[:e.min_items]], ps, e.max_tokens)]
            need_cap = [k for *_, k in batch_requests(task, [*dev, *order], ps, e.max_tokens)]
            rows.append(dict(task=t.name, players=kind, n_players=len(ps), to_first_check=len(need_min), to_cap=len(need_cap),
                             recorded=sum(k in have for k in need_cap), left_to_first_check=sum(k not in have for k in need_min),
                             left_to_cap=sum(k not in have for k in need_cap)))
    return pd.DataFrame(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=str(ROOT/"configs"/"study.toml"))
    ap.add_argument("--skip-games", action="store_true", help="leave out the protocols that call per coalition")
    a = ap.parse_args()
    from compstrength.config import load_study
    from compstrength.models import load_recording
    from compstrength.study import study_folder, study_progress, collection_cost
    pd.set_option("display.width", 200)
    cfg = load_study(a.config)
    folder = study_folder(cfg)
    have = load_recording(folder) if folder.exists() else {}
    print(f"# bench_grid_cost.py {' '.join(sys.argv[1:])}; {time.strftime('%Y-%m-%d %H:%M')}; no model is called".rstrip())
    print(f"# {cfg.path}: {len(cfg.players)} players in {len(cfg.pools)} pools ({', '.join(f'{p} {len(v)}' for p, v in cfg.pools.items())}), "
          f"{len(cfg.tasks)} tasks; batches of {cfg.evaluation.batch}, first check at {cfg.evaluation.min_items} items; the recording holds {len(have)} answers")
    rates = batch_rates(folder/"log.ndjson")
    for k, v in rates.items():
        print(f"# measured seconds per model call, batches of {k} players: median {np.median(v):.2f} (range {v.min():.2f} to {v.max():.2f}, {len(v)} batches)")
    df = own_answers_left(cfg, have)
    rate = {k: float(np.median(v)) for k, v in rates.items()}
    rate.setdefault("direct", rate.get("working", np.nan)); rate.setdefault("working", rate.get("direct", np.nan))
    df["hours_to_first_check"] = (df.left_to_first_check * df.players.map(rate) / 3600).round(2)
    df["hours_to_cap"] = (df.left_to_cap * df.players.map(rate) / 3600).round(2)
    print("\n## Own answers: requests per task and kind of player (dev items + test items), what the recording holds, what is left, and hours at the measured rates")
    print(df.to_string(index=False))
    tot = df[["to_first_check", "to_cap", "recorded", "left_to_first_check", "left_to_cap", "hours_to_first_check", "hours_to_cap"]].sum()
    print(f"total: {int(tot.left_to_first_check)} calls ({tot.hours_to_first_check:.1f} h) until every pool's first check, "
          f"{int(tot.left_to_cap)} calls ({tot.hours_to_cap:.1f} h) to every cap; the stopping rule ends a pool on a task between the two")
    print("\n## Where each pool stands (from the recording)")
    print(study_progress(cfg, have).to_string(index=False))
    print("\n## What collection has cost so far (the log)")
    print(collection_cost(cfg).to_string(index=False))
    if a.skip_games: return
    from bench_text_budget import count, gen_rates, hours, token_table
    from compstrength.experiment import call_groups, experiment_config
    from compstrength.study import study_results
    res = study_results(cfg)
    pend = res["pending"]
    print(f"\n## The protocols that call per coalition: {len(call_groups(cfg))} (pool, task) experiments, {len(pend)} not recorded yet")
    tokens, grates = token_table(ROOT/"data"/"recordings"/"main.jsonl"), gen_rates(ROOT/"bench"/"results"/"bench_throughput.txt")
    rows = []
    for r in pend.itertuples():
        ec = experiment_config(cfg, r.pool, r.protocols.split(", "), r.recording, tuple(r.tasks.split(", ")))
        c = count(ec, tokens)
        c["hours"] = hours(c, ec, grates, None, None).round(2)
        rows.append(c.assign(pool=r.pool))
    if rows:
        g = pd.concat(rows, ignore_index=True)
        print(g[["pool", "protocol", "task", "players", "items", "budget", "coalitions", "of", "model_calls", "gen_tokens", "hours"]].to_string(index=False))
        print(f"total: {int(g.model_calls.sum())} distinct model calls, ~{g.hours.sum():.1f} h of generation (each setting alone: an upper bound; prompt processing not included)")


if __name__ == "__main__":
    main()
