"""The C-RL bench's summary: every accuracy, Shapley value and LOO it reports comes with its 95% interval over the held-out items;
test.txt states the held-out overlap and the paper's endpoint, computed from the files; the committed runs keep their names and digests."""
import argparse, json, os, sys, time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import binomtest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/"bench"))
import bench_crl

COMMITTED = ROOT/"bench"/"results"/"crl"


def args(**kw):
    a = dict(task="arithmetic_crl", protocol="moa", difficulty=[1, 2], seeds=[0], steps=3, prompts=4, group=4, max_tokens=128,
             proposal_tokens=256, n_dev=20, n_train=118, n_eval=200, temperature=0.8, updates=2, lr=2e-4, pilot_steps=5)
    return argparse.Namespace(**{**a, **kw})


def write_run(d: Path, rng, a, shapley: bool = True, without=None, shift: float = 0.0):
    """A finished run's client files: train rows, and evaluations before and after with their per-item scores. `without`: the
    partners' per-item scores (frozen: the same in every evaluation), else drawn anew; `shift` moves the per-item Shapley values."""
    d.mkdir(parents=True)
    rows = [dict(kind="train", step=s, frac_same_as_individual=0.25, frac_reward_zero_std=0.5, reward=0.4) for s in range(a.steps)]
    with open(d/"eval_items.jsonl", "w") as f:
        for step in (0, a.steps):
            wp = without if without is not None else rng.integers(0, 2, a.n_eval)
            it = pd.DataFrame(dict(item=[f"arith-{1001 + k}" for k in range(a.n_eval)], system=rng.integers(0, 2, a.n_eval),
                                   policy_alone=rng.integers(0, 2, a.n_eval), without_policy=wp,
                                   shapley=rng.uniform(-0.5, 0.5, a.n_eval) + shift))
            if not shapley: it = it.drop(columns="shapley")
            for r in it.to_dict("records"): f.write(json.dumps(dict(run=d.name, step=step, protocol=a.protocol, **r)) + "\n")
            rows.append(dict(kind="eval", step=step, protocol=a.protocol, n_items=a.n_eval, system=it.system.mean(),
                             policy_alone=it.policy_alone.mean(), shapley=it.shapley.mean() if shapley else 0.0,
                             loo=(it.system - it.without_policy).mean()))
    (d/"log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_summary_has_an_interval_for_every_reported_value(tmp_path):
    a, rng = args(), np.random.default_rng(0)
    for arm in bench_crl.ARMS: write_run(tmp_path/"runs"/f"{arm}-{bench_crl.tag(a)}-seed0", rng, a)
    summary, text = bench_crl.summarize(a, tmp_path, None)
    assert len(summary) == 2 and (tmp_path/"summary.csv").exists() and "PRIMARY" in text
    items = pd.read_json(tmp_path/"runs"/f"crl-{bench_crl.tag(a)}-seed0"/"eval_items.jsonl", lines=True)
    row = summary[summary.arm == "crl"].iloc[0]
    for when, step in (("before", 0), ("after", a.steps)):
        for m in ("system", "policy_alone", "shapley", "loo"):
            lo, hi, v = row[f"{m}_{when}_lo"], row[f"{m}_{when}_hi"], row[f"{m}_{when}"]
            assert lo < v < hi, (m, when, lo, v, hi)
        f = items[items.step == step]
        exact = binomtest(int(f.system.sum()), len(f)).proportion_ci()  # accuracies: the exact binomial interval
        assert (row[f"system_{when}_lo"], row[f"system_{when}_hi"]) == (exact.low, exact.high)
    within = [l.split() for l in text.split("within each run")[1].split("\n\n")[0].splitlines()[2:]]
    assert [r[:2] for r in within] == [["crl", "0"], ["individual", "0"]]
    crl_gain = float(within[0][6])                                        # each run against its own start, paired on the items
    assert abs(crl_gain - (row.system_after - row.system_before)) < 1e-4
    back = pd.read_csv(tmp_path/"summary.csv")
    assert list(back.columns) == list(summary.columns) and back.shapley_after_lo.notna().all()


def test_logs_without_per_item_shapley_leave_its_interval_empty(tmp_path):
    "Logs from before the per-item Shapley values: the other intervals are there, and Shapley's is left empty rather than made up."
    a, rng = args(), np.random.default_rng(1)
    for arm in bench_crl.ARMS: write_run(tmp_path/"runs"/f"{arm}-{bench_crl.tag(a)}-seed0", rng, a, shapley=False)
    summary, _ = bench_crl.summarize(a, tmp_path, None)
    assert summary.shapley_before_lo.isna().all() and summary.loo_before_lo.notna().all() and summary.system_after_hi.notna().all()


class _Pool:
    "The bench's pool as `Runner.sync` uses it: its recording is flushed with every copy."
    flushed = 0
    def flush(self): self.flushed += 1


def test_a_run_moves_to_a_new_machine_through_its_committed_copy(tmp_path):
    """A real training service trains one step; the bench copies the run under --out, as a session commits it. A fresh work
    folder (a new machine) is filled from that copy: the service comes back at the same version with the same weights, its
    idempotency record answers the same step again without applying it, and the copy never holds the token."""
    from _service import start_service
    from compstrength.crl import TrainerClient
    a, name = args(threads=1, device="cpu"), "crl-moa-levels12-seed0"
    out, pool = tmp_path/"out", _Pool()
    r = bench_crl.Runner(a, name, None, pool, tmp_path/"machine1", out)
    svc, url = start_service(r.dir/"service", "cpu", r.dir/"service.log", threads=1)
    try:
        c = TrainerClient(url, token_file=r.dir/"service"/"token")
        assert os.getpriority(os.PRIO_PROCESS, svc.pid) == 19  # the pool's servers go first when both are busy
        h0 = c.health()
        groups = [dict(prompt=[{"role": "user", "content": "What is 7 + 5?"}], rewards=[1.0, 0.0],
                       completions=[dict(text="The answer is 12."), dict(text="The answer is 13.")])]
        a1 = c.train_step(f"{name}:0", h0["policy_version"], groups, learning_rate=1e-3)
        h1 = c.health()
        assert h1["policy_version"] == a1["policy_version"] == h0["policy_version"] + 1 and h1["policy_digest"] != h0["policy_digest"]
    finally:
        svc.terminate(); svc.wait(60)
    (r.dir/"log.jsonl").write_text(json.dumps(dict(kind="train", step=0)) + "\n")
    (r.dir/"pending.json").write_text("{}")
    r.sync(time.time())
    kept = out/"runs"/name
    assert pool.flushed == 1 and (kept/"log.jsonl").exists() and (kept/"pending.json").exists()
    assert [p.name for p in (kept/"service"/"versions").iterdir()] == [(r.dir/"service"/"CURRENT").read_text().strip()]
    assert not list(kept.rglob("token")) and not (out/"runs"/"service.tmp").exists()
    (r.dir/"pending.json").unlink(); r.sync(time.time())  # the step was logged: its pending request goes from the copy too
    assert not (kept/"pending.json").exists()

    r2 = bench_crl.Runner(a, name, None, pool, tmp_path/"machine2", out)  # a new machine: an empty work folder
    assert (r2.dir/"log.jsonl").read_text() == (r.dir/"log.jsonl").read_text() and (r2.dir/"wall.json").exists()
    svc, url = start_service(r2.dir/"service", "cpu", r2.dir/"service.log", threads=1)
    try:
        c2 = TrainerClient(url, token_file=r2.dir/"service"/"token")
        h2 = c2.health()
        assert (h2["service_id"], h2["policy_version"], h2["policy_digest"]) == (h1["service_id"], h1["policy_version"], h1["policy_digest"])
        assert (r2.dir/"service"/"token").read_text() != (r.dir/"service"/"token").read_text()  # a new secret, never copied
        again = c2.train_step(f"{name}:0", h0["policy_version"], groups, learning_rate=1e-3)
        assert again["replayed"] is True and c2.health()["policy_version"] == h1["policy_version"]
    finally:
        svc.terminate(); svc.wait(60)


def test_policy_text_reads_each_versions_proposals_from_the_committed_recording():
    """The held-out proposals of the shared start and of seed 0's trained versions are found in the committed recording by
    the digest of the saved weights (no model is asked): one per held-out item. The split by what the tail said covers every
    item, and weighting the system's accuracy in each part by its n gives back the evaluation's own system accuracy."""
    out = Path(__file__).resolve().parents[1]/"bench"/"results"/"crl"
    a = args(seeds=[0], steps=30, proposal_tokens=256)
    pt = bench_crl.policy_text(a, out).set_index(["arm", "when"])
    assert {("start", "before"), ("crl", "after"), ("individual", "after")} <= set(pt.index)
    for (arm, when), r in pt.iterrows():
        assert r.n == a.n_eval and r.n_right + r.n_wrong + r.n_none == r.n, (arm, when)
        assert 0 <= r.wrong_copied <= r.n_wrong, (arm, when)   # a copied number is counted among the wrong answers only
        assert 0 <= r.at_cap_lo <= r.at_cap <= r.at_cap_hi <= 1
        run = arm if arm != "start" else "crl"
        ev = [x for x in bench_crl.read_run(out/"runs"/f"{run}-{bench_crl.tag(a)}-seed0")[0]
              if x["kind"] == "eval" and x["step"] == (0 if when == "before" else a.steps)][0]
        parts = sum(r[f"n_{s}"] * r[f"system_if_{s}"] for s in ("right", "wrong", "none") if r[f"n_{s}"])
        assert abs(parts / r.n - ev["system"]) < 1e-9, (arm, when, parts / r.n, ev["system"])


def test_a_c_rl_run_that_failed_its_own_gate_stays_in_the_test_and_a_separate_sensitivity_note_leaves_it_out(tmp_path):
    """Seeds are never dropped on their C-RL run's own early verdict: the primary pooled test keeps every seed. The pooled
    tests without those that failed come only at the end, in one note that says it is no independent check."""
    a, rng = args(seeds=[0, 1]), np.random.default_rng(2)
    for seed, passed in ((0, True), (1, False)):
        for arm in bench_crl.ARMS: write_run(tmp_path/"runs"/f"{arm}-{bench_crl.tag(a)}-seed{seed}", rng, a)
        (tmp_path/"runs"/f"crl-{bench_crl.tag(a)}-seed{seed}"/"pilot.json").write_text(json.dumps(dict(
            steps=5, groups=20, zero_signal_frac=0.35, frac_same_as_individual=0.4 if passed else 0.5, max_zero_signal=0.6, max_same=0.5, passed=passed)))
    summary, text = bench_crl.summarize(a, tmp_path, None)
    pooled = text.split("PRIMARY")[1].split("secondary")[0]
    assert "sensitiv" not in pooled.lower() and "sensitiv" not in text.split("SENSITIVITY NOTE")[0].split("each C-RL run's own gate")[1].lower()
    assert "seed 1: FAILED" in text and "seed 0: passed" in text
    assert summary.set_index(["arm", "seed"]).gate_passed.to_dict() == {("crl", 0): True, ("individual", 0): None, ("crl", 1): False, ("individual", 1): None}
    row = [l.split() for l in pooled.splitlines() if l.split()[:1] == ["pooled"]][0]
    assert row[1:3] == ["200", "400"]   # 200 items, 400 pairs: both seeds in the primary test
    note = text.rstrip("\n").split("\n\n")[-1]   # the last paragraph of test.txt
    assert note.startswith("SENSITIVITY NOTE") and "not an independent check" in note and "(0)" in note
    assert "must not be read as confirmation" in note and "same runs" in note
    k = bench_crl.paired_test(pd.concat([pd.read_json(tmp_path/"runs"/f"{arm}-{bench_crl.tag(a)}-seed0"/"eval_items.jsonl", lines=True)
                                         .query(f"step == {a.steps}").assign(arm=arm, seed=0) for arm in bench_crl.ARMS])
                              .pivot_table(index=["seed", "item"], columns="arm", values="system").reset_index(), "crl", "individual")
    primary = note.split("PRIMARY")[1].split("secondary")[0]
    assert f"{k.effect.iloc[-1]:.4f}" in primary.splitlines()[2]   # the note's primary line is seed 0's own test


def test_between_seeds_reports_the_spread_over_seeds_and_the_floor_of_a_sign_test_over_them():
    "The per-seed effects give a t interval over seeds (mean ± t(0.975, k − 1)·SD/√k) and the smallest p a sign test over k seeds can reach."
    from scipy.stats import t as student
    e = [0.29, 0.03, 0.12]
    t = pd.DataFrame(dict(seed=[0, 1, 2, "pooled"], effect=e + [np.mean(e)]))
    line = bench_crl.between_seeds(t)
    h = student.ppf(0.975, 2) * np.std(e, ddof=1) / np.sqrt(3)
    assert f"[{np.mean(e) - h:+.3f}, {np.mean(e) + h:+.3f}]" in line and "ahead in 3 of 3" in line and "below 0.25" in line
    one = bench_crl.between_seeds(t.iloc[[0, 3]])
    assert "one seed" in one and "interval" not in one


def test_the_endpoint_is_stated_from_the_summary_and_the_recorded_evaluations(tmp_path):
    """test.txt's endpoint section gives each run's LOO and Shapley after training with their intervals (as summary.csv has
    them), the partners alone with their exact interval when they score each item the same in every evaluation, how the arms
    rank by Shapley per seed, and calls the policies net-harmful only when every interval lies below 0."""
    a, rng = args(seeds=[0, 1]), np.random.default_rng(3)
    without = np.r_[np.ones(150), np.zeros(50)].astype(int)
    for seed in (0, 1):
        for arm in bench_crl.ARMS: write_run(tmp_path/"runs"/f"{arm}-{bench_crl.tag(a)}-seed{seed}", rng, a, without=without, shift=-1.0)
    summary, text = bench_crl.summarize(a, tmp_path, None)
    end = text.split("the paper's endpoint")[1].split("\n\n")[0]
    for r in summary.itertuples():
        assert f"{r.loo_after:.3f} [{r.loo_after_lo:.3f}, {r.loo_after_hi:.3f}]" in end
        assert f"{r.shapley_after:.3f} [{r.shapley_after_lo:.3f}, {r.shapley_after_hi:.3f}]" in end
    ci = binomtest(150, 200).proportion_ci()
    assert f"the partners alone (the system without the policy) score 0.750 [{ci.low:.3f}, {ci.high:.3f}] on the 200 held-out items" in end
    w = summary.pivot_table(index="seed", columns="arm", values="shapley_after")
    up = [s for s, r in w.iterrows() if r.individual > r.crl]
    line = [l for l in end.splitlines() if l.startswith("by Shapley")][0]
    assert all(f"{s} (" in line for s in up) and ("no seed" in line) == (not up)
    harmful = (summary.loo_after_hi < 0).all() and (summary.shapley_after_hi < 0).all()
    assert ("net-harmful" in end) == harmful and ("is not shown by these runs" in end)

    b = tmp_path/"b"   # partners drawn anew per evaluation (not frozen): a range, no interval; Shapley around 0: not called harmful
    for arm in bench_crl.ARMS: write_run(b/"runs"/f"{arm}-{bench_crl.tag(a)}-seed0", rng, args(), shift=0.0)
    _, text = bench_crl.summarize(args(), b, None)
    end = text.split("the paper's endpoint")[1].split("\n\n")[0]
    assert "across the evaluations" in end and "net-harmful" not in end


def test_test_txt_states_the_held_out_overlap_counted_from_the_data_files():
    """The committed test.txt says how many held-out items share their (template, expression) with a training item and with an
    arithmetic1k item (either split), as counted here from the data files; on arithmetic_crl2 both counts are 0."""
    from compstrength.crl import train_eval_items
    from compstrength.tasks import load_task
    a = args(seeds=[0, 1, 2], steps=30)
    tr, ev = train_eval_items(bench_crl.config(a, "crl", 0))
    comp = lambda it: (it.meta["template"], it.meta["expression"])
    n_tr = sum(comp(it) in {comp(x) for x in tr} for it in ev)
    n_k1 = sum(comp(it) in {comp(x) for x in load_task("arithmetic1k")} for it in ev)
    text = (COMMITTED/"test.txt").read_text()
    assert f"with a training item: {n_tr} of {len(ev)}; with an item of arithmetic1k (either split): {n_k1} of {len(ev)}" in text
    assert bench_crl.overlap_line(a) in text.splitlines()
    new = bench_crl.overlap_line(args(task="arithmetic_crl2"))
    assert "with a training item: 0 of 200; with an item of arithmetic1k (either split): 0 of 200" in new and "not all new" not in new


def test_the_committed_runs_keep_their_names_configs_and_digests():
    """The bench rebuilds each committed run's config (task arithmetic_crl, checked by question only) with the digest its
    meta.json holds, under the same folder name; runs on another task get names no committed run has, and the stricter rule."""
    a = args(seeds=[0, 1, 2], steps=30)
    assert bench_crl.tag(a) == "moa-levels12"
    for seed in a.seeds:
        for arm in bench_crl.ARMS:
            meta = json.loads((COMMITTED/"runs"/f"{arm}-{bench_crl.tag(a)}-seed{seed}"/"meta.json").read_text())
            c = bench_crl.config(a, arm, seed)
            assert c.disjoint == "question" and c.digest() == meta["digest"], (arm, seed)
    pilots = {"pilot-crl-moa-levels12-seed0": a, "pilot-crl-moa-seed0": args(difficulty=None, n_train=300, steps=30)}
    for name, pa in pilots.items():
        meta = json.loads((COMMITTED/"runs"/name/"meta.json").read_text())
        assert f"pilot-crl-{bench_crl.tag(pa)}-seed0" == name
        assert bench_crl.config(pa, "crl", 0, steps=pa.pilot_steps).digest() == meta["digest"], name
    new = args(task="arithmetic_crl2", seeds=[0, 1, 2], steps=30)
    names = {f"{p}{arm}-{bench_crl.tag(new)}-seed{s}" for p in ("", "pilot-") for arm in bench_crl.ARMS for s in new.seeds}
    assert not names & {d.name for d in (COMMITTED/"runs").iterdir()}
    c = bench_crl.config(new, "crl", 0)
    assert c.task == "arithmetic_crl2" and c.disjoint == "template" and c.validate() is c
