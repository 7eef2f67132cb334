"""C-RL against individual-correctness RL: arms × seeds at an equal sample budget, tested paired on held-out items.

- Policy: SmolLM2-135M-Instruct + LoRA r=8, trained by the real training service (`compstrength serve-trainer`,
  one process per run, its own state folder).
- Protocol: mixture-of-agents. Every member proposes; the member most accurate on the dev items aggregates
  the proposals. The partners read the policy's proposal, and the policy holds no vote.
- Partners: gemma3-270m and qwen2.5-coder-0.5b from the embedded pool (llama.cpp; their answers are cached across runs).
- Task (`--task`): `arithmetic_crl2` (ids arith-2001..arith-3200, made by `make_arithmetic.py --exclude`), whose
  computations, each a (template, expression), are all new: none is one of the study's `arithmetic1k` or of
  `arithmetic_crl`, and none repeats. With split_seed 0 the same `--n-train` training and `--n-eval` held-out items
  serve every arm and seed. Its dev split calibrates the aggregator choice. The config refuses any item that shares
  a question or a (template, expression) with another part, or with the study's items.
  The committed runs under bench/results/crl/ used `--task arithmetic_crl` (ids arith-1001..arith-2000), whose
  questions are kept apart but not its computations: those runs were checked by question only
  (`CRLConfig(disjoint="question")`, their configs and digests as they were), and test.txt states how many of
  their held-out items share a (template, expression) with a training item or with an `arithmetic1k` item.
  Another task's runs carry its name in theirs (`tag`) and go to their own folder (`--out`, default
  bench/results/crl-<task>), so they never mix with those.
- Arms:
  - `crl`: the reward is the system's score with the sample in the policy's seat.
  - `individual`: the reward is the sample's own correctness.
  Both arms use the same steps × prompts × G, T > 0, 2 clipped updates per batch, and the same seeds. A seed sets the
  item order and the sampling seeds; the adapter starts from the same weights in every run.
- Order:
  1. A pilot: C-RL, seed 0, `--pilot-steps` steps, no evaluation. The bench stops and reports unless fewer than 60% of
     the groups carry no signal and fewer than 50% get individual RL's advantages.
  2. Then every (seed, arm) run, each evaluated on the held-out items before and after training: the policy alone,
     the system with and without it, and its Shapley value and leave-one-out in the 3-member pool. Each C-RL run's own
     gate verdict after its first steps is recorded (`pilot.json`) and reported, but stops nothing: dropping a seed on
     its own early data would select the seeds. test.txt ends with a sensitivity note, the pooled tests over the seeds
     whose C-RL run passed it, which is no independent check (the gate is read from the same runs).
- Primary endpoint: held-out system accuracy after training, C-RL vs individual, paired on items (McNemar exact per
  seed; pooled, the exact sign-flip test over items on their seed-averaged differences; bootstrap CI of the effect over items).
- The paper's endpoint, stated in test.txt: the trained policy's own compositional strength in its system (LOO and
  Shapley after training, with their CIs), beside the partners alone (the system without the policy).

Everything resumes, on this machine or a new one. Rerun the same command to continue. Runs stop between steps when
`--hours` is spent, and SIGTERM is safe at any point. What a run needs to go on is copied under `--out` (commit it) as it
grows: each run's client log, per-item evaluations, pilot verdict and pending request in `runs/<run>/`, the service's
current version (LoRA adapter, optimizer state, idempotency record; never its token) in `runs/<run>/service/`, and every
model call in `recording/` (gzipped parts). A work folder that lacks a run is filled from that copy, and the recorded
calls answer again without a model. `summary.csv`, `test.txt` and `policy_text.csv` are rewritten from the runs complete so far
(`--summary-only` rewrites them from the copies under --out, without a model).

Usage: COMPSTRENGTH_HOME=... .venv/bin/python bench/bench_crl.py [--task arithmetic_crl2] [--hours 2] [--seeds 0 1 2] [--device auto]
       (with `compstrength pool up --server llama-server` running in that home, its partners are reused).
       The full mix of levels failed the pilot gate; levels 1-2 passed it: `--difficulty 1 2 --n-train 118`.
       Start the partners so that the aggregator (qwen2.5-coder-0.5b, the best partner on dev) has every core, as the service has:
         compstrength pool up --server llama-server --slots 2 --members gemma3-270m
         compstrength pool up --server llama-server --slots 2 --threads 2 --members qwen2.5-coder-0.5b
         python bench/bench_crl.py --difficulty 1 2 --n-train 118 --hours H
       A step samples, then asks the partners, then trains: one phase at a time, so each can have every core.
       The committed runs' summary, from their copies alone (no model, no service):
         python bench/bench_crl.py --task arithmetic_crl --difficulty 1 2 --n-train 118 --summary-only
"""
import argparse, json, os, re, shutil, signal, sys, time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import pandas as pd

from _service import start_service
from compstrength.crl import CRLConfig, CRLRun, PilotGateError, TrainerClient, paired_test, pilot_gate
from compstrength.files import home_dir
from compstrength.local import local_pool
from compstrength.models import ModelClient

