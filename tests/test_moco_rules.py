"""Our scores on MoCo's datasets agree with MoCo's own rules.

MoCo's scoring functions are read out of `model_collaboration/data/eval.py` in the pinned `modelco==1.1.2` sdist (the
module itself cannot be imported: it imports torch, transformers and the OpenAI client at the top). Only its pure
string functions are compiled from the file's syntax tree; nothing else of MoCo runs. They score the replies that the
embedded pool's four real models gave to MoCo's prompts (`data/captured/replies_moco.jsonl`, written by
`bench/bench_moco_tasks.py`), beside `compstrength.tasks.score`, and every score must agree. Coding replies: the
program MoCo would run must be the program our sandbox runs (MoCo runs it unsandboxed; we never do).
"""
import ast, json, math, re, string
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from compstrength.files import Artifact, fetch_artifact
from compstrength.local import MEMBERS
from compstrength.moco_rules import BOX_INSTRUCTION, code_program
from compstrength.tasks import MOCO_PACKAGE, load_task, prompt_messages, score

CAPTURED = Path(__file__).resolve().parent.parent/"data"/"captured"/"replies_moco.jsonl"
EVAL_PY = Artifact("moco-eval.py", ((*MOCO_PACKAGE, "modelco-1.1.2/model_collaboration/data/eval.py"),),
                   "4dc92a54aba2f5cd493054db6581536ce72cfd23843967878a96dc1527f671f9", 54_729, dist="sdist")
PURE = ["normalize_answer", "_extract_balanced_braces", "_find_boxed_matches", "extract_answer_text", "calculate_f1_score",
        "_try_parse_number", "_try_parse_list", "_try_parse_bool", "_is_integer_like", "_numbers_match",
        "calculate_exact_match", "format_mcq_question", "parse_model_response_mcq", "extract_code_block", "extract_function_name"]
REQUIRED = ["agieval", "arc_challenge", "bbh", "gpqa_diamond", "gsm8k", "math", "medqa", "mmlu_redux", "theoremqa",
            "truthfulqa", "humaneval", "mbpp"]


@lru_cache(None)
def moco_source() -> str:
    return fetch_artifact(EVAL_PY).read_text(encoding="utf-8")


@lru_cache(None)
def moco() -> dict:
    "MoCo's pure scoring functions, compiled from eval.py's syntax tree (imports and model code left out)."
    tree = ast.parse(moco_source())
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in PURE]
    assert sorted(d.name for d in defs) == sorted(PURE), "eval.py no longer defines the functions we port"
    ns = dict(re=re, ast=ast, math=math, string=string, Counter=Counter)
    exec(compile(ast.Module(body=defs, type_ignores=[]), "modelco/eval.py", "exec"), ns)
    return ns


def moco_score(task, item, reply: str):
    "A reply's score as MoCo's get_scores computes it, for the task types we take; coding: the program it would run."
    m = moco()
    if task.kind == "choice":
        letter, _ = m["parse_model_response_mcq"](reply, list(item.choices))
        return 0.0 if letter is None else float(item.answer == letter)
    if task.kind == "text":
        got = m["extract_answer_text"](reply)
        if item.meta.get("metric") == "f1":
            if task.name == "moco:popqa":
                s = item.answer.replace("[", "").replace("]", "").replace("\"", "").replace("'", "")
                return max(m["calculate_f1_score"](got, o.strip()) for o in s.split(","))
            return m["calculate_f1_score"](got, item.answer)
        return m["calculate_exact_match"](got, item.answer, answer_type=item.meta.get("answer_type"))
    code = m["extract_code_block"](reply, item.meta.get("language", "python"))
    if not item.answer: return None
    name = m["extract_function_name"](code)
    return None if name is None else f"{code}\n\ncandidate = {name}\n\n{item.answer}\n\ncheck(candidate)\n"


@lru_cache(None)
def task(name):
    t = load_task(name)
    return t, {i.id: i for i in t}


def captured() -> list[dict]:
    return [json.loads(l) for l in CAPTURED.read_text().splitlines() if l.strip()]


def test_the_source_is_the_pinned_one_and_still_says_what_we_port():
    src = moco_source()
    assert 'combined_code = f"{code}\\n\\ncandidate = {func_name}\\n\\n{test_code}\\n\\ncheck(candidate)\\n"' in src
    assert BOX_INSTRUCTION.replace("{ANSWER}", "{{ANSWER}}").replace("\\", "\\\\") in src  # the exact-match prompt's instruction


def test_capture_covers_every_required_dataset_and_member():
    rows = captured()
    assert {r["task"] for r in rows} >= {f"moco:{d}" for d in REQUIRED}
    assert {r["model"] for r in rows} == set(MEMBERS)


def test_prompts_agree_with_moco():
    m = moco()
    for name in sorted({r["task"] for r in captured()}):
        t, _ = task(name)
        for item in t.split("test").items[:20]:
            ours = prompt_messages(t, item)[0]["content"]
            if t.kind == "choice": assert ours == m["format_mcq_question"](item.question, list(item.choices))
            elif t.kind == "text": assert ours == f"{item.question.rstrip()}\n\n{BOX_INSTRUCTION}"
            else: assert ours == item.question


def test_scores_agree_on_replies_from_the_embedded_pool():
    rows, kinds, disagree, right = captured(), Counter(), [], 0
    for r in rows:
        t, items = task(r["task"])
        item = items[r["item"]]
        theirs = moco_score(t, item, r["reply"])
        if t.kind == "code":
            ours = code_program(__import__("compstrength.moco_rules", fromlist=["x"]).extract_code_block(r["reply"]), item.answer)
            if ours != theirs: disagree.append((r["model"], r["item"], "program"))
            kinds["code"] += 1
            continue
        ours = score(t, item, r["reply"]).score
        if not math.isclose(ours, theirs): disagree.append((r["model"], r["item"], ours, theirs))
        kinds[t.kind] += 1; right += ours == 1
    assert not disagree, disagree[:10]
    assert kinds["choice"] >= 40 and kinds["text"] >= 40 and kinds["code"] >= 20, kinds
    assert 0 < right < kinds["choice"] + kinds["text"]  # right and wrong replies both compared


EDGE = {  # replies built to reach each branch of MoCo's readers
    "choice": ["b", "B)", "I think (A) is tempting, but the final answer: C", "Option A. Or maybe B.", "etc. Cats", "",
               "The answer is (D).", "answer: e", "(a) and (b)", "The answer is none of them"],
    "text": ["\\boxed{\\frac{1}{2}}", "\\box 42", "Final Answer: 17\nmore", "The answer is: -3.\n", "answer = 1,000", "",
             "so the answer is True", "[1, 2, 3]", "x + 1", "3.54e-07", "50%", "\\boxed{", "The answer is 12.5"],
}


@pytest.mark.parametrize("name", ["moco:mmlu_redux", "moco:truthfulqa", "moco:bbh", "moco:theoremqa", "moco:math", "moco:gsm8k"])
def test_scores_agree_on_edge_cases(name):
    t, _ = task(name)
    replies = EDGE[t.kind]
    got = []
    for item in t.split("test").items[:25]:
        extra = [f"The answer is {item.answer}", f"\\box{{{item.answer}}}", item.answer] + ([item.choices[0]] if item.choices else [])
        for reply in replies + extra:
            got.append(score(t, item, reply).score)
            assert math.isclose(got[-1], moco_score(t, item, reply)), (item.id, reply)
    assert len(got) >= 25 * len(replies) and 0 < sum(got) < len(got)  # both right and wrong replies were compared
