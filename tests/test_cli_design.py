"""`compstrength design` through the installed command, on the results folder of the main job (`default_run`, replayed once per
session): the recommendation and its table, a candidate's added value, and the refusals. Mechanisms only: which system wins
is the study's finding, never asserted here. How long it takes is measured by bench/bench_design.py."""
import re, subprocess, sys
from pathlib import Path

import pandas as pd
import pytest

CLI = [str(Path(sys.executable).parent/"compstrength")]


def design(*args, timeout=300):
    return subprocess.run(CLI + ["design", *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def record(default_run):
    "The main job's results folder, and what it holds: the settings one can deploy and each pool's players in bit order."
    r, res = default_run
    assert r.returncode == 0, r.stderr[-2000:]
    pt = pd.read_csv(res/"protocols.csv")
    settings = pt[~pt.upper_bound.astype(bool)][["pool", "protocol", "task"]]
    c = pd.read_csv(res/"coalitions.csv")
    one = c[c["size"] == 1].drop_duplicates(["pool", "members"])
    players = {p: g.sort_values("mask").members.tolist() for p, g in one.groupby("pool")}
    return res, settings, players, c


def _reuse_setting(record):
    "A (pool, task) whose settings hold every coalition (the protocols that reuse the members' answers), and its protocols."
    res, settings, players, c = record
    full = c.groupby(["pool", "protocol", "task"]).size()
    exact = [k for k, n in full.items() if n == 2 ** len(players[k[0]]) and k in set(map(tuple, settings.to_numpy()))]
    pool, _, task = exact[0]
    return pool, task, [p for (q, p, t) in exact if (q, t) == (pool, task)]


def test_design_recommends_in_one_sentence_per_item_group_with_a_ci(record):
    res, settings, players, _ = record
    r = design(res)
    assert r.returncode == 0, r.stderr[-2000:]
    sentences = [l for l in r.stdout.splitlines() if l.startswith("On ")]
    assert len(sentences) >= settings[["pool", "task"]].drop_duplicates().shape[0]   # one per (pool, task), more where item sets differ
    for s in sentences: assert re.search(r"held out \(95% CI -?\d\.\d{3} to -?\d\.\d{3};", s) and "held-out gain over it" in s, s
    for row in settings.itertuples():                                                # the compact table: one row per setting
        assert re.search(rf"^{re.escape(row.pool)}\s+{re.escape(row.task)}\s+{re.escape(row.protocol)}\s", r.stdout, re.M), row
    assert "oracle_router" not in r.stdout                                           # an upper bound is never a system to deploy


def test_design_table_has_every_size_and_the_cli_never_imports_the_llm_client(record):
    res, _, players, _ = record
    pool, task, protocols = _reuse_setting(record)
    code = ("import sys; from compstrength.cli import main; rc = main(sys.argv[1:]); "
            "bad = [m for m in ('litellm', 'compstrength.models', 'compstrength.local') if m in sys.modules]; "
            "assert not bad, bad; sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, "design", str(res), "--pool", pool, "--task", task], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(rf"^On {re.escape(task)} \({re.escape(pool)} pool\).*held out \(95% CI", r.stdout, re.M), r.stdout[:2000]
    n = len(players[pool])
    for p in protocols:
        for k in [*map(str, range(1, n + 1)), "any"]:
            assert re.search(rf"^{re.escape(p)}\s+\d+\s+{k}\s+\S.*?\s+\d\.\d{{3}}\s+\d\.\d{{3}} \[\d\.\d{{3}}, \d\.\d{{3}}\]\s+[+-]\d\.\d{{3}} \[", r.stdout, re.M), (p, k)
    with_k = design(res, "--pool", pool, "--task", task, "--k", 2)
    assert with_k.returncode == 0 and "the best system of 2 players" in with_k.stdout, with_k.stderr[-2000:]


def test_design_candidate_prints_its_added_value(record):
    res, _, players, c = record
    pool, task, protocols = _reuse_setting(record)
    cand, proto = players[pool][-1], protocols[0]
    r = design(res, "--pool", pool, "--task", task, "--protocol", proto, "--candidate", cand)
    assert r.returncode == 0, r.stderr[-2000:]
    v = c[(c.pool == pool) & (c.protocol == proto) & (c.task == task)].set_index("mask").value
    n = len(players[pool])
    added = v[(1 << n) - 1] - v[(1 << n) - 1 - (1 << (n - 1))]                       # v(N) − v(N ∖ {candidate}): the default deployed pool
    m = re.search(rf"^{re.escape(cand)} under {proto} on {re.escape(task)} .*it changes accuracy by ([+-]\d\.\d{{3}}) \(95% CI [+-]\d\.\d{{3}} to [+-]\d\.\d{{3}}\)", r.stdout, re.M)
    assert m, r.stdout[:3000]
    assert abs(float(m.group(1)) - added) <= 0.0005 + 1e-9, (m.group(1), added)
    for q in ("added", "shapley", "best_without", "best_with", "best_gain"): assert re.search(rf"^{proto}\s+{q}\s", r.stdout, re.M), q


def test_design_refuses_bad_input_in_one_line(record, tmp_path):
    res, _, players, _ = record
    pool = next(iter(players))
    cases = [((res, "--pool", "nosuch"), ["'nosuch'", "pools: ", pool]),
             ((res, "--task", "nosuch"), ["'nosuch'", "tasks: "]),
             ((res, "--candidate", "gpt-9"), ["'gpt-9'", "players: ", players[pool][0]]),
             ((res, "--pool", pool, "--k", len(players[pool]) + 1), [f"--k {len(players[pool]) + 1}", f"1 … {len(players[pool])}"]),
             ((res, "--budget", 0.001), ["--budget 0.001", "no system costs at most", "the cheapest costs"]),
             ((res, "--protocol", "oracle_router"), ["upper bound", "protocols: "]),
             ((tmp_path, ), [str(tmp_path), "not a results folder"])]
    c = record[3]
    budgeted = [k for k, n in c.groupby(["pool", "protocol", "task"]).size().items() if n < 2 ** len(players[k[0]]) and k[1] != "oracle_router"]
    if budgeted:                                                                     # a candidate needs every coalition of S ∪ {c}
        pool_b, proto_b, task_b = budgeted[0]
        cases.append(((res, "--pool", pool_b, "--protocol", proto_b, "--task", task_b, "--candidate", players[pool_b][0]), ["only budgeted estimates", proto_b]))
    for args, says in cases:
        r = design(*args)
        assert (r.returncode, r.stdout) == (2, ""), (args, r.returncode, r.stderr[-1000:])
        assert r.stderr.startswith("compstrength: error: ") and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (args, r.stderr)
        assert all(s in r.stderr for s in says), (args, r.stderr)
