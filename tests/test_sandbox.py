"""The code sandbox: limits hold and nothing escapes, for programs a model might write."""
import os, tempfile, time
from pathlib import Path

from compstrength.sandbox import run_sandboxed


def test_file_size_limit_and_cleanup():
    before = set(Path(tempfile.gettempdir()).glob("compstrength-sbx-*"))
    r = run_sandboxed("open('big.bin','wb').write(b'x' * (64 * 1024 * 1024))", fsize_mb=8)
    assert not r.passed
    assert set(Path(tempfile.gettempdir()).glob("compstrength-sbx-*")) == before, "temporary directory left behind"


def test_host_tmp_and_home_are_hidden():
    secret = Path(tempfile.mkdtemp())/"secret.txt"; secret.write_text("top secret")
    r = run_sandboxed(f"import os; print(os.path.exists({str(secret)!r}), os.listdir(os.path.expanduser('~')))")
    assert r.passed and r.stdout.startswith("False"), r.stdout + r.stderr


def test_children_killed_at_timeout():
    r = run_sandboxed("import subprocess, time\nsubprocess.Popen(['sleep', '300.0417'])\ntime.sleep(300)", timeout=1.5)
    assert r.timed_out
    deadline = time.time() + 10  # a killed process can take a moment to exit on a loaded machine; an escaped one lives 300 s
    while (out := os.popen("pgrep -f 'sleep 300[.]0417'").read().split()) and time.time() < deadline: time.sleep(0.2)
    assert not out, f"a sandboxed child survived: {out}"


def test_no_network_even_to_loopback():
    import socket
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    port = srv.getsockname()[1]
    r = run_sandboxed(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)")
    srv.close()
    assert not r.passed and ("refused" in r.stderr.lower() or "unreachable" in r.stderr.lower()), r.stderr
