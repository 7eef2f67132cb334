"""One-command GPU check of C-RL's training path (≤ 10 min on one GPU).

The real training service (`compstrength serve-trainer --device cuda`, a separate process, real HTTP)
with the real policy (SmolLM2-135M-Instruct, from the embedded GGUF, + LoRA r=8, bf16 on the GPU), driven by
the real client (`CRLRun`, samples through LiteLLM with their token ids and log-probabilities):

  1. individual-RL steps on `arithmetic_crl2` training items (`CRLConfig`'s default task), P prompts × G samples at T = 0.8, 2 updates per
     batch (clipped against the sampling log-probabilities), with a held-out evaluation before and after;
  2. an interrupted run resumed from its log and the service's state;
  3. the figures a paper-scale run is sized from: seconds per step (sampling, update), sampled tokens per second,
     and the mismatch between the sampler's and the trainer's log-probabilities on the GPU.

The check fails (exit 1) when a mechanism does: samples without token ids, versions that do not advance, a
resume that re-trains a step, or a log-probability mismatch above --max-mismatch. It asserts nothing about
whether the policy got better. Partners are left out: their calls run on llama.cpp or vLLM, not here.

Usage: python bench/gpu_check.py [--device cuda] [--steps 8] [--prompts 8] [--group 8] [--out bench/results/gpu_check]
"""
import argparse, json, os, platform, sys, tempfile, time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import pandas as pd

from _service import start_service
from compstrength.crl import CRLConfig, CRLRun, TrainerClient
from compstrength.models import ModelClient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per step")
    ap.add_argument("--group", type=int, default=8, help="G samples per prompt")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--n-eval", type=int, default=32, help="held-out items evaluated before and after")
    ap.add_argument("--max-mismatch", type=float, default=0.05, help="fail above this mean |sampling - training| log-prob")
    ap.add_argument("--out", default="bench/results/gpu_check")
    a = ap.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    import torch
    env = dict(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
               device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", requested=a.device)
    print("environment:", env, flush=True)
    cfg = CRLConfig(protocol="majority_vote", partners=(), reward="individual", steps=a.steps, prompts_per_step=a.prompts,
                    group_size=a.group, n_train=a.steps * a.prompts, n_eval=a.n_eval, eval_every=a.steps,
                    max_tokens=a.max_tokens, temperature=0.8, updates=2, learning_rate=1e-4, seed=0,
                    protocol_params=dict(max_tokens=a.max_tokens))
    t_start = time.time()
    svc, url = start_service(work/"service", a.device, work/"service.log")
    t_up = time.time() - t_start
    checks, failed = [], False
    def check(name, ok, value):
        nonlocal failed
        failed |= not ok
        checks.append(dict(check=name, result="pass" if ok else "FAIL", value=value)); print(checks[-1], flush=True)
    try:
        trainer = TrainerClient(url, token_file=work/"service"/"token")
        pool = ModelClient([trainer.spec(cfg.policy, trainer.health())], cache_dir=work/"calls")  # the policy alone; each version replaces it
        half = max(1, a.steps // 2)
        t0 = time.time()
        CRLRun(cfg, trainer, pool, work/"run", progress=False).run(steps=half)  # stops half-way, as an interrupted run
        first = time.time() - t0
        log = CRLRun(cfg, trainer, pool, work/"run", progress=False).run()  # a new client resumes from the log
        total = time.time() - t0
        tr, ev = log[log.kind == "train"], log[log.kind == "eval"]
        h = trainer.health()
        check("every step trained once, the resume went on where the run stopped", list(tr.step) == list(range(a.steps)), len(tr))
        check("each step advanced the policy version", bool((tr.version_after > tr.version_before).all())
              and h["policy_version"] == int(tr.version_after.iloc[-1]), int(h["policy_version"]))
        check("the trainer saw the sampled tokens (EOS included)", bool((tr.completion_tokens > 0).all()), int(tr.completion_tokens.sum()))
        mm = float(tr.logprob_mismatch.max())
        check(f"sampling and training log-probs agree at T (mean |diff| per token, max over steps <= {a.max_mismatch})",
              mm <= a.max_mismatch, round(mm, 5))
        check("two clipped updates per batch", bool((tr.updates == 2).all()), int(tr.updates.iloc[0]))
        check("held-out evaluation before and after", sorted(ev.step) == [0, a.steps], list(ev.step))
        samples = a.prompts * a.group
        rows = dict(device=env["device"], steps=a.steps, prompts=a.prompts, G=a.group, samples_per_step=samples,
                    max_tokens=a.max_tokens, service_start_s=round(t_up, 1),
                    sample_s_per_step=round(float(tr.sample_seconds.median()), 2), update_s_per_step=round(float(tr.step_seconds.median()), 2),
                    sampled_tokens_per_s=round(float(tr.completion_tokens.sum() / tr.sample_seconds.sum()), 1),
                    logprob_mismatch_median=round(float(tr.logprob_mismatch.median()), 5), logprob_mismatch_max=round(mm, 5),
                    clip_ratio_median=round(float(tr.clip_ratio.median()), 4),
                    reward_first_step=round(float(tr.reward.iloc[0]), 3), reward_last_step=round(float(tr.reward.iloc[-1]), 3),
                    heldout_items=a.n_eval, alone_before=round(float(ev[ev.step == 0].policy_alone.iloc[0]), 3),
                    alone_after=round(float(ev[ev.step == a.steps].policy_alone.iloc[0]), 3),
                    run_wall_s=round(total, 1), first_half_s=round(first, 1))
        log.to_json(out/"log.jsonl", orient="records", lines=True)
    finally:
        svc.terminate(); svc.wait(60)
    table = pd.Series(rows).to_string()
    head = (f"## GPU check: training service on {env['device']} (torch {env['torch']}, CUDA {env['cuda']}), "
            f"SmolLM2-135M-Instruct + LoRA r=8, individual RL on {CRLConfig().task}, T=0.8, 2 updates per batch\n"
            f"(the held-out accuracies are on {a.n_eval} items and {a.steps} steps: a check of the loop, not a result)\n")
    txt = head + "\n" + table + "\n\n" + pd.DataFrame(checks).to_string(index=False) + "\n"
    print(txt); (out/"gpu_check.txt").write_text(txt)
    (out/"environment.json").write_text(json.dumps(env, indent=1))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
