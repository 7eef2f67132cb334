"""The embedded pool on llama.cpp's own server (`llama-server`), live on the two smallest members: chat and text
completion answer with token logprobs through `ModelClient`, two slots generate two requests at once, stopping
leaves no process behind, and a server of one program is never reused as the other."""
import signal, subprocess, sys, threading, time

import httpx
import pytest

from compstrength.files import home_dir
from compstrength.local import (LocalPool, _alive, llama_server_dir, local_pool, pool_specs, pool_status, read_state,
                                stop_pid)
from compstrength.models import ModelClient, run_sync
from _procs import gone, servers_of

pytestmark = pytest.mark.pool
CHAT, BASE = "smollm2-135m", "gemma3-270m"  # the two smallest members: a chat model and the few-shot base model


REAL = home_dir()


def _own_home(folder):
    """A home of its own (pool state, logs), sharing the real home's verified models and llama-server build, so
    nothing is downloaded or compiled and no user pool is touched."""
    home = folder/"home"; home.mkdir()
    for d in ("models", "build"):
        (REAL/d).mkdir(exist_ok=True); (home/d).symlink_to(REAL/d)
    return home


@pytest.fixture(scope="module")
def ls_home(tmp_path_factory):
    assert (llama_server_dir()/"llama-server").exists(), "llama-server is not built: run scripts/setup.sh"
    home = _own_home(tmp_path_factory.mktemp("ls"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPSTRENGTH_HOME", str(home))
        yield home


@pytest.fixture
def fresh_home(ls_home, tmp_path, monkeypatch):
    "A second home, with no server of the module's pool recorded in it: for the tests that start and stop their own."
    home = _own_home(tmp_path)
    monkeypatch.setenv("COMPSTRENGTH_HOME", str(home))
    return home


@pytest.fixture(scope="module")
def ls_pool(ls_home):
    "Both members on llama-server with two slots each, started once for the module."
    with LocalPool([CHAT, BASE], server="llama-server", slots=2) as pool:
        yield pool


def test_specs_state_and_status(ls_pool, ls_home):
    specs = {s.name: s for s in ls_pool.specs()}
    assert all(s.cache_identity.endswith("+llama-server") and s.max_concurrency == 2 and s.api_base for s in specs.values())
    assert specs[BASE].model == f"text-completion-openai/{BASE}"
    st = read_state()
    assert {n: (s.server, s.slots) for n, s in st.items()} == {CHAT: ("llama-server", 2), BASE: ("llama-server", 2)}
    rows = {r["name"]: r for r in pool_status([CHAT, BASE])}
    assert all(r["up"] and r["server"] == "llama-server" and r["slots"] == 2 for r in rows.values()), rows
    assert (ls_home/"pool"/f"{CHAT}.log").stat().st_size > 0  # the server's own log, where llama-cpp-python's goes


def _answers(pool, logprobs, tmp_path):
    client = ModelClient(pool.specs(), cache_dir=tmp_path)
    return run_sync(client.amap([dict(model=m, messages="What is 2 + 3?", max_tokens=8, logprobs=logprobs) for m in (CHAT, BASE)]))


def _check_token_logprobs(c):
    "The normalised form `ModelClient` stores: one entry per generated token, a finite logprob, the token's text."
    assert c.text and c.completion_tokens > 0
    assert c.logprobs and len(c.logprobs) == c.completion_tokens, c.logprobs
    assert all(isinstance(t["token"], str) and -100 < t["logprob"] <= 0 for t in c.logprobs)
    assert "".join(t["token"] for t in c.logprobs).strip() == c.text


def test_chat_and_text_completion_answer_with_logprobs(ls_pool, tmp_path):
    chat, base = _answers(ls_pool, 1, tmp_path)  # chat: logprobs=True, top_logprobs=1; completion: logprobs=1
    for c in (chat, base):
        _check_token_logprobs(c)
        assert all(len(t["top"]) == 1 and t["top"][0]["token"] == t["token"] for t in c.logprobs)  # greedy: the top token is the chosen one


def test_token_logprobs_only(ls_pool, tmp_path):
    "`logprobs=0` (token logprobs only, what every own answer asks for) comes back on llama-server too."
    for c in _answers(ls_pool, 0, tmp_path):
        _check_token_logprobs(c)
        assert all(set(t) == {"token", "logprob"} for t in c.logprobs)


def test_two_slots_generate_two_requests_at_once(ls_pool, tmp_path):
    "llama-server's /slots endpoint shows both slots of the member processing while two requests are in flight."
    (spec,) = [s for s in ls_pool.specs() if s.name == CHAT]
    slots_url = spec.api_base.removesuffix("/v1") + "/slots"
    client = ModelClient([spec], cache_dir=tmp_path)
    box = {}
    reqs = [dict(model=CHAT, messages=f"Count from 1 to 30, request {k}.", max_tokens=48) for k in range(2)]
    t = threading.Thread(target=lambda: box.update(out=run_sync(client.amap(reqs))))
    t.start()
    most = 0
    while t.is_alive():
        busy = sum(bool(s.get("is_processing")) for s in httpx.get(slots_url, timeout=5).json())
        most = max(most, busy)
        time.sleep(0.05)
    t.join()
    assert all(c.text for c in box["out"]), box["out"]
    assert most == 2, f"at most {most} slot(s) busy at once"


def test_stop_leaves_no_process(fresh_home):
    with LocalPool([CHAT], server="llama-server") as pool:
        pid = pool.servers[CHAT].pid
        assert _alive(pid)
    assert gone([pid]) and CHAT not in read_state()
    code = ("from compstrength.local import LocalPool; import time\n"
            f"p = LocalPool([{CHAT!r}], server='llama-server').up()\n"
            f"print(p.servers[{CHAT!r}].pid, flush=True); time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(proc.stdout.readline())
        assert _alive(pid)
        proc.send_signal(signal.SIGKILL); proc.wait()
        assert gone([pid]), "llama-server outlived its SIGKILLed parent"
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()


def test_a_server_is_never_reused_as_the_other_program(fresh_home):
    detached = LocalPool([CHAT], server="llama-server").up(detach=True)  # as `compstrength pool up` leaves it
    (srv,) = detached.servers.values()
    try:
        # llama-cpp-python is asked for: the llama-server member is neither reused nor duplicated
        with pytest.raises(RuntimeError, match="already running on another server"):
            with local_pool([CHAT]): pass
        assert servers_of(fresh_home, "llama-server") == [srv.pid] and read_state()[CHAT].server == "llama-server"
        (plain,) = pool_specs([CHAT])
        assert plain.api_base is None and not plain.cache_identity.endswith("+llama-server")  # not pointed at the other program
        # the same program is reused
        with local_pool([CHAT], server="llama-server") as pool:
            assert pool.servers[CHAT].pid == srv.pid
        assert _alive(srv.pid)  # a reused server is left running
        (ls,) = pool_specs([CHAT], server="llama-server")
        assert ls.api_base == srv.api_base and ls.cache_identity.endswith("+llama-server")
    finally:
        stop_pid(srv.pid)
    assert gone([srv.pid])
