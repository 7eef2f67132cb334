"""Every collaboration protocol on a 2-member coalition of the embedded pool, 3 arithmetic items:
live (slow, `pool`), and replayed from the recording that live run made (fast). Also singletons,
the empty coalition, too few members and budget enforcement, each before or without a model call."""
import os
from pathlib import Path

import pytest

from compstrength.local import pool_specs
from compstrength.files import data_dir
from compstrength.models import ModelClient, run_sync
from compstrength.protocols import (PROTOCOLS, BudgetExceeded, FixedClient, MajorityVote, ProtocolError, expected_score,
                                    available_protocols, extract_answer, get_protocol)
from compstrength.tasks import load_task, score

CO = ("smollm2-135m", "qwen2.5-coder-0.5b")  # the two fastest members
SOLO = "qwen2.5-coder-0.5b"
REC = data_dir()/"recordings"/"protocols.jsonl"
NAMES = available_protocols()


def _task():
    return load_task("arithmetic", split="test", limit=10, seed=0)


def _proto(name):
    return get_protocol(name, **({"n_dev": 4} if PROTOCOLS[name].uses_dev else {}))


def _run(client, name, coalition=CO, items=3):
    p, task = _proto(name), _task()
    return p, task, [run_sync(p.run(client, task, it, coalition)) for it in task.items[:items]]


def _check(p, task, outs, coalition=CO):
    for it, o in zip(task.items, outs):
        assert 1 <= o.calls <= p.budget(len(coalition)), (p.name, o.calls)
        assert len(o.transcript) == o.calls and {e["member"] for e in o.transcript} <= set(coalition)
        outcomes = o.ties or [(o.final, o.answer, 1.0)]              # a tie: every tied outcome, with its probability
        assert abs(sum(q for *_, q in outcomes) - 1) < 1e-12 and o.final == outcomes[0][0]
        assert o.answer == ("|".join(dict.fromkeys(a for _, a, _ in o.ties if a is not None)) or None if o.ties else extract_answer(task, it, o.final))
        for text, answer, _ in outcomes:
            assert answer == extract_answer(task, it, text)            # each reported answer is its reply's
            if p.name not in ("logit_fusion",):                         # each reply is one of the calls' replies
                assert text in [e["reply"] for e in o.transcript]
        assert 0.0 <= expected_score(task, it, o) <= 1.0


def _replay(tmp_path):
    return ModelClient(pool_specs(), cache_dir=tmp_path, recording=REC, mode="replay")


def test_twelve_protocols_in_three_families_plus_weight_note():
    assert len(NAMES) == 12
    fams = {PROTOCOLS[n].family for n in NAMES}
    assert fams == {"api", "text", "logit"}
    assert [n for n in NAMES if PROTOCOLS[n].upper_bound] == ["oracle_router"]
    for n in NAMES:
        d = get_protocol(n).describe()
        assert d["min_size"] >= 1 and d["singleton"] and d["budget"] and isinstance(d["roles"], dict)
    assert "weight level" in (data_dir().parent/"nbs"/"04d_protocols.ipynb").read_text().lower()


def test_protocol_modules_import_downward_only():
    "The base imports no family, a family imports the base and never a sibling, the registry imports them all."
    import ast, compstrength
    order = ["proto_base", "proto_api", "proto_text", "proto_logit", "protocols"]
    def imported(mod):
        tree = ast.parse((Path(compstrength.__file__).parent/f"{mod}.py").read_text())
        return {n.module.lstrip(".").removeprefix("compstrength.") for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module and (n.level or n.module.startswith("compstrength"))}
    deps = {m: imported(m) & set(order) for m in order}
    assert deps == {"proto_base": set(), "proto_api": {"proto_base"}, "proto_text": {"proto_base"},
                    "proto_logit": {"proto_base"}, "protocols": {"proto_base", "proto_api", "proto_text", "proto_logit"}}
    import compstrength.protocols as reg, compstrength.proto_base as base
    assert reg.PROTOCOLS is base.PROTOCOLS and reg.Protocol is base.Protocol and reg.MajorityVote.__module__ == "compstrength.proto_text"


@pytest.mark.parametrize("name", NAMES)
def test_protocol_replayed(name, tmp_path):
    client = _replay(tmp_path)
    p, task, outs = _run(client, name)
    _check(p, task, outs)
    assert len(client.log) and client.usage().cached.all()              # nothing was asked of a model


