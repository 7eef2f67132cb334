"""Call layer: retries, error handling, cache keys, secrets, sampling, de-duplication."""
from pathlib import Path

import pytest

from compstrength.models import (ModelClient, ModelSpec, ModelCallError, ModelDownError, UnknownModelError,
                                 Completion, run_sync)
from standin_server import StandIn

CANARY = "sk-canary-7f3a9c1e5d"


def _spec(srv, **kw):
    return ModelSpec("standin", "openai/standin", api_base=srv.api_base, api_key_env="STANDIN_KEY", **kw)


def _all_bytes(*paths):
    out = b""
    for p in paths:
        p = Path(p)
        files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
        for f in files: out += f.read_bytes()
    return out


def test_retries_429_and_5xx_then_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_KEY", "k")
    with StandIn(script=[429, 503]) as srv:
        c = ModelClient([_spec(srv)], cache_dir=tmp_path/"c", backoff=0.01)
        r = run_sync(c.acomplete("standin", "What is 6 * 7?"))
        assert r.text == "The answer is 42." and not r.cached
        assert len(srv.requests) == 3                      # 429, 503, then the answer
        r2 = run_sync(c.acomplete("standin", "What is 6 * 7?"))
        assert r2.cached and r2.text == r.text and len(srv.requests) == 3
        u = c.usage()
        assert u.cached.tolist() == [False, True] and u.completion_tokens.tolist() == [4, 4]


def test_errors_are_raised_never_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_KEY", "k")
    with StandIn(script=[500] * 10) as srv:
        c = ModelClient([_spec(srv)], cache_dir=tmp_path/"c", retries=2, backoff=0.01)
        with pytest.raises(ModelCallError, match="standin"):
            run_sync(c.acomplete("standin", "Hi"))
        assert len(srv.requests) == 3                      # first try + 2 retries
        assert len(c.cache) == 0
        assert c.usage().error.notna().all()
        srv.script = []                                    # the server recovers: the call is made again
        assert run_sync(c.acomplete("standin", "Hi")).text == "The answer is 42."
        assert len(srv.requests) == 4


