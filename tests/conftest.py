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
    for d in ("models", "wheels", "data"):
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
