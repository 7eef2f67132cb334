"""Every recorded replay's result tables, written as CSVs into one folder, so two checkouts can be diffed.

    python tools/replay_tables.py OUT      # then: diff -r OUT_before OUT_after

- `main/`: the main job, `compstrength run` replaying data/recordings/main.jsonl (every results/*.csv);
- `protocols.csv`: every protocol on the 2-member coalition and alone, 3 arithmetic items, replaying
  data/recordings/protocols.jsonl (final reply, answer, score, calls per item).
No model is called: a replay that misses a request fails."""
import os, subprocess, sys
from pathlib import Path

import tempfile
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
