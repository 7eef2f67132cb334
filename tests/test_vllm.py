"""vLLM for real, on this machine's CPU: the project's own vLLM environment (pinned wheel), an embedded member
served by a real vLLM server, a protocol of each family live through LiteLLM against it (a rerun from the call
cache), and the training service's `--backend vllm` against a real vLLM server with LoRA: every policy version
hot-loaded under its own name and the previous one unloaded, samples with their token ids and sampling
log-probabilities, and a C-RL run with the real partners that resumes after the service restarts. One vLLM server
at a time (2 cores). Nothing here is skipped: a missing vLLM environment fails the tier (`./test.sh` builds it)."""
import contextlib, json, os, signal, socket, subprocess, sys

import httpx
import pytest

from compstrength.contract import model_name
from compstrength.local import LocalPool, _alive, local_pool
from compstrength.models import ModelClient, run_sync
from compstrength.protocols import PROTOCOLS, get_protocol
from compstrength.tasks import load_task, prompt_messages
from compstrength.vllm_env import VLLM_WHEELS, vllm_env_dir, vllm_python

from test_service import TOKEN, Service

MEMBER = "smollm2-135m"  # the smallest member, served by vLLM
PARTNER = "qwen2.5-coder-0.5b"  # on llama.cpp (the shared pool), beside it in the coalitions
VLLM_PY = str(vllm_env_dir("cpu")/"bin"/"python")  # the real home's environment (tests below may run in a home of their own)
LIVE = {"api": "cascade", "text": "majority_vote", "logit": "logit_fusion"}  # the cascade and logit fusion read log-probabilities


def test_the_vllm_environment_is_the_pinned_wheel():
    "The environment `./test.sh` built is the pinned package and version, on the CPU, and is the one the library runs."
    ready = json.loads((vllm_env_dir("cpu")/"ready.json").read_text())  # missing: the tier fails here, loudly
    w = VLLM_WHEELS["cpu"]
    assert (ready["package"], ready["version"], ready["sha256"], ready["device"]) == (w.package, w.version, w.sha256, "cpu")
    assert vllm_python() == vllm_env_dir("cpu")/"bin"/"python"
    out = subprocess.run([str(vllm_python()), "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True,
                         env={**os.environ, "VLLM_NO_USAGE_STATS": "1"})
    assert out.stdout.split()[-1] == ready["vllm"], out.stderr[-2000:]


def _cli(*args, env=None):
    exe = os.path.join(os.path.dirname(sys.executable), "compstrength")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def test_bad_input_is_refused_before_anything_starts(isolated_home):
    "A missing vLLM environment, a port in use and an unknown member are said in one line; nothing is fetched or started."
    r = _cli("pool", "up", "--server", "vllm", "--members", MEMBER)  # this home has no vLLM environment
    assert r.returncode == 2 and "compstrength vllm setup" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (isolated_home/"hf").exists() and not (isolated_home/"pool"/"state.json").exists()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); s.listen(); busy = s.getsockname()[1]
        r = _cli("pool", "up", "--server", "vllm", "--members", MEMBER, "--port", str(busy),
                 env={"COMPSTRENGTH_VLLM_PYTHON": VLLM_PY})
        assert r.returncode == 2 and f"port {busy}" in r.stderr and "in use" in r.stderr, r.stderr
    assert not (isolated_home/"pool"/"state.json").exists()
    with pytest.raises(KeyError, match="not embedded pool members"): LocalPool(["gpt-9"], server="vllm")
    with pytest.raises(ValueError, match="lora_rank"): LocalPool([MEMBER], server="llama-server", lora_rank=8)


@contextlib.contextmanager
def own_home(root):
    """A COMPSTRENGTH_HOME of its own while a vLLM server starts or stops: the pool's state file names one server per member,
    and the shared pool runs every member on llama.cpp (models, converted folders and builds are the real home's)."""
    from compstrength.files import home_dir
    real, home = home_dir(), root/"home"
    if not home.exists():
        home.mkdir(parents=True)
        for d in ("models", "hf", "vllm", "wheels", "data", "build"):
            (real/d).mkdir(exist_ok=True); (home/d).symlink_to(real/d)
    old = os.environ.get("COMPSTRENGTH_HOME")
    os.environ["COMPSTRENGTH_HOME"] = str(home)
    try: yield home
    finally: os.environ["COMPSTRENGTH_HOME"] = str(real) if old is None else old


@pytest.fixture(scope="module")
def vllm_member(tmp_path_factory):
    "The member on a real vLLM server (no LoRA: as a pool serves it), stopped with its engine processes at the end."
    root = tmp_path_factory.mktemp("vllm-member")
    with own_home(root): pool = LocalPool([MEMBER], server="vllm", slots=4).up()
    s = pool.servers[MEMBER]
    yield pool
    with own_home(root): pool.down()
    assert not _alive(s.pid)
    with pytest.raises(ProcessLookupError): os.killpg(s.pid, 0)  # its engine processes went with it


