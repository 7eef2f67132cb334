"""The library's house rules, checked on the exported modules and their notebooks: no import circles and no
import of a later notebook's module; no method attached by hand; no private name of another module used;
every public method documented; the task and training-service modules importable without the LLM client."""
import ast, json, re, subprocess, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]/"tools"))
from house import NBS, PKG, house  # noqa: E402

MODS = {p.stem: p for p in PKG.glob("*.py") if not p.stem.startswith("_")}


def test_no_circles_and_no_arrows_back_up():
    h = house()
    assert h["circles"] == [] and h["upward"] == [], (h["circles"], h["upward"])
    assert {r["module"] for r in h["modules"]} == set(MODS) and all(r["notebook"] != "?" for r in h["modules"])


def test_the_rule_sees_a_circle_and_an_arrow_back_up(tmp_path, monkeypatch):
    "The check can fail: two modules importing each other are a circle, and the earlier one's import runs back up."
    import house as H
    (tmp_path/"pkg").mkdir(); (tmp_path/"nbs").mkdir()
    (tmp_path/"pkg"/"a.py").write_text("from .b import x\n")
    (tmp_path/"pkg"/"b.py").write_text("def f():\n    from compstrength.a import y\n")
    for n, m in (("01_a", "a"), ("02_b", "b")):
        (tmp_path/"nbs"/f"{n}.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "source": [f"#| default_exp {m}"]}]}))
    monkeypatch.setattr(H, "PKG", tmp_path/"pkg"); monkeypatch.setattr(H, "NBS", tmp_path/"nbs")
    h = H.house()
    assert h["circles"] == [["a", "b"]] and h["upward"] == [("a", "b")]


def _attached(tree):
    "`Class.attr = f` statements (a method attached by hand) in a module."
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id[:1].isupper():
                        out.append(f"{e.value.id}.{e.attr}")
    return out


def test_no_method_attached_by_hand():
    found = {m: _attached(ast.parse(p.read_text())) for m, p in MODS.items()}
    assert not any(found.values()), {m: v for m, v in found.items() if v}
    assert _attached(ast.parse("class A: pass\ndef _f(self): pass\nA.f, A.g = _f, _f\n")) == ["A.f", "A.g"]


def _private_uses(tree):
    "Private names taken from other library modules: `from .m import _x`, or `obj._x` on anything but self/cls."
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("compstrength")):
            out += [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("_"):  # `_repr_mimebundle_`: a protocol
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")): out.append(node.attr)
    return out


def test_widgets_cli_and_experiment_use_public_names_only():
    found = {m: _private_uses(ast.parse(MODS[m].read_text())) for m in ("widgets", "cli", "experiment")}
    assert not any(found.values()), found
    assert _private_uses(ast.parse("from .local import _stop_pid\nasync def f(game): await game._run_one()\n")) == ["_stop_pid", "_run_one"]


def _documented(nb_texts: str) -> set:
    "Names with an API entry: `show_doc(X)` cells and exported `@patch` methods (`Class.method`)."
    out = set(re.findall(r"show_doc\(([\w.]+)", nb_texts))
    out |= {f"{c}.{f}" for f, c in re.findall(r"@patch[^\n]*\n(?:async )?def (\w+)\(self: *(\w+)", nb_texts)}
    return out


HOOKS = {"model_post_init"}  # pydantic calls it; not an API of ours


def test_every_public_method_has_an_api_entry():
    "Each public method of an exported class has a `show_doc` cell or is an exported `@patch`; an override is documented by its base."
    texts = "\n".join("\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code")
                      for p in sorted(NBS.glob("*.ipynb")))
    documented, missing, classes = _documented(texts), [], {}
    for m, p in MODS.items():
        public = set(re.findall(r"'(\w+)'", (re.search(r"__all__ = \[(.*?)\]", p.read_text(), re.S) or [None, ""])[1]))
        for cls in (n for n in ast.parse(p.read_text()).body if isinstance(n, ast.ClassDef)):
            meths = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
            classes[cls.name] = (m, cls.name in public, [b.id for b in cls.bases if isinstance(b, ast.Name)], meths)
    def inherited(c, f, seen=()):
        return any(b in classes and b not in seen and (f in classes[b][3] or inherited(b, f, seen + (c,))) for b in classes[c][2])
    for c, (m, public, _, meths) in classes.items():
        for f in sorted(meths):
            if public and not f.startswith("_") and f not in HOOKS and f"{c}.{f}" not in documented and not inherited(c, f): missing.append(f"{m}.{c}.{f}")
    assert not missing, missing


def test_tasks_and_the_training_service_import_without_the_llm_client():
    for mod in ("compstrength.tasks", "compstrength.service", "compstrength.files", "compstrength.contract"):
        code = f"import sys, {mod}; bad = [m for m in ('litellm', 'compstrength.models') if m in sys.modules]; assert not bad, bad"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 0, (mod, r.stderr[-500:])


def _export_cells(nb: Path):
    "(index, source) of the code cells of a notebook, and whether each is exported."
    cells = [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
    return [("".join(c["source"]), bool(re.search(r"^#\|\s*export\b", "".join(c["source"]), re.M))) for c in cells]


def _public_defs(src: str) -> list:
    tree = ast.parse("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("#|", "%", "!"))))
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith("_")]


def test_notebook_rhythm_one_definition_per_export_cell_then_an_example():
    "Each exported cell defines at most one public name, and the next code cell shows it (it is not another export)."
    crowded, alone = [], []
    for nb in sorted(NBS.glob("*.ipynb")):
        cells = _export_cells(nb)
        for k, (src, exported) in enumerate(cells):
            if not exported: continue
            defs = _public_defs(src)
            if len(defs) > 1: crowded.append(f"{nb.name}: {defs}")
            if defs and not defs[0].endswith("Error") and (k + 1 == len(cells) or cells[k + 1][1]):
                alone.append(f"{nb.name}: {defs[0]}")  # an error class is shown where it is raised
    assert not crowded, crowded
    assert not alone, alone
