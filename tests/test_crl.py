"""C-RL end to end on real models: the training service (SmolLM2-135M + LoRA, CPU) as a process,
two partners of the embedded pool served by llama.cpp, and the client loop. A 2-step run
changes the adapter's weights and what the policy samples; a client that dies mid-run resumes
without repeating or losing a step. The partners' answers share one call cache across the module (as
they would in one real run), so each distinct partner request is made once. Without a model: the items C-RL keeps
apart (the generator's exclusion of (template, expression) pairs, `check_disjoint`'s rule by template), and the committed
runs' config digests."""
import json, signal
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from compstrength.contract import model_name
from compstrength.crl import CRLConfig, CRLRun, TrainerClient, TrainerError
from compstrength.models import ModelClient
from compstrength.tasks import prompt_messages

from test_service import TOKEN, Service, api

PARTNERS = ("gemma3-270m", "qwen2.5-coder-0.5b")


@pytest.fixture(scope="module")
def partners():
    from compstrength.local import local_pool
    with local_pool(list(PARTNERS)) as lp:
        yield lp


def cfg(**kw):
    base = dict(partners=PARTNERS, steps=1, prompts_per_step=1, group_size=4, n_train=2, n_eval=1, eval_every=100,
                max_tokens=48, learning_rate=2e-3, protocol_params=dict(max_tokens=64), seed=3)
    return CRLConfig(**{**base, **kw})


def test_config_is_checked_when_made():
    "A bad key or value is refused as the config is made, naming the field; a config rebuilt from its dump (as in meta.json) keeps its digest."
    with pytest.raises(ValueError, match="stepz"): CRLConfig(stepz=3)
    with pytest.raises(ValueError, match="group_size must be >= 2"): cfg(group_size=1)
    with pytest.raises(ValueError, match="loss_type"): cfg(loss_type="ppo2")
    c = cfg()
    assert CRLConfig(**json.loads(json.dumps(c.model_dump()))).digest() == c.digest()
    assert cfg(steps=4).digest() != c.digest()


@pytest.fixture(scope="module")
def partner_calls(tmp_path_factory):
    return tmp_path_factory.mktemp("partner-calls")


@pytest.fixture
def live(tmp_path, partners, partner_calls):
    "A fresh training service (real subprocess) and a client of the partners (the module's call cache)."
    s = Service(tmp_path/"state", tmp_path/"svc.log").start()
    try:
        yield s, TrainerClient(s.url, token=TOKEN), ModelClient(partners.specs(), cache_dir=partner_calls)
    finally:
        s.kill(signal.SIGTERM)


def adapter(state_dir: Path, version: int) -> dict:
    return load_file(state_dir/"versions"/f"v{version:06d}"/"adapter_model.safetensors")


@pytest.mark.pool
def test_one_crl_step(tmp_path, live):
    "One C-RL step in majority vote, on real models: a well-formed log, evaluations before and after, and an update exactly when a group had signal."
    s, trainer, pool = live
    members = dict(pool.pool)
    w0 = adapter(s.dir, 0)  # version folders are pruned to the last two
    log = CRLRun(cfg(), trainer, pool, tmp_path/"run", progress=False).run()
    assert pool.pool == members  # the run called the policy through its own view of the client
    tr = log[log.kind == "train"]
    assert tr.step.tolist() == [0] and tr.version_after.tolist() == [1]
    assert tr.reward.between(0, 1).all() and tr.mean_individual.between(0, 1).all() and tr.grad_norm.notna().all()
    ev = log[log.kind == "eval"]
    assert ev.step.tolist() == [0, 1]  # before the first step and after the last
    for _, r in ev.iterrows():  # efficiency: the three Shapley values sum to v(N) − v(∅)
        assert abs(r.shapley + sum(r[f"shapley_{p}"] for p in PARTNERS) - r.system) < 1e-9
        assert abs(r.loo - (r.system - r.without_policy)) < 1e-9
    # the samples went back with their own tokens and sampling log-probabilities: scored at T, they agree
    assert tr.logprob_mismatch.iloc[0] < 1e-3 and tr.temperature.iloc[0] == cfg().temperature, tr.iloc[0].to_dict()
    items = pd.read_json(tmp_path/"run"/"eval_items.jsonl", lines=True)  # per held-out item, for the paired test
    assert sorted(set(zip(items.step, items.protocol))) == sorted(zip(ev.step, ev.protocol))
    for (st, pr), g in items.groupby(["step", "protocol"]):
        e = ev[(ev.step == st) & (ev.protocol == pr)].iloc[0]
        assert len(g) == cfg().n_eval and abs(g.system.mean() - e.system) < 1e-9
        assert abs(g.shapley.mean() - e.shapley) < 1e-9  # Shapley is linear: the per-item values average to the game's
    w1 = adapter(s.dir, 1)
    changed = any(not torch.equal(w0[k], w1[k]) for k in w0)
    signal_ = bool((tr.frac_reward_zero_std < 1).any())
    assert changed == signal_, (changed, tr.frac_reward_zero_std.tolist())  # all-equal groups: zero advantage, no update


