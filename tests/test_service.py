"""The training service's contract, against the real service (CPU backend: SmolLM2-135M + LoRA)
running as its own process on a real port: auth, idempotency, 409, malformed rewards, path
safety, restart, and the client's failure behaviour (service down, timeouts, bad token)."""
import json, os, signal, socket, subprocess, sys, time
from pathlib import Path

import httpx
import pytest

from compstrength.crl import (RewardError, StalePolicyError, TrainerAuthError, TrainerClient,
                              TrainerRequestError, TrainerUnavailable)
from compstrength.contract import DEFAULT_BASE, TOKEN_ENV, model_name

TOKEN = "svc-test-" + "x7Q2" * 6
PROMPT = [{"role": "user", "content": "What is 7 + 5? Finish with 'The answer is N.'"}]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


class Service:
    "`compstrength serve-trainer` as a subprocess on a state folder."
    def __init__(self, state_dir: Path, log: Path, token: str|None = TOKEN, extra: tuple = ()):
        self.dir, self.log, self.token, self.port, self.proc, self.extra = state_dir, log, token, free_port(), None, list(extra)

    @property
    def url(self): return f"http://127.0.0.1:{self.port}"

    def start(self):
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        if self.token: env[TOKEN_ENV] = self.token
        cmd = [sys.executable, "-c", "import sys; from compstrength.cli import main; sys.exit(main())",
               "serve-trainer", "--state-dir", str(self.dir), "--port", str(self.port), *self.extra]
        self.proc = subprocess.Popen(cmd, env=env, stdout=open(self.log, "a"), stderr=subprocess.STDOUT)
        for _ in range(600):
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 401: return self
            except httpx.TransportError: pass
            time.sleep(0.5)
        raise AssertionError("service did not start")

    def kill(self, sig=signal.SIGKILL):
        self.proc.send_signal(sig); self.proc.wait(30)


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    d = tmp_path_factory.mktemp("svc")
    s = Service(d/"state", d/"service.log").start()
    yield s
    if s.proc.poll() is None: s.kill(signal.SIGTERM)


def api(svc, token=TOKEN, **kw):
    return httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=600, **kw)


def sample(svc, n=2, seed=0, model=None):
    c = api(svc)
    model = model or c.get("/health").json()["model_name_for_sampling"]
    r = c.post("/v1/chat/completions", json=dict(model=model, messages=PROMPT, n=n, max_tokens=24, temperature=1.0, seed=seed))
    assert r.status_code == 200, r.text
    return [ch["message"]["content"] for ch in r.json()["choices"]]


def step_body(svc, key, version=None, rewards=(1.0, 0.0)):
    texts = sample(svc, n=len(rewards), seed=hash(key) % 1000)
    if version is None: version = api(svc).get("/health").json()["policy_version"]
    return dict(idempotency_key=key, policy_version=version, learning_rate=1e-3,
                groups=[dict(prompt=PROMPT, completions=[dict(text=t) for t in texts], rewards=list(rewards))])


def test_auth_on_every_route(svc):
    routes = [("GET", "/health", None), ("POST", "/v1/train_step", {}), ("GET", "/v1/checkpoints", None),
              ("POST", "/v1/checkpoints", {"name": "x"}), ("GET", "/v1/models", None),
              ("POST", "/v1/chat/completions", {"model": model_name(0), "messages": PROMPT}),
              ("POST", "/v1/completions", {"model": model_name(0), "prompt": "hi"})]
    for method, path, body in routes:
        for tok in (None, "wrong-token"):
            r = api(svc, tok).request(method, path, json=body)
            assert r.status_code == 401, (path, tok, r.status_code)
    h = api(svc).get("/health").json()
    assert {"status", "base_model", "policy_version", "backend", "service_id", "model_name_for_sampling"} <= set(h)
    assert h["backend"] == "transformers" and h["base_model"] == DEFAULT_BASE
    with pytest.raises(TrainerAuthError, match="bearer token"):
        TrainerClient(svc.url, token="wrong-token").health()


def _outward_ipv4() -> str|None:
    "This machine's address on its default route (a UDP connect sends no packet), or None without one."
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try: s.connect(("10.254.254.254", 9)); ip = s.getsockname()[0]
        except OSError: return None
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


