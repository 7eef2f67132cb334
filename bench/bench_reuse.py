"""Every coalition × item of the five answer-reuse protocols: the CoalitionGame path (one protocol run per
(coalition, item), on a subset of coalitions, extrapolated) vs `reuse_values` (all 2^n coalitions at once),
side by side in one run, at n = 4 and 8 players × 500 items.

Answers are SYNTHETIC (a `StandInPool` answering real GSM8K test questions with seeded answers, ties and near
misses): the timing of both paths does not depend on where the answers came from, and a stand-in answers
instantly, so the game path's time here is its own overhead, not model time. The trained router runs on MiniLM
features, as in the default study; the MiniLM question embeddings are computed once per process and kept (their
time is printed on its own). On the game-path subset the two paths are also compared item by item.

    .venv/bin/python bench/bench_reuse.py [--items 500] [--ns 4 8] [--coalitions 3] [--n-dev 50]
"""
import argparse, os, platform, random, sys, tempfile, time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np

from compstrength.attribution import coalition_of, mask_of, parse_coalition
from compstrength.game import CoalitionGame
from compstrength.proto_api import embed_minilm
from compstrength.protocols import dev_task, get_protocol, item_text
from compstrength.reuse import REUSE_PROTOCOLS, StandInPool, dev_answers, own_answers, reuse_values
from compstrength.tasks import load_task

SIZES = {"smollm2-135m": "135M", "gemma3-270m": "270M", "qwen2.5-coder-0.5b": "0.5B", "qwen2.5-coder-1.5b": "1.5B",
         "smollm2-135m-direct": "135M", "gemma3-270m-direct": "270M", "qwen2.5-coder-0.5b-direct": "0.5B", "qwen2.5-coder-1.5b-direct": "1.5B"}


def protocols(n_dev):
    return [get_protocol("cascade", n_dev=n_dev), get_protocol("trained_router", n_dev=n_dev, features="minilm"),
            get_protocol("oracle_router"), get_protocol("majority_vote"), get_protocol("weighted_vote", n_dev=n_dev)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--ns", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--coalitions", type=int, default=3, help="coalitions per protocol run through CoalitionGame (all items)")
    ap.add_argument("--n-dev", type=int, default=50)
    a = ap.parse_args()
    print(f"# bench_reuse  {platform.node()}  {os.cpu_count()} cores  python {platform.python_version()}")
    print(f"# SYNTHETIC answers (StandInPool) to {a.items} real GSM8K test questions; n_dev={a.n_dev}; trained router on MiniLM")
    task = load_task("gsm8k", split="test", limit=a.items, seed=0)
    dev = dev_task(task, a.n_dev, 0)
    t0 = time.perf_counter(); embed_minilm(["warm-up"]); t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    for it in task: embed_minilm([item_text(task, it)])  # one at a time, as the protocol embeds a question (kept per process)
    t_emb = time.perf_counter() - t0
    print(f"MiniLM: model load {t_load:.1f} s; {len(task)} question embeddings {t_emb:.1f} s, once per process (kept)")
    rows = []
    for n in a.ns:
        players = list(SIZES)[:n]
        client = StandInPool({p: SIZES[p] for p in players}, [task, dev], seed=n)
        t0 = time.perf_counter()
        ans = own_answers(client, task, players)
        devs = {p.name: dev_answers(client, p, task, players) for p in protocols(a.n_dev) if p.uses_dev}
        t_ans = time.perf_counter() - t0
        print(f"\nn={n}: {2 ** n - 1} coalitions x {len(task)} items; own + dev answers from the stand-in: {t_ans:.1f} s")
        masks = random.Random(n).sample(range(1, 2 ** n), a.coalitions)
        total_reuse = total_game = 0.0
        for p in protocols(a.n_dev):
            d = devs.get(p.name)
            t0 = time.perf_counter(); table = reuse_values(p, client, task, ans, d, players); t_first = time.perf_counter() - t0
            t0 = time.perf_counter(); reuse_values(p, client, task, ans, d, players); t_again = time.perf_counter() - t0
            game = CoalitionGame(client, p, task, players, cache_dir=tempfile.mkdtemp(), progress=False)
            t0 = time.perf_counter(); out = game.evaluate([coalition_of(m, players) for m in masks]); t_sub = time.perf_counter() - t0
            t_game = t_sub * (2 ** n - 1) / len(masks)
            wide = out.pivot(index="coalition", columns="item", values="score")[[it.id for it in task]]
            diff = float(np.nanmax(np.abs(wide.to_numpy(float) - table[[mask_of(parse_coalition(c), players) for c in wide.index]]), initial=0))
            total_reuse += t_first; total_game += t_game
            rows.append((n, p.name, t_game, t_first, t_again, diff))
            print(f"  {p.name:15s} game (extrapolated from {len(masks)} coalitions x {len(task)} items, {t_sub:6.1f} s) {t_game:9.1f} s"
                  f" | reuse_values {t_first:6.3f} s (again {t_again:6.3f} s) | ratio {t_game / t_first:8.0f}x | max |diff| on subset {diff:g}")
        print(f"  ALL FIVE        game (extrapolated) {total_game:9.1f} s | reuse_values {total_reuse:6.2f} s | ratio {total_game / total_reuse:8.0f}x")
    assert all(r[-1] == 0 for r in rows), "reuse_values differs from the protocol path"


if __name__ == "__main__":
    sys.exit(main())
