"""Budget a live run before starting it: coalitions, distinct model calls, tokens and hours per (protocol, task).

For an experiment config (or the two built in below), every game of the config is run on a STAND-IN client:
the real `ModelClient` (call cache, in-flight de-duplication, the players' styles and caps in the request
keys) whose model is replaced by a synthetic reply, so nothing is called and nothing needs a server. What it
counts is what the live run would send: the coalitions the game evaluates (every coalition, or a budgeted
run's `budgeted_evaluate`, as the estimator asks), the protocol-level requests (cached or not), and the DISTINCT model calls.

Synthetic replies ("The answer is k", k in {0, 1, 2} from a hash of the request, or a letter A-D when the request
holds a multiple-choice question; token logprobs when asked) make members disagree
often, so protocols whose later calls depend on disagreement (logit fusion's scoring of candidates) are
counted near their upper bound; debate, refine, mixture-of-agents, rank & fuse and self-consistency make a
fixed number of calls whatever the answers. Generated tokens per call are the mean the same member generated
at the same cap in data/recordings/main.jsonl (else the mean at its largest recorded cap, at most the cap);
prompt tokens are the messages' characters / 4 (plus the few-shot prefix for base models).

Hours: generated tokens / the member's measured generation rate on llama-server (bench/results/
bench_throughput.txt, the largest-slots row per member; members without a row take qwen2.5-coder-0.5b's,
which over-states the time of the two smaller models), members one after another (2 cores: members that run
at once share them). Prompt processing is not measured there: it is added only with --prompt-tok-per-s.
--calls-per-min replaces all of this by a flat rate of distinct calls.

Usage: .venv/bin/python bench/bench_text_budget.py [--config PATH ...] (default: the study's two text configs)
       [--calls-per-min X] [--prompt-tok-per-s Y]
"""
import argparse, ast, hashlib, json, re, sys, tempfile, time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from compstrength.experiment import budgeted_evaluate, experiment_games, load_config
from compstrength.game import CoalitionGame
from compstrength.models import FEWSHOT_PREFIX, Completion, ModelClient

ROOT = Path(__file__).resolve().parents[1]

# The setups the live runs need: the text protocols at size on the four base models, and LOO + a budgeted estimate on the 8 players.
CONFIGS = [ROOT/"configs"/"study_text_mmlu.toml", ROOT/"configs"/"study_loo_mmlu.toml"]


def token_table(recording: Path) -> dict:
    "(member, cap) -> mean generated tokens, from a recording."
    acc = defaultdict(list)
    if recording.exists():
        for line in recording.read_text().splitlines():
            if not line.strip(): continue
            r = json.loads(line)
            name = r["request"]["model"].split("/")[-1].split("@")[0].split("+")[0]
            acc[(name, r["request"]["max_tokens"])].append(r["completion"]["completion_tokens"])
    return {k: float(np.mean(v)) for k, v in acc.items()}


def gen_rates(path: Path) -> dict:
    "member -> generated tokens/s on llama-server with logprobs (the row with the most slots, the last measured), from the dict rows and the tables."
    best = {}
    def keep(m, slots, rate):
        if m not in best or slots >= best[m][0]: best[m] = (slots, rate)
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("{'member'"):
                r = ast.literal_eval(line)
                if r["server"] == "llama-server" and r["logprobs"]: keep(r["member"], r["slots"], r["gen_tok_per_s"])
            f = line.split()
            if len(f) >= 12 and f[2] == "llama-server" and f[5] == "True" and f[3].isdigit():  # member rep server slots in_flight logprobs calls errors wall_s calls_per_s gen_tokens gen_tok_per_s
                keep(f[0], int(f[3]), float(f[11]))
    return {m: r for m, (_, r) in best.items()}


CHOICES = re.compile(r"^A\. .*\nB\. ", re.M)  # a multiple-choice question's options, as `item_text` writes them

