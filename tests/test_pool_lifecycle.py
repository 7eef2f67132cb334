"""The embedded pool's servers: started, health-checked and stopped with no orphan, however the
process that started them ends (context exit, Ctrl-C, `pool down`, SIGKILL of the parent)."""
import json, signal, subprocess, sys, time
from pathlib import Path

import pytest

from compstrength.local import LocalPool, healthy, _alive, read_state
from _procs import gone, servers_of

pytestmark = pytest.mark.pool
PY = sys.executable
CLI = [str(Path(sys.executable).parent/"compstrength")]  # the installed console script


def test_context_manager_starts_and_stops(isolated_home):
    with LocalPool(["smollm2-135m"]) as pool:
        s = pool.servers["smollm2-135m"]
        assert healthy(s.api_base) and s.api_base.startswith("http://127.0.0.1:")
        pid = s.pid
    assert gone([pid])


def test_sigkill_of_parent_leaves_no_orphan(isolated_home):
    code = ("from compstrength.local import LocalPool; import time, sys\n"
            "p = LocalPool(['smollm2-135m']).up()\n"
            "print(p.servers['smollm2-135m'].pid, flush=True); time.sleep(600)\n")
    proc = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    assert _alive(pid)
    proc.kill(); proc.wait()
    assert gone([pid]), "server outlived its SIGKILLed parent"


def test_ctrl_c_on_pool_up_wait(isolated_home):
    # A shell that started this run in the background leaves SIGINT ignored, and Python keeps an
    # inherited SIG_IGN: give the command the disposition a terminal would.
    proc = subprocess.Popen(CLI + ["pool", "up", "--wait", "--members", "smollm2-135m"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "Ctrl-C" in line: break
        pids = servers_of(isolated_home)
        assert pids, "".join(lines)
        # a foreground pool is visible to other processes (`run --live` in a second terminal)
        st = json.loads(subprocess.run(CLI + ["pool", "status", "--json"], capture_output=True, text=True).stdout)
        assert {s["name"]: s["up"] for s in st}["smollm2-135m"]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        assert gone(pids)
        assert "smollm2-135m" not in read_state()
    finally:
        if proc.poll() is None: proc.terminate(); proc.wait(timeout=30)  # never leave it behind


def test_cli_up_status_down(isolated_home):
    up = subprocess.run(CLI + ["pool", "up", "--members", "smollm2-135m", "gemma3-270m"], capture_output=True, text=True, timeout=180)
    assert up.returncode == 0, up.stderr
    st = json.loads(subprocess.run(CLI + ["pool", "status", "--json"], capture_output=True, text=True).stdout)
    assert len(st) == 4 and all(s["sha256_ok"] for s in st)
    byname = {s["name"]: s for s in st}
    assert byname["smollm2-135m"]["up"] and byname["gemma3-270m"]["up"] and not byname["qwen2.5-coder-1.5b"]["up"]
    assert byname["gemma3-270m"]["litellm_model"] == "text-completion-openai/gemma3-270m"
    # the default server program, recorded in the state file and reported; its identity is the recordings' one
    assert (byname["smollm2-135m"]["server"], byname["smollm2-135m"]["slots"]) == ("llama-cpp-python", 1)
    assert not byname["smollm2-135m"]["identity"].endswith("+llama-server")
    assert {s.server for s in read_state().values()} == {"llama-cpp-python"}
    pids = [s.pid for s in read_state().values()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    down = subprocess.run(CLI + ["pool", "down"], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0 and gone(pids) and not servers_of(isolated_home)
    assert read_state() == {}


def test_busy_server_is_reused_not_duplicated(isolated_home):
    """llama.cpp's server answers HTTP (even `GET /models`) only between generations, so a busy one
    can look dead for minutes; `local_pool()` must reuse it rather than start a second server (or
    stop it mid-generation). The server is paused (SIGSTOP) to make it unresponsive, deterministically."""
    import os
    from compstrength.local import local_pool
    up = subprocess.run(CLI + ["pool", "up", "--members", "smollm2-135m"], capture_output=True, text=True, timeout=180)
    assert up.returncode == 0, up.stderr
    (srv,) = read_state().values()
    os.kill(srv.pid, signal.SIGSTOP)
    try:
        assert not healthy(srv.api_base, timeout=2.0)                        # it looks dead over HTTP…
        with local_pool(["smollm2-135m"]) as pool:
            assert pool.servers["smollm2-135m"].pid == srv.pid             # …and is reused,
            assert servers_of(isolated_home) == [srv.pid]                 # not duplicated,
            assert _alive(srv.pid)                                         # nor stopped
    finally:
        os.kill(srv.pid, signal.SIGCONT)
        subprocess.run(CLI + ["pool", "down"], capture_output=True, text=True, timeout=60)
    assert gone([srv.pid])
