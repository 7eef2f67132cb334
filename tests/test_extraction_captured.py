"""Answer extraction on replies captured from the embedded pool's real models
(data/captured/replies*.jsonl, written by bench/bench_pool.py and a capture of MMLU answers).
`extraction_cases.jsonl` holds a reviewed selection: for each reply, the final answer a person
reads in it (boxed, "The answer is", a program's printed output, a bare option letter...)."""
import json
from pathlib import Path

import pytest

from compstrength.local import MEMBERS
from compstrength.tasks import extract_number, extract_choice

DATA = Path(__file__).resolve().parent.parent/"data"/"captured"
CASES = [json.loads(l) for l in (DATA/"extraction_cases.jsonl").read_text().splitlines() if l.strip()]


def test_cases_cover_every_member_and_style():
    assert {c["model"] for c in CASES} == set(MEMBERS)
    assert {c["kind"] for c in CASES} == {"numeric", "choice"}
    styles = {"\\boxed": 0, "answer is": 0, "```output": 0}
    for c in CASES:
        for s in styles: styles[s] += s in c["reply"].lower() or s in c["reply"]
    assert all(v >= 2 for v in styles.values()), styles


@pytest.mark.parametrize("case", CASES, ids=[f"{c['model']}:{c['item']}" for c in CASES])
def test_extraction_matches_reviewed_answer(case):
    if case["kind"] == "numeric":
        assert extract_number(case["reply"]) == float(case["expected"])
    else:
        assert extract_choice(case["reply"], case["choices"]) == case["expected"]


def test_every_captured_reply_extracts_without_error():
    for f in DATA.glob("replies*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            extract_number(r["reply"])
            extract_choice(r["reply"], ["a", "b", "c", "d"])
