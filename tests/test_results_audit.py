"""The results record can be audited from its files alone: every v(S), exact Shapley, LOO and Banzhaf value, every
bootstrap CI of a value and of a gain, every accuracy against chance, every dictator flag and every split-half ρ of the
main job's run, rebuilt here with numpy, scipy and pandas only (no compstrength code), from `games.csv.gz`,
`coalitions.csv`, `individual.csv` and the run's seed, level and resamples (those of configs/study.toml), pool by pool. A setting whose
Shapley value is a budgeted estimate (the protocols that call per coalition) holds only the coalitions the estimator
read: there its v(S), LOO and LOO CIs are rebuilt, and the estimate is left to the estimator's own tests.

Reads the session's one replay of the main job (conftest's `default_run`: `compstrength run`, no model call).
"""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

N_BOOT, LEVEL, SEED = 2000, 0.95, 0  # configs/study.toml (and the text experiment's config)


def _quantiles(boot: np.ndarray) -> tuple:
    return tuple(np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0))


def _resample_means(x: np.ndarray) -> np.ndarray:
    "Means of the columns of x (items × k) over the run's item resamples: numpy's default_rng(seed).integers, as documented."
    m = len(x)
    idx = np.random.default_rng(SEED).integers(0, m, size=(N_BOOT, m))
    counts = np.zeros((N_BOOT, m))
    np.add.at(counts, (np.repeat(np.arange(N_BOOT), m), idx.ravel()), 1)
    return counts @ x / m


@pytest.fixture(scope="module")
def record(default_run):
    r, res = default_run
    assert r.returncode == 0, r.stderr[-3000:]
    games = pd.read_csv(res/"games.csv.gz", dtype={"item": str})
    coal = pd.read_csv(res/"coalitions.csv")
    return dict(games=games, coal=coal, values=pd.read_csv(res/"values.csv"), protocols=pd.read_csv(res/"protocols.csv"),
                individual=pd.read_csv(res/"individual.csv", dtype={"item": str}), chance=pd.read_csv(res/"chance.csv"),
                correlations=pd.read_csv(res/"correlations.csv"))


KEY = ["pool", "protocol", "task"]


def _settings(record):
    "Per setting: (pool, protocol, task), its players in bit order (from the singleton coalitions), the masks × items score matrix (masks in order; NaN rows where a budgeted estimate read no such coalition) and the item ids."
    g, c = record["games"], record["coal"]
    for (pool, p, t), cs in c.groupby(KEY, sort=False):
        single = cs[cs["size"] == 1]
        n = int(cs["size"].max())
        players = [None] * n
        for r in single.itertuples(): players[int(math.log2(r.mask))] = r.members
        gs = g[(g.pool == pool) & (g.protocol == p) & (g.task == t)]
        wide = gs.pivot(index="mask", columns="item", values="score")
        items = list(pd.unique(gs.item[gs["mask"] == 0]))
        yield (pool, p, t), players, wide.reindex(range(2 ** n))[items].to_numpy(), items


def _weights(n: int, method: str) -> np.ndarray:
    "players × masks: φ_i = Σ_S w(S) v(S), for Shapley, Banzhaf or LOO, by the textbook formulas."
    W = np.zeros((n, 2 ** n))
    full = 2 ** n - 1
    for i in range(n):
        for S in range(2 ** n):
            if S >> i & 1: continue
            s = bin(S).count("1")
            if method == "shapley": w = math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n)
            elif method == "banzhaf": w = 1 / 2 ** (n - 1)
            else: w = 1.0 if S == full ^ (1 << i) else 0.0
            W[i, S | 1 << i] += w; W[i, S] -= w
    return W


def test_every_coalition_value_rebuilds_from_the_per_item_record(record):
    g, c = record["games"], record["coal"]
    v = g.groupby([*KEY, "mask"]).score.mean()
    got = v.loc[list(zip(c.pool, c.protocol, c.task, c["mask"]))].to_numpy()
    np.testing.assert_allclose(got, c.value.to_numpy(), rtol=0, atol=1e-12)
    assert len(c) == g.groupby([*KEY, "mask"]).ngroups          # every coalition of every setting, ∅ included
    assert (g.groupby([*KEY, "mask"]).size().groupby(KEY).nunique() == 1).all()   # same items in each


