"""Values do not depend on the order a pool is listed in: every registered protocol, replayed from the recording
the project made live on the embedded pool, gives identical values for a permuted pool."""
import itertools

import numpy as np
import pytest

from compstrength.config import load_study
from compstrength.experiment import ExperimentConfig, call_groups, experiment_config, experiment_games, load_config
from compstrength.files import project_root
from compstrength.protocols import available_protocols


def _config(order: list) -> ExperimentConfig:
    "The default config with its pool listed in `order`."
    cfg = load_study(project_root()/"configs"/"default.toml")
    cfg = cfg.model_copy(update=dict(pools={p: [n for n in order if n in v] for p, v in cfg.pools.items()}))
    (group,) = call_groups(cfg)
    return experiment_config(cfg, *group)


def _values(cfg, cache_dir) -> dict:
    "(protocol, task) → {coalition: per-item scores}, and (task) → individual scores, from a replay."
    _, games = experiment_games(cfg, "replay", cache_dir, progress=False)
    out = {}
    for g in games:
        o = g.evaluate()
        out[(g.protocol.name, g.task.name)] = g.item_values(o)
        ind = g.individual().set_index(["model", "item"]).score
        out[("individual", g.protocol.name, g.task.name)] = ind.sort_index()
    return out


@pytest.fixture(scope="module")
def forward(tmp_path_factory):
    cfg = load_config()
    return cfg, _values(cfg, tmp_path_factory.mktemp("forward"))


def test_the_default_config_covers_every_registered_protocol(forward):
    cfg, _ = forward
    assert sorted(cfg.run.protocols) == sorted(available_protocols())


@pytest.mark.parametrize("perm", ["reversed", "swapped"])
def test_a_permuted_pool_gives_identical_values_for_every_protocol(forward, perm, tmp_path):
    cfg, base = forward
    names = cfg.players
    order = {"reversed": names[::-1], "swapped": [names[2], names[0], names[3], names[1]]}[perm]
    assert order != names and sorted(order) == sorted(names)
    other = _values(_config(order), tmp_path)   # a fresh cache: nothing is shared with the forward run
    assert other.keys() == base.keys()
    for key, v in base.items():
        if key[0] == "individual":
            np.testing.assert_allclose(other[key].to_numpy(), v.to_numpy(), rtol=0, atol=1e-12, err_msg=str(key))
            continue
        assert other[key].keys() == v.keys(), key
        for c in v:   # every coalition, item by item
            np.testing.assert_allclose(other[key][c], v[c], rtol=0, atol=1e-12, err_msg=f"{key} {sorted(c)}")