pd.set_option("display.width", 250)
PARTNERS = ("gemma3-270m", "qwen2.5-coder-0.5b")
ARMS = {"crl": "system", "individual": "individual"}
KEEP = ("log.jsonl", "eval_items.jsonl", "meta.json", "pilot.json", "wall.json", "pending.json")  # a run's client files, kept under --out
COMMITTED = "arithmetic_crl"  # the task of the committed runs: checked by question only, named and kept as they were


def config(a, arm: str, seed: int, steps: int|None = None) -> CRLConfig:
    "A run's config; the committed task's runs keep the question-only rule they were made under (and so their digests)."
    return CRLConfig(task=a.task, disjoint="question" if a.task == COMMITTED else "template", protocol=a.protocol,
                     protocol_params=dict(max_tokens=a.proposal_tokens, n_dev=a.n_dev), partners=PARTNERS, reward=ARMS[arm], steps=steps or a.steps, prompts_per_step=a.prompts,
                     group_size=a.group, n_train=a.n_train, n_eval=a.n_eval, split_seed=0, eval_every=a.steps,
                     max_tokens=a.max_tokens, temperature=a.temperature, updates=a.updates, learning_rate=a.lr,
                     seed=seed, pilot_steps=a.pilot_steps, item_meta={"difficulty": a.difficulty} if a.difficulty else {})


def slug(task: str) -> str:
    "A task's name (or file) as it may stand in a run's or a folder's name."
    return re.sub(r"[^A-Za-z0-9_]+", "_", task)


def tag(a) -> str:
    """The protocol, the task unless it is the committed runs' one, and the arithmetic levels when not all: part of every
    run's name, so that settings never share a folder."""
    task = "" if a.task == COMMITTED else "-" + slug(a.task)
    return a.protocol + task + (f"-levels{''.join(map(str, a.difficulty))}" if a.difficulty else "")


