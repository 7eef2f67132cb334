"""Mechanisms of the sampled Shapley estimators (`stratified`, `permutation`, `kernel`): each reads at most its
budget of distinct coalitions, gives the same estimate however the players are listed, is exact at full budget
where it promises to be, and refuses a bad method or a budget below its minimum with a clear error."""
import math

import numpy as np
import pytest

from compstrength.attribution import ESTIMATOR, METHODS, SAMPLED_METHODS, _Game, _compute, attribute, attribute_table

MIN_BUDGET = {"stratified": lambda n: n + 2, "kernel": lambda n: n + 2, "permutation": lambda n: 2 + 2 * (n - 1)}


def game_table(n, seed, items=None):
    "A random game with some structure: a weighted vote plus noise, per item if `items`."
    rng = np.random.default_rng(seed)
    masks = np.arange(1 << n)
    bits = (masks[:, None] >> np.arange(n)) & 1
    w = rng.uniform(0, 1, size=(n,) if items is None else (n, items))
    t = (bits @ w > w.sum(axis=0) / 2).astype(float) + 0.1 * rng.random((1 << n,) if items is None else ((1 << n), items))
    return t


class Counting(_Game):
    "The game wrapper with a count of the distinct coalitions it is asked for (a value table behind it)."
    def __init__(self, v, players, method):
        super().__init__(v, players, method)
        self.asked = set()

    def at(self, masks):
        self.asked.update(np.asarray(masks, dtype=np.int64).ravel().tolist())
        return super().at(masks)


def test_every_sampled_method_is_listed():
    assert ESTIMATOR in SAMPLED_METHODS and set(SAMPLED_METHODS) < set(METHODS)
    assert set(MIN_BUDGET) == set(SAMPLED_METHODS)


@pytest.mark.parametrize("method", SAMPLED_METHODS)
@pytest.mark.parametrize("n,budget", [(6, 16), (8, 30), (10, 51), (10, 102), (10, 256), (12, 410), (12, 4096)])
def test_budget_counted_through_the_game_wrapper(method, n, budget):
    "Through `_Game.at`: never more distinct coalitions than the budget, v(∅) and v(N) included."
    from compstrength import attribution as A
    t = game_table(n, seed=n + budget)
    g = Counting(t, list(range(n)), method)
    est = {"stratified": A._stratified, "permutation": A._permutation, "kernel": A._kernel}[method](g, budget, 0)
    assert est.shape == (n,)
    assert len(g.asked) <= budget, (method, n, budget, len(g.asked))
    if method == "stratified":
        assert len(g.asked) == min(budget, 1 << n)  # it spends the whole budget, on distinct coalitions
        assert {0, (1 << n) - 1} <= g.asked


@pytest.mark.parametrize("method", SAMPLED_METHODS)
def test_budget_counted_on_a_callable(method):
    "A callable is asked each coalition at most once and at most `budget` times, per item game too."
    n, budget = 9, 60
    t = game_table(n, seed=5, items=4)
    asked = []
    def v(S):
        asked.append(frozenset(S)); return t[sum(1 << p for p in S)]
    phi = _compute(v, list(range(n)), method, budget, 1)  # players × items
    assert len(asked) <= budget and len(set(asked)) == len(asked)
    assert phi.shape == (n, 4)


@pytest.mark.parametrize("method", SAMPLED_METHODS)
@pytest.mark.parametrize("n,budget", [(5, 20), (9, 60), (11, 300)])
def test_reversed_players_give_identical_estimates(method, n, budget):
    "Listing the pool reversed (with its value table's bits to match) changes no player's estimate at a fixed seed."
    t = game_table(n, seed=3 * n)
    names = [f"model-{chr(97 + k)}" for k in range(n)]
    fwd = attribute_table(t, names, method, budget=budget, seed=7)
    masks = np.arange(1 << n)
    rev_bits = np.zeros_like(masks)
    for k in range(n): rev_bits |= ((masks >> k) & 1) << (n - 1 - k)  # bit k of the new table is player n-1-k
    rev = attribute_table(t[rev_bits], names[::-1], method, budget=budget, seed=7)
    assert list(rev.index) == names[::-1]
    np.testing.assert_array_equal(rev.loc[names].to_numpy(), fwd.to_numpy())
    f = lambda S: t[sum(1 << names.index(p) for p in S)]  # and as a callable
    np.testing.assert_array_equal(attribute(f, names[::-1], method, budget=budget, seed=7).loc[names].to_numpy(), fwd.to_numpy())


@pytest.mark.parametrize("n", [2, 3, 5, 8, 11])
@pytest.mark.parametrize("method", ["stratified", "kernel"])
def test_exact_at_full_budget(method, n):
    t = game_table(n, seed=40 + n)
    exact = attribute_table(t, list(range(n))).to_numpy()
    for budget in (1 << n, (1 << n) + 7):
        np.testing.assert_allclose(attribute_table(t, list(range(n)), method, budget=budget, seed=2).to_numpy(), exact, rtol=0, atol=1e-6 if method == "kernel" else 1e-12)


@pytest.mark.parametrize("n,budget", [(4, 6), (7, 20), (10, 51), (12, 205)])
def test_stratified_is_efficient_and_linear_in_items(n, budget):
    "Estimates add up to v(N) − v(∅); the mean of per-item estimates is the estimate of the mean game."
    t = game_table(n, seed=n, items=5)
    per_item = _compute(t, list(range(n)), "stratified", budget, 4)
    np.testing.assert_allclose(per_item.sum(axis=0), t[-1] - t[0], atol=1e-12)
    np.testing.assert_allclose(per_item.mean(axis=1), _compute(t.mean(axis=1), list(range(n)), "stratified", budget, 4), atol=1e-12)


def test_default_estimator_when_only_a_budget_is_given():
    t = game_table(7, seed=1)
    players = list("abcdefg")
    assert attribute_table(t, players).name == "shapley"
    est = attribute_table(t, players, budget=40, seed=3)
    assert est.name == ESTIMATOR
    np.testing.assert_array_equal(est.to_numpy(), attribute_table(t, players, ESTIMATOR, budget=40, seed=3).to_numpy())
    np.testing.assert_array_equal(attribute_table(t, players, "shapley", budget=40).to_numpy(), attribute_table(t, players).to_numpy())


def test_seeded():
    t = game_table(10, seed=2)
    a, b = (attribute_table(t, list(range(10)), "stratified", budget=102, seed=s).to_numpy() for s in (1, 1))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, attribute_table(t, list(range(10)), "stratified", budget=102, seed=2).to_numpy())


@pytest.mark.parametrize("method", SAMPLED_METHODS)
def test_clear_error_below_the_minimum_budget(method):
    n = 6
    t = game_table(n, seed=0)
    low = MIN_BUDGET[method](n)
    attribute_table(t, list(range(n)), method, budget=low)  # the minimum works
    with pytest.raises(ValueError, match=rf"budget {low - 1} is too small for method '{method}' with {n} players"):
        attribute_table(t, list(range(n)), method, budget=low - 1)


def test_clear_error_for_an_unknown_method():
    with pytest.raises(ValueError, match=r"unknown method 'svarm': use one of shapley, .*stratified"):
        attribute_table(game_table(4, seed=0), list(range(4)), "svarm", budget=10)
