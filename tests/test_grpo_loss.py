"""The training service's update, checked on a real model (SmolLM2-135M + a LoRA adapter, CPU) on a fixed
batch of its own samples: against a hand computation (sequence by sequence, no padding, plain torch), and
against TRL's own GRPO loss (`GRPOTrainer._compute_loss`) for every loss type both implement."""
import copy

import numpy as np
import pytest
import torch

from compstrength.contract import LOSS_TYPES, TrainStep, group_advantages
from compstrength.service import Policy

PROMPT = [{"role": "user", "content": "What is 7 + 5? Finish with 'The answer is N.'"}]
T, MAX_TOKENS, EPS, LR = 0.7, 16, 0.2, 1e-3
REWARDS = [1.0, 0.0, 0.5, 0.0]


@pytest.fixture(scope="module")
def policy():
    "SmolLM2 with a LoRA adapter whose B matrices are not zero (a trained adapter), so both A and B get gradients."
    p = Policy("smollm2-135m", device="cpu", seed=0)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, w in p.model.named_parameters():
            if "lora_B" in n: w.copy_(torch.randn(w.shape, generator=g) * 0.02)
    return p


@pytest.fixture(scope="module")
def batch(policy):
    """Four samples at T = 0.7 with their sampling log-probabilities, shifted by noise so that the ratios are
    not 1 and the clipping bites on some tokens (as after a few updates, or with a sampler slightly off)."""
    samples = policy.sample(PROMPT, n=4, max_tokens=MAX_TOKENS, temperature=T, seed=11)
    rng = np.random.default_rng(0)
    comps = [dict(text=s["text"], token_ids=s["token_ids"],
                  logprobs=[min(0.0, lp + float(rng.normal(0, 0.3))) for lp in s["logprobs"]]) for s in samples]
    return dict(policy_version=0, groups=[dict(prompt=PROMPT, completions=comps, rewards=REWARDS)])


def hand_loss(model, tok, body, loss_type, temperature=T, max_tokens=MAX_TOKENS, eps=EPS):
    "The loss written out: each sequence on its own, no padding, TRL's advantage and reductions."
    g = body["groups"][0]
    r = np.array(g["rewards"])
    A = (r - r.mean()) / (r.std(ddof=1) + 1e-4)  # TRL: Bessel-corrected std, eps 1e-4
    p = tok.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    p_ids = tok(p, add_special_tokens=False).input_ids
    per_seq, tokens = [], 0
    for a, c in zip(A, g["completions"]):
        ids = torch.tensor([p_ids + c["token_ids"]])
        logits = model(input_ids=ids).logits[0].float()
        L = len(p_ids)
        lp = torch.stack([torch.log_softmax(logits[L - 1 + t] / temperature, -1)[tid] for t, tid in enumerate(c["token_ids"])])
        ratio = torch.exp(lp - torch.tensor(c["logprobs"]))
        loss_t = -torch.minimum(ratio * a, ratio.clamp(1 - eps, 1 + eps) * a)
        per_seq.append(loss_t); tokens += len(c["token_ids"])
    if loss_type == "grpo": return torch.stack([s.mean() for s in per_seq]).mean()
    total = torch.stack([s.sum() for s in per_seq]).sum()
    if loss_type in ("dapo", "bnpo"): return total / tokens
    if loss_type == "dr_grpo": return total / (len(per_seq) * max_tokens)
    raise ValueError(loss_type)


def assert_rel(a, b, tol=1e-4):
    "Whole-tensor relative error: float noise of batched vs single-sequence forwards stays far below tol."
    err = float((a - b).norm() / b.norm().clamp(min=1e-12))
    assert err < tol, f"relative error {err:.2e} >= {tol}"


