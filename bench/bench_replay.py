"""How long the default `compstrength run` takes: the study of configs/study.toml replayed from its recordings (no model,
no server), end to end through the installed command, in a fresh COMPSTRENGTH_HOME (as on a first run).

Two measurements, side by side in one run:
  1. the real recordings, as committed (however many batches they hold today);
  2. the study at its full size on a SYNTHETIC recording: every player's answer to every dev item and to every test item
     up to the cap of every task, for every pool, written as `collect` writes batches, with seeded stand-in replies
     (right at a per-player rate, else one of a few shared wrong answers; token logprobs higher when right); and every
     call of the protocols that call per coalition, recorded by bench_text_budget's stand-in client (every call its live
     run would make, answered synthetically). The time of the analysis does not depend on where the answers came from,
     so this is the replay time the full study will have.

    .venv/bin/python bench/bench_replay.py [--repeats 2] [--skip-synthetic] [--skip-committed]
"""
import argparse, os, platform, random, re, subprocess, sys, tempfile, time
from pathlib import Path
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("compstrength")


def fresh_home(root: Path) -> Path:
    "A COMPSTRENGTH_HOME of its own (no call or coalition cache), sharing the downloaded models, data and builds."
    from compstrength.files import home_dir
    real, home = home_dir(), root/"home"
    home.mkdir(parents=True)
    for d in ("models", "wheels", "data", "build"):
        (real/d).mkdir(exist_ok=True); (home/d).symlink_to(real/d)
    return home


def recorded_answers(study: Path) -> int:
    "The answers the study's recordings hold (its batch files and the recordings of its protocols that call per coalition): distinct requests, each answered once."
    from compstrength.config import load_study
    from compstrength.models import load_recording
    from compstrength.study import study_folder
    cfg = load_study(study)
    have = load_recording(study_folder(cfg)) if study_folder(cfg).exists() else {}
    for rec in {pe.recording for pe in cfg.protocols.values() if pe.recording}:
        p = Path(rec) if Path(rec).is_absolute() else REPO/rec
        if p.exists(): have.update(load_recording(p))
    return len(have)


def timed_run(args: list, root: Path) -> dict:
    "`compstrength run ARGS` in a fresh home: wall seconds, the run's own evaluation seconds, its exit code."
    env = {**os.environ, "COMPSTRENGTH_HOME": str(fresh_home(root))}
    t0 = time.perf_counter()
    r = subprocess.run([str(EXE), "run", *args, "--out", str(root/"res")], cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode: sys.exit(f"compstrength run {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    m = re.search(r"(\d+) requests, (\d+) model calls, ([\d.]+) s;", r.stdout)
    items = re.findall(r"^\s*(\w+)\s+(\S+)\s+(True|False)\s+(\d+)\s+(\d+)\s", r.stdout, flags=re.M)
    return dict(wall=wall, evaluation=float(m.group(3)), requests=int(m.group(1)), model_calls=int(m.group(2)),
                answers=recorded_answers(Path(args[0]) if args else REPO/"configs"/"study.toml"),
                items=", ".join(f"{p}/{t} {n}" for p, t, _, n, _ in items))


def synthetic_study(root: Path) -> Path:
    "A copy of configs/study.toml whose recordings hold synthetic answers for every request of the full study: every pool's batches up to each task's cap, and every call of its protocols that call per coalition."
    from bench_text_budget import StandInClient, token_table
    from compstrength.config import load_study, study_players
    from compstrength.experiment import call_groups, experiment_config, item_order, run_experiment
    from compstrength.models import Completion, ModelClient
    from compstrength.protocols import dev_task
    from compstrength.study import batch_requests, collect
    from compstrength.tasks import load_task
    root.mkdir(parents=True, exist_ok=True); path = root/"study.toml"
    text = (REPO/"configs"/"study.toml").read_text()
    text = re.sub(r'(?m)^recording\s*=.*$', f'recording = "{root/"recording"}"', text, count=1)  # the study's batches
    text = re.sub(r'(?m)^recording\s*=\s*"data/recordings/text/[^"]*"', f'recording = "{root/"text"}"', text)  # the coalition games' calls
    path.write_text(text)
    cfg = load_study(path)
    players = study_players(cfg)
    client = ModelClient(players, cache_dir=str(root/"fill"))
    skill = {p.name: 0.15 + 0.6 * k / max(1, len(players) - 1) for k, p in enumerate(players)}
    n = 0
    for t in cfg.tasks:
        task = load_task(t.name, split="test")
        for its in (dev_task(task, cfg.n_dev, cfg.evaluation.seed).items, item_order(task, cfg.evaluation.seed)[:cfg.cap(t.name)]):
            for p, it, r, k in batch_requests(task, its, players, cfg.evaluation.max_tokens):
                rng = random.Random(f"{p.name}|{t.name}|{it.id}")
                right = rng.random() < skill[p.name]
                wrong = rng.choice([c for c in "ABCD" if c != it.answer]) if task.kind == "choice" else rng.choice(["1", "2", "7", "12"])
                reply = f"The answer is {it.answer if right else wrong}."
                lp = [dict(token=".", logprob=-0.05 - rng.random() * (0.6 if right else 2.0))]
                client.cache.set(k, Completion(reply, p.name, 20, 6, logprobs=lp).to_cache()); n += 1
    collect(cfg, client, log=None)
    calls = 0
    for pool, protos, rec, part in call_groups(cfg):
        ec = experiment_config(cfg, pool, protos, rec, part)
        sc = StandInClient(ec.specs, root/"text-calls", token_table(REPO/"data"/"recordings"/"main.jsonl"), mode="extend", recording=Path(rec))
        calls += run_experiment(ec, mode="extend", progress=False, client=sc)["model_calls"]
        sc.flush()
    print(f"# synthetic recordings: {n} own answers ({len(players)} players x {len(cfg.tasks)} tasks x ({cfg.n_dev} dev + the cap of test items)), "
          f"{calls} calls of the protocols that call per coalition ({len(call_groups(cfg))} (pool, task) experiments)")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-committed", action="store_true")
    a = ap.parse_args()
    print(f"# .venv/bin/python bench/bench_replay.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for k in range(0 if a.skip_committed else a.repeats):
            rows.append(dict(recording="committed", run=k + 1, **timed_run([], tmp/f"real{k}")))
        if not a.skip_synthetic:
            study = synthetic_study(tmp/"synthetic")
            for k in range(a.repeats):
                rows.append(dict(recording="synthetic, full size", run=k + 1, **timed_run([str(study)], tmp/f"syn{k}")))
    print("\n# wall: the whole command (Python start, imports, analysis, writing the CSVs and report.html); evaluation: the run's "
          "own analysis time as it prints it; answers: the distinct answers the recordings hold (the study's batch files and the "
          "parts of its coalition games' recordings); requests: the calls the analysis asked for, each answered from those (one answer "
          "serves every protocol and coalition that reads it); items: test items per pool and task analysed")
    print(f"{'recording':>22} {'run':>3} {'wall s':>7} {'evaluation s':>12} {'answers':>8} {'requests':>8} {'model calls':>11}  items")
    for r in rows:
        print(f"{r['recording']:>22} {r['run']:>3} {r['wall']:7.1f} {r['evaluation']:12.1f} {r['answers']:8d} {r['requests']:8d} {r['model_calls']:11d}  {r['items']}")


if __name__ == "__main__":
    main()
