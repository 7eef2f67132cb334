"""Process helpers shared by the pool tests: the servers a test started, and waiting for processes to end."""
import subprocess, time

from compstrength.local import _alive


def servers_of(home, server: str = "llama_cpp.server") -> list[int]:
    "Pids of the `server` processes (llama_cpp.server or llama-server) whose model path is under this test's home (isolated from any user pool)."
    out = subprocess.run(["pgrep", "-f", f"{server} --model {home}"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def gone(pids, timeout: float = 15) -> bool:
    "Whether every process of `pids` has ended within `timeout` seconds."
    t0 = time.time()
    while time.time() - t0 < timeout:
        if not any(_alive(p) for p in pids): return True
        time.sleep(0.2)
    return False