class Runner:
    "One run folder: its service (started on demand), its client, and the copy of its logs under --out."
    def __init__(self, a, name: str, cfg: CRLConfig, pool: ModelClient, work: Path, out: Path):
        self.a, self.name, self.cfg, self.pool = a, name, cfg, pool
        self.dir, self.out = work/name, out/"runs"/name
        self.dir.mkdir(parents=True, exist_ok=True); self.out.mkdir(parents=True, exist_ok=True)
        self.cc = work/"coalitions"  # shared: equal policy weights (every run's start) share their evaluations
        self.restore()

    def restore(self):
        """On a machine whose work folder lacks this run (a new machine, or a lost cache), put back what --out keeps: the client
        files and the service's current version. Training then resumes where the committed copy stands, not from step 0."""
        if not (self.dir/"log.jsonl").exists():
            for f in KEEP:
                if (self.out/f).exists(): shutil.copy2(self.out/f, self.dir/f)
        svc, kept = self.dir/"service", self.out/"service"
        if not (svc/"CURRENT").exists() and (kept/"CURRENT").exists():
            shutil.copytree(kept, svc, dirs_exist_ok=True)  # the service makes itself a new token

    def save_state(self):
        """Copy the service's current version (LoRA adapter, optimizer state, step and idempotency record), its id and its
        CURRENT pointer under --out, replacing the previous copy whole. Never its token: a secret does not persist."""
        svc = self.dir/"service"
        if not (svc/"CURRENT").exists(): return
        cur = (svc/"CURRENT").read_text().strip()
        dst = self.out/"service"; tmp = dst.with_name("service.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(svc/"versions"/cur, tmp/"versions"/cur)
        for f in ("service_id", "CURRENT"): shutil.copy2(svc/f, tmp/f)
        shutil.rmtree(dst, ignore_errors=True); tmp.rename(dst)

    def trained(self) -> int:
        return sum(r["kind"] == "train" for r in read_run(self.dir)[0])

    def done(self, evaluate: bool = True) -> bool:
        rows = read_run(self.dir)[0]
        n = sum(r["kind"] == "train" for r in rows)
        return n >= self.cfg.steps and (not evaluate or any(r["kind"] == "eval" and r["step"] == self.cfg.steps for r in rows))

    def advance(self, deadline: float, evaluate: bool = True, gate: str = "stop"):
        """Train (and evaluate) until the run is complete or the deadline passes; one step at a time. `gate`: what a failed
        pilot gate does to this run (`CRLRun`): the setting's pilot stops; a long run records its verdict and goes on."""
        if self.done(evaluate): return
        t0 = time.time()
        svc, url = start_service(self.dir/"service", self.a.device, self.dir/"service.log", threads=self.a.threads)
        try:
            run = CRLRun(self.cfg, TrainerClient(url, token_file=self.dir/"service"/"token"), self.pool, self.dir,
                         coalition_cache=self.cc, progress=self.a.progress, gate=gate)
            while not self.done(evaluate) and time.time() < deadline:
                run.run(steps=min(self.trained() + 1, self.cfg.steps), evaluate=evaluate)
                self.sync(t0); t0 = time.time()
        finally:
            svc.terminate(); svc.wait(60)
            self.sync(t0)

    def sync(self, t0: float):
        """Add this stretch's wall time, then copy the run under --out: its client files, the service's current version, and
        the calls recorded so far. Called between steps (the service idle) and when the run stops, so log and state agree."""
        w = self.dir/"wall.json"
        spent = json.loads(w.read_text())["seconds"] if w.exists() else 0.0
        w.write_text(json.dumps(dict(seconds=round(spent + time.time() - t0, 1))))
        for f in KEEP:
            if (self.dir/f).exists(): shutil.copy2(self.dir/f, self.out/f)
            else: (self.out/f).unlink(missing_ok=True)  # a step sent and logged: its pending request is gone here too
        self.save_state()
        self.pool.flush()


def read_run(d: Path) -> tuple[list[dict], pd.DataFrame]:
    rows = [json.loads(l) for l in (d/"log.jsonl").read_text().splitlines() if l.strip()] if (d/"log.jsonl").exists() else []
    it = pd.read_json(d/"eval_items.jsonl", lines=True) if (d/"eval_items.jsonl").exists() else pd.DataFrame()
    if len(it): it = it.drop_duplicates(["run", "step", "protocol", "item"], keep="last")  # a re-run evaluation writes its rows again
    return rows, it


def pilot_line(v: dict) -> str:
    "A pilot's verdict with each fraction's exact (Clopper-Pearson) 95% interval over its n groups."
    from scipy.stats import binomtest
    ci = lambda f: binomtest(round(f * v["groups"]), v["groups"]).proportion_ci()
    z, s = ci(v["zero_signal_frac"]), ci(v["frac_same_as_individual"])
    return (f"{'passed' if v['passed'] else 'FAILED'}; n = {v['groups']} groups over {v['steps']} steps; "
            f"zero-signal {v['zero_signal_frac']:.2f} [{z.low:.2f}, {z.high:.2f}] (limit < {v['max_zero_signal']}), "
            f"same as individual {v['frac_same_as_individual']:.2f} [{s.low:.2f}, {s.high:.2f}] (limit < {v['max_same']})")


def cis(items: pd.DataFrame, step: int, protocol: str, when: str) -> dict:
    """95% intervals over the held-out items of one evaluation: exact (Clopper-Pearson) for the accuracies when every
    score is 0 or 1, else a percentile bootstrap; a bootstrap (seed 0, 2000 draws) for the policy's Shapley value and LOO."""
    from scipy.stats import binomtest
    from compstrength.attribution import bootstrap_ci
    f = items[(items.step == step) & (items.protocol == protocol)] if len(items) else items
    out = {f"{m}_{when}_{e}": None for m in ("system", "policy_alone", "shapley", "loo") for e in ("lo", "hi")}
    if f.empty: return out
    per = pd.DataFrame({"system": f.system, "policy_alone": f.policy_alone, "loo": f.system - f.without_policy})
    if "shapley" in f: per["shapley"] = f.shapley  # logs written before the per-item Shapley values have no such column
    boot = bootstrap_ci(per.reset_index(drop=True))
    for m in per.columns:
        x = per[m].to_numpy()
        if m in ("system", "policy_alone") and np.isin(x, (0, 1)).all():
            ci = binomtest(int(x.sum()), len(x)).proportion_ci()
            lo, hi = ci.low, ci.high
        else:
            lo, hi = boot.loc[m, "ci_low"], boot.loc[m, "ci_high"]
        out[f"{m}_{when}_lo"], out[f"{m}_{when}_hi"] = float(lo), float(hi)
    return out


def recorded(out: Path) -> list[dict]:
    "Every recorded model call under --out (the gzipped parts, in order)."
    import gzip
    rows = []
    for f in sorted((out/"recording").glob("part-*.jsonl.gz")):
        with gzip.open(f, "rt") as fh: rows += [json.loads(l) for l in fh if l.strip()]
    return rows


def policy_text(a, out: Path) -> pd.DataFrame:
    """What the policy wrote in the held-out evaluations, before training and after each run, read from the recorded calls
    (no model is asked): its greedy proposals (the moa's first round, ≤ --proposal-tokens), found by the digest of the
    weights that wrote them (the run's saved version after training, the shared start before). Per proposal: whether it
    hit the token cap, whether the tail the aggregator reads (the last 600 characters) carries an answer and whether that
    answer is right, whether a wrong answer is one of the numbers the question shows, and whether one line fills half of it. With the item's system score, with and without the policy,
    split by what that tail said."""
    from scipy.stats import binomtest
    from compstrength.proto_text import tail
    from compstrength.service import adapter_digest
    from compstrength.tasks import _NUM, _to_float, extract_number, load_task, prompt_messages, score
    task = load_task(a.task)
    by_prompt = {prompt_messages(task, it)[0]["content"]: it for it in task.items}
    calls = recorded(out)
    def proposals(base: str, digest: str) -> dict:
        model = f"trainer/{base}/{digest[:32]}"  # the policy's identity in the pool (`TrainerClient.spec`)
        got = {}
        for r in calls:
            q = r["request"]
            if q["model"] == model and q["temperature"] == 0 and q["max_tokens"] == a.proposal_tokens and len(q["messages"]) == 1:
                it = by_prompt.get(q["messages"][0]["content"])
                if it is not None: got[it.id] = (it, r["completion"])
        return got
    def row(what: dict, got: dict, items: pd.DataFrame) -> dict:
        f = items.set_index("item")
        recs = []
        for iid, (it, c) in got.items():
            if iid not in f.index: continue  # dev items: they choose the aggregator, not scored here
            t = tail(c["text"]); ans = extract_number(t)
            lines = [l.strip() for l in c["text"].splitlines() if l.strip()]
            top = max((lines.count(l) for l in set(lines)), default=0)
            said = "none" if ans is None else "right" if score(task, it, t).score == 1 else "wrong"
            given = {_to_float(x) for x in re.findall(_NUM, it.question)}  # the numbers the question itself shows
            recs.append(dict(cap=c["finish_reason"] == "length", said=said, repeats=len(lines) >= 4 and top >= len(lines) / 2,
                             copied=said == "wrong" and ans in given,
                             tokens=c["completion_tokens"], system=f.loc[iid, "system"], without=f.loc[iid, "without_policy"]))
        r = pd.DataFrame(recs)
        if r.empty: return dict(**what, n=0)
        ci = binomtest(int(r.cap.sum()), len(r)).proportion_ci()
        d = dict(**what, n=len(r), at_cap=r.cap.mean(), at_cap_lo=ci.low, at_cap_hi=ci.high, mean_tokens=r.tokens.mean(),
                 repeats=r.repeats.mean(), tail_right=(r.said == "right").mean(), tail_wrong=(r.said == "wrong").mean(),
                 tail_none=(r.said == "none").mean(), wrong_copied=int(r.copied.sum()))
        for s in ("right", "wrong", "none"):
            g = r[r.said == s]
            d.update({f"n_{s}": len(g), f"system_if_{s}": g.system.mean() if len(g) else None,
                      f"without_if_{s}": g.without.mean() if len(g) else None})
            if len(g) and np.isin(g.system, (0, 1)).all():  # exact 95% interval of the system's accuracy on those items
                ci = binomtest(int(g.system.sum()), len(g)).proportion_ci()
                d.update({f"system_if_{s}_lo": ci.low, f"system_if_{s}_hi": ci.high})
        return d
    rows = []
    for seed in a.seeds:
        for arm in ARMS:
            d = out/"runs"/f"{arm}-{tag(a)}-seed{seed}"
            log, items = read_run(d)
            if not (d/"meta.json").exists() or items.empty: continue
            meta = json.loads((d/"meta.json").read_text())
            if not rows:  # the start is shared by every run: its evaluation once
                f0 = items[(items.step == 0) & (items.protocol == a.protocol)]
                rows.append(row(dict(arm="start", seed="all", when="before"), proposals(meta["base_model"], meta["start_digest"]), f0))
            cur = (d/"service"/"CURRENT").read_text().strip() if (d/"service"/"CURRENT").exists() else None
            f1 = items[(items.step == a.steps) & (items.protocol == a.protocol)]
            if cur != f"v{a.steps:06d}" or f1.empty: continue  # not trained and evaluated to the end yet
            dig = adapter_digest(d/"service"/"versions"/cur, meta["base_model"])
            rows.append(row(dict(arm=arm, seed=seed, when="after"), proposals(meta["base_model"], dig), f1))
    return pd.DataFrame(rows)


def policy_text_table(pt: pd.DataFrame) -> str:
    "policy_text's rows as test.txt prints them: rates with exact 95% intervals in brackets, and each tail class's n."
    iv = lambda r, c: "-" if pd.isna(r.get(c)) else f"{r[c]:.3f} [{r[c + '_lo']:.2f}, {r[c + '_hi']:.2f}]" if pd.notna(r.get(c + "_lo")) else f"{r[c]:.3f}"
    num = lambda r, c: "-" if pd.isna(r.get(c)) else f"{r[c]:.3f}"
    t = pd.DataFrame([{"run": f"{r['arm']} seed {r['seed']} {r['when']}", "n": r["n"], "at_cap": iv(r, "at_cap"),
                       "tokens": f"{r['mean_tokens']:.0f}", "repeats": num(r, "repeats"),
                       "tail right/wrong/none": f"{r['n_right']}/{r['n_wrong']}/{r['n_none']}",
                       "wrong = a question number": f"{r['wrong_copied']}/{r['n_wrong']}",
                       "system if wrong": iv(r, "system_if_wrong"), "without if wrong": num(r, "without_if_wrong"),
                       "system if none": iv(r, "system_if_none"), "without if none": num(r, "without_if_none"),
                       "system if right": iv(r, "system_if_right"), "without if right": num(r, "without_if_right")}
                      for r in pt.to_dict("records") if r["n"]])
    return t.to_string(index=False)


def between_seeds(t: pd.DataFrame) -> str:
    """The spread of paired_test's per-seed effects, and what it allows. The item-level tests hold the trained policies fixed
    and generalise over items; a claim over training seeds rests on the seeds alone: a t interval with k − 1 degrees of
    freedom, and an exact sign test whose smallest two-sided p is 2/2^k."""
    from scipy.stats import ttest_1samp
    e = t[t.seed != "pooled"].effect.to_numpy(float); k = len(e)
    head = (f"between seeds (training randomness; the tests above hold these {k} trained pairs fixed and generalise over items): "
            f"effect per seed {', '.join(f'{x:+.3f}' for x in e)}")
    if k < 2: return head + "; one seed: no spread over seeds yet"
    ci = ttest_1samp(e, 0).confidence_interval(0.95)
    return (head + f"; mean {e.mean():+.3f}, SD {e.std(ddof=1):.3f}, 95% t interval over seeds [{ci.low:+.3f}, {ci.high:+.3f}]; C-RL ahead in "
            f"{int((e > 0).sum())} of {k}; an exact sign test over {k} seeds cannot give a two-sided p below {2 / 2 ** k:.3g}")


def overlap_line(a) -> str:
    """How many held-out items ask the same computation, a (template, expression) with other names, as a training item,
    and as an item of the study's arithmetic1k (either split): counted from the data files (`item_overlap`), never typed in."""
    from compstrength.crl import item_overlap
    cfg = config(a, "crl", a.seeds[0])
    o = item_overlap(cfg).query("key == 'template' and part == 'held_out'").set_index("other")
    n = {k: (int(o.loc[k, "n"]), int(o.loc[k, "of"])) for k in ("train", "arithmetic1k") if k in o.index}
    said = "; ".join(f"{what}: {n[k][0]} of {n[k][1]}" for k, what in (("train", "with a training item"),
                                                                        ("arithmetic1k", "with an item of arithmetic1k (either split)")) if k in n)
    line = f"held-out items that share their (template, expression), the same computation asked with other names, {said}"
    if any(v for v, _ in n.values()):
        line += ("; so the held-out items are not all new to training, nor all apart from the study's items"
                 + (" (these runs were checked by question text only, disjoint=\"question\"; the default rule, disjoint=\"template\", "
                    "refuses any such overlap)" if cfg.disjoint == "question" else ""))
    return line


def endpoint(summary: pd.DataFrame, out: Path, a) -> list[str]:
    """The paper's endpoint in words: the trained policy's own compositional strength in its system (LOO and Shapley after
    training, with their intervals, from summary.csv), the partners alone (the system without the policy, from the recorded
    evaluations, with its exact interval), and how the two arms' policies rank by Shapley and by LOO, seed by seed."""
    from scipy.stats import binomtest
    s = summary.dropna(subset=["shapley_after", "loo_after"])
    if s.empty: return []
    iv = lambda r, m: f"{r[m]:.3f} [{r[m + '_lo']:.3f}, {r[m + '_hi']:.3f}]" if pd.notna(r[m + "_lo"]) else f"{r[m]:.3f}"
    t = pd.DataFrame([{"run": f"{r['arm']} seed {r['seed']}", "LOO after": iv(r, "loo_after"), "Shapley after": iv(r, "shapley_after"),
                       "system after": iv(r, "system_after")} for r in s.to_dict("records")])
    k = len(s)
    below = lambda m: f"{int((s[m] < 0).sum())} of {k} runs (the whole 95% interval below 0 in {int((s[m + '_hi'] < 0).sum())})"
    lines = ["the paper's endpoint, the trained policy's own compositional strength in its system (held-out items; 95% intervals "
             "over items, bootstrap):", t.to_string(index=False),
             f"after training the policy's LOO is below 0 in {below('loo_after')}, its Shapley value in {below('shapley_after')}"]
    ev = []
    for seed in a.seeds:
        for arm in ARMS:
            _, items = read_run(out/"runs"/f"{arm}-{tag(a)}-seed{seed}")
            if len(items): ev.append(items[items.protocol == a.protocol][["run", "step", "item", "without_policy"]])
    alone = None
    if ev:
        ev = pd.concat(ev)
        per = ev.groupby(["run", "step"]).without_policy.mean()
        if (ev.groupby("item").without_policy.nunique() == 1).all():  # frozen partners: the same per item in every evaluation
            x = ev.drop_duplicates("item").without_policy.to_numpy()
            alone = x.mean()
            ci = binomtest(int(x.sum()), len(x)).proportion_ci() if np.isin(x, (0, 1)).all() else None
            lines.append(f"the partners alone (the system without the policy) score {alone:.3f}" + (f" [{ci.low:.3f}, {ci.high:.3f}]" if ci else "")
                         + f" on the {len(x)} held-out items, the same in each of the {len(per)} evaluations; every system with a trained policy "
                         f"scores {s.system_after.min():.3f} to {s.system_after.max():.3f}")
        else:
            lines.append(f"the partners alone (the system without the policy) score {per.min():.3f} to {per.max():.3f} across the evaluations; "
                         f"every system with a trained policy scores {s.system_after.min():.3f} to {s.system_after.max():.3f}")
    for m, name in (("shapley_after", "Shapley"), ("loo_after", "LOO")):
        w = s.pivot_table(index="seed", columns="arm", values=m)
        if not {"crl", "individual"} <= set(w.columns): continue
        w = w.dropna()
        up = [f"{int(sd)} ({r.individual:.3f} vs {r.crl:.3f})" for sd, r in w.iterrows() if r.individual > r.crl]
        lines.append(f"by {name}, the individually trained policy ranks above the C-RL policy of the same seed in "
                     + (f"seed{'s' if len(up) > 1 else ''} {', '.join(up)}" if up else "no seed") + f" of {len(w)}")
    harmful = bool((s.loo_after_hi < 0).all() and (s.shapley_after_hi < 0).all())
    if harmful:
        lines.append("so every trained policy, C-RL's included, remains a net-harmful member of its system"
                     + (", and the partners alone do better than any system with one" if alone is not None and alone > s.system_after.max() else "")
                     + ": the paper's claim, a stronger collaborator (positive compositional strength), is not shown by these runs. "
                       "What the tests above measure is how much less the system loses with the C-RL policy than with the individual one.")
    elif (s.shapley_after_lo > 0).any():
        lines.append("runs whose policy's Shapley value is above 0 with its whole interval: "
                     + ", ".join(f"{r.arm} seed {r.seed}" for r in s.itertuples() if r.shapley_after_lo > 0))
    else:
        lines.append("no run shows a positive Shapley value with its whole interval above 0: a stronger collaborator is not shown by these runs")
    return lines + [""]


def summarize(a, out: Path, pilot: dict|None) -> tuple[pd.DataFrame, str]:
    "summary.csv (one row per arm and seed) and test.txt (the paired test on the runs complete in both arms)."
    rows, finals = [], []
    for seed in a.seeds:
        for arm in ARMS:
            d = out/"runs"/f"{arm}-{tag(a)}-seed{seed}"
            log, items = read_run(d)
            tr = [r for r in log if r["kind"] == "train"]
            ev = {r["step"]: r for r in log if r["kind"] == "eval" and r["protocol"] == a.protocol}
            if not log: continue
            b, e = ev.get(0, {}), ev.get(a.steps, {})
            wall = json.loads((d/"wall.json").read_text())["seconds"] if (d/"wall.json").exists() else None
            gate = json.loads((d/"pilot.json").read_text()) if (d/"pilot.json").exists() else None  # a C-RL run's own verdict
            rows.append(dict(arm=arm, seed=seed, steps=len(tr), heldout_items=b.get("n_items", e.get("n_items")),
                             system_before=b.get("system"), system_after=e.get("system"),
                             policy_alone_before=b.get("policy_alone"), policy_alone_after=e.get("policy_alone"),
                             frac_same_as_individual=float(np.mean([r["frac_same_as_individual"] for r in tr])) if tr else None,
                             zero_signal_frac=float(np.mean([r["frac_reward_zero_std"] for r in tr])) if tr else None,
                             shapley_before=b.get("shapley"), shapley_after=e.get("shapley"), loo_before=b.get("loo"), loo_after=e.get("loo"),
                             mean_train_reward=float(np.mean([r["reward"] for r in tr])) if tr else None,
                             samples=len(tr) * a.prompts * a.group, wall_s=wall, gate_passed=gate["passed"] if gate else None,
                             **cis(items, 0, a.protocol, "before"), **cis(items, a.steps, a.protocol, "after")))
            if e and len(items):
                f = items[(items.step == a.steps) & (items.protocol == a.protocol)]
                finals.append(f.assign(arm=arm, seed=seed)[["arm", "seed", "item", "system", "policy_alone"]])
    cols = ["arm", "seed", "steps", "heldout_items", "system_before", "system_after", "policy_alone_before", "policy_alone_after",
            "frac_same_as_individual", "zero_signal_frac", "shapley_before", "shapley_after", "loo_before", "loo_after",
            "mean_train_reward", "samples", "wall_s", "gate_passed"]
    cols += [f"{m}_{w}_{e}" for w in ("before", "after") for m in ("system", "policy_alone", "shapley", "loo") for e in ("lo", "hi")]
    summary = pd.DataFrame(rows, columns=cols)
    summary.to_csv(out/"summary.csv", index=False)
    lines = [f"## C-RL vs individual RL in {a.protocol}: policy SmolLM2-135M-Instruct + LoRA r=8, partners {', '.join(PARTNERS)}",
             f"task {a.task}{' levels ' + str(a.difficulty) if a.difficulty else ''}: {a.n_train} training, {a.n_eval} held-out items (split_seed 0, the same for every run); "
             f"{a.steps} steps × {a.prompts} prompts × G={a.group} per run, samples ≤{a.max_tokens} tokens at T={a.temperature}, "
             f"{a.updates} clipped updates per batch, lr {a.lr}; seeds {list(a.seeds)}", overlap_line(a), ""]
    if pilot: lines += [f"pilot (C-RL, seed {a.seeds[0]}, first steps, no evaluation): {pilot_line(pilot)}", ""]
    others = [d for d in sorted((out/"runs").glob("pilot-*")) if d.name != f"pilot-crl-{tag(a)}-seed{a.seeds[0]}" and (d/"pilot.json").exists()]
    if others: lines += ["pilots of other settings:"] + [f"  {d.name}: {pilot_line(json.loads((d/'pilot.json').read_text()))}" for d in others] + [""]
    gates = {int(r.seed): r.gate_passed for r in summary.itertuples() if r.arm == "crl" and r.gate_passed is not None}
    if gates:
        lines += ["each C-RL run's own gate after its first steps (recorded; it stops no run once the setting's pilot has passed):"]
        lines += [f"  seed {s}: {pilot_line(json.loads((out/'runs'/f'crl-{tag(a)}-seed{s}'/'pilot.json').read_text()))}" for s in sorted(gates)] + [""]
    both = pd.concat(finals, ignore_index=True) if finals else pd.DataFrame()
    sensitivity = []  # the pooled tests over the seeds whose C-RL run passed its own gate: a note at the end, not a check
    for metric, what in (("system", "PRIMARY: held-out system accuracy after training"), ("policy_alone", "secondary: the policy alone after training")):
        if pilot and not pilot["passed"]:
            lines.append(f"{what}: not tested; the pilot gate stopped the benchmark before any long run"); continue
        if both.empty: lines.append(f"{what}: no seed has both arms evaluated after training yet"); continue
        w = both.pivot_table(index=["seed", "item"], columns="arm", values=metric).dropna().reset_index()
        if not {"crl", "individual"} <= set(w.columns) or w.empty:
            lines.append(f"{what}: no seed has both arms evaluated after training yet"); continue
        t = paired_test(w, "crl", "individual")
        per_item = (w["crl"] - w["individual"]).groupby(w["item"]).mean()  # pooled over the seeds that have both arms
        mde = 2.8 * per_item.std(ddof=1) / np.sqrt(len(per_item))  # z(0.975) + z(0.8) = 2.80
        fmt = dict(index=False, float_format=lambda x: f"{x:.4f}", formatters={"p": lambda x: f"{x:.2g}"})  # a p of 2e-11 is not 0
        lines += [f"{what} — C-RL vs individual, paired on items (effect = C-RL − individual; bootstrap CI over items; p: McNemar exact "
                  f"per seed, and pooled the exact sign-flip test over items, each item's difference averaged over its seeds):",
                  t.to_string(**fmt),
                  f"power: with these {len(per_item)} items and their observed spread, the pooled test detects |effect| >= {mde:.3f} "
                  f"with 80% power at alpha 0.05 (normal approximation)"]
        lines.append(between_seeds(t))
        kept = sorted(s for s in w.seed.unique() if gates.get(int(s)) is True)
        if len(kept) < w.seed.nunique() and kept:  # the pooled test without the seeds whose C-RL run failed its own gate
            k = paired_test(w[w.seed.isin(kept)], "crl", "individual").iloc[[-1]]
            sensitivity.append((what, kept, k.to_string(**fmt)))
        lines.append("")
    lines += endpoint(summary, out, a)
    within = []  # each run against its own start, on the same items: what 30 steps did to the system with the policy
    for seed in a.seeds:
        for arm in ARMS:
            _, items = read_run(out/"runs"/f"{arm}-{tag(a)}-seed{seed}")
            if items.empty: continue
            f = items[items.protocol == a.protocol].pivot_table(index="item", columns="step", values="system")
            if 0 in f and a.steps in f:
                w = f[[0, a.steps]].dropna().rename(columns={0: "before", a.steps: "after"}).reset_index().assign(seed=seed)
                within.append(paired_test(w, "after", "before").iloc[[0]].assign(seed=f"{arm} {seed}"))
    if within:
        lines += ["within each run: held-out system accuracy after training vs before, paired on items (McNemar exact):",
                  pd.concat(within).rename(columns={"seed": "run"}).to_string(index=False, float_format=lambda x: f"{x:.4f}",
                                                                               formatters={"p": lambda x: f"{x:.2g}"}), ""]
    pt = policy_text(a, out)
    if len(pt):
        pt.to_csv(out/"policy_text.csv", index=False)
        lines += ["how the policy's held-out proposals read (from the recorded calls; the tail is the last 600 characters, what the "
                  "aggregator reads; system_if_* / without_if_*: held-out system accuracy with / without the policy on the items "
                  "where that tail was right, wrong or had no answer):",
                  policy_text_table(pt), ""]
    if sensitivity:
        kept = sensitivity[0][1]
        lines += [f"SENSITIVITY NOTE — not an independent check. The pooled tests above again, over only the seeds whose C-RL run "
                  f"passed its own gate ({', '.join(map(str, kept))}). Which seeds those are was read from the same runs: each C-RL "
                  f"run's gate over its own first steps, a statistic of its early rewards that is tied to how the run turns out. "
                  f"Keeping seeds on it selects them on the outcome's own data, so these lines must not be read as confirmation "
                  f"of the pooled tests; the tests above, over every seed, are the result."]
        for what, _, table in sensitivity: lines += [f"{what}, pooled over seeds {', '.join(map(str, kept))} only:", table]
        lines.append("")
    text = "\n".join(lines) + "\n"
    (out/"test.txt").write_text(text)
    return summary, text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="arithmetic_crl2",
                    help=f"the task the policy trains and is evaluated on (default: arithmetic_crl2; {COMMITTED}: the committed runs)")
    ap.add_argument("--protocol", default="moa", help="the protocol the policy trains and is evaluated in")
    ap.add_argument("--difficulty", type=int, nargs="+", default=None, help="arithmetic levels to train and evaluate on (default: all, 1-5)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--prompts", type=int, default=4, help="prompts (groups) per step")
    ap.add_argument("--group", type=int, default=4, help="G samples per prompt")
    ap.add_argument("--max-tokens", type=int, default=128, help="policy sample length")
    ap.add_argument("--proposal-tokens", type=int, default=256, help="the members' proposal length in moa (evaluation)")
    ap.add_argument("--n-dev", type=int, default=20, help="dev items that choose the aggregator")
    ap.add_argument("--n-train", type=int, default=300)
    ap.add_argument("--n-eval", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--pilot-steps", type=int, default=5)
    ap.add_argument("--hours", type=float, default=float("inf"), help="stop between steps after this long (rerun to continue)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="the service's CPU threads (default: every core; a step samples, asks the partners, then trains, one phase at a time)")
    ap.add_argument("--out", default=None,
                    help=f"results (default: bench/results/crl for the committed runs' task {COMMITTED}, else bench/results/crl-<task>)")
    ap.add_argument("--work", default=None, help="run folders and service states (default: home_dir()/bench_crl)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per model call")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--summary-only", action="store_true",
                    help="rewrite summary.csv, test.txt and policy_text.csv from the runs under --out; no model, no service")
    a = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C: each run's `finally` stops its service and adds the stretch's wall time and logs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = Path(a.out or ("bench/results/crl" if a.task == COMMITTED else f"bench/results/crl-{slug(a.task)}"))
    work = Path(a.work or home_dir()/"bench_crl")
    out.mkdir(parents=True, exist_ok=True); work.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + a.hours * 3600
    for arm in ARMS:  # every config is checked (items, overlap, partners' names) before any call
        for s in a.seeds: config(a, arm, s).validate()
    if a.summary_only:  # from the copies under --out alone (what a clone has): the pilot's verdict, then the tables
        pc = config(a, "crl", a.seeds[0], steps=a.pilot_steps)
        summary, text = summarize(a, out, pilot_gate(read_run(out/"runs"/f"pilot-crl-{tag(a)}-seed{a.seeds[0]}")[0], pc))
        print(summary.to_string(index=False)); print(); print(text); return
    with local_pool(list(PARTNERS), server="llama-server") as lp:
        # a call may wait behind the policy's other calls on a busy CPU: a long timeout, so that none is abandoned and re-asked
        # every model call is recorded under --out (gzipped parts, committed with the runs): on a new machine the evaluations
        # and system rewards already paid for are answered from it, and only new calls reach a model
        pool = ModelClient(lp.specs(), cache_dir=home_dir()/"calls", timeout=a.timeout, recording=out/"recording", mode="extend")
        pc = config(a, "crl", a.seeds[0], steps=a.pilot_steps)
        pilot = Runner(a, f"pilot-crl-{tag(a)}-seed{a.seeds[0]}", pc, pool, work, out)
        try:
            pilot.advance(deadline, evaluate=False)
        except PilotGateError as e:
            summarize(a, out, json.loads((pilot.dir/"pilot.json").read_text()))
            print(f"stopped: {e}"); sys.exit(2)
        verdict = pilot_gate(read_run(pilot.dir)[0], pc)
        if verdict is None: print("the pilot has not finished; rerun to continue"); sys.exit(0)
        if not verdict["passed"]:  # a pilot that failed earlier: the same verdict, no run
            summarize(a, out, verdict); print(f"stopped by the pilot gate: {verdict}"); sys.exit(2)
        for seed in a.seeds:
            for arm in ARMS:
                if time.time() >= deadline: break
                # the setting passed its pilot: a long run's own gate is recorded and reported, never a reason to drop its seed
                Runner(a, f"{arm}-{tag(a)}-seed{seed}", config(a, arm, seed), pool, work, out).advance(deadline, gate="record")
        summary, text = summarize(a, out, verdict)
    print(summary.to_string(index=False)); print(); print(text)


if __name__ == "__main__":
    main()
