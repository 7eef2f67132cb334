"""The twelve collaboration protocols on the default config (issue 4).

For each protocol and task: the grand coalition's value v(N), the best single member's score,
the gain, model calls per item for N, and each member's individual strength, Shapley and LOO
values — from the recording the project made live on the embedded pool (replayed here, so the
table prints in seconds; `compstrength run --live` recomputes it through the models).

Also the cost of exact Shapley per protocol: the requests a per-coalition re-execution sends
(sum over the 15 coalitions of the calls each makes) against the distinct requests compstrength
sends (shared calls asked once: each member's own answer, dev answers, samples), and the ratio.

Usage: .venv/bin/python bench/bench_protocols.py [CONFIG]
"""
import sys, tempfile
from pathlib import Path

import pandas as pd

from compstrength.experiment import ProtocolConfig, load_config, run_experiment
from compstrength.game import CoalitionGame
from compstrength.models import ModelClient
from compstrength.tasks import Task

pd.set_option("display.width", 250)


def main():
    cfg = load_config(sys.argv[1] if len(sys.argv) > 1 else None)
    res = run_experiment(cfg, cache_dir=tempfile.mkdtemp(), progress=False)
    pt = res["protocols"]
    players = cfg.players
    print(f"## Protocols on {cfg.path} (replayed from {cfg.run.recording})\n")
    print(pt[["protocol", "family", "task", "items", "v_N", "best_individual", "best_individual_member", "gain", "gain_ci_low", "gain_ci_high", "dictator", "calls_per_item",
              "upper_bound"]].to_string(index=False))
    print("\n## Per member: individual strength / Shapley / LOO\n")
    short = {p: p.replace("qwen2.5-coder-", "qwen-").replace("smollm2-", "smol-").replace("gemma3-", "gemma-") for p in players}
    per = pt[["protocol", "task"]].copy()
    for p in players:
        per[short[p]] = [f"{a:+.2f} / {b:+.2f} / {c:+.2f}" for a, b, c in
                         zip(pt[f"{p}:individual"], pt[f"{p}:shapley"], pt[f"{p}:loo"])]
    print(per.to_string(index=False))

    print("\n## Requests for exact Shapley (15 coalitions): per-coalition re-execution vs distinct requests sent\n")
    r = cfg.run
    rows = []
    tasks = [t.load() for t in cfg.tasks]
    for proto in cfg.protocol_objects:
        name, ps = proto.name, cfg.protocols.get(proto.name, ProtocolConfig())
        for task in tasks:
            if ps.tasks and task.name not in ps.tasks: continue
            t = Task(task.name, task.kind, task.items[:ps.items], task.source) if ps.items else task
            tmp = Path(tempfile.mkdtemp())
            client = ModelClient(cfg.specs, cache_dir=tmp/"calls", recording=Path(r.recording), mode="replay")
            game = CoalitionGame(client, proto, t, players, seed=r.seed, cache_dir=tmp/"coal", progress=False)
            out = game.evaluate()
            naive = int(out.calls.sum())
            distinct = len({c.key for c in client.log})
            rows.append(dict(protocol=name, task=task.name, items=len(t), per_coalition_requests=naive,
                             distinct_requests=distinct, ratio=round(naive / distinct, 2)))
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
