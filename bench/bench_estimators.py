"""Error of the Shapley estimators against exact values, by budget.

Games (n players, seeded):
- random: v(S) ~ U(0, 1) independently for every coalition, v(∅) included (a hard, structureless game);
- voting: weighted majority, integer weights U{1..10}, v(S) = 1 if the weights in S exceed half the total;
- ensemble: a per-item majority vote of simulated models (accuracy U(0.3, 0.8), 200 items), v(S) the
  share of items that S's strict majority gets right, v(∅) = 0.

For each game, budget (a share of 2^n coalition evaluations) and seed: max over players of
|estimate − exact| for `permutation` (antithetic Monte Carlo) and `kernel` (shap.KernelExplainer).

    .venv/bin/python bench/bench_estimators.py [--ns 10 11 12] [--seeds 10]
"""
import argparse, time

import numpy as np
import pandas as pd

from compstrength.attribution import attribute_table, _popcount


def random_game(n, rng):
    return rng.random(1 << n)


def voting_game(n, rng):
    w = rng.integers(1, 11, size=n).astype(float)
    masks = np.arange(1 << n)
    weight = ((masks[:, None] >> np.arange(n)) & 1) @ w
    return (weight > w.sum() / 2).astype(float)


def ensemble_game(n, rng, items=200):
    acc = rng.uniform(0.3, 0.8, size=n)
    right = (rng.random((items, n)) < acc).astype(np.int64)  # items × models
    masks = np.arange(1 << n)
    bits = (masks[:, None] >> np.arange(n)) & 1  # 2^n × n
    votes = bits @ right.T  # 2^n × items: right answers in S
    return (2 * votes > _popcount(n)[:, None]).mean(axis=1)


GAMES = dict(random=random_game, voting=voting_game, ensemble=ensemble_game)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", type=int, nargs="+", default=[10, 11, 12])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.05, 0.10, 0.25, 1.0])
    a = ap.parse_args()
    attribute_table(np.arange(16.0), range(4), "kernel", budget=16)  # warm-up: import shap
    rows = []
    for n in a.ns:
        for gname, make in GAMES.items():
            for seed in range(a.seeds):
                t = make(n, np.random.default_rng(1000 * n + seed))
                players = list(range(n))
                exact = attribute_table(t, players).to_numpy()
                scale = np.abs(exact).max()
                for share in a.shares:
                    budget = int(round(share * (1 << n)))
                    for method in ("permutation", "kernel"):
                        t0 = time.perf_counter()
                        est = attribute_table(t, players, method, budget=budget, seed=seed).to_numpy()
                        rows.append(dict(n=n, game=gname, share=share, budget=budget, method=method, seed=seed,
                                         err=np.abs(est - exact).max(), rel=np.abs(est - exact).max() / scale,
                                         s=time.perf_counter() - t0))
        print(f"n={n} done", flush=True)
    df = pd.DataFrame(rows)
    print(f"\n# max |estimate - exact| over players: mean (max) over {a.seeds} seeds; "
          "rel = that error / max |exact Shapley| (mean over seeds); s = seconds per estimate (mean)\n")
    g = df.groupby(["n", "game", "share", "budget", "method"])
    tab = g.agg(err_mean=("err", "mean"), err_max=("err", "max"), rel=("rel", "mean"), s=("s", "mean")).reset_index()
    wide = tab.pivot_table(index=["n", "game", "share", "budget"], columns="method",
                           values=["err_mean", "err_max", "rel", "s"]).sort_index()
    out = pd.DataFrame(index=wide.index)
    for m in ("permutation", "kernel"):
        out[f"{m} err"] = [f"{e:.2e} ({x:.2e})" for e, x in zip(wide[("err_mean", m)], wide[("err_max", m)])]
        out[f"{m} rel"] = [f"{r:.3f}" for r in wide[("rel", m)]]
        out[f"{m} s"] = [f"{s:.4f}" for s in wide[("s", m)]]
    out = out.reset_index()
    out["share"] = [f"{s:.0%}" for s in out["share"]]
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_columns", 20):
        print(out.to_string(index=False))


if __name__ == "__main__":
    main()