@pytest.mark.pool
def test_two_steps_change_weights_and_samples(tmp_path, live):
    "A 2-step run whose first group has signal changes the adapter's weights and what the policy samples."
    from compstrength.crl import individual_reward
    s, trainer, pool = live
    for seed in range(12):  # the run's sampling is seeded: find a seed whose first group has mixed rewards
        c = cfg(reward="individual", steps=2, seed=seed, group_size=6, max_tokens=96, item_meta={"difficulty": [1]})
        run = CRLRun(c, trainer, pool, tmp_path/f"run{seed}", progress=False)
        item = run._items_for(0)[0]
        probe = dict(model=model_name(0), messages=prompt_messages(run.train_items, item), n=c.group_size,
                     max_tokens=c.max_tokens, temperature=c.temperature, seed=run.sample_seed(0, 0))
        before = [ch["message"]["content"] for ch in api(s).post("/v1/chat/completions", json=probe).json()["choices"]]
        if len({individual_reward(run.train_items, item, t) for t in before}) > 1: break
    else:
        pytest.fail("no seed in 0-11 gave a first group with mixed rewards")
    w0 = adapter(s.dir, 0)
    log = run.run(evaluate=False)  # train only: the evaluations are test_one_crl_step's
    tr = log[log.kind == "train"]
    assert tr.step.tolist() == [0, 1] and not (log.kind == "eval").any()
    assert tr.frac_reward_zero_std.iloc[0] < 1 and tr.grad_norm.iloc[0] > 0
    w2 = adapter(s.dir, 2)
    assert [k for k in w0 if not torch.equal(w0[k], w2[k])], "two steps changed no adapter weight"
    after = [ch["message"]["content"] for ch in api(s).post("/v1/chat/completions", json={**probe, "model": model_name(2)}).json()["choices"]]
    assert after != before, "the same seeded samples after two steps"


@pytest.mark.pool
def test_client_restart_resumes_without_repeating_or_losing(tmp_path, live):
    "A client that dies after the service applied a step, and a restarted service, resume without repeating or losing a step."
    s, _, pool = live
    c = cfg(reward="individual", steps=3)

    class Crash(Exception): pass
    class Crashing(CRLRun):  # dies after the service applied step 1, before the client logged it
        def _append(self, row):
            if row.get("kind") == "train" and row["step"] == 1: raise Crash()
            super()._append(row)
    with pytest.raises(Crash):  # train only (as a pilot): no evaluation before the first step
        Crashing(c, TrainerClient(s.url, token=TOKEN), pool, tmp_path/"run", progress=False).run(evaluate=False)
    assert (tmp_path/"run"/"pending.json").exists()
    assert TrainerClient(s.url, token=TOKEN).health()["policy_version"] == 2  # step 1 was applied

    s.kill(signal.SIGKILL); s.start()  # and the service restarts too
    log = CRLRun(c, TrainerClient(s.url, token=TOKEN), pool, tmp_path/"run", progress=False).run()
    tr = log[log.kind == "train"]
    assert tr.step.tolist() == [0, 1, 2] and tr.version_after.tolist() == [1, 2, 3]
    assert tr.replayed.tolist() == [False, True, False]  # step 1 resent, answered from the service's record
    assert log[log.kind == "eval"].step.tolist() == [3]  # the evaluating run evaluates after its last step only
    assert TrainerClient(s.url, token=TOKEN).health()["step"] == 3
    assert not (tmp_path/"run"/"pending.json").exists()
    assert TOKEN not in "".join(p.read_text() for p in (tmp_path/"run").glob("*.json*"))

    # another config in the same run folder, or the run on a different service, is refused
    with pytest.raises(ValueError, match="another config"):
        CRLRun(cfg(reward="individual", steps=4), TrainerClient(s.url, token=TOKEN), pool, tmp_path/"run", progress=False).run()
    other = Service(tmp_path/"state2", tmp_path/"svc2.log").start()
    try:
        with pytest.raises(TrainerError, match="was trained on service"):
            CRLRun(c, TrainerClient(other.url, token=TOKEN), pool, tmp_path/"run", progress=False).run()
    finally:
        other.kill(signal.SIGTERM)