def test_api_key_never_persists(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_KEY", CANARY)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    rec = tmp_path/"rec.jsonl"
    with StandIn(script=[401]) as srv:
        c = ModelClient([_spec(srv)], cache_dir=tmp_path/"c", recording=rec, mode="record", backoff=0.01)
        with pytest.raises(ModelCallError) as e:           # the server echoes the key in its error
            run_sync(c.acomplete("standin", "Hi"))
        assert CANARY not in str(e.value) and CANARY not in c.usage().to_csv()
        r = run_sync(c.acomplete("standin", "Hi", temperature=0.7, sample=2))
        assert r.text
        assert any(CANARY in q["headers"].get("authorization", "") for q in srv.requests)  # the key was really used
        c.close()
    blob = _all_bytes(tmp_path/"c", rec)
    assert blob and CANARY.encode() not in blob


def test_identical_requests_in_flight_are_made_once(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_KEY", "k")
    with StandIn(delay=0.3) as srv:
        c = ModelClient([_spec(srv)], cache_dir=tmp_path/"c")
        res = run_sync(c.amap([dict(model="standin", messages="Same question")] * 5))
        assert all(isinstance(r, Completion) for r in res)
        assert len(srv.requests) == 1
        u = c.usage()
        assert len(u) == 5 and int((~u.cached).sum()) == 1


def test_validation_before_any_call(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_KEY", "k")
    with pytest.raises(UnknownModelError, match="cannot route"):
        ModelSpec("x", "made-up-provider/x-1")
    with pytest.raises(ValueError, match="empty"):
        ModelClient([])
    with StandIn() as srv:
        down = ModelSpec("local-down", "openai/local-down", api_base=None, local=True)
        c = ModelClient([_spec(srv), down], cache_dir=tmp_path/"c")
        with pytest.raises(UnknownModelError, match="not in the pool"):
            run_sync(c.acomplete("gpt-9", "Hi"))
        with pytest.raises(ModelDownError, match="is down"):
            c.check()
        with pytest.raises(ModelDownError):
            run_sync(c.acomplete("local-down", "Hi"))
        assert srv.requests == []


@pytest.mark.pool
def test_local_pool_canary_and_sampling(pool, tmp_path, monkeypatch):
    "Real llama.cpp servers: sampled calls are cached per sample index; no key reaches the cache."
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("COMPSTRENGTH_TEST_KEY", CANARY)
    spec = [s for s in pool.specs() if s.name == "smollm2-135m"][0]
    keyed = ModelSpec(**{**spec.__dict__, "api_key_env": "COMPSTRENGTH_TEST_KEY"})
    c = ModelClient([keyed], cache_dir=tmp_path/"c", recording=tmp_path/"rec.jsonl", mode="record")
    reqs = [dict(model="smollm2-135m", messages="Name a fruit.", temperature=0.9, max_tokens=12, sample=k) for k in range(3)]
    first = run_sync(c.amap(reqs))
    assert all(isinstance(r, Completion) and not r.cached for r in first)
    again = run_sync(c.amap(reqs))
    assert [r.text for r in again] == [r.text for r in first] and all(r.cached for r in again)
    more = run_sync(c.acomplete(**{**reqs[0], "sample": 3}))
    assert not more.cached
    u = c.usage()
    assert int((~u.cached).sum()) == 4
    c.close()
    blob = _all_bytes(tmp_path/"c", tmp_path/"rec.jsonl")
    assert blob and CANARY.encode() not in blob


@pytest.mark.pool
def test_local_pool_all_members_answer(pool, tmp_path):
    c = ModelClient(pool.specs(), cache_dir=tmp_path/"c")
    res = run_sync(c.amap([dict(model=m, messages="What is 2 + 2? Answer with a number.", max_tokens=48) for m in c.pool]))
    assert all(isinstance(r, Completion) and r.text.strip() for r in res), res
    lp = run_sync(c.acomplete("qwen2.5-coder-0.5b", "Is 7 prime? Answer yes or no.", max_tokens=4, logprobs=3))
    assert lp.logprobs and all("logprob" in t for t in lp.logprobs)
    lp2 = run_sync(c.acomplete("gemma3-270m", "Is 7 prime? Answer yes or no.", max_tokens=4, logprobs=3))
    assert lp2.logprobs and lp2.logprobs[0]["top"]


def test_stale_recording_fails_loudly_naming_the_command(tmp_path, monkeypatch):
    "A replayed request that the recording does not hold (here: its max_tokens changed) raises, names the command that regenerates the recordings, and reaches no model."
    from compstrength.models import RECORD_COMMAND, ReplayMissError
    monkeypatch.setenv("STANDIN_KEY", "k")
    rec = tmp_path/"rec.jsonl"
    with StandIn() as srv:
        c = ModelClient([_spec(srv)], cache_dir=tmp_path/"c1", recording=rec, mode="record")
        run_sync(c.acomplete("standin", "What is 6 * 7?", max_tokens=64))
        c.close()
        live = ModelClient([_spec(srv)], cache_dir=tmp_path/"c1")  # a later live run leaves the changed request in the cache only
        run_sync(live.acomplete("standin", "What is 6 * 7?", max_tokens=65)); live.close()
        assert len(srv.requests) == 2
        replay = ModelClient([_spec(srv)], cache_dir=tmp_path/"c1", recording=rec, mode="replay")
        assert run_sync(replay.acomplete("standin", "What is 6 * 7?", max_tokens=64)).text == "The answer is 42."
        with pytest.raises(ReplayMissError) as e:              # the request changed since it was recorded
            run_sync(replay.acomplete("standin", "What is 6 * 7?", max_tokens=65))
        assert RECORD_COMMAND in str(e.value) and "stale" in str(e.value) and str(rec) in str(e.value)
        assert len(srv.requests) == 2                          # nothing was asked of the model
    assert RECORD_COMMAND.split()[0] == "./test.sh" and (Path(__file__).parents[1]/"test.sh").read_text().count("--record") >= 2