def lora_grads(model):
    return {n: w.grad.detach().clone() for n, w in model.named_parameters() if w.requires_grad and w.grad is not None}


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_one_step_matches_the_hand_computation(policy, batch, loss_type):
    m = copy.deepcopy(policy.model); m.train()
    ref = hand_loss(m, policy.tok, batch, loss_type)
    ref.backward()
    g = lora_grads(m)
    norm = torch.sqrt(sum((v ** 2).sum() for v in g.values()))
    clip = min(1.0, 1.0 / (float(norm) + 1e-6))  # clip_grad_norm_ to max_grad_norm = 1
    w0 = {n: w.detach().clone() for n, w in policy.model.named_parameters() if w.requires_grad}
    state = copy.deepcopy(policy.opt.state_dict())
    req = TrainStep(idempotency_key=f"hand-{loss_type}", learning_rate=LR, temperature=T, max_tokens=MAX_TOKENS,
                    loss_type=loss_type, epsilon=EPS, **batch)
    out = policy.step(req)
    np.testing.assert_allclose(out["loss"], ref.item(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out["grad_norm"], float(norm), rtol=1e-3)
    got = lora_grads(policy.model)
    assert got.keys() == g.keys() and len(g) > 0
    for n in g:  # the service's gradient, after clipping, is the hand gradient times the clip factor
        assert_rel(got[n], g[n] * clip)
    # AdamW's first step: w - lr · g/(|g| + 1e-8) with g the clipped gradient (bias corrections cancel)
    moved = {n: w.detach() for n, w in policy.model.named_parameters() if w.requires_grad}
    for n in ("base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight",):
        big = got[n].abs() > 1e-6  # where the sign of g is not float noise
        expect = w0[n] - LR * got[n] / (got[n].abs() + 1e-8)
        torch.testing.assert_close(moved[n][big], expect[big], rtol=0, atol=LR * 1e-3)
    assert 0 < out["clip_ratio"] < 1  # some, not all, ratios outside [1-ε, 1+ε]
    # put the policy back for the next loss type (same start, fresh optimizer)
    with torch.no_grad():
        for n, w in policy.model.named_parameters():
            if w.requires_grad: w.copy_(w0[n])
    policy.opt.load_state_dict(state)


@pytest.fixture(scope="module")
def trl_trainer(policy, tmp_path_factory):
    "TRL's GRPOTrainer around a copy of the same adapted model, with the batch's settings."
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("trl")), use_cpu=True, per_device_train_batch_size=4,
                      num_generations=4, max_completion_length=MAX_TOKENS, temperature=T, beta=0.0, epsilon=EPS,
                      report_to=[], bf16=False, gradient_checkpointing=False)
    tr = GRPOTrainer(model=copy.deepcopy(policy.model), reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                     args=args, train_dataset=Dataset.from_dict({"prompt": [PROMPT] * 4}), processing_class=policy.tok)
    if not hasattr(tr, "current_gradient_accumulation_steps"): tr.current_gradient_accumulation_steps = 1
    return tr


def trl_inputs(policy, batch):
    "The batch as TRL's `_compute_loss` takes it: left-padded prompts, right-padded completions, advantages, old log-probs."
    g = batch["groups"][0]
    p = policy.tok(policy.tok.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True), add_special_tokens=False).input_ids
    n, C = len(g["completions"]), max(len(c["token_ids"]) for c in g["completions"])
    cid = torch.full((n, C), policy.tok.pad_token_id); cm = torch.zeros((n, C), dtype=torch.long); old = torch.zeros((n, C))
    for k, c in enumerate(g["completions"]):
        L = len(c["token_ids"])
        cid[k, :L] = torch.tensor(c["token_ids"]); cm[k, :L] = 1; old[k, :L] = torch.tensor(c["logprobs"])
    A = torch.tensor(group_advantages([g["rewards"]])[0], dtype=torch.float32)
    return dict(prompt_ids=torch.tensor([p] * n), prompt_mask=torch.ones((n, len(p)), dtype=torch.long),
                completion_ids=cid, completion_mask=cm, advantages=A, old_per_token_logps=old,
                num_items_in_batch=cm.sum())


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_loss_and_gradient_match_trl(policy, batch, trl_trainer, loss_type):
    tr = trl_trainer
    tr.loss_type = loss_type
    tr.model.train(); tr.model.zero_grad(set_to_none=True)
    trl_loss = tr._compute_loss(tr.model, trl_inputs(policy, batch))
    trl_loss.backward()
    tg = lora_grads(tr.model)
    m = copy.deepcopy(policy.model); m.train()
    ours = hand_loss(m, policy.tok, batch, loss_type)
    ours.backward()
    og = lora_grads(m)
    np.testing.assert_allclose(trl_loss.item(), ours.item(), rtol=1e-4, atol=1e-6)
    assert tg.keys() == og.keys() and len(tg) > 0
    for n in tg: assert_rel(tg[n], og[n])
    # the service's own reduction of the same batch gives the same number
    out = policy.step(TrainStep(idempotency_key=f"trl-{loss_type}", learning_rate=1e-12, temperature=T,
                                max_tokens=MAX_TOKENS, loss_type=loss_type, epsilon=EPS, **batch))
    np.testing.assert_allclose(out["loss"], trl_loss.item(), rtol=1e-4, atol=1e-6)


