"""Which llama.cpp build collects fastest here, and is it safe: the pool's portable x86-64 build (AVX2, no AVX-512, no
AMX) against builds of the same llama.cpp source with AVX-512 kernels, and with AVX-512 plus AMX, each also with one
and with two threads per server.

Every setting starts a fresh llama-server for one member (2 parallel slots, as a study collects) and sends the same
real requests: the member's own answers to GSM8K and MMLU test items under the task's standard prompt, greedy, token
logprobs on, 2 in flight. Prompt and generation speeds are llama-server's own timings (`timings` of each response).
It prints, per setting, calls/s, generated tokens/s, prompt tokens/s, their ratio to the portable build at the same
threads, whether the server crashed, and the share of answers whose text and whose extracted answer equal the
portable build's (a different kernel is a different sum order: a greedy answer can change).

    .venv/bin/python bench/bench_llama_build.py [--members qwen2.5-coder-1.5b] [--requests 16] [--threads 1 2]

Builds are made once per machine by `compstrength.local.build_llama_server(variant=...)` into
$COMPSTRENGTH_HOME/build/llama-server-<id>/ (about 10 minutes each on 2 cores); a CPU without AVX-512 (or AMX) skips
that build and says so.
"""
import argparse, json, os, signal, subprocess, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from compstrength.files import fetch_model, home_dir
from compstrength.local import LLAMA_VARIANTS, build_llama_server, cpu_flags, free_port, healthy, stop_pid, variant_supported
from compstrength.protocols import extract_answer, own_request
from compstrength.tasks import load_task