def test_every_value_and_its_ci_rebuilds_from_the_files(record):
    vals, checked, budgeted = record["values"].set_index([*KEY, "model"]), 0, 0
    for key, players, X, items in _settings(record):
        full = not np.isnan(X).any()                                         # every coalition: exact values; else a budgeted estimate
        budgeted += not full
        for method in (("shapley", "loo", "banzhaf") if full else ("loo",)):
            W = _weights(len(players), method)
            per_item = (W[:, ~np.isnan(X[:, 0])] @ X[~np.isnan(X[:, 0])]).T  # items × players, linear in the per-item game
            lo, hi = _quantiles(_resample_means(per_item))
            want = vals.loc[[(*key, m) for m in players]]
            np.testing.assert_allclose(per_item.mean(0), want[method], rtol=0, atol=1e-9, err_msg=f"{key} {method}")
            np.testing.assert_allclose(lo, want[f"{method}_ci_low"], rtol=0, atol=1e-9, err_msg=f"{key} {method} CI")
            np.testing.assert_allclose(hi, want[f"{method}_ci_high"], rtol=0, atol=1e-9, err_msg=f"{key} {method} CI")
            checked += 1
        if not full: assert set(vals.loc[[(*key, m) for m in players], "method"]) != {"exact"}  # the record says it is an estimate
    n = len(record["coal"].groupby(KEY))
    assert checked == 3 * (n - budgeted) + budgeted


def test_individual_strength_gain_and_chance_rebuild_from_the_files(record):
    ind, pt = record["individual"], record["protocols"].set_index(KEY)
    vals = record["values"].set_index([*KEY, "model"])
    assert {"source"} <= set(ind.columns) and ind.duplicated(["source", "task", "item", "model"]).sum() == 0
    item_sets = {}
    for key, players, X, items in _settings(record):
        pool, p, t = key
        item_sets.setdefault((pool, t, len(items)), items)
        src = ind[(ind.source == pool) & (ind.task == t) & ind.model.isin(players) & ind.item.isin(items)]
        own = src.pivot(index="item", columns="model", values="score").loc[items, players].to_numpy()
        np.testing.assert_allclose(own.mean(0), vals.loc[[(*key, m) for m in players], "individual"], rtol=0, atol=1e-12)
        means = own.mean(0)
        best = sorted(range(len(players)), key=lambda k: (-round(means[k], 12), players[k]))[0]
        gain = X[-1] - own[:, best]                                           # the grand coalition against the best member, per item
        lo, hi = _quantiles(_resample_means(gain[:, None]))
        row = pt.loc[key]
        assert row.best_individual_member == players[best]
        np.testing.assert_allclose([gain.mean(), lo[0], hi[0]], [row.gain, row.gain_ci_low, row.gain_ci_high], rtol=0, atol=1e-9)
    ch = record["chance"]
    for r in ch.itertuples():  # a pool read on two item sets of a task (its batches, a coalition game's sample) has a row for each
        s = ind[(ind.source == r.source) & (ind.task == r.task) & (ind.model == r.model) & ind.item.isin(item_sets[(r.source, r.task, r.items)])]
        k = int(round(s.score.sum()))
        ci = stats.binomtest(k, len(s)).proportion_ci(LEVEL, method="exact")
        assert (len(s), k) == (r.items, r.correct) and abs(ci.low - r.ci_low) < 1e-12 and abs(ci.high - r.ci_high) < 1e-12
        top = s.answer.fillna("(none)").astype(str).value_counts()
        assert abs(top.max() / len(s) - r.top_share) < 1e-12
        assert r.guessing == (ci.low <= r.chance + 1e-12 or top.max() / len(s) >= 0.8)


