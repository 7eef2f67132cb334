"""One config schema and one runner: the configs of the earlier formats keep working.

`tests/data/legacy/` holds the project's configs as they were written in the earlier formats (an experiment's
`[pool]` file, and the flat study file with its text protocols in a second file), and the values and correlations
the earlier runners gave on their recordings. Each legacy file is migrated on the way in, the repository's
configs are those migrations, and the one runner (`study.study_results`) replays every recording to the same
values, CIs, p-values and verdicts, bit for bit.

The expected records were made by the earlier runners (commit 9013a94) with one BLAS thread
(`OPENBLAS_NUM_THREADS=1`), as every bootstrap's resample means are now computed, so that the bits are the
same on any machine and in any worker process: with several BLAS threads, OpenBLAS rounds the same product
differently in the last bit (5.6e-17 here), and the record depended on the machine's cores.
"""
import subprocess, sys
from pathlib import Path

import pandas as pd
import pytest

from compstrength.config import StudyError, load_study
from compstrength.files import project_root
from compstrength.study import study_results

ROOT = project_root()
LEGACY = ROOT/"tests"/"data"/"legacy"
CONFIGS = ("default", "study", "study_loo_mmlu", "study_text_mmlu")


@pytest.mark.parametrize("name", ["default", "study_loo_mmlu", "study_text_mmlu"])
def test_repo_configs_are_their_legacy_files_migrated(name):
    old, new = load_study(LEGACY/f"{name}.toml"), load_study(ROOT/"configs"/f"{name}.toml")
    assert old.model_dump(exclude={"path"}) == new.model_dump(exclude={"path"})


def test_legacy_study_with_text_becomes_two_pools():
    cfg = load_study(LEGACY/"study.toml")
    assert list(cfg.pools) == ["study", "study_text_mmlu"] and cfg.family.rule == "all"
    assert all(cfg.protocols[p].pools == ["study"] for p in ("cascade", "majority_vote"))
    assert cfg.protocols["refine"].pools == ["study_text_mmlu"] and (cfg.protocols["refine"].sample, cfg.protocols["refine"].items) == (60, 30)


@pytest.mark.parametrize("name", CONFIGS)
def test_legacy_replay_is_unchanged(name, tmp_path):
    res = study_results(load_study(LEGACY/f"{name}.toml"))
    assert res["model_calls"] == 0
    for k in ("values", "correlations"):
        before = pd.read_csv(LEGACY/f"{name}.{k}.csv.gz")
        res[k].to_csv(tmp_path/f"{k}.csv", index=False)
        after = pd.read_csv(tmp_path/f"{k}.csv")
        missing = [c for c in before.columns if c not in after.columns]
        assert not missing, missing  # every column of the earlier record is still there (new ones may be added)
        # to floating-point precision: OpenBLAS picks its kernels by CPU, so a sum over items can differ in its last bit
        # (1e-17 on an AMD EPYC against the machine that wrote the record); a value that changed would differ by far more
        pd.testing.assert_frame_equal(after[list(before.columns)], before, check_exact=False, rtol=0, atol=1e-12, check_dtype=False)  # 0 and 0.0 alike


def test_migrate_command_writes_a_file_that_reads_back(tmp_path):
    out = tmp_path/"study.toml"
    r = subprocess.run([str(Path(sys.executable).parent/"compstrength"), "config", "migrate", str(LEGACY/"study.toml"), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    text = out.read_text()
    assert "[players.smollm2-135m]" in text and "[pools]" in text and "text =" not in text  # one file: the text protocols folded in
    assert load_study(out).model_dump(exclude={"path"}) == load_study(LEGACY/"study.toml").model_dump(exclude={"path"})


def test_legacy_typo_is_refused_with_its_key(tmp_path):
    bad = tmp_path/"bad.toml"
    bad.write_text((LEGACY/"default.toml").read_text().replace("limit = 10", "limt = 10", 1))
    with pytest.raises(StudyError, match=r"bad\.toml: unknown key 'tasks\[0\]\.limt'"): load_study(bad)