def start(binary, member: str, slots: int, threads: int, n_ctx: int = 4096):
    "One llama-server for `member`: (process, base url, log path)."
    path, port = fetch_model(member), free_port()
    cmd = [str(binary), "-m", str(path), "-a", member, "--host", "127.0.0.1", "--port", str(port), "-c", str(n_ctx * slots),
           "-np", str(slots), "-t", str(threads), "-tb", str(threads), "--cont-batching", "--no-webui"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    env["LD_LIBRARY_PATH"] = str(binary.parent)
    logp = home_dir()/"build"/f"bench-build-{binary.parent.name}-{member}.log"
    p = subprocess.Popen(cmd, stdout=open(logp, "ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    t0 = time.monotonic()
    while not healthy(f"http://127.0.0.1:{port}/v1", 1.0):
        if p.poll() is not None: raise RuntimeError(f"llama-server exited at start (code {p.returncode}); see {logp}")
        if time.monotonic() - t0 > 180: stop_pid(p.pid); raise TimeoutError(f"not up after 180 s; see {logp}")
        time.sleep(0.3)
    return p, f"http://127.0.0.1:{port}", logp


def items(n: int) -> list:
    "n real test items: half GSM8K, half MMLU."
    out = []
    for name in ("gsm8k", "mmlu"):
        task = load_task(name, split="test", limit=n // 2, seed=2)
        out += [(task, it) for it in task]
    return out


def ask(base: str, member: str, task, it, max_tokens: int) -> dict:
    r = own_request(task, it, max_tokens)
    body = dict(model=member, messages=r["messages"], max_tokens=max_tokens, temperature=0.0, seed=0, logprobs=True, top_logprobs=1)
    req = urllib.request.Request(f"{base}/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as f: d = json.loads(f.read())
    t = d.get("timings", {})
    return dict(text=d["choices"][0]["message"]["content"], gen=d["usage"]["completion_tokens"], prompt=d["usage"]["prompt_tokens"],
                prompt_ms=t.get("prompt_ms", np.nan), prompt_n=t.get("prompt_n", np.nan), gen_ms=t.get("predicted_ms", np.nan))


def measure(binary, member: str, qs: list, threads: int, max_tokens: int, slots: int = 2) -> tuple:
    try: p, base, logp = start(binary, member, slots, threads)
    except RuntimeError as e:  # a build whose kernels the CPU (or its VM) refuses dies at its first decode
        print(f"  {binary.parent.name} {member} t{threads}: {e}", flush=True)
        return dict(calls=0, crashed=True, error=str(e)[:160]), []
    try:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(slots) as ex: res = list(ex.map(lambda q: ask(base, member, *q, max_tokens), qs))
        wall = time.perf_counter() - t0
        crashed = p.poll() is not None
    except Exception as e:
        crashed, res, wall = True, [], np.nan
        print(f"  {binary.parent.name} {member} t{threads}: failed: {type(e).__name__}: {str(e)[:200]} (log {logp})", flush=True)
    finally:
        if p.poll() is None: stop_pid(p.pid)
        p.wait()
    if not res: return dict(calls=0, crashed=True, error="no answer"), []
    gen, pn = sum(r["gen"] for r in res), np.nansum([r["prompt_n"] for r in res])
    return dict(calls=len(res), crashed=crashed, wall_s=wall, calls_per_s=len(res) / wall, gen_tok_per_s=gen / wall,
                prompt_tok_per_s_server=pn / (np.nansum([r["prompt_ms"] for r in res]) / 1000),
                gen_tok_per_s_server=gen / (np.nansum([r["gen_ms"] for r in res]) / 1000)), res


def crash_site(binary) -> str:
    "Where the kernel says the server died (its last 'traps:' line) and, with objdump, the instruction and function at that offset."
    import re, shutil
    try: log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    except OSError: return "dmesg unavailable"
    hits = [l for l in log.splitlines() if "traps: llama-server" in l]
    if not hits: return "no kernel trap recorded"
    m = re.search(r"trap (.+?) ip:\S+ .* in (\S+)\[([0-9a-f]+),", hits[-1])
    if not m: return hits[-1].split("traps: ", 1)[-1]
    what, lib, off = m.group(1), m.group(2), int(m.group(3), 16)
    where = f"{what} in {lib} at +{off:#x}"
    if shutil.which("objdump") and (binary.parent/lib).exists():
        d = subprocess.run(["objdump", "-dC", f"--start-address={off:#x}", f"--stop-address={off + 8:#x}", str(binary.parent/lib)],
                           capture_output=True, text=True).stdout
        fn = re.findall(r"<(.+?)(?:\+0x[0-9a-f]+)?>:", d)
        ins = re.findall(rf"^\s*{off:x}:\s+(?:[0-9a-f]{{2}} )+\s*(.+)$", d, flags=re.M)
        where += f": `{ins[0].strip() if ins else '?'}` in {fn[0] if fn else '?'}"
    return where


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", nargs="+", default=["qwen2.5-coder-1.5b"])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--max-tokens", type=int, default=320)
    ap.add_argument("--variants", nargs="+", default=list(LLAMA_VARIANTS))
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run stops its server too (the `finally` of `measure`)
    pd.set_option("display.width", 220)
    print(f"# bench_llama_build.py {' '.join(sys.argv[1:])}; {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores; "
          f"CPU reports: {' '.join(sorted(f for f in cpu_flags() if f.startswith(('avx512', 'amx'))))}; load average {os.getloadavg()[0]:.2f} at start", flush=True)
    binaries = {}
    for v in a.variants:
        if not variant_supported(v): print(f"{v}: this CPU lacks what it needs; skipped"); continue
        binaries[v] = build_llama_server(variant=v)
    qs = items(a.requests)
    rows, texts = [], {}
    for m in a.members:
        for th in a.threads:
            for v, b in binaries.items():
                row, res = measure(b, m, qs, th, a.max_tokens)
                texts[(m, th, v)] = res
                rows.append(dict(member=m, threads=th, build=v, **row))
                print({k: round(x, 2) if isinstance(x, float) else x for k, x in rows[-1].items()}, flush=True)
    df = pd.DataFrame(rows)
    ref = df[df.build == "portable"].set_index(["member", "threads"])
    for c in ("calls_per_s", "gen_tok_per_s", "prompt_tok_per_s_server"):
        if c not in df: df[c] = np.nan
        df[f"x_{c}"] = [getattr(r, c) / ref.loc[(r.member, r.threads), c] if (r.member, r.threads) in ref.index else np.nan for r in df.itertuples()]
    same_text, same_answer = [], []
    for r in df.itertuples():
        a0, a1 = texts.get((r.member, r.threads, "portable")), texts.get((r.member, r.threads, r.build))
        if not a0 or not a1: same_text.append(np.nan); same_answer.append(np.nan); continue
        same_text.append(float(np.mean([x["text"] == y["text"] for x, y in zip(a0, a1)])))
        same_answer.append(float(np.mean([extract_answer(t, it, x["text"]) == extract_answer(t, it, y["text"]) for (t, it), x, y in zip(qs, a0, a1)])))
    df["same_text"], df["same_answer"] = same_text, same_answer
    for v in df.loc[df.crashed.astype(bool), "build"].unique():
        print(f"# {v}: crashed; the kernel's record of the last llama-server trap: {crash_site(binaries[v])}")
    print(f"\n## {a.requests} own-answer requests (GSM8K + MMLU test items), greedy, max_tokens {a.max_tokens}, 2 slots, 2 in flight, "
          "one server at a time; x_ = ratio to the portable build at the same threads; same_ = share equal to the portable build's")
    print(df.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
