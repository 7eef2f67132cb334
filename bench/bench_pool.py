"""Benchmark of the embedded pool and the call layer (issue 2).

Prints three tables:
1. each member's solo accuracy on 50 GSM8K and 50 arithmetic test items (greedy, 320 tokens);
2. the same run again: model calls made (expected 0) and the speed-up from the cache;
3. throughput of N concurrent calls through compstrength's ModelClient (cache and concurrency
   layer, fresh cache so every request is a real call) vs the same requests sent directly with
   the `openai` client to the same llama.cpp servers, side by side, as a ratio.

Usage: .venv/bin/python bench/bench_pool.py [--items 50] [--concurrency 8] [--requests 32]
       [--capture data/captured/replies.jsonl]
Uses the running pool (`compstrength pool up`) or starts one for the run.
"""
import argparse, asyncio, json, shutil, tempfile, time
from pathlib import Path

import pandas as pd
from openai import AsyncOpenAI

from compstrength.local import local_pool
from compstrength.models import ModelClient, fewshot_prompt, FEWSHOT_STOP, run_sync
from compstrength.cli import smoke_run


def solo(client, items, max_tokens):
    "Every member answers `items` GSM8K and `items` arithmetic test items; (table, seconds, model calls)."
    n0 = len(client.log)
    t0 = time.perf_counter()
    df = smoke_run(client, {"gsm8k": items, "arithmetic": items}, seed=0, max_tokens=max_tokens)
    dt = time.perf_counter() - t0
    return df, dt, sum(1 for r in client.log[n0:] if not r.cached)


async def direct(specs, prompts, max_tokens, concurrency):
    "The same requests with the openai client, a semaphore per member of the same size."
    clients = {s.name: AsyncOpenAI(base_url=s.api_base, api_key="none", max_retries=0) for s in specs}
    sems = {s.name: asyncio.Semaphore(concurrency) for s in specs}
    async def one(s, p):
        async with sems[s.name]:
            if s.prompt_format == "fewshot":
                r = await clients[s.name].completions.create(model=s.name, prompt=fewshot_prompt([{"role": "user", "content": p}]),
                                                             max_tokens=max_tokens, temperature=0.0, stop=FEWSHOT_STOP, seed=0)
                return r.choices[0].text
            r = await clients[s.name].chat.completions.create(model=s.name, messages=[{"role": "user", "content": p}],
                                                              max_tokens=max_tokens, temperature=0.0, seed=0)
            return r.choices[0].message.content
    t0 = time.perf_counter()
    out = await asyncio.gather(*(one(s, p) for s, p in prompts))
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=50)
    ap.add_argument("--max-tokens", type=int, default=320)
    ap.add_argument("--requests", type=int, default=32, help="requests per side in the throughput test")
    ap.add_argument("--concurrency", type=int, default=2, help="in-flight requests per member, both sides")
    ap.add_argument("--capture", default=None, help="write every reply to this JSONL (for extraction tests)")
    a = ap.parse_args()
    pd.set_option("display.width", 200)
    cache = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    with local_pool() as pool:
        specs = pool.specs()
        client = ModelClient(specs, cache_dir=cache)
        df, t1, calls1 = solo(client, a.items, a.max_tokens)
        print(f"\n## 1. Solo accuracy, {a.items} items per task (greedy, {a.max_tokens} tokens), {t1:.0f} s, {calls1} model calls")
        acc = df.pivot_table(index="model", columns="task", values="score", aggfunc="mean").round(3)
        acc["errors"] = df.groupby("model").error.count()
        print(acc.loc[[s.name for s in specs]].to_string())

        client2 = ModelClient(specs, cache_dir=cache)
        df2, t2, calls2 = solo(client2, a.items, a.max_tokens)
        same = (df2.score.values == df.score.values).all()
        print(f"\n## 2. Rerun of the same {len(df2)} requests")
        print(pd.DataFrame([dict(run="first (live)", seconds=round(t1, 2), model_calls=calls1),
                            dict(run="rerun (cache)", seconds=round(t2, 3), model_calls=calls2)]).to_string(index=False))
        print(f"speed-up {t1 / t2:.0f}x; identical scores: {bool(same)}")

        # 3. throughput: distinct short prompts so nothing is cached on either side
        prompts = [(specs[i % len(specs)], f"Reply with one short sentence about the number {1000 + i}.") for i in range(a.requests)]
        specs_c = [s.__class__(**{**s.__dict__, "max_concurrency": a.concurrency}) for s in specs]
        rows = []
        for rep in range(2):  # alternate the order to share the machine's noise
            for side in (["direct", "compstrength"] if rep % 2 == 0 else ["compstrength", "direct"]):
                tag = f"r{rep}"
                ps = [(s, p + f" ({tag})") for s, p in prompts]
                if side == "direct":
                    dt, _ = asyncio.run(direct(specs, ps, 24, a.concurrency))
                else:
                    c = ModelClient(specs_c, cache_dir=tempfile.mkdtemp(prefix="bench-tp-"))
                    t0 = time.perf_counter()
                    res = run_sync(c.amap([dict(model=s.name, messages=p, max_tokens=24) for s, p in ps]))
                    dt = time.perf_counter() - t0
                    assert not any(isinstance(r, Exception) for r in res), res
                rows.append(dict(rep=rep, side=side, seconds=dt, req_per_s=len(ps) / dt))
        tp = pd.DataFrame(rows)
        agg = tp.groupby("side").req_per_s.median()
        print(f"\n## 3. Throughput, {a.requests} requests over {len(specs)} members, {a.concurrency} in flight per member, 24 tokens each")
        print(tp.round(2).to_string(index=False))
        print(f"compstrength / direct throughput: {agg['compstrength'] / agg['direct']:.2f} (median of 2 runs each)")
    if a.capture:
        out = Path(a.capture); out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w") as fh:
            for r in df.itertuples():
                fh.write(json.dumps(dict(model=r.model, task=r.task, item=r.item, reply=r.reply)) + "\n")
        print(f"\nreplies written to {out}")
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
