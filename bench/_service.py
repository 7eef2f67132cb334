"""The training service as a separate process, for the benches (a fresh port, its log in a file)."""
import os, socket, subprocess, sys, time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def _yield_cpu():
    """In the service's process (a session of its own): the lowest CPU priority, for the process and, where the kernel
    groups sessions (autogroup), for its session. A C-RL step runs its phases one at a time, so this changes nothing
    there; in an evaluation the policy and the pool's llama.cpp servers are busy at once, and llama.cpp's threads, which
    wait for each other at every layer, slow to a crawl when torch's threads take their cores (seen: 0.36 tokens/s
    instead of ~19 on 2 cores). The servers go first; the service takes the cores they leave."""
    os.nice(19)
    try: Path("/proc/self/autogroup").write_text("19")
    except OSError: pass


def start_service(state_dir: Path, device: str, log: Path, threads: int|None = None, extra_args: list[str]|None = None,
                  yield_cpu: bool = True):
    """Start `compstrength serve-trainer` on `state_dir` (resumes its versions); returns (process, url) once it answers.
    `extra_args`: more of its flags, e.g. `["--backend", "vllm", "--vllm-url", "http://127.0.0.1:PORT"]`.
    `yield_cpu`: run it at the lowest CPU priority (`_yield_cpu`); False: at the caller's priority."""
    port = free_port()
    cmd = [sys.executable, "-c", "import sys; from compstrength.cli import main; sys.exit(main())",
           "serve-trainer", "--state-dir", str(state_dir), "--port", str(port), "--device", device]
    if threads: cmd += ["--threads", str(threads)]
    if extra_args: cmd += [str(x) for x in extra_args]
    proc = subprocess.Popen(cmd, stdout=open(log, "a"), stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_yield_cpu if yield_cpu else None)
    url = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        if proc.poll() is not None: raise RuntimeError(f"the service exited ({proc.returncode}): {Path(log).read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 401: return proc, url
        except httpx.TransportError: pass
        time.sleep(0.5)
    proc.terminate()
    raise RuntimeError(f"the service did not come up in 600 s; see {log}")
