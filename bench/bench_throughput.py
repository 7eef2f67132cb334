"""Throughput of live collection: the server the embedded pool runs today (llama-cpp-python's `llama_cpp.server`,
one request at a time) against llama.cpp's own `llama-server`, built from the llama.cpp source that the
llama-cpp-python sdist vendors, with parallel slots and continuous batching; and how many tokens a per-task
`max_tokens` would save.

Every setting sends the same real requests: each member's own answer to arithmetic and GSM8K test items under the
task's standard prompt (the request every protocol shares), greedy, through compstrength's `ModelClient` with a fresh
cache (nothing is served from a cache), one model at a time on all cores. The settings alternate in order, and a
suffix per run keeps llama.cpp's prompt cache from carrying over. It prints calls/s and generated tokens/s per
setting with their ratio to the baseline (llama-cpp-python's server, one stream, token logprobs on, as the pool runs today), and how often the two servers give the same extracted answer
(a switch of server is a switch of recording).

    .venv/bin/python bench/bench_throughput.py [--members qwen2.5-coder-0.5b qwen2.5-coder-1.5b] [--requests 16]
        [--max-tokens 320] [--slots 4] [--reps 1]
    .venv/bin/python bench/bench_throughput.py --build-only       # build llama-server (~6 min on 2 cores, once)
    .venv/bin/python bench/bench_throughput.py --caps-only        # the max_tokens section alone, from the recording

llama-server is built once by `compstrength.local.build_llama_server` (scripts/setup.sh runs it) into
$COMPSTRENGTH_HOME/build/llama-server-<id>/, with the same portable x86-64 flags as scripts/setup.sh uses for
llama-cpp-python (no AMX/AVX-512 kernels).
"""
import argparse, json, os, subprocess, sys, tempfile, time

import numpy as np
import pandas as pd

from compstrength.files import data_dir, fetch_model, home_dir
from compstrength.local import build_llama_server, free_port, healthy, stop_pid
from compstrength.models import ModelClient, ModelSpec, run_sync
from compstrength.protocols import extract_answer, own_request
from compstrength.tasks import load_task

def start(kind: str, member: str, slots: int, threads: int, n_ctx: int = 4096):
    "Start one server for `member`: (process, api_base)."
    path, port = fetch_model(member), free_port()
    if kind == "llama-cpp-python":  # exactly as the embedded pool starts it, on all cores
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", member, "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
               "--use_mlock", "False", "--verbose", "False"]
        env = None
    else:
        binary = build_llama_server()
        cmd = [str(binary), "-m", str(path), "-a", member, "--host", "127.0.0.1", "--port", str(port), "-c", str(n_ctx * slots),
               "-np", str(slots), "-t", str(threads), "-tb", str(threads), "--cont-batching"]
        env = {**os.environ, "LD_LIBRARY_PATH": str(binary.parent)}
    log = open(home_dir()/"build"/f"bench-{kind}-{member}.log", "ab")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    t0 = time.monotonic()
    while not healthy(base, 1.0):
        if p.poll() is not None: raise RuntimeError(f"{kind} for {member} exited; see {log.name}")
        if time.monotonic() - t0 > 180: stop_pid(p.pid); raise TimeoutError(f"{kind} for {member} not up after 180 s")
        time.sleep(0.3)
    return p, base


