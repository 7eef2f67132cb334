"""One-command GPU check of C-RL's training path (≤ 10 min on one GPU).

The real training service (`compstrength serve-trainer --device cuda`, a separate process, real HTTP)
with the real policy (SmolLM2-135M-Instruct, from the embedded GGUF, + LoRA r=8, bf16 on the GPU), driven by
the real client (`CRLRun`, samples through LiteLLM with their token ids and log-probabilities):

  1. individual-RL steps on `arithmetic_crl2` training items (`CRLConfig`'s default task), P prompts × G samples at T = 0.8, 2 updates per
     batch (clipped against the sampling log-probabilities), with a held-out evaluation before and after;
  2. an interrupted run resumed from its log and the service's state;
  3. the figures a paper-scale run is sized from: seconds per step (sampling, update), sampled tokens per second,
     and the mismatch between the sampler's and the trainer's log-probabilities on the GPU.

`--backend transformers` (the default): the service samples too (transformers `generate`). `--backend vllm`: the
samples come from a vLLM server and the service only trains (`serve-trainer --backend vllm --vllm-url ...`):

  0. first, a Python that imports vLLM for this device is looked for: `$COMPSTRENGTH_VLLM_PYTHON`, the project's vLLM
     environment (`compstrength vllm setup`, what `vllm_python()` returns), this interpreter, then `python3` on PATH.
     None: a one-line verdict ("no vLLM on this machine: ...", what was tried), written to `result_vllm.json` too, and
     exit code 3 (not a failure of the check: nothing was checked);
  1. a vLLM server (`vllm_command`, `vllm_environ`) on the policy's base folder (`base_model_dir`), LoRA up to the
     trainer's rank, in the trainer's dtype (bf16 with `--gpu-memory-utilization` on CUDA, so the trainer fits beside
     it; fp32 on a CPU), in a process group of its own, stopped as a group at the end (on a failure or SIGTERM too);
  2. the service loads each new version's adapter into vLLM as `policy-v<N>` and unloads the one before: after every
     step the check asks vLLM's `/v1/models` and fails unless it lists exactly the current `policy-v<N>`;
  3. per step, the sampler/trainer log-prob mismatch per token: mean (checked against --max-mismatch), median and max.
  Its files carry the backend in their names (`gpu_check_vllm.txt`, `log_vllm.jsonl`, `steps_vllm.csv`,
  `environment_vllm.json`, `result_vllm.json`, and the tails of the vLLM server's and the service's logs), beside the
  transformers backend's files, which it leaves alone.

The check fails (exit 1) when a mechanism does: samples without token ids, versions that do not advance, a
resume that re-trains a step, a log-probability mismatch above --max-mismatch, or (vllm) an adapter listing other
than the current version's. It asserts nothing about whether the policy got better. Partners are left out: their
calls run on llama.cpp or vLLM, not here.

Usage: python bench/gpu_check.py [--device cuda] [--steps 8] [--prompts 8] [--group 8] [--out bench/results/gpu_check]
       python bench/gpu_check.py --backend vllm [--vllm-gpu-memory 0.3] ...   (exit 0 pass, 1 fail, 3 no vLLM here)
On a lent GPU machine (no network: vLLM must be in its image, and the SmolLM2 GGUF or its converted folder in its cache), from
the repository root: `timeout 570 python bench/gpu_check.py --backend vllm --out $OUT/gpu_check; echo rc=$?`
(`COMPSTRENGTH_VLLM_PYTHON=/path/to/python` where vLLM lives in another Python). On a CPU, `--device cpu` uses the
project's CPU vLLM (`compstrength vllm setup`); keep it tiny: `--steps 2 --prompts 1 --group 2 --max-tokens 16 --n-eval 2`.
"""
import argparse, json, os, platform, shutil, signal, subprocess, sys, tempfile, time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import pandas as pd

from _service import free_port, start_service
from compstrength.crl import CRLConfig, CRLRun, TrainerClient
from compstrength.models import ModelClient

LORA_R = 8  # the trainer's LoRA rank (`serve-trainer --lora-r`), and the rank vLLM serves adapters up to
NO_VLLM = 3  # exit code: no vLLM here, nothing checked
_PROBE = ("import vllm, torch; from vllm.platforms import current_platform as p; "
          "print('VLLM-PROBE', vllm.__version__, torch.__version__, p.device_type)")