def test_token_never_logged_and_loopback_only(svc):
    assert TOKEN not in svc.log.read_text()
    assert TOKEN_ENV in svc.log.read_text()  # the startup line names where the token comes from
    with socket.create_connection(("127.0.0.1", svc.port), timeout=5): pass  # reachable on loopback
    ip = _outward_ipv4()
    if ip is None: pytest.skip("this machine has no non-loopback IPv4 address to try the service's port on")
    with pytest.raises(ConnectionRefusedError):  # and not on the machine's outward address
        socket.create_connection((ip, svc.port), timeout=5).close()


def test_sampling_routes_follow_the_version(svc):
    h = api(svc).get("/health").json()
    c = api(svc)
    models = [m["id"] for m in c.get("/v1/models").json()["data"]]
    assert h["model_name_for_sampling"] in models
    r = c.post("/v1/chat/completions", json=dict(model=model_name(999), messages=PROMPT, max_tokens=4))
    assert r.status_code == 404 and h["model_name_for_sampling"] in r.json()["detail"]
    a, b = sample(svc, seed=5), sample(svc, seed=5)
    assert a == b  # a seeded sampled call is repeatable
    r = c.post("/v1/completions", json=dict(model=h["model_name_for_sampling"], prompt="1, 2, 3,", max_tokens=4, temperature=0, logprobs=1))
    ch = r.json()["choices"][0]
    assert r.status_code == 200 and len(ch["logprobs"]["token_logprobs"]) == len(ch["token_ids"]) > 0


def test_concurrent_greedy_requests_are_answered_together(svc):
    """Greedy requests in flight at once (an evaluation's) go through the service's batcher: each comes back as it does
    alone, capped at its own max_tokens, n copies where n > 1; a sampled request beside them keeps its seed's answer."""
    from concurrent.futures import ThreadPoolExecutor
    m = api(svc).get("/health").json()["model_name_for_sampling"]
    qs = [("What is 7 + 5?", 24, 1), ("Name a colour.", 6, 1), ("What is 12 - 4? Explain.", 16, 2), ("Count to five.", 20, 1)]
    def ask(q):
        r = api(svc).post("/v1/chat/completions", json=dict(model=m, messages=[{"role": "user", "content": q[0]}], max_tokens=q[1],
                                                             n=q[2], temperature=0))
        assert r.status_code == 200, r.text
        return [ch["token_ids"] for ch in r.json()["choices"]]
    alone = [ask(q) for q in qs]
    with ThreadPoolExecutor(len(qs) + 1) as ex:
        hot = ex.submit(sample, svc, 2, 5)
        together = list(ex.map(ask, qs))
    assert together == alone
    assert [len(a) for a in alone] == [q[2] for q in qs] and all(len(t) <= q[1] for a, q in zip(alone, qs) for t in a)
    assert hot.result() == sample(svc, n=2, seed=5)


def test_idempotency_and_stale_version(svc):
    c = api(svc)
    body = step_body(svc, "idem-1")
    v0 = body["policy_version"]
    a1 = c.post("/v1/train_step", json=body)
    assert a1.status_code == 200, a1.text
    a1 = a1.json()
    assert a1["policy_version"] == v0 + 1 and a1["replayed"] is False
    assert {"loss", "mean_reward", "reward_std", "grad_norm"} <= set(a1["metrics"])
    a2 = c.post("/v1/train_step", json=body).json()  # the same key again: the earlier answer, nothing applied
    assert a2["replayed"] is True and {k: a2[k] for k in ("step", "policy_version", "metrics")} == {k: a1[k] for k in ("step", "policy_version", "metrics")}
    assert c.get("/health").json()["policy_version"] == v0 + 1
    r = c.post("/v1/train_step", json={**body, "idempotency_key": "idem-2"})  # a new key at the old version
    assert r.status_code == 409 and "stale policy_version" in r.json()["detail"]
    r = c.post("/v1/train_step", json={**body, "learning_rate": 0.5})  # the same key, another body
    assert r.status_code == 422 and "different request" in r.json()["detail"]
    with pytest.raises(StalePolicyError, match="stale"):
        TrainerClient(svc.url, token=TOKEN).train_step("idem-3", v0, body["groups"])
    assert c.get("/health").json()["policy_version"] == v0 + 1


