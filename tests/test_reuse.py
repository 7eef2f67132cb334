"""Answer reuse gives exactly the per-item scores of the real protocols run through `CoalitionGame`: on the recorded
answers of the default study (every coalition, every item, the five answer-reuse protocols, both tasks) and on a
stand-in pool of eight built to produce vote ties, near misses, tied confidences and failed calls."""
import random

import numpy as np
import pytest

from compstrength.attribution import coalition_of, mask_of, parse_coalition
from compstrength.experiment import experiment_games, load_config
from compstrength.game import CoalitionGame
from compstrength.protocols import ProtocolError, dev_task, get_protocol, member_order
from compstrength.reuse import REUSE_PROTOCOLS, StandInPool, dev_answers, own_answers, reuse_values
from compstrength.tasks import load_task


def _compare(game, table, players, coalitions=None):
    "(max |reuse - game|, NaNs in the same places, outcomes compared, coalitions compared) over `coalitions` of `game`."
    out = game.evaluate(coalitions)
    wide = out.pivot(index="coalition", columns="item", values="score")[[it.id for it in game.task]]
    ref = wide.to_numpy(float)
    mine = table[[mask_of(parse_coalition(c), players) for c in wide.index]]
    same_nan = bool((np.isnan(ref) == np.isnan(mine)).all())
    return float(np.nanmax(np.abs(ref - mine), initial=0.0)), same_nan, ref.size, len(wide)


def test_recorded_default_study_every_coalition_and_item(tmp_path):
    cfg = load_config()
    client, games = experiment_games(cfg, "replay", tmp_path, progress=False)  # a fresh coalition cache: every outcome is a protocol run
    games = [g for g in games if g.protocol.name in REUSE_PROTOCOLS]
    assert sorted({g.protocol.name for g in games}) == sorted(REUSE_PROTOCOLS) and len(games) == 5 * len(cfg.tasks)
    players, seen = cfg.players, []
    for g in games:
        p = g.protocol
        ans = own_answers(client, g.task, players, max_tokens=p.max_tokens)
        dev = dev_answers(client, p, g.task, players) if p.uses_dev else None
        table = reuse_values(p, client, g.task, ans, dev, players, empty_value=cfg.run.empty_value)
        diff, same_nan, n_out, n_coal = _compare(g, table, players)
        assert diff == 0 and same_nan, (p.name, g.task.name, diff)
        assert n_coal == 2 ** len(players) - 1 and n_out == n_coal * len(g.task)
        np.testing.assert_array_equal(table[0], g.v_empty())
        seen.append((p.name, g.task.name, n_out))
    assert sum(n for *_, n in seen) == 10 * 15 * 10, seen


SIZES = {"a": "7B", "b": "135M", "c": "1.5B", "d": "", "e": "360M", "f": "1.5B", "g": "", "h": "70B"}


@pytest.fixture(scope="module")
def stand_in():
    task = load_task("arithmetic", split="test", limit=48, seed=2)
    dev = dev_task(task, 16, 1)
    fails = {("c", task[3].id), ("h", task[5].id), ("b", task[5].id), ("g", task[0].id)}
    client = StandInPool(SIZES, [task, dev], fails=fails, seed=5)
    return client, task, own_answers(client, task, list(SIZES))


def _protocols(features="tfidf"):
    return [get_protocol("cascade", n_dev=16, seed=1), get_protocol("trained_router", n_dev=16, seed=1, features=features),
            get_protocol("oracle_router", seed=1), get_protocol("majority_vote", seed=1), get_protocol("weighted_vote", n_dev=16, seed=1)]


def test_stand_in_pool_of_eight_matches_the_protocol_path(stand_in, tmp_path):
    client, task, ans = stand_in
    players = list(SIZES)
    assert member_order(client, players) != tuple(players) and member_order(client, players) != tuple(sorted(players))
    masks = sorted(set(random.Random(1).sample(range(1, 256), 24)) | {255, 3, 1 << 7})
    for p in _protocols():
        dev = dev_answers(client, p, task, players) if p.uses_dev else None
        table = reuse_values(p, client, task, ans, dev, players)
        game = CoalitionGame(client, p, task, players, cache_dir=tmp_path/p.name, progress=False)
        diff, same_nan, n_out, n_coal = _compare(game, table, players, [coalition_of(m, players) for m in masks])
        assert diff == 0 and same_nan, (p.name, diff)
        assert n_coal == len(masks) and np.isnan(table).any()   # failed calls met
        if p.name.endswith("vote"): assert (np.nan_to_num(table) % 1 > 0).any(), p.name   # ties met