# --- items kept apart: the generator's exclusion, check_disjoint's rule by template, the committed runs' digests

ROOT = Path(__file__).resolve().parents[1]


def make_arithmetic():
    "data/make_arithmetic.py as a module (it is a script, not part of the package)."
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_arithmetic", ROOT/"data"/"make_arithmetic.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m


def test_generator_excludes_computations_and_draws_each_once():
    "With `exclude`, no item asks an excluded (template, expression) and none asks the same one twice; levels stay balanced, ids start where asked, and the same call gives the same items."
    m = make_arithmetic()
    excl = {m.pair(it) for it in m.read_items(ROOT/"data"/"arithmetic1k.jsonl")}
    out = m.generate(7, 400, excl, first_id=5001)
    pairs = [m.pair(it) for it in out]
    assert len(set(pairs)) == len(out) and not set(pairs) & excl
    assert (out[0]["id"], out[-1]["id"]) == ("arith-5001", "arith-5400")
    for start in (0, 200):
        assert [sum(it["difficulty"] == lv for it in out[start:start + 200]) for lv in range(1, 6)] == [40] * 5
    assert m.generate(7, 400, excl, first_id=5001) == out
    # without it, pairs may repeat and the draw is the one that wrote data/arithmetic.jsonl
    assert m.generate(m.DEFAULT_SEED, 200) == m.read_items(ROOT/"data"/"arithmetic.jsonl")


def test_a_template_that_runs_out_gives_its_slots_to_its_levels_other_templates():
    m = make_arithmetic()
    rows = {("l2_rows_mul", f"{a} * {b}") for a in range(3, 10) for b in range(4, 12)}  # every pair l2_rows_mul can draw
    out = m.generate(7, 200, rows)
    assert not any(it["template"] == "l2_rows_mul" for it in out) and sum(it["difficulty"] == 2 for it in out) == 40
    level1 = ({("l1_gift_add", f"{a} + {b}") for a in range(2, 13) for b in range(1, 20 - a)}
              | {("l1_lost_sub", f"{a} - {b}") for a in range(6, 20) for b in range(1, a)}
              | {("l1_bus_add", f"{a} + {b}") for a in range(3, 15) for b in range(1, 20 - a)}
              | {("l1_eaten_sub", f"{a} - {b}") for a in range(5, 20) for b in range(1, a)})
    with pytest.raises(AssertionError, match="every level-1 template is exhausted"):
        m.generate(7, 200, level1)


def test_arithmetic_crl2_is_what_its_command_writes(tmp_path):
    "The committed file is the docstring's command's output, byte for byte; its ids are in no file it excludes, and an id clash is refused."
    import subprocess, sys
    old = [ROOT/"data"/f for f in ("arithmetic.jsonl", "arithmetic1k.jsonl", "arithmetic_crl.jsonl")]
    cmd = [sys.executable, str(ROOT/"data"/"make_arithmetic.py"), "--items", "1200", "--seed", "20261206", "--first-id", "2001",
           "--exclude", *map(str, old), "--out", str(tmp_path/"crl2.jsonl")]
    subprocess.run(cmd, check=True, capture_output=True)
    assert (tmp_path/"crl2.jsonl").read_bytes() == (ROOT/"data"/"arithmetic_crl2.jsonl").read_bytes()
    m = make_arithmetic()
    new, before = m.read_items(tmp_path/"crl2.jsonl"), [it for f in old for it in m.read_items(f)]
    assert not {it["id"] for it in new} & {it["id"] for it in before}
    assert len({m.pair(it) for it in new}) == len(new) and not {m.pair(it) for it in new} & {m.pair(it) for it in before}
    clash = subprocess.run([sys.executable, str(ROOT/"data"/"make_arithmetic.py"), "--items", "200", "--first-id", "1001",
                            "--exclude", str(old[2]), "--out", str(tmp_path/"x.jsonl")], capture_output=True, text=True)
    assert clash.returncode == 2 and "already in the excluded files" in clash.stderr


