#!/usr/bin/env bash
# README command 2: the whole test suite (sets up first if needed).
#   fast notebook tests -> pytest (integration, pool, service tests) -> notebook slow pass (live models)
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
echo "== nbdev-test (fast: recorded replays, no model server)"
.venv/bin/nbdev-test --n-workers 2
echo "== pytest"
set +e
.venv/bin/python -m pytest -q -rs tests
rc=$?
set -e
if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then exit $rc; fi   # 5: no tests collected
[ $rc -eq 5 ] && echo "pytest collected no tests"
echo "== nbdev-test --flags slow (live calls to the embedded pool)"
.venv/bin/nbdev-test --flags slow --n-workers 1
