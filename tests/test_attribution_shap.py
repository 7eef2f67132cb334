"""Cross-checks of compstrength.attribution against independent implementations: shap's
ExactExplainer and KernelExplainer and shapiq's ExactComputer (dependencies: a missing one fails)."""
import numpy as np
import pytest

from compstrength.attribution import attribute, attribute_table, interactions

import shap


def mask_game(table, n):
    "A shap/shapiq model: rows of a 0/1 mask matrix -> the table's value of that coalition."
    bits = 1 << np.arange(n, dtype=np.int64)
    return lambda M: table[(np.asarray(M) > 0.5).astype(np.int64) @ bits]


def random_game(n, seed):
    rng = np.random.default_rng(seed)
    t = rng.normal(size=1 << n)
    t[0] = rng.uniform(0, 0.3)  # a chance-level empty coalition, not 0
    return t


@pytest.mark.parametrize("n", range(4, 9))
def test_shapley_matches_shap_exact(n):
    t = random_game(n, seed=100 + n)
    players = [f"model-{k}" for k in range(n)]
    ex = shap.explainers.Exact(mask_game(t, n), np.zeros((1, n)))
    ref = ex(np.ones((1, n)), silent=True)
    np.testing.assert_allclose(ref.base_values, t[0], atol=1e-12)
    ours = attribute(lambda S: t[sum(1 << players.index(p) for p in S)], players, "shapley")
    assert list(ours.index) == players
    np.testing.assert_allclose(ours.to_numpy(), ref.values[0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(attribute_table(t, players).to_numpy(), ref.values[0], rtol=0, atol=1e-8)


@pytest.mark.parametrize("n", range(4, 9))
def test_kernel_at_full_budget_is_exact(n):
    t = random_game(n, seed=200 + n)
    players = list(range(n))
    exact = attribute_table(t, players, "shapley").to_numpy()
    for budget in (1 << n, 4 << n):
        np.testing.assert_allclose(attribute_table(t, players, "kernel", budget=budget).to_numpy(), exact, rtol=0, atol=1e-6)


@pytest.mark.parametrize("n", [4, 6, 8])
def test_against_shapiq(n):
    import shapiq  # a dev dependency: a missing one fails here rather than skipping the cross-check
    t = random_game(n, seed=300 + n)
    game = mask_game(t, n)
    comp = shapiq.ExactComputer(game, n_players=n)
    sv, bv, sii = comp("SV"), comp("BV"), comp("SII", order=2)
    players = list(range(n))
    np.testing.assert_allclose(attribute_table(t, players).to_numpy(), [sv[(i,)] for i in players], atol=1e-8)
    np.testing.assert_allclose(attribute_table(t, players, "banzhaf").to_numpy(), [bv[(i,)] for i in players], atol=1e-8)
    ours = interactions(t, players)
    for i in players:
        for j in range(i + 1, n):
            assert ours.loc[i, j] == pytest.approx(sii[(i, j)], abs=1e-8)