def test_split_half_rho_rebuilds_from_the_files(record):
    # individual strength on one half of the items, Shapley value on the other: halving r is the permutation r of
    # numpy's default_rng(seed), its first m // 2 items one half; Spearman ρ of the means (12 decimals, average ranks)
    # both ways round, averaged over the 200 halvings where defined
    corr = record["correlations"]
    main = corr[(corr.x == "individual") & (corr.y == "shapley")].set_index(KEY)
    ind, checked = record["individual"], 0
    for key, players, X, items in _settings(record):
        if np.isnan(X).any(): continue                                       # a budgeted estimate: its per-item Shapley is the estimator's
        pool, p, t = key
        src = ind[(ind.source == pool) & (ind.task == t) & ind.model.isin(players) & ind.item.isin(items)]
        own = src.pivot(index="item", columns="model", values="score").loc[items, players].to_numpy() - X[0][:, None]
        phi = (_weights(len(players), "shapley") @ X).T
        m, rng, rhos = len(items), np.random.default_rng(SEED), []
        for _ in range(200):
            a = np.zeros(m, bool); a[rng.permutation(m)[: m // 2]] = True
            for u, w in ((own[a], phi[~a]), (own[~a], phi[a])):
                x, y = np.round(u.mean(0), 12), np.round(w.mean(0), 12)
                rhos.append(np.nan if np.ptp(x) == 0 or np.ptp(y) == 0 else stats.spearmanr(x, y).statistic)
        rhos = np.asarray(rhos)
        want = main.loc[key]
        assert abs(np.mean(~np.isnan(rhos)) - want.spearman_split_defined) < 1e-12, key
        if np.isnan(rhos).all(): assert np.isnan(want.spearman_split), key
        else: np.testing.assert_allclose(np.nanmean(rhos), want.spearman_split, rtol=0, atol=1e-9, err_msg=str(key))
        checked += 1
    assert checked > 0


def test_dictator_flags_follow_their_stated_rule(record):
    c, pt = record["coal"], record["protocols"].set_index(KEY)
    corr = record["correlations"]
    main = corr[(corr.x == "individual") & (corr.y == "shapley")].set_index(KEY)
    for key, cs in c.groupby(KEY, sort=False):
        cs = cs[cs["size"] > 0]
        if len(cs) < 2 ** int(cs["size"].max()) - 1: continue  # a budgeted game: the rule reads every coalition, which it has not
        n = int(cs["size"].max())
        fixed = {}
        for k in range(n):
            single = cs.loc[cs["mask"] == 1 << k, "value"].iloc[0]
            has = cs[(cs["mask"].to_numpy() >> k & 1) == 1]
            share = float((np.abs(has.value - single) <= 0.01 + 1e-12).mean())
            y, x = cs.value.to_numpy(), (cs["mask"].to_numpy() >> k & 1) == 1
            r2 = (x.sum() * (y[x].mean() - y.mean()) ** 2 + (~x).sum() * (y[~x].mean() - y.mean()) ** 2) / ((y - y.mean()) ** 2).sum()
            fixed[cs.loc[cs["mask"] == 1 << k, "members"].iloc[0]] = (share, r2)
        dictators = {m for m, (s, r2) in fixed.items() if s >= 1 or r2 >= 0.9}
        flagged = pt.loc[key, "dictator"]
        assert (flagged if isinstance(flagged, str) else "") in (dictators or {""}), (key, flagged, dictators)
        if not pt.loc[key, "upper_bound"]:
            assert (main.loc[key, "verdict"] == "dictator game") == bool(dictators), key


def test_whom_each_system_paid_for_follows_its_protocol(record):
    "`asked`, the members whose answers a system paid for on an item: a vote and the oracle ask the whole coalition, the trained router one member of it, a cascade some of it and at least one; a coalition game's calls are in outcomes.csv (-1)."
    g = record["games"]
    assert "asked" in g, "games.csv.gz lacks the asked column"
    a, m = g["asked"].to_numpy(np.int64), g["mask"].to_numpy(np.int64)
    reuse = a >= 0
    assert ((a[reuse] & ~m[reuse]) == 0).all()                                     # nobody outside the coalition
    n = np.zeros(len(a), dtype=np.int64)
    for k in range(16): n += (a >> k) & 1
    for proto, rule in (("majority_vote", lambda: a == m), ("weighted_vote", lambda: a == m), ("oracle_router", lambda: a == m),
                        ("trained_router", lambda: n == (m > 0)), ("cascade", lambda: (n >= 1) == (m > 0))):
        sel = (g.protocol == proto).to_numpy()
        if sel.any(): assert reuse[sel].all() and rule()[sel].all(), proto
    calls = ~g.protocol.isin(["majority_vote", "weighted_vote", "oracle_router", "trained_router", "cascade"]).to_numpy()
    assert (a[calls] == -1).all()
