"""The main job and `compstrength attribute`, through the installed command."""
import subprocess, sys
from pathlib import Path

import pandas as pd

CLI = [str(Path(sys.executable).parent/"compstrength")]


def test_default_run_replays_without_a_model_call(default_run):
    # how long it takes is measured by bench/bench_replay.py (and quoted in the README), not asserted here: a loaded machine made a time bound flaky
    from compstrength.config import REUSE_PROTOCOLS, load_study, study_players
    from compstrength.study import study_progress
    r, res = default_run  # `compstrength run`: the study of configs/study.toml, replayed once for the session (conftest)
    assert r.returncode == 0, r.stderr[-2000:]
    assert " 0 model calls" in r.stdout
    files = {p.name for p in (res).iterdir()}
    assert {"outcomes.csv", "individual.csv", "values.csv", "pairwise.csv", "correlations.csv", "summary.csv", "protocols.csv",
            "coalitions.csv", "agreement.csv", "stopping.csv", "players.csv", "report.html", "games.csv.gz", "chance.csv"} <= files
    cfg = load_study(Path(__file__).resolve().parents[1]/"configs"/"study.toml")
    players = [p.name for p in study_players(cfg)]
    assert len(cfg.pools) >= 3 and all(len(v) >= 6 for v in cfg.pools.values())
    assert pd.read_csv(res/"players.csv").player.tolist() == players
    stopping, progress = pd.read_csv(res/"stopping.csv"), study_progress(cfg)
    assert stopping[["pool", "task", "items"]].values.tolist() == progress[["pool", "task", "items"]].values.tolist()  # every (pool, task), as recorded
    assert (stopping["items"] <= stopping.cap).all() and (stopping.state[stopping["items"] >= stopping.cap] == "stopped").all()
    recorded = stopping[(stopping["items"] > 0) & stopping.dev]
    assert len(recorded), "the study's recording holds no test batch"
    values = pd.read_csv(res/"values.csv")
    reuse = values[values.protocol.isin(REUSE_PROTOCOLS)]
    settings = cfg.reuse_settings()
    assert len(reuse) == sum(len(cfg.pools[t.pool]) * sum(s[0] == t.pool and s[2] == t.task for s in settings) for t in recorded.itertuples())
    for t in recorded.itertuples():                                                 # every player of the pool, on exactly its recorded items
        v = reuse[(reuse.pool == t.pool) & (reuse.task == t.task)]
        assert set(v.model) == set(cfg.pools[t.pool]) and set(v.n_items) == {t.items}
        assert (v.budget == 2 ** len(cfg.pools[t.pool])).all() and (v.method == "exact").all()
    calls = values[~values.protocol.isin(REUSE_PROTOCOLS)]                         # the protocols that call per coalition, as recorded
    for (pool, protocol, task), v in calls.groupby(["pool", "protocol", "task"]):
        assert set(v.model) == set(cfg.pools[pool]) and cfg.runs(protocol, task, pool)
    assert values.shapley.notna().all()
    assert ((values.shapley_ci_low <= values.shapley + 1e-12) & (values.shapley <= values.shapley_ci_high + 1e-12)).all()
    protocols = pd.read_csv(res/"protocols.csv").set_index(["pool", "protocol", "task"])
    for (pool, p, t), v in reuse.groupby(["pool", "protocol", "task"]):             # efficiency: Σ Shapley = v(N) − v(∅), v(∅) = 0
        assert abs(v.shapley.sum() - protocols.loc[(pool, p, t), "v_N"]) < 1e-9, (pool, p, t)
    coalitions = pd.read_csv(res/"coalitions.csv")
    assert (coalitions[coalitions.protocol.isin(REUSE_PROTOCOLS)].groupby(["pool", "protocol", "task"]).size()
            == reuse.groupby(["pool", "protocol", "task"]).model.size().map(lambda n: 2 ** n)).all()   # every coalition of every reuse game
    corr = pd.read_csv(res/"correlations.csv")
    main = corr[(corr.x == "individual") & (corr.y == "shapley") & (corr.verdict != "upper bound")]
    assert main.in_family.astype(bool).any() and main.loc[~main.in_family.astype(bool), "spearman_p_holm"].isna().all()  # Tarone's family, fixed in the config
    summary = pd.read_csv(res/"summary.csv")
    total = summary.set_index("family").loc["all"]
    assert total.translates + total.does_not_translate + total.inconclusive + total.dictator_games == total.settings == len(main)
    html = (res/"report.html").read_text()
    assert "vegaEmbed" in html and "cdn.jsdelivr.net" not in html and html.index('id="pools"') < html.index('id="finding"')