def test_trained_router_on_minilm_features(stand_in, tmp_path):
    client, task, ans = stand_in
    players = list(SIZES)[:5]
    p = get_protocol("trained_router", n_dev=16, seed=1, features="minilm")
    table = reuse_values(p, client, task, ans, dev_answers(client, p, task, players), players)
    game = CoalitionGame(client, p, task, players, cache_dir=tmp_path, progress=False)
    diff, same_nan, *_ = _compare(game, table, players, [frozenset(players), frozenset(players[:2]), frozenset(players[2:])])
    assert diff == 0 and same_nan


def test_a_failed_dev_call_fails_the_calibrating_coalitions(tmp_path):
    task = load_task("arithmetic", split="test", limit=12, seed=3)
    dev = dev_task(task, 8, 0)
    client = StandInPool({"x": "1B", "y": "2B", "z": "3B"}, [task, dev], fails={("y", dev[0].id)}, seed=1)
    players = ["z", "y", "x"]
    ans = own_answers(client, task, players)
    for name in ("cascade", "trained_router", "weighted_vote", "majority_vote"):
        p = get_protocol(name, n_dev=8) if REUSE_PROTOCOLS[name].uses_dev else get_protocol(name)
        table = reuse_values(p, client, task, ans, dev_answers(client, p, task, players) if p.uses_dev else None, players)
        diff, same_nan, *_ = _compare(CoalitionGame(client, p, task, players, cache_dir=tmp_path/name, progress=False), table, players)
        assert diff == 0 and same_nan, name
        with_y = [m for m in range(8) if m >> 1 & 1 and bin(m).count("1") > 1]
        assert np.isnan(table[with_y]).all() == p.uses_dev, name           # y's coalitions calibrate on its failed dev answer
        assert not np.isnan(table[[1, 2, 4, 5]]).any()                       # z, y, x alone and z+x never meet it


def test_the_table_does_not_depend_on_the_listing_order(stand_in):
    client, task, ans = stand_in
    players = list(SIZES)
    shuffled = random.Random(7).sample(players, len(players))
    relabel = [mask_of(coalition_of(m, players), shuffled) for m in range(256)]
    for p in _protocols():
        dev = dev_answers(client, p, task, players) if p.uses_dev else None
        a, b = reuse_values(p, client, task, ans, dev, players), reuse_values(p, client, task, ans, dev, shuffled)
        np.testing.assert_array_equal(b[relabel], a, err_msg=p.name)


def test_bad_input_gets_a_clear_error(stand_in):
    client, task, ans = stand_in
    players = list(SIZES)
    with pytest.raises(ProtocolError, match="cascade, trained_router, oracle_router, majority_vote, weighted_vote"):
        reuse_values(get_protocol("debate"), client, task, ans, players=players)
    with pytest.raises(ValueError, match="max_tokens=64"):
        reuse_values(get_protocol("majority_vote", max_tokens=64), client, task, ans, players=players)
    with pytest.raises(ValueError, match="dev answers are needed"):
        reuse_values(get_protocol("cascade", n_dev=16, seed=1), client, task, ans, players=players)
    with pytest.raises(ValueError, match="miss 1 "):
        reuse_values(get_protocol("majority_vote"), client, task, ans.iloc[1:], players=players)
    cascade = get_protocol("cascade", n_dev=16, seed=1)
    dev = dev_answers(client, cascade, task, players)
    with pytest.raises(ValueError, match="dev answers miss 1 "):
        reuse_values(cascade, client, task, ans, dev.iloc[1:], players)
    with pytest.raises(ValueError, match="empty_value"):
        reuse_values(get_protocol("majority_vote"), client, task, ans, players=players, empty_value="half")
