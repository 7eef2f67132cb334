"""Write README.md from nbs/index.ipynb without Quarto (nbdev-readme needs Quarto, which cannot be
installed here). Markdown cells are copied; code cells become ```python blocks; cells marked
`#| hide` are skipped, as are nbdev directives. CI fails if this changes README.md."""
import json, sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
nb = json.loads((root/"nbs"/"index.ipynb").read_text())
out = []
for c in nb["cells"]:
    src = "".join(c["source"]).strip("\n")
    if not src: continue
    if c["cell_type"] == "markdown": out.append(src)
    elif c["cell_type"] == "code":
        lines = src.splitlines()
        if any(l.strip() in ("#| hide", "#|hide") for l in lines): continue
        code = "\n".join(l for l in lines if not l.startswith("#|")).strip("\n")
        if code: out.append(f"```python\n{code}\n```")
text = "<!-- generated from nbs/index.ipynb by tools/sync_readme.py; edit the notebook, not this file -->\n\n" + "\n\n".join(out) + "\n"
readme = root/"README.md"
if not readme.exists() or readme.read_text() != text:
    readme.write_text(text)
    print("README.md updated from nbs/index.ipynb", file=sys.stderr)