def test_attribute_from_csv(tmp_path):
    # the glove game: a holds a left glove, b and c right gloves; a pair is worth 1
    csv = tmp_path/"v.csv"
    csv.write_text("coalition,value\n,0\na,0\nb,0\nc,0\na+b,1\na+c,1\nb+c,0\na+b+c,1\n")
    r = subprocess.run(CLI + ["attribute", str(csv), "--method", "shapley", "loo"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: [float(x) for x in l.split()[1:]] for l in r.stdout.splitlines()[1:]}
    assert abs(rows["a"][0] - 2 / 3) < 1e-6 and abs(rows["b"][0] - 1 / 6) < 1e-6 and rows["b"][1] == 0.0


def test_attribute_refuses_bad_input_in_one_line(tmp_path):
    # through the installed command: one line, exit 2, no traceback (every other refusal is checked in-process in nbs/13_cli)
    r = subprocess.run(CLI + ["attribute", str(tmp_path/"nosuch.csv")], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"compstrength: error: {tmp_path/'nosuch.csv'}: no such file\n")


def test_bad_config_fails_before_any_call(tmp_path, isolated_home):
    cfg = tmp_path/"bad.toml"
    cfg.write_text('[pool]\nembedded = ["smollm2-135m", "gpt-9"]\n[[tasks]]\nname = "gsm8k"\n')
    r = subprocess.run(CLI + ["run", str(cfg), "--live", "--out", str(tmp_path/"o")], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "unknown embedded member" in r.stderr
    assert not (isolated_home/"pool"/"state.json").exists() and not (tmp_path/"o").exists()


def test_shared_defaults_come_from_their_one_home():
    # the attribution methods, the trainer's address and base model: the command line repeats none of them
    from compstrength.attribution import METHODS
    from compstrength.cli import cli_parser
    from compstrength.contract import DEFAULT_BASE, DEFAULT_HOST, DEFAULT_PORT
    p = cli_parser()
    sub = p._subparsers._group_actions[0].choices
    method = next(a for a in sub["attribute"]._actions if a.dest == "method")
    assert tuple(method.choices) == tuple(METHODS)
    t = p.parse_args(["serve-trainer"])
    assert (t.host, t.port, t.base) == (DEFAULT_HOST, DEFAULT_PORT, DEFAULT_BASE)


def test_cli_uses_only_public_names_of_other_modules():
    import ast, compstrength.cli as cli
    tree = ast.parse(Path(cli.__file__).read_text())
    private = [(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               for a in n.names if a.name.startswith("_")]
    assert not private, private


def test_extend_resumes_from_the_committed_recording_alone(tmp_path, isolated_home):
    # a long run spans sessions and machines: `--extend` grows a folder recording part by part, and a machine whose caches
    # are gone (here: the home's call and coalition caches deleted) answers what the folder holds from it, with no model call.
    # Two small members answering directly (24 tokens at most) keep the live part to seconds. Logit fusion makes calls of its
    # own in every coalition (scoring the candidates), beyond the members' own answers that majority vote reuses.
    import gzip, json, shutil
    rec = tmp_path/"rec"
    cfg = tmp_path/"small.toml"
    cfg.write_text('[pool]\nembedded = ["smollm2-135m", "qwen2.5-coder-0.5b"]\nstyles = ["direct"]\n[[tasks]]\nname = "arithmetic"\nsplit = "test"\n'
                   f'limit = 2\nseed = 0\n[run]\nprotocols = ["majority_vote", "logit_fusion"]\nn_boot = 50\nrecording = "{rec}"\n')
    def run(*flags):
        r = subprocess.run(CLI + ["run", str(cfg), *flags, "--out", str(tmp_path/"o")], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout
    first = run("--extend")
    assert "extend:" in first and " 0 model calls" not in first
    assert sorted(p.name for p in rec.iterdir()) == ["part-0001.jsonl.gz"]
    lines = gzip.decompress((rec/"part-0001.jsonl.gz").read_bytes()).decode().splitlines()
    keys = [json.loads(l)["key"] for l in lines]
    assert len(set(keys)) == len(keys)  # every call once
    assert len(keys) > 2 * 2  # the 2 members' own answers to the 2 items, and the fusion's scoring calls
    values = pd.read_csv(tmp_path/"o"/"values.csv")
    # coalition results in the cache whose calls the recording lacks (a run killed before it wrote its part, say): the next
    # --extend runs every coalition through its calls again, so the recording gets them back, with no model call
    (rec/"part-0001.jsonl.gz").unlink()
    healed = run("--extend")
    assert " 0 model calls" in healed and sorted(p.name for p in rec.iterdir()) == ["part-0001.jsonl.gz"]
    back = [json.loads(l) for l in gzip.decompress((rec/"part-0001.jsonl.gz").read_bytes()).decode().splitlines()]
    assert sorted((d["key"], d["completion"]["text"]) for d in back) == sorted((d["key"], d["completion"]["text"]) for d in map(json.loads, lines))
    for d in ("calls", "coalitions"): shutil.rmtree(isolated_home/d)  # a new machine: no cache, the recording alone
    again = run("--extend")
    assert " 0 model calls" in again and sorted(p.name for p in rec.iterdir()) == ["part-0001.jsonl.gz"]  # nothing new: no new part
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path/"o"/"values.csv"), values)
    assert " 0 model calls" in run()  # and the folder replays
    # a replay of a changed recording is computed afresh, never answered from the old recording's cached coalition results
    answers = lambda: set(pd.read_csv(tmp_path/"o"/"outcomes.csv").query("protocol == 'majority_vote'").answer.dropna()
                          .astype(str).str.removesuffix(".0"))
    assert "424242" not in answers()
    changed = [{**d, "completion": {**d["completion"], "text": "The answer is 424242."}} for d in back]
    (rec/"part-0001.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(d) + "\n" for d in changed).encode()))
    assert " 0 model calls" in run() and answers() == {"424242"}  # every coalition's vote is now the one answer recorded
    r = subprocess.run(CLI + ["run", str(cfg), "--record", "--extend"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr
