"""The main job and `compstrength attribute`, through the installed command."""
import subprocess, sys
from pathlib import Path

import pandas as pd

CLI = [str(Path(sys.executable).parent/"compstrength")]


def test_default_run_replays_without_a_model_call(default_run):
    # how long it takes is measured by bench/ (and quoted in the README), not asserted here: a loaded machine made a 60 s bound flaky
    r, res = default_run  # `compstrength run`, replayed once for the session (conftest)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "0 model calls" in r.stdout
    files = {p.name for p in (res).iterdir()}
    assert {"outcomes.csv", "individual.csv", "values.csv", "pairwise.csv", "correlations.csv", "summary.csv", "protocols.csv",
            "report.html"} <= files
    values = pd.read_csv(res/"values.csv")
    settings = 10 * 2 + 2 * 1                                                # (protocol, task) pairs: debate, refine on arithmetic only
    assert len(values) == 4 * settings and values.shapley.notna().all()      # 4 members each
    assert ((values.shapley_ci_low <= values.shapley + 1e-12) & (values.shapley <= values.shapley_ci_high + 1e-12)).all()
    outcomes = pd.read_csv(res/"outcomes.csv")
    assert len(outcomes) == 15 * (5 * 20 + 2 * 6 + 3 * 4 + 2 * 2) and outcomes.error.isna().all()   # coalitions × items
    protocols = pd.read_csv(res/"protocols.csv")
    real = protocols[~protocols.upper_bound]
    assert real.protocol.nunique() >= 8 and real.family.nunique() >= 3       # the floor: 8 protocols, 3 families
    assert {"v_N", "best_single", "calls_per_item", "qwen2.5-coder-1.5b:shapley", "qwen2.5-coder-1.5b:loo"} <= set(protocols.columns)
    summary = pd.read_csv(res/"summary.csv")
    fam = summary[summary.family != "all"]
    assert set(fam.family) == {"api", "text", "logit"} and fam.settings.sum() == settings - 2   # oracle left out
    total = summary.set_index("family").loc["all"]
    assert total.settings == settings - 2 and total.translates + total.does_not_translate + total.inconclusive == total.settings
    html = (res/"report.html").read_text()
    assert "vegaEmbed" in html and "cdn.jsdelivr.net" not in html


def test_attribute_from_csv(tmp_path):
    # the glove game: a holds a left glove, b and c right gloves; a pair is worth 1
    csv = tmp_path/"v.csv"
    csv.write_text("coalition,value\n,0\na,0\nb,0\nc,0\na+b,1\na+c,1\nb+c,0\na+b+c,1\n")
    r = subprocess.run(CLI + ["attribute", str(csv), "--method", "shapley", "loo"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: [float(x) for x in l.split()[1:]] for l in r.stdout.splitlines()[1:]}
    assert abs(rows["a"][0] - 2 / 3) < 1e-6 and abs(rows["b"][0] - 1 / 6) < 1e-6 and rows["b"][1] == 0.0


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