def _arith(name, rows):
    "A numeric task of (id, split, question, expression) rows, each item with its template and expression in its meta."
    from compstrength.tasks import Item, Task
    return Task(name, "numeric", [Item(i, q, "0", meta=dict(split=s, template="T", expression=e)) for i, s, q, e in rows])


def test_check_disjoint_compares_template_and_expression(monkeypatch):
    """Items with the same (template, expression) and other questions: refused between train, held-out and dev, and
    against the test items of a task in `avoid` (and arithmetic1k's items of both splits), with the count and a shared key;
    the question-only rule lets them through."""
    import compstrength.crl as crl
    from compstrength.crl import item_overlap, train_eval_items
    c = CRLConfig(task="mine", avoid=("arithmetic1k", "other"), n_train=4, n_eval=4)
    base = lambda exprs: _arith("mine", [(f"m-{k}", "test", f"Question {k}?", e) for k, e in enumerate(exprs)]
                                + [("m-dev", "dev", "A dev question?", "99 + 0")])
    tasks = {"mine": base([f"{k} + 1" for k in range(8)])}
    monkeypatch.setattr(crl, "load_task", lambda name, split="all", **kw: tasks[name].split(split))
    tr, ev = train_eval_items(c)
    t0, h = tr[0].meta["expression"], [it.meta["expression"] for it in ev]
    exprs = [f"{k} + 1" for k in range(8)]
    exprs[int(ev[0].id.split("-")[1])] = t0                      # one held-out item asks a training item's computation
    tasks["mine"] = base(exprs)
    tasks["arithmetic1k"] = _arith("arithmetic1k", [("s-1", "dev", "Study?", h[1]), ("s-2", "test", "Study 2?", h[2])])
    tasks["other"] = _arith("other", [("o-1", "dev", "Other?", h[3]), ("o-2", "test", "Other 2?", "55 + 5")])
    o = item_overlap(c).query("key == 'template' and part == 'held_out'").set_index("other").n
    assert (o["train"], o["arithmetic1k"], o["other"], o["dev"]) == (1, 2, 0, 0)  # arithmetic1k: both splits; other: its test split
    with pytest.raises(ValueError) as e: c.check_disjoint()
    msg = str(e.value)
    assert f"1 of the 4 held_out items share their (template, expression) with the train items, e.g. ('T', '{t0}')" in msg
    assert "2 of the 4 held_out items share their (template, expression) with items of 'arithmetic1k'" in msg and "'other'" not in msg
    assert CRLConfig(**{**c.model_dump(), "disjoint": "question"}).check_disjoint() == dict(train=4, held_out=4, dev=1)
    tasks["mine"] = _arith("mine", [*((it.id, "test", it.question, it.meta["expression"]) for it in tasks["mine"].split("test")),
                                   ("m-dev", "dev", "A dev question?", t0)])       # a dev item asks a training item's computation
    tasks["arithmetic1k"] = tasks["other"] = _arith("x", [])
    c2 = CRLConfig(**{**c.model_dump(), "avoid": ("arithmetic1k",)})
    with pytest.raises(ValueError, match="1 of the 4 train items share their .template, expression. with the dev items"): c2.check_disjoint()


def test_the_committed_runs_keep_their_digests():
    "Every committed run folder's config, rebuilt with the question-only rule it was checked by, has the digest its meta.json holds; the stricter rule is another config."
    metas = sorted((ROOT/"bench"/"results"/"crl"/"runs").glob("*/meta.json"))
    assert len(metas) >= 8
    for f in metas:
        meta = json.loads(f.read_text())
        assert "disjoint" not in meta["config"]
        assert CRLConfig(**{**meta["config"], "disjoint": "question"}).digest() == meta["digest"], f.parent.name
        assert CRLConfig(**meta["config"]).digest() != meta["digest"]  # the default rule, by template: not the run's config
