"""The policy's greedy answers through the training service: one request at a time vs 8 in flight, batched by the service.

An evaluation asks the policy (SmolLM2-135M-Instruct + LoRA, served by `compstrength serve-trainer` on the CPU) for one
greedy answer per held-out item, as a mixture-of-agents proposer: up to 256 tokens each. This bench sends the same
requests (the first `--items` held-out items of `arithmetic_crl`, levels 1-2, as the C-RL bench asks them) through
compstrength's ModelClient, each setting with a fresh call cache:

- `1 in flight`: the client's earlier setting; the service answers one request, then the next.
- `8 in flight`: the client's setting now; the service gathers the greedy requests that arrive together and answers them
  in one left-padded batch (`GreedyBatcher`, `Policy.greedy_batch`).

It prints wall time, seconds per answer, generated tokens per second and the ratio, and how many answers are the same
text in both settings (a batch's float rounding can flip a near-tie in greedy decoding).

Usage: .venv/bin/python bench/bench_policy_batch.py [--items 32] [--threads 2] [--max-tokens 256]
"""
import argparse, os, sys, tempfile, time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import pandas as pd

from _service import start_service
from compstrength.crl import CRLConfig, TrainerClient, train_eval_items
from compstrength.models import ModelClient, run_sync
from compstrength.protocols import own_request


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=32)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--max-tokens", type=int, default=256)
    a = ap.parse_args()
    cfg = CRLConfig(task="arithmetic_crl", protocol="moa", partners=("gemma3-270m", "qwen2.5-coder-0.5b"), n_train=118,
                    n_eval=200, split_seed=0, item_meta={"difficulty": [1, 2]})
    task = train_eval_items(cfg)[1]
    items = task.items[:a.items]
    tmp = Path(tempfile.mkdtemp(prefix="bench-policy-batch-"))
    svc, url = start_service(tmp/"state", "cpu", tmp/"service.log", threads=a.threads)
    rows, texts = [], {}
    try:
        tc = TrainerClient(url, token_file=tmp/"state"/"token")
        h = tc.health()
        base = tc.spec("policy", h)
        reqs = [dict(model="policy", **own_request(task, it, a.max_tokens)) for it in items]  # a moa proposer's request
        for flight in (1, 8):
            spec = base.__class__(**{**base.__dict__, "max_concurrency": flight})
            c = ModelClient([spec], cache_dir=tmp/f"calls-{flight}", timeout=3600)
            t0 = time.perf_counter()
            res = run_sync(c.amap(reqs))
            wall = time.perf_counter() - t0
            bad = [r for r in res if isinstance(r, Exception)]
            if bad: raise bad[0]
            texts[flight] = [r.text for r in res]
            toks = sum(r.completion_tokens for r in res)
            rows.append({"in flight": flight, "answers": len(res), "wall s": wall, "s per answer": wall / len(res),
                         "tokens": toks, "tokens/s": toks / wall})
    finally:
        svc.terminate(); svc.wait(60)
    t = pd.DataFrame(rows)
    t["speed-up"] = t["wall s"].iloc[0] / t["wall s"]
    same = int(np.sum([x == y for x, y in zip(texts[1], texts[8])]))
    print(f"policy SmolLM2-135M-Instruct + fresh LoRA (r=8) on the CPU, {a.threads} threads; {len(items)} held-out arithmetic_crl "
          f"items (levels 1-2), greedy, <= {a.max_tokens} tokens; the real service over HTTP, through ModelClient")
    print(t.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    print(f"same text in both settings: {same} of {len(items)}")


if __name__ == "__main__":
    main()
