"""C-RL end to end on real models: the training service (SmolLM2-135M + LoRA, CPU) as a process,
two partners of the embedded pool served by llama.cpp, and the client loop. A 2-step run
changes the adapter's weights and what the policy samples; a client that dies mid-run resumes
without repeating or losing a step."""
import json, signal
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from compstrength.crl import CRLConfig, CRLRun, TrainerClient, TrainerError
from compstrength.models import ModelClient
from compstrength.tasks import prompt_messages

from test_service import TOKEN, Service, api

pytestmark = pytest.mark.pool
PARTNERS = ("gemma3-270m", "qwen2.5-coder-0.5b")


@pytest.fixture(scope="module")
def partners():
    from compstrength.local import local_pool
    with local_pool(list(PARTNERS)) as lp:
        yield lp


def cfg(**kw):
    base = dict(partners=PARTNERS, steps=2, prompts_per_step=1, group_size=4, n_train=2, n_eval=2, eval_every=100,
                max_tokens=48, learning_rate=2e-3, protocol_params=dict(max_tokens=256), seed=3)
    return CRLConfig(**{**base, **kw})


def adapter(state_dir: Path, version: int) -> dict:
    return load_file(state_dir/"versions"/f"v{version:06d}"/"adapter_model.safetensors")


def test_two_crl_steps_change_weights_and_samples(tmp_path, partners):
    s = Service(tmp_path/"state", tmp_path/"svc.log").start()
    try:
        trainer = TrainerClient(s.url, token=TOKEN)
        pool = ModelClient(partners.specs(), cache_dir=tmp_path/"calls")
        run = CRLRun(cfg(), trainer, pool, tmp_path/"run", progress=False)
        item = run.train_items[0]
        probe = dict(model="policy-v0", messages=prompt_messages(run.train_items, item), n=4, max_tokens=48, temperature=1.0, seed=11)
        before = [c["message"]["content"] for c in api(s).post("/v1/chat/completions", json=probe).json()["choices"]]
        w0 = adapter(s.dir, 0)
        log = run.run()
        tr = log[log.kind == "train"]
        assert tr.step.tolist() == [0, 1] and tr.version_after.tolist() == [1, 2]
        assert tr.reward.between(0, 1).all() and tr.grad_norm.notna().all()
        ev = log[log.kind == "eval"]
        assert ev.step.tolist() == [0, 2]  # before the first step and after the last
        assert {"system", "policy_alone", "without_policy", "shapley", "loo"} <= set(ev.columns)
        # efficiency: Shapley values of the 3 players sum to v(N) − v(∅)
        for _, r in ev.iterrows():
            assert abs(r.shapley + sum(r[f"shapley_{p}"] for p in PARTNERS) - r.system) < 1e-9
        w2 = adapter(s.dir, 2)
        changed = [k for k in w0 if not torch.equal(w0[k], w2[k])]
        assert changed, "two steps changed no adapter weight"
        after = [c["message"]["content"] for c in api(s).post("/v1/chat/completions", json={**probe, "model": "policy-v2"}).json()["choices"]]
        assert after != before, "the same seeded samples after two steps"
    finally:
        s.kill(signal.SIGTERM)


def test_client_restart_resumes_without_repeating_or_losing(tmp_path, partners):
    s = Service(tmp_path/"state", tmp_path/"svc.log").start()
    try:
        pool = ModelClient(partners.specs(), cache_dir=tmp_path/"calls")
        c = cfg(reward="individual", steps=3)

        class Crash(Exception): pass
        class Crashing(CRLRun):  # dies after the service applied step 1, before the client logged it
            def _append(self, row):
                if row.get("kind") == "train" and row["step"] == 1: raise Crash()
                super()._append(row)
        with pytest.raises(Crash):
            Crashing(c, TrainerClient(s.url, token=TOKEN), pool, tmp_path/"run", progress=False).run()
        assert (tmp_path/"run"/"pending.json").exists()
        assert TrainerClient(s.url, token=TOKEN).health()["policy_version"] == 2  # step 1 was applied

        s.kill(signal.SIGKILL); s.start()  # and the service restarts too
        log = CRLRun(c, TrainerClient(s.url, token=TOKEN), pool, tmp_path/"run", progress=False).run()
        tr = log[log.kind == "train"]
        assert tr.step.tolist() == [0, 1, 2] and tr.version_after.tolist() == [1, 2, 3]
        assert tr.replayed.tolist() == [False, True, False]  # step 1 resent, answered from the service's record
        assert TrainerClient(s.url, token=TOKEN).health()["step"] == 3
        assert not (tmp_path/"run"/"pending.json").exists()
        assert TOKEN not in "".join(p.read_text() for p in (tmp_path/"run").glob("*.json*"))

        # another config in the same run folder, or the run on a different service, is refused
        with pytest.raises(ValueError, match="another config"):
            CRLRun(cfg(reward="individual", steps=4), TrainerClient(s.url, token=TOKEN), pool, tmp_path/"run", progress=False).run()
    finally:
        s.kill(signal.SIGTERM)
    other = Service(tmp_path/"state2", tmp_path/"svc2.log").start()
    try:
        with pytest.raises(TrainerError, match="was trained on service"):
            CRLRun(c, TrainerClient(other.url, token=TOKEN), pool, tmp_path/"run", progress=False).run()
    finally:
        other.kill(signal.SIGTERM)
