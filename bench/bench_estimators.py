"""Error of the Shapley estimators against exact values, by budget: ours and shapiq's, side by side.

Games (n players, seeded):
- random: v(S) ~ U(0, 1) independently for every coalition, v(∅) included (a hard, structureless game);
- voting: weighted majority, integer weights U{1..10}, v(S) = 1 if the weights in S exceed half the total;
- ensemble: a per-item majority vote of simulated models (accuracy U(0.3, 0.8), 200 items), v(S) the
  share of items that S's strict majority gets right, v(∅) = 0.

Estimators: ours (`compstrength.attribution`): `stratified` (the default), `permutation` (antithetic Monte
Carlo), `kernel` (shap.KernelExplainer); shapiq's (version printed at the top of the output):
KernelSHAP, SVARM, SVARMIQ (index SV), PermutationSamplingSV, StratifiedSamplingSV, OwenSamplingSV,
UnbiasedKernelSHAP, kADDSHAP (2-additive), RegressionFSII (order 1). shapiq 1.4.1 has no LeverageSHAP.
Every stochastic estimator is seeded with the seed of the game (shapiq: `random_state`).

Budget accounting, the same for every method: the budget is the number of DISTINCT coalitions whose value
the method reads, v(∅) and v(N) included. Each method gets the game as a function that records the
coalitions it is asked for (ours: a callable on frozensets, which `attribute` caches, so each call is
one new coalition; shapiq: a function over 0/1 coalition matrices); a run that reads more than its budget
stops the bench. shapiq's samplers count v(∅) and v(N) in their budget as well.

Reported, for each game, budget (a share of 2^n) and method: the max over players of |estimate − exact|,
its mean and max over the seeds, the same relative to max |exact Shapley|, and seconds per estimate.
The summary compares `stratified` with the best shapiq approximator of that setting (lowest mean error):
ratio < 1 means ours is more accurate.

    .venv/bin/python bench/bench_estimators.py [--ns 10 11 12] [--seeds 10] [--first-seed 0] [--shares 0.05 0.1 0.25 1.0]
"""
import argparse, sys, time, warnings
from importlib.metadata import version

import numpy as np
import pandas as pd

from compstrength.attribution import attribute, attribute_table, _popcount


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
OURS = ("stratified", "permutation", "kernel")
SHAPIQ = {  # name -> keyword arguments besides n and random_state
    "KernelSHAP": {}, "SVARM": {}, "SVARMIQ": dict(index="SV", max_order=1), "PermutationSamplingSV": {},
    "StratifiedSamplingSV": {}, "OwenSamplingSV": {}, "UnbiasedKernelSHAP": {}, "kADDSHAP": dict(max_order=2),
    "RegressionFSII": dict(max_order=1)}


def ours(table, n, method, budget, seed):
    "Our estimate, and the distinct coalitions it read."
    asked = []
    def v(S):
        m = sum(1 << p for p in S); asked.append(m); return table[m]
    est = attribute(v, range(n), method, budget=budget, seed=seed).to_numpy()
    assert len(set(asked)) == len(asked)  # `attribute` caches: each call is a new coalition
    return est, len(asked)