def test_malformed_rewards_are_refused(svc):
    c = api(svc)
    body = step_body(svc, "nan-1")
    v = body["policy_version"]
    raw = json.dumps(body).replace("1.0, 0.0]", "NaN, 0.0]")
    assert "NaN" in raw
    r = c.post("/v1/train_step", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "finite" in r.text
    bad = {**body, "groups": [{**body["groups"][0], "rewards": [1.0]}]}
    r = c.post("/v1/train_step", json=bad)
    assert r.status_code == 422 and "2 completions but 1 rewards" in r.text
    with pytest.raises(RewardError, match="not a finite number"):  # the client refuses before sending
        TrainerClient(svc.url, token=TOKEN).train_step("nan-2", v, [{**body["groups"][0], "rewards": [float("inf"), 0.0]}])
    with pytest.raises(TrainerRequestError, match="422"):
        TrainerClient(svc.url, token=TOKEN).train_step("nan-3", v, bad["groups"])
    assert c.get("/health").json()["policy_version"] == v  # nothing applied


def test_checkpoint_names_cannot_escape(svc):
    c = api(svc)
    root = svc.dir/"checkpoints"
    for bad in ["../escape", "..", "/tmp/abs", "a/b", ".hidden", "", "x" * 65, "..\\x", "ok\nname", "%2e%2e"]:
        r = c.post("/v1/checkpoints", json={"name": bad})
        assert r.status_code == 422, (bad, r.status_code)
    assert not (svc.dir/"escape").exists() and not Path("/tmp/abs").exists()
    r = c.post("/v1/checkpoints", json={"name": "after-steps.1"})
    assert r.status_code == 200, r.text
    p = Path(r.json()["path"])
    assert p.parent == root.resolve() and (p/"adapter_model.safetensors").exists()
    assert c.post("/v1/checkpoints", json={"name": "after-steps.1"}).status_code == 409
    assert "after-steps.1" in [x["name"] for x in TrainerClient(svc.url, token=TOKEN).checkpoints()]


def test_restart_keeps_version_and_answers(tmp_path):
    s = Service(tmp_path/"state", tmp_path/"svc.log").start()
    try:
        body = step_body(s, "restart-1")
        a1 = api(s).post("/v1/train_step", json=body).json()
        s.kill(signal.SIGKILL)  # no clean shutdown
        s.port = free_port(); s.start()
        h = api(s).get("/health").json()
        assert h["policy_version"] == a1["policy_version"] and h["step"] == 1
        a2 = api(s).post("/v1/train_step", json=body).json()
        assert a2["replayed"] is True and a2["policy_version"] == a1["policy_version"]
    finally:
        if s.proc.poll() is None: s.kill(signal.SIGTERM)


def test_client_failures(svc, tmp_path):
    down = TrainerClient(f"http://127.0.0.1:{free_port()}", token="t", retries=2, backoff=0.01)
    with pytest.raises(TrainerUnavailable, match="not reachable after 3 tries"):
        down.health()
    with pytest.raises(TrainerAuthError, match="no token"):
        env = os.environ.pop(TOKEN_ENV, None)
        try: TrainerClient(svc.url)
        finally:
            if env is not None: os.environ[TOKEN_ENV] = env
    # a train step that times out is retried, then reported; the service applied it once, and a resend is answered from its record
    body = step_body(svc, "timeout-1", rewards=(1.0, 0.0, 0.0, 1.0))
    impatient = TrainerClient(svc.url, token=TOKEN, timeout=0.05, retries=1, backoff=0.01)
    with pytest.raises(TrainerUnavailable, match="ReadTimeout|Timeout"):
        impatient.train_step(body["idempotency_key"], body["policy_version"], body["groups"], learning_rate=1e-3)
    patient = TrainerClient(svc.url, token=TOKEN)
    ans = patient.train_step(body["idempotency_key"], body["policy_version"], body["groups"], learning_rate=1e-3)
    assert ans["replayed"] is True and ans["policy_version"] == body["policy_version"] + 1
    assert patient.health()["policy_version"] == body["policy_version"] + 1


def test_client_and_service_share_one_contract():
    "The client and the service take the request schema, the token variable and the defaults from `contract`; neither imports the other."
    code = ("import sys, compstrength.crl as crl; assert 'compstrength.service' not in sys.modules, 'crl imports service'; "
            "import compstrength.contract as c, compstrength.service as s; "
            "assert s.TrainStep is c.TrainStep and crl.TOKEN_ENV is s.TOKEN_ENV is c.TOKEN_ENV and s.model_name is crl.model_name; "
            "import inspect; assert inspect.signature(s.serve).parameters['port'].default == c.DEFAULT_PORT; "
            "assert inspect.signature(crl.TrainerClient).parameters['url'].default == c.DEFAULT_URL")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-1500:]
