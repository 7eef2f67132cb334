"""C-RL against individual RL, end to end on real models (issue 6).

The policy, SmolLM2-135M-Instruct (+ LoRA, trained by the real training service,
`compstrength serve-trainer`, started here as a separate process per run with a fresh state
folder), sits in a pool with two frozen partners of the embedded pool (served live by llama.cpp;
their answers are cached across runs). Three runs with the same budget (steps × prompts × G):

  - C-RL in majority_vote   (reward: the system's outcome with the sample in the policy's seat)
  - C-RL in weighted_vote   (the same, votes weighted by dev accuracy; calibration fixed at the start)
  - individual RL           (reward: the sample's own correctness)

Each run is evaluated before and after training, on held-out arithmetic items, in both
protocols: the policy alone, the system with it (v(N)), without it (v(N∖policy)), and its exact
Shapley value and leave-one-out in the 3-member pool. One table; binomial standard errors of
the held-out accuracies say how large the noise is.

Usage: .venv/bin/python bench/bench_crl.py [--steps 30] [--seed 0] [--device auto] [--out bench/results/crl]
(--device cuda with a larger --steps on a GPU machine.)
"""
import argparse, json, os, shutil, sys, time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import httpx
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _service import start_service
from compstrength.crl import CRLConfig, CRLRun, TrainerClient
from compstrength.local import local_pool
from compstrength.files import home_dir
from compstrength.models import ModelClient

pd.set_option("display.width", 250)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--prompts", type=int, default=2, help="prompts per step")
    ap.add_argument("--group", type=int, default=4, help="G samples per prompt")
    ap.add_argument("--max-tokens", type=int, default=96, help="policy sample length")
    ap.add_argument("--n-train", type=int, default=12)
    ap.add_argument("--n-eval", type=int, default=12)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--difficulty", type=int, nargs="+", default=[1], help="arithmetic levels to train and evaluate on (1-5)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--runs", nargs="+", default=["crl:majority_vote", "crl:weighted_vote", "individual"])
    ap.add_argument("--out", default="bench/results/crl", help="table, log and chart")
    ap.add_argument("--work", default=None, help="run folders and service states (default: ~/.cache/compstrength/bench_crl); rerun to resume")
    a = ap.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    partners = ("gemma3-270m", "qwen2.5-coder-0.5b")
    proto_params = dict(max_tokens=320, n_dev=12)  # the defaults: partner answers are shared with the default experiment's call cache
    evals = ("majority_vote", "weighted_vote")
    t_all = time.time()
    logs = []
    with local_pool(list(partners)) as lp:
        pool = ModelClient(lp.specs(), cache_dir=home_dir()/"calls")
        for spec in a.runs:
            kind, _, proto = spec.partition(":")
            proto = proto or "majority_vote"
            cfg = CRLConfig(protocol=proto, protocol_params=proto_params, partners=partners,
                            reward="system" if kind == "crl" else "individual", steps=a.steps, prompts_per_step=a.prompts,
                            group_size=a.group, n_train=a.n_train, n_eval=a.n_eval, eval_every=a.steps,
                            eval_protocols=tuple(p for p in evals if p != proto), max_tokens=a.max_tokens,
                            learning_rate=a.lr, seed=a.seed, item_meta={"difficulty": a.difficulty})
            name = f"{kind}-{proto}-seed{a.seed}" if kind == "crl" else f"individual-seed{a.seed}"
            rdir = Path(a.work or home_dir()/"bench_crl")/name
            rdir.mkdir(parents=True, exist_ok=True)
            sd = rdir/"service"
            svc, url = start_service(sd, a.device, rdir.parent/f"{name}.service.log")
            try:
                trainer = TrainerClient(url, token_file=sd/"token")
                run = CRLRun(cfg, trainer, pool, rdir, coalition_cache=home_dir()/"coalitions", progress=True)
                t0 = time.time()
                log = run.run()
                log["run_name"], log["wall_s"] = name, time.time() - t0
                logs.append(log)
            finally:
                svc.terminate(); svc.wait(60)
    log = pd.concat(logs, ignore_index=True)
    log.to_csv(out/"log.csv", index=False)
    summarize(log, a, partners, out, time.time() - t_all)


def summarize(log, a, partners, out, seconds):
    tr, ev = log[log.kind == "train"], log[log.kind == "eval"]
    rows = []
    for (name, proto), g in ev.groupby(["run_name", "protocol"], sort=False):
        b, e = g.sort_values("step").iloc[0], g.sort_values("step").iloc[-1]
        t = tr[tr.run_name == name].sort_values("step")
        k = max(1, len(t) // 3)
        se = lambda p: np.sqrt(p * (1 - p) / b.n_items)
        rows.append({"run": name, "eval in": proto, "steps": int(t.step.max() + 1),
                     "system before": f"{b.system:.3f}±{se(b.system):.2f}", "system after": f"{e.system:.3f}±{se(e.system):.2f}",
                     "Δ system": round(e.system - b.system, 3),
                     "shapley before": round(b.shapley, 3), "shapley after": round(e.shapley, 3),
                     "loo before": round(b.loo, 3), "loo after": round(e.loo, 3),
                     "alone before": round(b.policy_alone, 3), "alone after": round(e.policy_alone, 3),
                     "v(N∖policy)": round(e.without_policy, 3),
                     "train reward first/last third": f"{t.reward.head(k).mean():.2f}/{t.reward.tail(k).mean():.2f}",
                     "own correctness first/last third": f"{t.mean_individual.head(k).mean():.2f}/{t.mean_individual.tail(k).mean():.2f}",
                     "zero-signal groups": round(float(t.frac_reward_zero_std.mean()), 2),
                     "groups with individual RL's update": (round(float(t.frac_same_as_individual.mean()), 2)
                                                            if "frac_same_as_individual" in t and t.frac_same_as_individual.notna().all() else "not logged"),
                     "s/step": round(float((t.sample_seconds + t.step_seconds).mean()), 1)})
    table = pd.DataFrame(rows)
    head = (f"## C-RL vs individual RL — policy SmolLM2-135M (+LoRA r=8), partners {', '.join(partners)}, arithmetic\n"
            f"seed {a.seed}; {a.steps} steps × {a.prompts} prompts × G={a.group}, samples ≤{a.max_tokens} tokens, lr {a.lr}, "
            f"arithmetic levels {a.difficulty}: train items {a.n_train}, held-out items {a.n_eval} (± = binomial standard error); device {a.device}; "
            f"this invocation {seconds:.0f} s (runs already complete are reloaded from their logs; s/step is the training time)\n")
    print(head); print(table.to_string(index=False))
    (out/"table.txt").write_text(head + "\n" + table.to_string(index=False) + "\n")
    try:
        from compstrength.charts import save_chart, training_curves
        save_chart(training_curves(log), out/"curves.html")
    except ImportError: pass


if __name__ == "__main__":
    main()
