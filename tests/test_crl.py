"""C-RL end to end on real models: the training service (SmolLM2-135M + LoRA, CPU) as a process,
two partners of the embedded pool served by llama.cpp, and the client loop. A 2-step run
changes the adapter's weights and what the policy samples; a client that dies mid-run resumes
without repeating or losing a step. The partners' answers share one call cache across the module (as
they would in one real run), so each distinct partner request is made once."""
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
                max_tokens=48, learning_rate=2e-3, protocol_params=dict(max_tokens=128), seed=3)
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
    log = run.run()
    tr = log[log.kind == "train"]
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