def requests(member: str, n: int, max_tokens: int, tag: str, logprobs: bool = True) -> list:
    "n real own-answer requests (half arithmetic, half GSM8K test items), each with a per-run suffix; `logprobs=False` drops the token logprobs."
    out = []
    for name in ("arithmetic", "gsm8k"):
        task = load_task(name, split="test", limit=n // 2, seed=1)
        for it in task:
            r = own_request(task, it, max_tokens)
            r["messages"] = [*r["messages"][:-1], {**r["messages"][-1], "content": r["messages"][-1]["content"] + f"\n({tag})"}]
            if not logprobs: r.pop("logprobs")
            out.append((task, it, dict(model=member, **r)))
    return out


def measure(member: str, base: str, reqs: list, in_flight: int) -> tuple:
    "Send `reqs` with `in_flight` calls at once through a fresh ModelClient: (row, extracted answers)."
    spec = ModelSpec(member, f"openai/{member}", api_base=base, max_concurrency=in_flight, timeout=900.0, identity=f"bench/{member}")
    c = ModelClient([spec], cache_dir=tempfile.mkdtemp(prefix="bench-tp-"))
    t0 = time.perf_counter()
    res = run_sync(c.amap([r for _, _, r in reqs]))
    wall = time.perf_counter() - t0
    ok = [r for r in res if not isinstance(r, Exception)]
    toks = sum(r.completion_tokens for r in ok)
    answers = [None if isinstance(r, Exception) else extract_answer(t, it, r.text) for (t, it, _), r in zip(reqs, res)]
    return dict(calls=len(res), errors=len(res) - len(ok), wall_s=wall, calls_per_s=len(ok) / wall, gen_tokens=toks,
                gen_tok_per_s=toks / wall, latency_median_s=float(np.median([r.latency for r in ok])) if ok else np.nan), answers


def caps() -> pd.DataFrame:
    "From the recorded own answers: tokens generated per task, the share cut at the cap, and what a per-task cap would save."
    questions = {it.question: name for name in ("arithmetic", "gsm8k") for it in load_task(name)}
    rows = []
    for line in open(data_dir()/"recordings"/"main.jsonl"):
        d = json.loads(line)
        req, comp = d["request"], d["completion"]
        if req.get("max_tokens") != 320 or req.get("temperature", 0) != 0: continue  # greedy own answers only
        msgs = json.dumps(req.get("messages", ""), ensure_ascii=False)
        task = next((t for q, t in questions.items() if json.dumps(q, ensure_ascii=False)[1:-1] in msgs), None)
        if task is None: continue
        rows.append(dict(task=task, model=comp.get("model"), tokens=comp.get("completion_tokens", 0),
                         cut=comp.get("finish_reason") == "length"))
    return pd.DataFrame(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", nargs="+", default=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
    ap.add_argument("--requests", type=int, default=16, help="requests per member and setting (half per task)")
    ap.add_argument("--max-tokens", type=int, default=320)
    ap.add_argument("--slots", type=int, default=4, help="llama-server parallel slots (and calls in flight)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--caps-only", action="store_true")
    a = ap.parse_args()
    pd.set_option("display.width", 200)
    print(f"# bench_throughput.py {' '.join(sys.argv[1:])}; {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores", flush=True)
    if not a.caps_only:
        build_llama_server()
        if a.build_only: return
        # (server, slots, calls in flight, token logprobs): the own-answer request asks for logprobs (cascade's confidence)
        settings = [("llama-cpp-python", 1, 1, True), ("llama-cpp-python", 1, 1, False), ("llama-server", 1, 1, True),
                    ("llama-server", a.slots, a.slots, True)]
        rows, answers = [], {}
        for m in a.members:
            for rep in range(a.reps):
                for kind, slots, flight, lp in (settings if rep % 2 == 0 else settings[::-1]):
                    p, base = start(kind, m, slots, a.threads)
                    try:
                        tag = f"run {rep} {kind} {slots} {lp}"
                        row, ans = measure(m, base, requests(m, a.requests, a.max_tokens, tag, lp), flight)
                    finally:
                        stop_pid(p.pid); p.wait()
                    answers[(m, rep, kind, slots, lp)] = ans
                    rows.append(dict(member=m, rep=rep, server=kind, slots=slots, in_flight=flight, logprobs=lp, **row))
                    print({k: round(v, 2) if isinstance(v, float) else v for k, v in rows[-1].items()}, flush=True)
        df = pd.DataFrame(rows)
        base = df[(df.server == "llama-cpp-python") & df.logprobs].groupby("member")[["calls_per_s", "gen_tok_per_s"]].median()
        df["x_calls"] = df.calls_per_s / df.member.map(base.calls_per_s)
        df["x_tokens"] = df.gen_tok_per_s / df.member.map(base.gen_tok_per_s)
        print(f"\n## Throughput: {a.requests} own-answer requests per member and setting (arithmetic + GSM8K test items), greedy, "
              f"max_tokens {a.max_tokens}, {a.threads} threads, one model at a time, fresh cache")
        print(df.round(2).to_string(index=False))
        agree = []
        for m in a.members:
            ref = answers[(m, 0, "llama-cpp-python", 1, True)]
            for (mm, rep, kind, slots, lp), ans in answers.items():
                if mm == m and (kind, lp) != ("llama-cpp-python", True):
                    agree.append(dict(member=m, rep=rep, server=f"{kind} ×{slots}", logprobs=lp,
                                      same_answer=float(np.mean([x == y for x, y in zip(ref, ans)]))))
        print("\n## Same extracted answer as llama-cpp-python's server (greedy, same requests)")
        print(pd.DataFrame(agree).round(3).to_string(index=False))
    c = caps()
    g = c.groupby(["task", "model"]).tokens
    t = pd.DataFrame(dict(answers=g.size(), mean=g.mean(), p95=g.quantile(0.95), max=g.max(),
                          cut_at_320=c.groupby(["task", "model"]).cut.mean()))
    print("\n## Own answers in data/recordings/main.jsonl (max_tokens 320): generated tokens, and the share cut at the cap")
    print(t.round(2).to_string())
    for task, d in c.groupby("task"):
        p95 = int(np.ceil(d.tokens.quantile(0.95)))
        saved = 1 - np.minimum(d.tokens, p95).sum() / d.tokens.sum()
        print(f"{task}: a cap at the 95th percentile ({p95} tokens) would cut {float((d.tokens > p95).mean()):.1%} more answers "
              f"and save {saved:.1%} of generated tokens")


if __name__ == "__main__":
    main()
