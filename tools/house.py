"""The library's house, drawn from its imports: rooms (modules), floors, circles and arrows that run back up.

    python tools/house.py [--json]

A module's notebook sets its place: `nbs/04a_proto_api.ipynb` comes after `nbs/04_proto_base.ipynb`, so
`proto_api` may import `proto_base` and not the other way round. An arrow that runs back up is an import
of a module whose notebook sorts after the importer's; a circle is a set of modules that import each other
(directly or not). Every import counts, at the top of a module or inside a function."""
import ast, collections, json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG, NBS = ROOT/"compstrength", ROOT/"nbs"

def notebooks() -> dict:
    "module -> its notebook's file name (from `#| default_exp`)."
    out = {}
    for nb in sorted(NBS.glob("*.ipynb")):
        for c in json.loads(nb.read_text())["cells"]:
            m = re.search(r"^#\|\s*default_exp\s+(\S+)", "".join(c["source"]), re.M)
            if c["cell_type"] == "code" and m: out[m.group(1)] = nb.name; break
    return out

def imports(path: Path, mods: set) -> set:
    "The library modules a module imports."
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom):
            if node.level: names = [node.module] if node.module else [a.name for a in node.names]
            elif node.module and node.module.startswith("compstrength."): names = [node.module.split(".", 1)[1]]
            elif node.module == "compstrength": names = [a.name for a in node.names]
        elif isinstance(node, ast.Import): names = [a.name.split(".", 1)[1] for a in node.names if a.name.startswith("compstrength.")]
        out |= {n.split(".")[0] for n in names if n and n.split(".")[0] in mods}
    return out - {path.stem}

def house() -> dict:
    "Rooms, floors, circles, upward arrows and lines per module."
    mods = {p.stem: p for p in PKG.glob("*.py") if not p.stem.startswith("_")}
    edges = {m: imports(p, set(mods)) for m, p in mods.items()}
    nbs = notebooks()
    # circles: strongly connected components with more than one module (Tarjan)
    idx, low, st, on, sccs = {}, {}, [], set(), []
    def visit(v):
        idx[v] = low[v] = len(idx); st.append(v); on.add(v)
        for w in edges[v]:
            if w not in idx: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            sccs.append(sorted(comp))
    sys.setrecursionlimit(10_000)
    for v in sorted(mods):
        if v not in idx: visit(v)
    comp = {v: i for i, c in enumerate(sccs) for v in c}
    floor: dict = {}
    def fl(i):
        if i not in floor:
            floor[i] = 0
            floor[i] = 1 + max((fl(comp[w]) for v in sccs[i] for w in edges[v] if comp[w] != i), default=-1)
        return floor[i]
    up = sorted((m, t) for m in mods for t in edges[m] if m in nbs and t in nbs and nbs[t] > nbs[m])
    rows = [dict(module=m, notebook=nbs.get(m, "?"), floor=fl(comp[m]), lines=len(mods[m].read_text().splitlines()),
                 imports=sorted(edges[m])) for m in mods]
    rows.sort(key=lambda r: (r["floor"], r["notebook"]))
    return dict(rooms=len(mods), floors=1 + max(r["floor"] for r in rows), circles=[c for c in sccs if len(c) > 1],
                upward=up, modules=rows, lines=sum(r["lines"] for r in rows))

if __name__ == "__main__":
    h = house()
    if "--json" in sys.argv: print(json.dumps(h, indent=1)); sys.exit()
    print(f"{h['rooms']} rooms on {h['floors']} floors, {h['lines']} lines; circles: {len(h['circles'])} {h['circles']}; "
          f"arrows back up: {len(h['upward'])} {h['upward']}")
    for r in h["modules"]:
        print(f"  floor {r['floor']}  {r['module']:13s} {r['lines']:5d} lines  {r['notebook']:24s} -> {', '.join(r['imports'])}")
