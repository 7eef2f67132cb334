"""For each protocol of the default config: the largest |Δ| of any Shapley value and of v(N) between the pool as listed
and the pool reversed (fresh caches), replayed from data/recordings/main.jsonl. `python tools/order_check.py` on a checkout
(PYTHONPATH=<checkout> to read another one); a protocol whose reversed pool sends prompts the recording lacks says so."""
import sys, tempfile, tomllib, warnings
import numpy as np, pandas as pd
warnings.filterwarnings("ignore")
from compstrength.experiment import ExperimentConfig, experiment_games, load_config
from compstrength.attribution import attribute
from compstrength.files import project_root
from compstrength.models import ReplayMissError
raw = tomllib.loads((project_root()/"configs"/"default.toml").read_text())
def cfg(order):
    r = {**raw, "pool": {"embedded": order}, "run": {**raw["run"], "name": "default"}}
    return ExperimentConfig.model_validate(r)
fwd = load_config()
names = fwd.players
res = {}
for tag, c in (("listed", cfg(names)), ("reversed", cfg(names[::-1]))):
    _, games = experiment_games(c, "replay", tempfile.mkdtemp(), progress=False)
    for g in games:
        try:
            o = g.evaluate()
            v = g.values(o)
            res[(tag, g.protocol.name, g.task.name)] = (attribute(v, names), v[frozenset(names)])
        except ReplayMissError: res[(tag, g.protocol.name, g.task.name)] = None
rows = []
for (tag, p, t), x in res.items():
    if tag != "listed": continue
    y = res[("reversed", p, t)]
    if x is None or y is None: rows.append(dict(protocol=p, task=t, max_dshapley="replay miss: the reversed pool sends other prompts", d_vN=None)); continue
    rows.append(dict(protocol=p, task=t, max_dshapley=round(float((x[0] - y[0]).abs().max()), 4), d_vN=round(abs(x[1] - y[1]), 4)))
print(pd.DataFrame(rows).to_string(index=False))
