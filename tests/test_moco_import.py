"""MoCo logs in and out, end to end: `compstrength run --moco-logs` writes the default experiment's real recorded runs
(the embedded pool's answers, replayed) as MoCo-format logs; `compstrength import-moco` reads them back and must give the
same values the run computed itself. Then the same logs, cut down or damaged, as a MoCo user's folder would be."""
import json, random, shutil, subprocess, sys
from pathlib import Path

import pandas as pd
import pytest

from compstrength.moco import MocoLogError, import_moco

ROOT = Path(__file__).resolve().parent.parent
CLI = [str(Path(sys.executable).parent/"compstrength")]  # the installed console script
COLS = ["shapley", "shapley_ci_low", "shapley_ci_high", "loo", "loo_ci_low", "loo_ci_high", "individual", "individual_ci_low", "individual_ci_high"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    "The default experiment replayed (no model call) with --moco-logs: (its results folder, the logs folder)."
    d = tmp_path_factory.mktemp("moco_rt")
    r = subprocess.run(CLI + ["run", str(ROOT/"configs"/"default.toml"), "--out", str(d/"res"), "--moco-logs", str(d/"logs")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "MoCo-format logs in" in r.stdout
    return d/"res", d/"logs"


def ours(res: Path) -> pd.DataFrame:
    return pd.read_csv(res/"values.csv").set_index(["protocol", "task", "model"]).sort_index()


def theirs(values: pd.DataFrame) -> pd.DataFrame:
    return values.assign(protocol=values.method.str.removeprefix("compstrength_")).set_index(["protocol", "task", "model"]).sort_index()


def test_logs_have_moco_shape(exported):
    _, logs = exported
    files = sorted(logs.glob("*.json"))
    single = [f for f in files if f.name.endswith("_single_model.json")]
    assert len(single) == 8  # 4 members × 2 tasks
    for f in files:
        d = json.loads(f.read_text())
        assert {"task", "task_type", "model_names", "hyperparameters", "avg_test_score", "logs"} <= set(d)
        assert ("method" in d) == (f not in single)  # MoCo's single_model logs carry no method
        assert d["logs"] and all({"input", "output", "score"} <= set(r) for r in d["logs"])
        assert abs(d["avg_test_score"] - sum(r["score"] for r in d["logs"]) / len(d["logs"])) < 1e-12


def test_import_gives_back_the_runs_own_values(exported, tmp_path):
    res, logs = exported
    r = subprocess.run(CLI + ["import-moco", str(logs), "--out", str(tmp_path/"imp")], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    a, b = ours(res), theirs(pd.read_csv(tmp_path/"imp"/"values.csv"))
    assert list(a.index) == list(b.index) and len(a) == 88
    assert (b.attribution == "exact").all()
    point = ["shapley", "loo", "individual"]
    pd.testing.assert_frame_equal(a[point], b[point], check_exact=False, rtol=0, atol=1e-12)
    # the import orders items by their text, the run by the task's order: the same bootstrap, other draws
    for m in point:
        assert ((b[f"{m}_ci_low"] <= b[m] + 1e-12) & (b[m] <= b[f"{m}_ci_high"] + 1e-12)).all()
        assert ((a[f"{m}_ci_high"] - a[f"{m}_ci_low"]) - (b[f"{m}_ci_high"] - b[f"{m}_ci_low"])).abs().max() < 0.15
    c = pd.read_csv(tmp_path/"imp"/"correlations.csv")
    assert len(c) == 3 * 22 and set(c.verdict.dropna()) <= {"translates", "does not translate", "inconclusive", "upper bound", "dictator game"}
    assert c.verdict.isna().sum() == 2 * 22                           # only the individual-vs-Shapley row of a game gets a verdict


def test_order_of_model_names_changes_nothing(exported, tmp_path):
    res, logs = exported
    shuffled = tmp_path/"logs"; shutil.copytree(logs, shuffled)
    rng = random.Random(0)
    for f in shuffled.glob("*.json"):
        d = json.loads(f.read_text()); rng.shuffle(d["model_names"]); rng.shuffle(d["logs"])  # names and item order
        f.write_text(json.dumps(d))
    a, b = theirs(import_moco(logs)["values"]), theirs(import_moco(shuffled)["values"])
    pd.testing.assert_frame_equal(a[COLS], b[COLS], check_exact=False, rtol=0, atol=1e-12)  # CIs included


def test_loo_only_and_incomplete_games(exported, tmp_path):
    res, logs = exported
    cut = tmp_path/"logs"; shutil.copytree(logs, cut)
    moa = [f for f in cut.glob("*.json") if "_majority_vote_" in f.name and f.name.startswith("gsm8k_")]
    for f in moa:  # keep N, N∖{i} and the singletons: the n + 1 runs LOO needs (and individual strength)
        if len(json.loads(f.read_text())["model_names"]) == 2: f.unlink()
    for f in cut.glob("gsm8k_4_*_cascade_*.json"): f.unlink()  # the cascade without its full pool: neither
    out = import_moco(cut, tmp_path/"imp")
    v = theirs(out["values"])
    mv = v.loc[("majority_vote", "gsm8k")]
    assert (mv.attribution == "loo only").all() and mv.shapley.isna().all()
    pd.testing.assert_series_equal(mv.loo, ours(res).loc[("majority_vote", "gsm8k")].loo, check_exact=False, rtol=0, atol=1e-12)
    assert ("cascade", "gsm8k") not in {k[:2] for k in v.index}
    (g, miss, cfgs), = [x for x in out["incomplete"] if x[0].method == "compstrength_cascade" and x[0].task == "gsm8k"]
    assert [sorted(c) for c in miss] == [sorted(g.players)]
    cfg = json.loads(cfgs[0].read_text())
    assert set(cfg) == {"method", "task", "task_type", "gpu_ids", "model_names", "hyperparameters"} and sorted(cfg["model_names"]) == sorted(g.players)


def test_bad_logs_are_named_and_nothing_is_written(exported, tmp_path):
    _, logs = exported
    bad = tmp_path/"logs"; shutil.copytree(logs, bad)
    victim = sorted(bad.glob("arithmetic_*_cascade_*.json"))[0]
    d = json.loads(victim.read_text()); d["logs"] = d["logs"][:-1]; victim.write_text(json.dumps(d))  # one item fewer
    with pytest.raises(MocoLogError, match="items are not those of"):
        import_moco(bad, tmp_path/"out")
    assert not (tmp_path/"out").exists()
    (bad/"dup.json").write_text(sorted(bad.glob("gsm8k_*_moa_*.json"))[0].read_text())
    victim.unlink()
    r = subprocess.run(CLI + ["import-moco", str(bad), "--out", str(tmp_path/"out")], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 2 and "dup.json" in r.stderr and "a second run" in r.stderr
    assert not (tmp_path/"out").exists()