@pytest.mark.pool
@pytest.mark.parametrize("family", list(LIVE))
def test_a_protocol_of_each_family_runs_live_on_vllm(family, vllm_member, pool, tmp_path_factory):
    "Live through LiteLLM, the vLLM member beside a llama.cpp one; the same run again comes from the call cache."
    name = LIVE[family]
    assert PROTOCOLS[name].family == family
    specs = {s.name: s for s in vllm_member.specs()}
    assert specs[MEMBER].cache_identity.endswith("+vllm") and specs[MEMBER].max_concurrency == 4
    members = [specs[MEMBER], next(s for s in pool.specs() if s.name == PARTNER)]
    task = load_task("mmlu" if family == "logit" else "arithmetic", split="test", limit=2, seed=0)
    cache = tmp_path_factory.mktemp(f"vllm-{family}")
    p = get_protocol(name, max_tokens=64, **({"n_dev": 2} if PROTOCOLS[name].uses_dev else {}))
    client = ModelClient(members, cache_dir=cache)
    outs = [run_sync(p.run(client, task, it, (MEMBER, PARTNER))) for it in task.items]
    for o in outs:
        assert 1 <= o.calls <= p.budget(2) and not getattr(o, "error", None)
    log = client.usage()
    mine = log[log.model == MEMBER]
    assert len(mine) and not mine.cached.any() and mine.error.isna().all()  # the vLLM member was asked, live
    if family != "text":  # the cascade's confidence and logit fusion's letter distribution come from vLLM's log-probabilities
        c = run_sync(client.acomplete(MEMBER, prompt_messages(task, task.items[0]), max_tokens=4, logprobs=5))
        assert c.logprobs and all(len(t["top"]) == 5 for t in c.logprobs), c.logprobs
    again = ModelClient(members, cache_dir=cache)  # a rerun: every call from the cache, the same outcomes
    outs2 = [run_sync(p.run(again, task, it, (MEMBER, PARTNER))) for it in task.items]
    assert again.usage().cached.all() and [o.final for o in outs2] == [o.final for o in outs]


# --- the training service's vLLM backend, end to end

@pytest.fixture(scope="module")
def sampler(tmp_path_factory):
    "A real vLLM server with LoRA for the policy's base (after the member's server above has stopped: one at a time)."
    root = tmp_path_factory.mktemp("vllm-sampler")
    with own_home(root): p = LocalPool([MEMBER], server="vllm", lora_rank=8, slots=8).up()
    yield f"http://127.0.0.1:{p.servers[MEMBER].port}"
    with own_home(root): p.down()


def served(url) -> list[str]:
    return sorted(m["id"] for m in httpx.get(f"{url}/v1/models", timeout=30).json()["data"])


@pytest.mark.pool
def test_crl_through_the_vllm_backend_resumes_after_a_restart(sampler, tmp_path):
    "2 C-RL steps with the real partners, sampled by vLLM; the service is killed after the first and the run resumes and evaluates; each version's adapter is loaded and the previous one unloaded."
    from compstrength.crl import CRLConfig, CRLRun, TrainerClient
    from test_crl import PARTNERS
    with local_pool(list(PARTNERS)) as lp:
        svc = Service(tmp_path/"state", tmp_path/"svc.log", extra=["--backend", "vllm", "--vllm-url", sampler]).start()
        try:
            trainer = TrainerClient(svc.url, token=TOKEN)
            h = trainer.health()
            assert h["backend"] == "vllm" and h["sampling_api_base"] == f"{sampler}/v1"
            assert served(sampler) == sorted([MEMBER, model_name(0)])
            cfg = CRLConfig(partners=PARTNERS, steps=2, prompts_per_step=1, group_size=4, n_train=3, n_eval=1, eval_every=100,
                            max_tokens=48, learning_rate=2e-3, protocol_params=dict(max_tokens=64), seed=3)
            client = ModelClient(lp.specs(), cache_dir=tmp_path/"calls")
            CRLRun(cfg, trainer, client, tmp_path/"run", progress=False, gate="record").run(steps=1, evaluate=False)  # train only
            assert trainer.health()["policy_version"] == 1 and served(sampler) == sorted([MEMBER, model_name(1)])
            svc.kill(signal.SIGKILL); svc.start()  # the service restarts on its state folder; vLLM keeps running
            trainer = TrainerClient(svc.url, token=TOKEN)
            assert trainer.health()["policy_version"] == 1 and served(sampler) == sorted([MEMBER, model_name(1)])
            log = CRLRun(cfg, trainer, client, tmp_path/"run", progress=False, gate="record").run()
            assert served(sampler) == sorted([MEMBER, model_name(2)])
        finally:
            svc.kill(signal.SIGTERM)
    tr = log[log.kind == "train"]
    assert tr.step.tolist() == [0, 1] and tr.version_after.tolist() == [1, 2] and not tr.replayed.any()
    assert log[log.kind == "eval"].step.tolist() == [2]  # the policy evaluated in its system through vLLM, after its last step
    # vLLM's sampling log-probabilities against the trainer's, per token (both float32 on a CPU, the same tokens):
    # a different prompt or tokenisation would put the median far above bf16 noise
    m = tr[["logprob_mismatch", "logprob_mismatch_median", "logprob_mismatch_max"]]
    assert m.notna().all().all() and (m.logprob_mismatch_median < 1e-3).all(), m  # float32 sampler and trainer: ~1e-5
    print("\nlog-prob mismatch (vLLM sampling vs trainer), per step:\n" + m.to_string())


def test_the_vllm_backend_refuses_a_server_that_is_not_there(tmp_path):
    "A vLLM URL where nothing answers is said before the policy is loaded."
    from compstrength.service import TrainerState
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    with pytest.raises(ValueError, match="no vLLM server answers"):
        TrainerState(tmp_path/"state", backend="vllm", vllm_url=f"http://127.0.0.1:{port}")
    assert not (tmp_path/"state"/"versions").exists() or not any((tmp_path/"state"/"versions").iterdir())