def find_vllm(flavour: str) -> tuple[str|None, dict, list[str]]:
    """A Python that imports vLLM built for `flavour` ("cuda" or "cpu"): `$COMPSTRENGTH_VLLM_PYTHON`, the project's
    vLLM environment (what `vllm_python()` gives without that variable), this interpreter, `python3` on PATH.
    Returns (python or None, what it reported, what was tried)."""
    from compstrength.vllm_env import VLLM_PYTHON_ENV, vllm_env_dir, vllm_environ
    tried, cands = [], []
    own = os.environ.get(VLLM_PYTHON_ENV)
    if own:
        if Path(own).exists(): cands.append((f"${VLLM_PYTHON_ENV}={own}", own))
        else: tried.append(f"${VLLM_PYTHON_ENV}={own} does not exist")
    d = vllm_env_dir(flavour)
    if (d/"ready.json").exists(): cands.append((f"the project's vLLM environment {d}", str(d/"bin"/"python")))
    else: tried.append(f"no project vLLM environment at {d} (`compstrength vllm setup` makes one)")
    cands.append((f"this interpreter {sys.executable}", sys.executable))
    py3 = shutil.which("python3")
    if py3: cands.append((f"python3 on PATH ({py3})", py3))
    else: tried.append("no python3 on PATH")
    seen = set()
    for label, py in cands:
        key = os.path.realpath(py)
        if key in seen: continue
        seen.add(key)
        try: r = subprocess.run([py, "-c", _PROBE], capture_output=True, text=True, timeout=180, env=vllm_environ())
        except (OSError, subprocess.TimeoutExpired) as e: tried.append(f"{label}: {type(e).__name__}"); continue
        line = next((l for l in r.stdout.splitlines() if l.startswith("VLLM-PROBE ")), None)
        if r.returncode or not line:
            err = next((l for l in reversed(r.stderr.strip().splitlines()) if l.strip()), f"exit {r.returncode}")
            tried.append(f"{label}: {err.strip()[:200]}"); continue
        vv, tv, dev = line.split()[1:4]
        if dev != flavour: tried.append(f"{label}: vLLM {vv} runs on {dev!r} here, not {flavour}"); continue
        return py, dict(vllm_python=py, found_as=label, vllm=vv, vllm_torch=tv, vllm_device=dev), tried
    return None, {}, tried


def lora_adapters(vllm_url: str) -> list[str]:
    "The LoRA adapters the vLLM server lists (`/v1/models` entries with a parent)."
    import httpx
    return sorted(m["id"] for m in httpx.get(f"{vllm_url}/v1/models", timeout=30).json()["data"] if m.get("parent"))