class StandInClient(ModelClient):
    "The real client (cache, de-duplication, request keys) with a synthetic model: nothing is called."
    def __init__(self, specs, cache_dir, tokens: dict, mode: str = "live", recording=None):
        super().__init__(specs, cache_dir=cache_dir, mode=mode, recording=recording)
        self.tokens = tokens
        self.base = {s.name: s.cache_identity.split("/")[-1].split("@")[0] for s in specs}

    def check(self, names=None): pass  # no server to find

    async def _call_model(self, spec, f):
        h = int(hashlib.sha256(json.dumps(f, sort_keys=True).encode()).hexdigest()[:8], 16)
        base, cap = self.base[spec.name], f["max_tokens"]
        caps = sorted(c for (m, c) in self.tokens if m == base)
        gen = self.tokens.get((base, cap), min(cap, self.tokens[(base, caps[-1])]) if caps else cap)
        chars = sum(len(m["content"]) for m in f["messages"]) + (len(FEWSHOT_PREFIX) if spec.prompt_format == "fewshot" else 0)
        choice = any(CHOICES.search(m["content"]) for m in f["messages"])  # answer in the question's own format
        ans = "ABCD"[h % 4] if choice else str(h % 3)
        lp = None if f["logprobs"] is None else [dict(token=ans, logprob=-0.1 - (h >> 4) % 7 / 5,  # a few alternatives: a distribution to fuse
                                                      top=[dict(token=t, logprob=-0.1 - (h + k) % 4) for k, t in enumerate("ABCD")])]
        return Completion(f"The answer is {ans}.", spec.name, prompt_tokens=chars // 4, completion_tokens=int(round(gen)), logprobs=lp)


def count(cfg, tokens: dict) -> pd.DataFrame:
    "One row per (protocol, task): coalitions, requests, distinct model calls and tokens, alone and in config order."
    tmp = Path(tempfile.mkdtemp(prefix="bench-text-budget-"))
    shared = StandInClient(cfg.specs, tmp/"shared-calls", tokens)  # one client for the whole config: calls shared across settings
    _, games = experiment_games(cfg, "live", tmp/"shared", progress=False, client=shared)
    rows = []
    for k, g in enumerate(games):
        b = cfg.budget_of(g.protocol.name)
        alone = StandInClient(cfg.specs, tmp/f"alone{k}"/"calls", tokens)  # this setting alone: a fresh call cache
        ga = CoalitionGame(alone, g.protocol, g.task, cfg.players, seed=cfg.run.seed, empty_value=cfg.run.empty_value,
                           cache_dir=tmp/f"alone{k}"/"coalitions", progress=False)
        out = budgeted_evaluate(ga, b, cfg.run.seed) if b else ga.evaluate(); ga.individual()
        ua = alone.usage(); new = ua[~ua.cached]
        n0 = len(shared.log)
        budgeted_evaluate(g, b, cfg.run.seed) if b else g.evaluate(); g.individual()
        us = shared.usage().iloc[n0:]
        per_member = new.groupby("model").completion_tokens.sum()
        rows.append(dict(protocol=g.protocol.name, task=g.task.name, players=len(cfg.players), items=len(g.task),
                         budget=b or "exact", coalitions=out.coalition.nunique(), of=2 ** len(cfg.players) - 1,
                         requests=len(ua), model_calls=len(new), calls_in_order=int((~us.cached).sum()),
                         gen_tokens=int(new.completion_tokens.sum()), prompt_tokens=int(new.prompt_tokens.sum()),
                         _gen_by_member={m: int(v) for m, v in per_member.items()},
                         _prompt_by_member={m: int(v) for m, v in new.groupby("model").prompt_tokens.sum().items()}))
    return pd.DataFrame(rows)


def hours(df: pd.DataFrame, cfg, rates: dict, calls_per_min: float|None, prompt_rate: float|None) -> pd.Series:
    "Estimated hours per row."
    if calls_per_min: return df.model_calls / calls_per_min / 60
    base = {s.name: s.cache_identity.split("/")[-1].split("@")[0] for s in cfg.specs}
    fallback = rates.get("qwen2.5-coder-0.5b")
    def h(r):
        s = sum(t / rates.get(base[m], fallback) for m, t in r._gen_by_member.items())
        if prompt_rate: s += sum(r._prompt_by_member.values()) / prompt_rate
        return s / 3600
    return df.apply(h, axis=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", nargs="*", help="experiment configs (default: configs/study_text_mmlu.toml and configs/study_loo_mmlu.toml)")
    ap.add_argument("--calls-per-min", type=float, default=None, help="a flat rate of distinct calls instead of the measured token rates")
    ap.add_argument("--prompt-tok-per-s", type=float, default=None, help="add prompt processing at this rate (not measured by bench_throughput)")
    ap.add_argument("--throughput", default=str(ROOT/"bench/results/bench_throughput.txt"))
    ap.add_argument("--recording", default=str(ROOT/"data/recordings/main.jsonl"))
    a = ap.parse_args()
    tokens, rates = token_table(Path(a.recording)), gen_rates(Path(a.throughput))
    if not a.calls_per_min and not rates: sys.exit(f"no llama-server rates in {a.throughput}: pass --calls-per-min")
    paths = a.config or [str(p) for p in CONFIGS]
    print(f"# bench_text_budget.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"# no model is called: a stand-in client counts the distinct requests (see the docstring)")
    if a.calls_per_min: print(f"# hours = distinct model calls / {a.calls_per_min} calls per minute (given)")
    else:
        print(f"# hours = generated tokens / llama-server generation rate (tok/s, {Path(a.throughput).name}): "
              + ", ".join(f"{m} {r}" for m, r in sorted(rates.items()))
              + "; members without a measured rate take qwen2.5-coder-0.5b's; members one after another; "
              + (f"prompt tokens at {a.prompt_tok_per_s} tok/s (assumed)" if a.prompt_tok_per_s else "prompt processing NOT included"))
    print(f"# generated tokens per call: the member's mean at the same cap in {Path(a.recording).name}")
    for p in paths:
        cfg = load_config(p)
        t0 = time.perf_counter()
        df = count(cfg, tokens)
        df["hours"] = hours(df, cfg, rates, a.calls_per_min, a.prompt_tok_per_s).round(2)
        first = Path(p).read_text().splitlines()[0]
        print(f"\n## {Path(p).name}: {first.lstrip('# ')}")
        print(f"players ({len(cfg.players)}): {', '.join(cfg.players)}; server {cfg.pool.server}, slots {cfg.pool.slots}")
        print(df.drop(columns=[c for c in df.columns if c.startswith("_")]).to_string(index=False))
        print(f"total: {int(df.calls_in_order.sum())} distinct model calls for the whole config (own answers shared across protocols), "
              f"~{df.hours.sum():.1f} h if every setting ran alone (upper bound); counted in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