def shapiq_estimate(table, n, name, budget, seed):
    "shapiq's estimate, and the distinct coalitions it read."
    import shapiq
    bits = np.int64(1) << np.arange(n, dtype=np.int64)
    asked = set()
    def game(M):
        masks = np.atleast_2d(np.asarray(M)).astype(np.int64) @ bits
        asked.update(masks.tolist())
        return table[masks]
    approx = getattr(shapiq, name)(n=n, random_state=seed, **SHAPIQ[name])
    iv = approx.approximate(budget, game)
    return np.array([iv[(i,)] for i in range(n)]), len(asked)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", type=int, nargs="+", default=[10, 11, 12])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds − 1 (a second, independent set: 100)")
    ap.add_argument("--shares", type=float, nargs="+", default=[0.05, 0.10, 0.25, 1.0])
    a = ap.parse_args()
    print(f"# {' '.join(['.venv/bin/python', *sys.argv])}\n# shapiq {version('shapiq')}, shap {version('shap')}", flush=True)
    warnings.filterwarnings("ignore")  # shapiq warns when a budget covers (nearly) every coalition
    attribute_table(np.arange(16.0), range(4), "kernel", budget=16)  # warm-up: import shap
    shapiq_estimate(np.arange(16.0), 4, "SVARM", 8, 0)  # and shapiq
    rows = []
    for n in a.ns:
        for gname, make in GAMES.items():
            for seed in range(a.first_seed, a.first_seed + a.seeds):
                t = make(n, np.random.default_rng(1000 * n + seed))
                exact = attribute_table(t, list(range(n))).to_numpy()
                scale = np.abs(exact).max()
                for share in a.shares:
                    budget = int(round(share * (1 << n)))
                    for method in (*OURS, *SHAPIQ):
                        t0 = time.perf_counter()
                        est, used = (ours if method in OURS else shapiq_estimate)(t, n, method, budget, seed)
                        s = time.perf_counter() - t0
                        assert used <= budget, (method, n, budget, used)
                        rows.append(dict(n=n, game=gname, share=share, budget=budget, method=method, seed=seed, used=used,
                                         err=np.abs(est - exact).max(), rel=np.abs(est - exact).max() / scale, s=s))
        print(f"n={n} done", flush=True)
    df = pd.DataFrame(rows)
    key = ["n", "game", "share", "budget"]
    tab = (df.groupby([*key, "method"]).agg(err_mean=("err", "mean"), err_max=("err", "max"), rel=("rel", "mean"),
                                            s=("s", "mean"), used=("used", "max")).reset_index())
    best = tab[tab.method.isin(list(SHAPIQ))].sort_values("err_mean").groupby(key).head(1).set_index(key)
    mine = tab[tab.method == "stratified"].set_index(key)
    summ = pd.DataFrame({"stratified err": [f"{e:.2e} ({x:.2e})" for e, x in zip(mine.err_mean, mine.err_max)],
                         "best shapiq": best.method.reindex(mine.index),
                         "its err": [f"{e:.2e} ({x:.2e})" for e, x in zip(best.err_mean.reindex(mine.index), best.err_max.reindex(mine.index))],
                         "ratio mean": (mine.err_mean / best.err_mean.reindex(mine.index)).map("{:.2f}".format),
                         "ratio max": (mine.err_max / best.err_max.reindex(mine.index)).map("{:.2f}".format),
                         "stratified s": mine.s.map("{:.4f}".format), "its s": best.s.reindex(mine.index).map("{:.4f}".format)})
    summ = summ.reset_index()
    summ["share"] = [f"{s:.0%}" for s in summ["share"]]
    sampled = df[df.share < 1]
    wins = (mine.err_mean <= best.err_mean.reindex(mine.index))[mine.index.get_level_values("share") < 1]
    with pd.option_context("display.width", 250, "display.max_rows", 1000, "display.max_columns", 30):
        print(f"\n# max |estimate - exact| over players: mean (max) over {a.seeds} seeds. ratio: stratified / the best "
              "shapiq approximator of the row (lowest mean error); < 1: ours is more accurate. s: seconds per estimate\n")
        print(summ.to_string(index=False))
        print(f"\n# below 100% of 2^n: stratified has the lower mean error in {int(wins.sum())} of {len(wins)} settings; "
              f"lower max error in {int((mine.err_max <= best.err_max.reindex(mine.index))[wins.index].sum())} of {len(wins)}")
        print(f"# every method read at most its budget of distinct coalitions ({len(df)} runs; {len(sampled)} below 100%)")
        print("\n# every method: err = mean (max) over seeds; rel = err / max |exact Shapley| (mean); s = seconds (mean); "
              "used = distinct coalitions read (max)\n")
        tab["err"] = [f"{e:.2e} ({x:.2e})" for e, x in zip(tab.err_mean, tab.err_max)]
        tab["share"] = [f"{s:.0%}" for s in tab["share"]]
        order = {m: k for k, m in enumerate((*OURS, *SHAPIQ))}
        tab = tab.sort_values(["n", "game", "budget"], kind="stable").sort_values(
            ["n", "game", "budget", "method"], key=lambda c: c.map(order) if c.name == "method" else c, kind="stable")
        print(tab[[*key, "method", "err", "rel", "s", "used"]].to_string(index=False, formatters={"rel": "{:.3f}".format, "s": "{:.4f}".format}))


if __name__ == "__main__":
    main()
