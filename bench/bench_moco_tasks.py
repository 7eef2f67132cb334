"""MoCo's datasets on the embedded pool: each member alone on N test items of each dataset, with MoCo's prompts
and scored by MoCo's rules (`moco:<dataset>` tasks).

Prints one table: dataset × member accuracy, each with its n and exact (Clopper-Pearson) 95% interval, the
errors (a failed call is never scored), and the seconds the run took. Writes it to --out/scores.csv and
--out/table.txt, and every reply to --capture (the replies `tests/test_moco_rules.py` scores with MoCo's own
code beside ours).

Calls go through the call cache of the home folder, so an interrupted run resumes, and a larger --items reuses
a smaller run's answers (the item sample of a seed grows by adding items).

Usage: COMPSTRENGTH_HOME=... .venv/bin/python bench/bench_moco_tasks.py [--items 20] [--datasets gsm8k bbh ...]
       (uses the running pool, `compstrength pool up`, or starts one for the run)
"""
import argparse, json, os, time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import pandas as pd
from scipy.stats import binomtest

from compstrength.cli import smoke_run
from compstrength.local import local_pool
from compstrength.models import ModelClient

DATASETS = ["agieval", "arc_challenge", "bbh", "gpqa_diamond", "gsm8k", "math", "medqa", "mmlu_redux", "theoremqa",
            "truthfulqa", "humaneval", "mbpp"]


def ci(scores: pd.Series) -> str:
    "Mean with its exact 95% interval (0/1 scores) and n."
    s = scores.dropna()
    if not len(s): return "—"
    k = int(s.sum()); c = binomtest(k, len(s)).proportion_ci()
    return f"{s.mean():.2f} [{c.low:.2f}, {c.high:.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=20, help="test items per dataset (a seeded sample)")
    ap.add_argument("--datasets", nargs="+", default=DATASETS)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/results/moco_tasks")
    ap.add_argument("--capture", default="data/captured/replies_moco.jsonl")
    ap.add_argument("--server", default="llama-server", help="the pool's server program (reuses a running pool of it)")
    a = ap.parse_args()
    pd.set_option("display.width", 250)
    t0 = time.time()
    with local_pool(server=a.server) as pool:
        client = ModelClient(pool.specs())
        df = smoke_run(client, {f"moco:{d}": a.items for d in a.datasets}, seed=a.seed, max_tokens=a.max_tokens)
    secs = time.time() - t0
    live = int((df.cached == False).sum())
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    df.drop(columns=["reply"]).to_csv(out/"scores.csv", index=False)
    models = list(dict.fromkeys(df.model))
    tab = df.pivot_table(index="task", columns="model", values="score", aggfunc=ci).reindex(columns=models)
    tab["errors"] = df.groupby("task").error.count()
    tab["items"] = df.groupby("task").item.nunique()
    tab = tab.reindex([f"moco:{d}" for d in a.datasets])
    text = (f"## MoCo's datasets on the embedded pool: {a.items} test items each (seed {a.seed}), MoCo's prompts and rules, "
            f"greedy, {a.max_tokens} tokens\naccuracy [exact 95% CI]; n = items per cell; errors are never scored\n\n"
            + tab.to_string() + f"\n\n{len(df)} replies, {live} live model calls, {secs:.0f} s\n")
    print(text)
    (out/"table.txt").write_text(text)
    cap = Path(a.capture); cap.parent.mkdir(parents=True, exist_ok=True)
    with open(cap, "w") as fh:
        for r in df[df.error.isna()].itertuples():
            fh.write(json.dumps(dict(model=r.model, task=r.task, item=r.item, reply=r.reply)) + "\n")
    print(f"replies written to {cap}")


if __name__ == "__main__":
    main()