@pytest.mark.parametrize("name", NAMES)
def test_singleton_replayed(name, tmp_path):
    client = _replay(tmp_path)
    p, task, outs = _run(client, name, (SOLO,), items=1)
    o, it = outs[0], task.items[0]
    _check(p, task, outs, (SOLO,))
    solo = run_sync(MajorityVote().run(client, task, it, (SOLO,)))
    if name == "self_consistency":                                      # documented: its samples, not a greedy answer
        assert o.calls == p.samples and all(e["role"].startswith("sample") for e in o.transcript)
    else:                                                               # the member answers alone
        assert o.calls == 1 and o.final == solo.final and o.answer == solo.answer
        assert p.alone_when_single or name == "logit_fusion"           # logit: alone on numeric items


@pytest.mark.parametrize("name", NAMES)
def test_empty_and_too_few_members_fail_before_any_call(name):
    fc = FixedClient({m: "The answer is 1." for m in CO})
    p, task = _proto(name), _task()
    with pytest.raises(ProtocolError, match="at least 1 member"):
        run_sync(p.run(fc, task, task.items[0], ()))
    with pytest.raises(ProtocolError, match="duplicate"):
        run_sync(p.run(fc, task, task.items[0], (CO[0], CO[0])))
    with pytest.raises(ProtocolError, match="max_calls=0"):
        run_sync(get_protocol(name, max_calls=0).run(fc, task, task.items[0], CO))
    assert fc.asked == []


def test_protocol_declaring_min_size_two_refuses_a_singleton():
    class Pairwise(MajorityVote):
        name, min_size = "pairwise_vote", 2
    fc = FixedClient({"a": "The answer is 1."})
    task = _task()
    with pytest.raises(ProtocolError, match="needs at least 2 member"):
        run_sync(Pairwise().run(fc, task, task.items[0], ("a",)))
    assert fc.asked == []


@pytest.mark.parametrize("name", NAMES)
def test_budget_is_enforced(name, tmp_path):
    client = _replay(tmp_path)
    p, task, outs = _run(client, name, items=1)
    used = outs[0].calls
    tight = _proto(name)
    tight._dev = p._dev                                                 # dev answers are setup, outside the budget
    tight.budget = lambda k: used - 1
    n0 = len(client.log)
    with pytest.raises(BudgetExceeded, match=f"budget of {used - 1}"):
        run_sync(tight.run(client, task, task.items[0], CO))
    assert len(client.log) - n0 <= used - 1                             # the over-budget call was never made


# The live tier every CI run makes: one protocol of each family, one item, 96-token answers, the two
# smallest chat members (cascade and logit_fusion need logprobs from the server; majority vote is the text family's
# base). `./test.sh --live` (COMPSTRENGTH_LIVE_DEEP=1) runs every protocol on 3 items instead, and
# `./test.sh --record` (COMPSTRENGTH_RECORD=1) does that while rewriting the recording the fast tests replay.
RECORD = os.environ.get("COMPSTRENGTH_RECORD") == "1"
DEEP = RECORD or os.environ.get("COMPSTRENGTH_LIVE_DEEP") == "1"
LIVE_TIER = {"api": "cascade", "text": "majority_vote", "logit": "logit_fusion"}
LIVE = NAMES if DEEP else list(LIVE_TIER.values())


def test_live_tier_covers_every_family():
    assert {PROTOCOLS[n].family for n in LIVE_TIER.values()} == {PROTOCOLS[n].family for n in NAMES}
    assert all(LIVE_TIER[PROTOCOLS[n].family] == n for n in LIVE_TIER.values())


@pytest.fixture(scope="module")
def live_calls(tmp_path_factory):
    "One live call cache for the module: calls the protocols share (dev and own answers) are made once, as in a real run."
    return tmp_path_factory.mktemp("live-calls")


@pytest.mark.slow
@pytest.mark.pool
@pytest.mark.parametrize("name", LIVE)
def test_protocol_live(name, pool, live_calls):
    """Live on the real pool (mode "live": nothing comes from a recording). With COMPSTRENGTH_RECORD=1
    it rewrites the recording the fast tests replay (llama.cpp's greedy output can differ slightly
    between server states, so live answers are not compared with the recording)."""
    from compstrength.files import home_dir
    client = ModelClient(pool.specs(), cache_dir=(home_dir()/"calls") if RECORD else live_calls,
                         recording=REC if RECORD else None, mode="record" if RECORD else "live")
    assert RECORD or not client._replay                                 # no recorded answer can stand in
    if DEEP: p, task, outs = _run(client, name)                        # the recorded setting: n_dev=4, 3 items
    else:
        p, task = get_protocol(name, max_tokens=96, **({"n_dev": 2} if PROTOCOLS[name].uses_dev else {})), _task()
        outs = [run_sync(p.run(client, task, task.items[0], CO))]
    _check(p, task, outs)
    solo = [run_sync(p.run(client, task, task.items[0], (SOLO,)))]
    _check(p, task, solo, (SOLO,))
