"""Every recorded replay's result tables, written as CSVs into one folder, so two checkouts can be diffed.

    python tools/replay_tables.py OUT                  # on each checkout
    python tools/replay_tables.py --compare A B        # every table of A against B's

- `main/`: the main job, `compstrength run` replaying data/recordings/main.jsonl (every results/*.csv);
- `protocols.csv`: every protocol on the 2-member coalition and alone, 3 arithmetic items, replaying
  data/recordings/protocols.jsonl (final reply, answer, score, calls per item).
No model is called: a replay that misses a request fails."""
import os, subprocess, sys
from pathlib import Path

import tempfile

if sys.argv[1:2] == ["--compare"]:
    # byte-identical files pass; a CSV that differs must equal the other on every column the other has
    # (columns added since are named); anything else fails
    import pandas as pd
    a, b = Path(sys.argv[2]), Path(sys.argv[3])
    fa, fb = sorted(p.relative_to(a) for p in a.rglob("*.csv")), sorted(p.relative_to(b) for p in b.rglob("*.csv"))
    if fa != fb: sys.exit(f"different tables: {sorted(set(fa) ^ set(fb))}")
    for f in fa:
        if (a/f).read_bytes() == (b/f).read_bytes(): print(f"{f}: identical"); continue
        x, y = pd.read_csv(a/f), pd.read_csv(b/f)
        missing = [c for c in x.columns if c not in y.columns]
        if missing: sys.exit(f"{f}: columns {missing} are gone")
        pd.testing.assert_frame_equal(x, y[list(x.columns)])
        print(f"{f}: identical on all {len(x.columns)} columns of {a.name}, {len(y)} rows; added: {[c for c in y.columns if c not in x.columns]}")
    sys.exit()

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["COMPSTRENGTH_HOME"] = tempfile.mkdtemp(prefix="replay-home-")  # empty caches: every value is recomputed from the recordings
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
root = Path(__file__).resolve().parents[1]
subprocess.run([str(root/".venv"/"bin"/"compstrength"), "run", "--out", str(out/"main")], check=True, cwd=root,
               stdout=subprocess.DEVNULL)
(out/"main"/"report.html").unlink(missing_ok=True)  # timestamps and chart ids; its tables are the CSVs

import pandas as pd
from compstrength.local import pool_specs
from compstrength.models import ModelClient, run_sync
from compstrength.protocols import PROTOCOLS, available_protocols, get_protocol
from compstrength.tasks import load_task, score

rec = root/"data"/"recordings"/"protocols.jsonl"
client = ModelClient(pool_specs(), cache_dir=tempfile.mkdtemp(), recording=rec, mode="replay")
task = load_task("arithmetic", split="test", limit=10, seed=0)
rows = []
for name in available_protocols():
    p = get_protocol(name, **({"n_dev": 4} if PROTOCOLS[name].uses_dev else {}))
    for co, n in ((("smollm2-135m", "qwen2.5-coder-0.5b"), 3), (("qwen2.5-coder-0.5b",), 1)):
        for it in task.items[:n]:
            o = run_sync(p.run(client, task, it, co))
            rows.append(dict(protocol=name, coalition="+".join(co), item=it.id, answer=o.answer,
                             score=score(task, it, o.final).score, calls=o.calls, final=o.final))
pd.DataFrame(rows).to_csv(out/"protocols.csv", index=False)
print(f"{out}: main/ ({', '.join(sorted(p.name for p in (out/'main').iterdir()))}) and protocols.csv ({len(rows)} rows)")
