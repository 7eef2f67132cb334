"""Supply chain: the installed litellm is the pinned one and carries no startup hook."""
import sys, tomllib
from importlib.metadata import version
from pathlib import Path


def test_litellm_pinned_and_clean():
    root = Path(__file__).resolve().parent.parent
    deps = tomllib.loads((root/"pyproject.toml").read_text())["project"]["dependencies"]
    pin = [d for d in deps if d.startswith("litellm==")]
    assert pin, "litellm must be pinned exactly"
    assert version("litellm") == pin[0].split("==")[1]
    for p in map(Path, sys.path):
        if p.is_dir():
            assert not list(p.glob("litellm_init.pth")), f"malicious startup hook in {p}"
