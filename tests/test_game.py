"""Coalition games: an interrupted run resumes with no finished (coalition, item) recomputed;
shared member calls are made once."""
import tempfile

import pytest

from compstrength.game import CoalitionGame, all_coalitions
from compstrength.local import pool_specs
from compstrength.files import data_dir
from compstrength.models import ModelClient
from compstrength.protocols import MajorityVote
from compstrength.tasks import load_task


class Counting(MajorityVote):
    "Majority vote that counts its runs and can be told to break after k of them (a Ctrl-C stand-in)."
    def __init__(self, stop_after=None, **kw):
        super().__init__(**kw); self.runs, self.stop_after = 0, stop_after
    async def run(self, client, task, item, coalition):
        if self.stop_after is not None and self.runs >= self.stop_after: raise KeyboardInterrupt
        self.runs += 1
        return await super().run(client, task, item, coalition)


def _client():
    return ModelClient(pool_specs(), cache_dir=tempfile.mkdtemp(), recording=data_dir()/"recordings"/"main.jsonl", mode="replay")


def test_interrupted_run_resumes_without_recomputing(tmp_path):
    task = load_task("arithmetic", split="test", limit=10, seed=0)
    total = 15 * len(task)
    broken = Counting(stop_after=100)
    game = CoalitionGame(_client(), broken, task, cache_dir=tmp_path, progress=False, max_concurrency=4)
    with pytest.raises(KeyboardInterrupt):
        game.evaluate()
    done = len(game.cache)
    assert 0 < done <= 100
    again = Counting()
    game2 = CoalitionGame(_client(), again, task, cache_dir=tmp_path, progress=False)
    out = game2.evaluate()
    assert again.runs == total - done            # only the unfinished ones ran
    assert len(out) == total and out.error.isna().all()
    assert int(out.cached.sum()) == done


def test_shared_calls_are_made_once(tmp_path):
    task = load_task("gsm8k", split="test", limit=10, seed=0)
    client = _client()
    game = CoalitionGame(client, MajorityVote(), task, cache_dir=tmp_path, progress=False)
    out = game.evaluate()
    assert int(out.calls.sum()) == sum(len(c) for c in all_coalitions(game.players)) * len(task)   # 32 × 10 requests
    assert len({r.key for r in client.log}) == 4 * len(task)                                    # 40 distinct


def test_lookup_and_arun_one(tmp_path):
    "`lookup` reads the coalition cache with no call; `arun_one` fills it; rows carry their setting, which is not stored."
    from compstrength.game import OUTCOME_COLUMNS
    from compstrength.models import run_sync
    task = load_task("arithmetic", split="test", limit=2, seed=0)
    client = _client()
    game = CoalitionGame(client, MajorityVote(), task, cache_dir=tmp_path, progress=False, max_concurrency=1)
    c, it = {"smollm2-135m"}, task.items[0]
    assert game.lookup(c, it) is None and not client.log               # no call
    row = run_sync(game.arun_one(c, it))
    assert list(row) == OUTCOME_COLUMNS + ["cached"] and row["cached"] is False
    assert (row["family"], row["upper_bound"]) == ("text", False)
    stored = game.cache.get(game.key(c, it.id))
    assert "family" not in stored and "upper_bound" not in stored   # caches written before these columns stay valid
    n = len(client.log)
    assert game.lookup(c, it.id) == {**row, "model_calls": 0, "cached": True}
    assert run_sync(game.arun_one(c, it))["cached"] is True and len(client.log) == n
