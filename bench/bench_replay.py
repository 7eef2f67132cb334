"""How long the default `compstrength run` takes: the study of configs/study.toml replayed from its recording (no model,
no server), end to end through the installed command, in a fresh COMPSTRENGTH_HOME (as on a first run).

Two measurements, side by side in one run:
  1. the real recording, as committed (however many batches it holds today);
  2. the study at its full size on a SYNTHETIC recording: every player's answer to every dev item and to every test item
     up to the cap (`max_items`) of every task, written as `collect` writes batches, with seeded stand-in replies
     (right at a per-player rate, else one of a few shared wrong answers; token logprobs higher when right). The time of
     the analysis does not depend on where the answers came from, so this is the replay time the full study will have.
     Its `text` experiment is the one at size (--text, default configs/study_text_mmlu.toml), recorded the same way by
     bench_text_budget's stand-in client (every call its live run would make, answered synthetically).

    .venv/bin/python bench/bench_replay.py [--repeats 2] [--skip-synthetic] [--skip-committed] [--text CONFIG]
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
    "The answers the study's recordings hold (its batch files and its text experiment's parts): distinct requests, each answered once."
    from compstrength.models import load_recording
    from compstrength.study import load_study, study_folder
    cfg = load_study(study)
    n = len(load_recording(study_folder(cfg)))
    tc = cfg.text_config()
    if tc is not None and tc.run.recording:
        rec = Path(tc.run.recording)
        n += len(load_recording(rec if rec.is_absolute() else REPO/rec))
    return n


def timed_run(args: list, root: Path) -> dict:
    "`compstrength run ARGS` in a fresh home: wall seconds, the run's own evaluation seconds, its exit code."
    env = {**os.environ, "COMPSTRENGTH_HOME": str(fresh_home(root))}
    t0 = time.perf_counter()
    r = subprocess.run([str(EXE), "run", *args, "--out", str(root/"res")], cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode: sys.exit(f"compstrength run {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    m = re.search(r"(\d+) requests, (\d+) model calls, ([\d.]+) s;", r.stdout)
    items = re.findall(r"^\s*(\w+)\s+(True|False)\s+(\d+)\s+(\d+)\s", r.stdout, flags=re.M)
    return dict(wall=wall, evaluation=float(m.group(3)), requests=int(m.group(1)), model_calls=int(m.group(2)),
                answers=recorded_answers(Path(args[0]) if args else REPO/"configs"/"study.toml"),
                items=", ".join(f"{t} {n}" for t, _, n, _ in items))


def synthetic_text(root: Path, text: Path) -> Path:
    "A copy of the experiment config `text` whose recording holds a synthetic answer to every call of its live run."
    from bench_text_budget import StandInClient, token_table
    from compstrength.experiment import load_config, run_experiment
    rec = root/"text.jsonl"
    path = root/"text.toml"
    path.write_text(re.sub(r"(?m)^recording\s*=.*$", f'recording = "{rec}"', text.read_text()))
    cfg = load_config(path)
    client = StandInClient(cfg.specs, root/"text-calls", token_table(REPO/"data"/"recordings"/"main.jsonl"), mode="record", recording=rec)
    res = run_experiment(cfg, mode="record", progress=False, client=client)
    print(f"# synthetic text experiment {text.relative_to(REPO) if text.is_relative_to(REPO) else text}: {res['model_calls']} calls recorded, "
          f"{', '.join(cfg.run.protocols)} on {len(cfg.players)} players")
    return path


def synthetic_study(root: Path, text: Path|None = None) -> Path:
    "A copy of configs/study.toml whose recording holds synthetic answers for every request up to the cap (and its `text` experiment's, at `text`'s size)."
    from compstrength.models import Completion, ModelClient
    from compstrength.protocols import dev_task
    from compstrength.study import batch_requests, collect, item_order, load_study, study_players
    from compstrength.tasks import load_task
    cfg = load_study(REPO/"configs"/"study.toml")
    root.mkdir(parents=True, exist_ok=True); path = root/"study.toml"
    text = f'text = "{synthetic_text(root, text)}"\n' if text else f'text = "{cfg.text}"\n' if cfg.text else ""
    body = [l for l in (REPO/"configs"/"study.toml").read_text().splitlines() if not l.startswith(("recording", "text"))]
    path.write_text("\n".join(body) + f'\nrecording = "{root/"recording"}"\n' + text)
    cfg = load_study(path)
    players = study_players(cfg)
    client = ModelClient(players, cache_dir=str(root/"fill"))
    skill = {p.name: 0.15 + 0.6 * k / max(1, len(players) - 1) for k, p in enumerate(players)}
    n = 0
    for t in cfg.tasks:
        task = load_task(t, split="test")
        for its in (dev_task(task, cfg.n_dev, cfg.seed).items, item_order(task, cfg.seed)[:cfg.max_items]):
            for p, it, r, k in batch_requests(task, its, players, cfg.max_tokens):
                rng = random.Random(f"{p.name}|{t}|{it.id}")
                right = rng.random() < skill[p.name]
                wrong = rng.choice([c for c in "ABCD" if c != it.answer]) if task.kind == "choice" else rng.choice(["1", "2", "7", "12"])
                reply = f"The answer is {it.answer if right else wrong}."
                lp = [dict(token=".", logprob=-0.05 - rng.random() * (0.6 if right else 2.0))]
                client.cache.set(k, Completion(reply, p.name, 20, 6, logprobs=lp).to_cache()); n += 1
    collect(cfg, client, log=None)
    print(f"# synthetic recording: {n} answers ({len(players)} players x {len(cfg.tasks)} tasks x ({cfg.n_dev} dev + {cfg.max_items} test items))")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-committed", action="store_true")
    ap.add_argument("--text", default=str(REPO/"configs"/"study_text_mmlu.toml"),
                    help="the synthetic study's text experiment, recorded at its size (default: configs/study_text_mmlu.toml; '' for the study's own)")
    a = ap.parse_args()
    print(f"# .venv/bin/python bench/bench_replay.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for k in range(0 if a.skip_committed else a.repeats):
            rows.append(dict(recording="committed", run=k + 1, **timed_run([], tmp/f"real{k}")))
        if not a.skip_synthetic:
            study = synthetic_study(tmp/"synthetic", Path(a.text).resolve() if a.text else None)
            for k in range(a.repeats):
                rows.append(dict(recording="synthetic, full size", run=k + 1, **timed_run([str(study)], tmp/f"syn{k}")))
    print("\n# wall: the whole command (Python start, imports, analysis, writing the CSVs and report.html); evaluation: the run's "
          "own analysis time as it prints it; answers: the distinct answers the recordings hold (the study's batch files and its text "
          "experiment's parts); requests: the calls the analysis asked for, each answered from those (one answer serves every "
          "protocol and coalition that reads it); items: test items per task analysed")
    print(f"{'recording':>22} {'run':>3} {'wall s':>7} {'evaluation s':>12} {'answers':>8} {'requests':>8} {'model calls':>11}  items")
    for r in rows:
        print(f"{r['recording']:>22} {r['run']:>3} {r['wall']:7.1f} {r['evaluation']:12.1f} {r['answers']:8d} {r['requests']:8d} {r['model_calls']:11d}  {r['items']}")


if __name__ == "__main__":
    main()
