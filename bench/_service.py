"""The training service as a separate process, for the benches (a fresh port, its log in a file)."""
import socket, subprocess, sys, time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def start_service(state_dir: Path, device: str, log: Path, threads: int|None = None):
    "Start `compstrength serve-trainer` on `state_dir` (resumes its versions); returns (process, url) once it answers."
    port = free_port()
    cmd = [sys.executable, "-c", "import sys; from compstrength.cli import main; sys.exit(main())",
           "serve-trainer", "--state-dir", str(state_dir), "--port", str(port), "--device", device]
    if threads: cmd += ["--threads", str(threads)]
    proc = subprocess.Popen(cmd, stdout=open(log, "a"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        if proc.poll() is not None: raise RuntimeError(f"the service exited ({proc.returncode}): {Path(log).read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 401: return proc, url
        except httpx.TransportError: pass
        time.sleep(0.5)
    proc.terminate()
    raise RuntimeError(f"the service did not come up in 600 s; see {log}")
