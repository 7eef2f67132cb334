import os, sys
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def isolated_home(tmp_path, monkeypatch):
    """A COMPSTRENGTH_HOME of its own (pool state, caches), sharing the verified models and wheels
    of the real home, so that tests never touch a pool the user started."""
    from compstrength.files import home_dir
    real = home_dir()
    home = tmp_path/"home"; home.mkdir()
    for d in ("models", "wheels", "data", "build"):  # build: the llama-server binary, compiled once per machine
        (real/d).mkdir(exist_ok=True)
        (home/d).symlink_to(real/d)
    monkeypatch.setenv("COMPSTRENGTH_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def pool():
    "The embedded pool (all four members), started once for the session (or reused)."
    from compstrength.local import local_pool
    with local_pool() as p:
        yield p


@pytest.fixture(scope="session")
def default_run(tmp_path_factory):
    """`compstrength run` (the default config, replayed: no model call) once for the whole session, in a
    COMPSTRENGTH_HOME of its own; the tests that read its results, stdout or report share it."""
    import os, subprocess, sys
    from pathlib import Path
    from compstrength.files import home_dir
    tmp = tmp_path_factory.mktemp("default_run")
    real, home = home_dir(), tmp/"home"
    home.mkdir()
    for d in ("models", "wheels", "data", "build"):
        (real/d).mkdir(exist_ok=True)
        (home/d).symlink_to(real/d)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COMPSTRENGTH_HOME": str(home)}
    exe = Path(sys.executable).with_name("compstrength")
    r = subprocess.run([str(exe), "run", "--out", str(tmp/"res")], cwd=Path(__file__).resolve().parents[1], env=env,
                       capture_output=True, text=True, timeout=900)
    return r, tmp/"res"
