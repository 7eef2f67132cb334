"""Model calls of a coalition game vs the distinct-call lower bound (issue 3).

Exact Shapley over the 4 embedded models × majority vote × N items needs v(S) for all 15
coalitions. A per-coalition re-execution sends sum_S |S| × N = 32 × N requests; the distinct
requests are one per (member, item) = 4 × N, and that is what compstrength sends to the models
(call cache + in-flight de-duplication). A rerun makes 0 calls (coalition cache).

Usage: .venv/bin/python bench/bench_game_calls.py [--items 50] [--task arithmetic]
Runs live on the embedded pool with fresh caches (uses a running `compstrength pool up`, or starts one).
"""
import argparse, tempfile, time
from pathlib import Path

import pandas as pd

from compstrength.game import CoalitionGame, all_coalitions
from compstrength.local import local_pool
from compstrength.models import ModelClient
from compstrength.protocols import get_protocol
from compstrength.tasks import load_task


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=50)
    ap.add_argument("--task", default="arithmetic")
    a = ap.parse_args()
    task = load_task(a.task, split="test", limit=a.items, seed=0)
    tmp = Path(tempfile.mkdtemp(prefix="bench-game-"))
    rows = []
    with local_pool() as pool:
        for run in ("first", "rerun"):
            client = ModelClient(pool.specs(), cache_dir=tmp/"calls")
            game = CoalitionGame(client, get_protocol("majority_vote"), task, cache_dir=tmp/"coalitions", progress=False)
            t0 = time.perf_counter()
            out = game.evaluate()
            dt = time.perf_counter() - t0
            n = len(game.players)
            u = client.usage()
            rows.append(dict(run=run, coalitions=len(all_coalitions(game.players)), items=len(task),
                             per_coalition_requests=int(sum(len(c) for c in all_coalitions(game.players)) * len(task)),
                             lower_bound=n * len(task), model_calls=int((~u.cached).sum()),
                             errors=int(out.error.notna().sum()), seconds=round(dt, 2)))
    df = pd.DataFrame(rows)
    print(f"## Model calls for exact Shapley: 4 models × majority vote × {len(task)} {a.task} items")
    print(df.to_string(index=False))
    first = df.iloc[0]
    print(f"model calls / lower bound = {first.model_calls / first.lower_bound:.2f}; "
          f"per-coalition re-execution would send {first.per_coalition_requests / first.model_calls:.0f}x more")


if __name__ == "__main__":
    main()