def start_vllm(model_dir: Path, name: str, python: str, cuda: bool, a, log: Path):
    "vLLM's server on `model_dir` in a process group of its own; returns (process, url) once /health answers."
    import httpx
    from compstrength.vllm_env import vllm_command, vllm_environ
    port = free_port()
    cmd = vllm_command(model_dir, name, port, python=python, lora_rank=LORA_R, dtype=a.vllm_dtype,
                       max_num_seqs=max(8, a.group) if cuda else 8)
    if cuda: cmd += ["--gpu-memory-utilization", str(a.vllm_gpu_memory)]
    print("vLLM server:", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=open(log, "ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=vllm_environ(), start_new_session=True)
    url, t0 = f"http://127.0.0.1:{port}", time.time()
    try:
        while time.time() - t0 < a.vllm_timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited ({proc.returncode}); the end of its log:\n{Path(log).read_text(errors='replace')[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200: return proc, url
            except httpx.TransportError: pass
            time.sleep(1)
        raise RuntimeError(f"the vLLM server did not answer /health in {a.vllm_timeout:.0f} s (--vllm-timeout); the end of its log:\n"
                           f"{Path(log).read_text(errors='replace')[-3000:]}")
    except BaseException:  # not up (or this process was stopped): its whole group goes
        from compstrength.local import stop_pid
        stop_pid(proc.pid, group=True); raise


class Stopped(Exception):
    "SIGTERM (a `timeout` around the check): the servers are stopped and the verdict written on the way out."


def _stopped(*_): raise Stopped("stopped by SIGTERM before the end (a timeout?)")


def tail(src: Path, dst: Path, lines: int = 300):
    "The last `lines` lines of a log, kept beside the results."
    if src.exists(): dst.write_text("\n".join(src.read_text(errors="replace").splitlines()[-lines:]) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backend", choices=["transformers", "vllm"], default="transformers",
                    help="transformers: the service samples and trains; vllm: a vLLM server samples, the service trains")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per step")
    ap.add_argument("--group", type=int, default=8, help="G samples per prompt")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--n-eval", type=int, default=32, help="held-out items evaluated before and after")
    ap.add_argument("--max-mismatch", type=float, default=0.05, help="fail above this mean |sampling - training| log-prob")
    ap.add_argument("--vllm-gpu-memory", type=float, default=0.3, help="vllm on CUDA: --gpu-memory-utilization (the trainer shares the GPU)")
    ap.add_argument("--vllm-dtype", default=None, help="vllm: the server's dtype (default: the trainer's, bfloat16 on CUDA, float32 on a CPU)")
    ap.add_argument("--vllm-timeout", type=float, default=600, help="vllm: seconds to wait for the server's /health")
    ap.add_argument("--out", default="bench/results/gpu_check")
    a = ap.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    vllm = a.backend == "vllm"
    sfx = f"_{a.backend}" if vllm else ""  # the transformers backend keeps its file names
    vinfo, tried = {}, []
    if vllm:  # first: is there a vLLM for this device at all?
        signal.signal(signal.SIGTERM, _stopped)  # a `timeout` still stops the servers and writes the verdict
        from compstrength.vllm_env import vllm_flavour
        cuda = a.device.startswith("cuda") or (a.device == "auto" and vllm_flavour() == "cuda")
        a.vllm_dtype = a.vllm_dtype or ("bfloat16" if cuda else "float32")
        vpy, vinfo, tried = find_vllm("cuda" if cuda else "cpu")
        for t in tried: print("vLLM: tried", t, flush=True)
        if vpy is None:
            verdict = f"no vLLM on this machine: none imports and runs on {'cuda' if cuda else 'cpu'}; tried {'; '.join(tried)}"
            print(verdict, flush=True)
            (out/f"result{sfx}.json").write_text(json.dumps(dict(backend=a.backend, device=a.device, exit_code=NO_VLLM,
                                                                   verdict=verdict, tried=tried), indent=1))
            sys.exit(NO_VLLM)
        print("vLLM:", vinfo, flush=True)
    work = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    import torch
    env = dict(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
               device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", requested=a.device)
    if vllm: env.update(backend=a.backend, **vinfo, vllm_dtype=a.vllm_dtype, vllm_gpu_memory=a.vllm_gpu_memory if cuda else None)
    print("environment:", env, flush=True)
    cfg = CRLConfig(protocol="majority_vote", partners=(), reward="individual", steps=a.steps, prompts_per_step=a.prompts,
                    group_size=a.group, n_train=a.steps * a.prompts, n_eval=a.n_eval, eval_every=a.steps,
                    max_tokens=a.max_tokens, temperature=0.8, updates=2, learning_rate=1e-4, seed=0,
                    protocol_params=dict(max_tokens=a.max_tokens))
    checks, failed = [], False
    def check(name, ok, value):
        nonlocal failed
        failed |= not ok
        checks.append(dict(check=name, result="pass" if ok else "FAIL", value=value)); print(checks[-1], flush=True)
    vproc = vurl = svc = None
    listings, steps_table = [], None
    t_vllm = 0.0
    try:
        extra = []  # the transformers backend: the service as today (LoRA r=8, its default)
        if vllm:
            from compstrength.contract import DEFAULT_BASE
            from compstrength.service import base_model_dir
            t0 = time.time()
            model_dir = base_model_dir(DEFAULT_BASE)  # converted (once) here, before the server and the service read it
            print(f"base folder: {model_dir} ({time.time() - t0:.0f} s)", flush=True)
            t0 = time.time()
            vproc, vurl = start_vllm(model_dir, DEFAULT_BASE, vpy, cuda, a, work/"vllm.log")
            t_vllm = time.time() - t0
            print(f"vLLM server up at {vurl} in {t_vllm:.0f} s", flush=True)
            extra += ["--lora-r", str(LORA_R), "--backend", "vllm", "--vllm-url", vurl]
        t_start = time.time()
        svc, url = start_service(work/"service", a.device, work/"service.log", extra_args=extra)
        t_up = time.time() - t_start
        trainer = TrainerClient(url, token_file=work/"service"/"token")
        if vllm:  # after every step: what vLLM lists, beside the version the service answered
            listings.append(dict(step=None, policy_version=int(trainer.health()["policy_version"]), adapters=lora_adapters(vurl), replayed=False))
            print(f"vLLM adapters at the start (version {listings[0]['policy_version']}): {listings[0]['adapters']}", flush=True)
            send = trainer.train_step
            def watched(*args, **kw):
                ans = send(*args, **kw)
                listings.append(dict(step=int(ans["step"]) - 1, policy_version=int(ans["policy_version"]), adapters=lora_adapters(vurl),
                                     replayed=bool(ans.get("replayed"))))
                print(f"vLLM adapters after step {listings[-1]['step']} (version {listings[-1]['policy_version']}): {listings[-1]['adapters']}", flush=True)
                return ans
            trainer.train_step = watched
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
        if vllm:
            check("the service trains only: its samples come from the vLLM server",
                  h.get("backend") == "vllm" and h.get("sampling_api_base") == f"{vurl}/v1", h.get("sampling_api_base"))
            bad = [l for l in listings if l["adapters"] != [f"policy-v{l['policy_version']}"]]
            check("vLLM lists exactly the current adapter policy-v<N> at the start and after every step (the previous one unloaded)",
                  not bad and len(listings) == a.steps + 1 and lora_adapters(vurl) == [f"policy-v{h['policy_version']}"],
                  f"{len(listings) - len(bad)} of {len(listings)} listings" + (f"; first wrong: {bad[0]}" if bad else ""))
            lst = {l["policy_version"]: l["adapters"] for l in listings}
            steps_table = pd.DataFrame(dict(step=tr.step.astype(int), version=tr.version_after.astype(int),
                                            vllm_adapters=[",".join(lst.get(int(v), ["?"])) for v in tr.version_after],
                                            tokens=tr.completion_tokens.astype(int), sample_s=tr.sample_seconds, update_s=tr.step_seconds,
                                            mismatch_mean=tr.logprob_mismatch.round(6), mismatch_median=tr.logprob_mismatch_median.round(6),
                                            mismatch_max=tr.logprob_mismatch_max.round(6), clip_ratio=tr.clip_ratio.round(4)))
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
        if vllm:
            rows = dict(backend="vllm", vllm=vinfo["vllm"], vllm_dtype=a.vllm_dtype, vllm_start_s=round(t_vllm, 1), **rows,
                        token_mismatch_median_of_steps=round(float(tr.logprob_mismatch_median.median()), 6),
                        token_mismatch_max_of_steps=round(float(tr.logprob_mismatch_max.max()), 6))
        log.to_json(out/f"log{sfx}.jsonl", orient="records", lines=True)
    except Exception as e:
        if not vllm: raise  # today's behaviour: the traceback
        import traceback; traceback.print_exc()
        verdict = f"the vLLM check did not finish: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        print(verdict, flush=True)
        (out/f"result{sfx}.json").write_text(json.dumps(dict(backend=a.backend, exit_code=1, verdict=verdict, environment=env,
                                                               checks=checks, vllm_adapters=listings), indent=1, default=str))
        failed, rows = True, None
    finally:
        if svc is not None: svc.terminate(); svc.wait(60)
        if vproc is not None:
            from compstrength.local import stop_pid
            stop_pid(vproc.pid, group=True)  # the server and its engine processes
            print(f"vLLM server stopped (process group {vproc.pid})", flush=True)
        if vllm:
            tail(work/"vllm.log", out/f"vllm_server{sfx}.log"); tail(work/"service.log", out/f"service{sfx}.log")
    if rows is None: sys.exit(1)
    table = pd.Series(rows).to_string()
    if vllm:
        head = (f"## GPU check, vLLM backend: sampling on vLLM {vinfo['vllm']} ({vinfo['vllm_device']}, {a.vllm_dtype}"
                + (f", --gpu-memory-utilization {a.vllm_gpu_memory}" if cuda else "") + f"), training service on {env['device']} "
                f"(torch {env['torch']}, CUDA {env['cuda']}), SmolLM2-135M-Instruct + LoRA r={LORA_R} loaded into vLLM per version, "
                f"individual RL on {CRLConfig().task}, T=0.8, 2 updates per batch\n"
                f"(the held-out accuracies are on {a.n_eval} items and {a.steps} steps: a check of the loop, not a result)\n")
        per_step = "\nper step (mismatch: |vLLM's - the trainer's log-prob| per sampled token, at T):\n" + steps_table.to_string(index=False) + "\n"
    else:
        head = (f"## GPU check: training service on {env['device']} (torch {env['torch']}, CUDA {env['cuda']}), "
                f"SmolLM2-135M-Instruct + LoRA r=8, individual RL on {CRLConfig().task}, T=0.8, 2 updates per batch\n"
                f"(the held-out accuracies are on {a.n_eval} items and {a.steps} steps: a check of the loop, not a result)\n")
        per_step = ""
    txt = head + "\n" + table + "\n" + per_step + "\n" + pd.DataFrame(checks).to_string(index=False) + "\n"
    print(txt); (out/f"gpu_check{sfx}.txt").write_text(txt)
    (out/f"environment{sfx}.json").write_text(json.dumps(env, indent=1))
    if vllm:
        steps_table.to_csv(out/f"steps{sfx}.csv", index=False)
        verdict = "FAIL: " + "; ".join(c["check"] for c in checks if c["result"] != "pass") if failed else "pass: every check passed"
        (out/f"result{sfx}.json").write_text(json.dumps(dict(backend=a.backend, exit_code=1 if failed else 0, verdict=verdict, environment=env,
                                                               figures=rows, checks=checks, steps=steps_table.to_dict("records"),
                                                               vllm_adapters=listings), indent=1, default=str))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
