"""Calls in flight per embedded member: 1 (the default since issue 6's last stop) vs 2 (before).

llama_cpp.server answers one request at a time. With two calls in flight per member, the second
waits inside the server, and that wait counts against the client's 180 s timeout; a request
whose client timed out is still generated to the end, so the retry queues behind it. This bench
sends the same long-answer requests (arithmetic dev items, greedy, up to 320 tokens) to two
members at once, as a protocol's dev pass does, through compstrength's ModelClient with a fresh
cache for each setting, and prints wall time and per-call latency (what the timeout sees) side by
side. The two settings alternate, and each sees distinct prompts (a suffix per run) so that
neither gets llama.cpp's prompt cache from the other.

Usage: .venv/bin/python bench/bench_concurrency.py [--requests 6] [--reps 1]
Uses the running pool (`compstrength pool up`) or starts one for the run.
"""
import argparse, tempfile, time

import numpy as np
import pandas as pd

from compstrength.local import local_pool
from compstrength.models import ModelClient, run_sync
from compstrength.protocols import own_request
from compstrength.tasks import load_task

MEMBERS = ("smollm2-135m", "qwen2.5-coder-0.5b")


def run(specs, reqs, concurrency):
    "Send `reqs` through a fresh ModelClient with `concurrency` calls in flight per member."
    specs_c = [s.__class__(**{**s.__dict__, "max_concurrency": concurrency}) for s in specs]
    c = ModelClient(specs_c, cache_dir=tempfile.mkdtemp(prefix="bench-conc-"))
    t0 = time.perf_counter()
    res = run_sync(c.amap(reqs))
    wall = time.perf_counter() - t0
    errors = [r for r in res if isinstance(r, Exception)]
    ok = [r for r in res if not isinstance(r, Exception)]
    lat = np.array([r.latency for r in ok])
    return dict(in_flight=concurrency, wall_s=wall, calls=len(res), errors=len(errors),
                tokens=sum(r.completion_tokens for r in ok), latency_median_s=np.median(lat),
                latency_max_s=lat.max(), tok_per_s=sum(r.completion_tokens for r in ok) / wall)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=6, help="requests per member")
    ap.add_argument("--reps", type=int, default=1, help="runs of each setting (alternating)")
    ap.add_argument("--max-tokens", type=int, default=320)
    a = ap.parse_args()
    pd.set_option("display.width", 200)
    task = load_task("arithmetic", split="dev", limit=a.requests, seed=0)  # the dev items protocols calibrate on
    items = task.items
    with local_pool(members=list(MEMBERS)) as pool:
        specs = pool.specs()
        rows = []
        for rep in range(a.reps):
            for conc in ((2, 1) if rep % 2 == 0 else (1, 2)):
                reqs = []
                for m in MEMBERS:
                    for it in items:
                        r = own_request(task, it, a.max_tokens)
                        r["messages"] = [*r["messages"][:-1], {**r["messages"][-1],
                                         "content": r["messages"][-1]["content"] + f"\n(run {rep}-{conc})"}]
                        reqs.append(dict(model=m, **r))
                rows.append(dict(rep=rep, **run(specs, reqs, conc)))
                print({k: round(float(v), 1) if isinstance(v, (float, np.floating)) else v for k, v in rows[-1].items()}, flush=True)
    df = pd.DataFrame(rows)
    print(f"\n## Calls in flight per member: {a.requests} arithmetic dev items x {len(MEMBERS)} members, "
          f"greedy, up to {a.max_tokens} tokens, fresh cache per run")
    print(df.round(1).to_string(index=False))
    g = df.groupby("in_flight").median(numeric_only=True)
    print(f"\nwall time 1 / 2 in flight: {g.wall_s[1] / g.wall_s[2]:.2f}; "
          f"longest call 1 / 2 in flight: {g.latency_max_s[1] / g.latency_max_s[2]:.2f} (timeout: 180 s)")


if __name__ == "__main__":
    main()