def test_several_updates_clip_against_the_sampling_logprobs(policy, batch):
    "updates=3 is three AdamW steps on one batch, each ratio taken against the sent log-probabilities (not the last update's)."
    m = copy.deepcopy(policy.model); m.train()
    params = [w for w in m.parameters() if w.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=0.0)
    opt.load_state_dict(copy.deepcopy(policy.opt.state_dict()))  # the service's optimizer state so far...
    for pg in opt.param_groups: pg["lr"] = LR                     # ...which also restores its last learning rate
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        hand_loss(m, policy.tok, batch, "grpo").backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    out = policy.step(TrainStep(idempotency_key="three", learning_rate=LR, temperature=T, max_tokens=MAX_TOKENS,
                                updates=3, epsilon=EPS, **batch))
    assert out["updates"] == 3 and out["loss_last"] != out["loss"]
    want = {n: w.detach() for n, w in m.named_parameters() if w.requires_grad}
    got = {n: w.detach() for n, w in policy.model.named_parameters() if w.requires_grad}
    close = np.mean([float(torch.isclose(got[n], want[n], rtol=0, atol=LR * 1e-2).float().mean()) for n in want])
    assert close > 0.999, close  # Adam's g/|g| is float noise only where g is ~0


def test_sampling_and_scoring_agree_at_the_sampling_temperature(policy):
    "Fresh samples sent back with their own log-probabilities: a ratio of 1 before the update, at T; not at T = 1."
    s = policy.sample(PROMPT, n=3, max_tokens=MAX_TOKENS, temperature=T, seed=5)
    body = dict(policy_version=0, groups=[dict(prompt=PROMPT, rewards=[1.0, 0.0, 0.0],
                                               completions=[dict(text=x["text"], token_ids=x["token_ids"], logprobs=x["logprobs"]) for x in s])])
    w0 = {n: w.detach().clone() for n, w in policy.model.named_parameters() if w.requires_grad}
    at_t = policy.step(TrainStep(idempotency_key="agree-T", learning_rate=1e-12, temperature=T, **body))
    at_1 = policy.step(TrainStep(idempotency_key="agree-1", learning_rate=1e-12, temperature=1.0, **body))
    assert at_t["logprob_mismatch"] < 1e-3, at_t
    assert at_1["logprob_mismatch"] > 10 * at_t["logprob_mismatch"], (at_1, at_t)
    with torch.no_grad():
        for n, w in policy.model.named_parameters():
            if w.requires_grad: w.copy_(w0[n])


def test_the_policy_runs_local_kernels_only(policy):
    "No Hub kernels are swapped in (remote code; on a GPU, other math than the sampler ran): kernels stay off through train/eval switches."
    base = policy.model.get_base_model()
    policy.model.train(); policy.model.eval()
    assert base.use_kernels is False and getattr(base, "_kernels_mode", None) is None
