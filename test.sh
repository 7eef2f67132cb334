#!/usr/bin/env bash
# README command 2: the whole test suite (sets up first if needed). CI runs exactly this.
#   ./test.sh            every notebook (recorded replays, and its #| slow cells live on the embedded pool),
#                        then pytest (integration, browser, service tests and the small live tier)
#   ./test.sh --live     also the deep live runs CI does not do (every protocol live on 3 items with
#                        the recorded settings): a few hours on 2 cores
#   ./test.sh --record   regenerate every recording the replays read (data/recordings/*.jsonl), live;
#                        a replay that misses a request says to run this
# Nothing is skipped for time: every cell and every test runs, and any failure fails the run.
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-}
case "$mode" in ""|--live|--record) ;; *) echo "usage: ./test.sh [--live|--record]" >&2; exit 2;; esac

phases=(); secs=()
t_phase=$(date +%s)
phase() {  # close the running phase under the name given
  local now; now=$(date +%s); phases+=("$1"); secs+=($(( now - t_phase ))); t_phase=$now
}
table() {
  echo "== phase timings"
  printf '%-44s %8s\n' phase seconds
  local i total=0
  for i in "${!phases[@]}"; do printf '%-44s %8d\n' "${phases[$i]}" "${secs[$i]}"; total=$(( total + secs[i] )); done
  printf '%-44s %8d\n' total "$total"
}

if [ -n "${CS_CI_SETUP_S:-}" ]; then phases+=("setup + export check (.ci/run)"); secs+=("$CS_CI_SETUP_S"); fi
bash scripts/setup.sh
# vLLM's own environment (the pinned wheel, once per machine: ~2 min), for the vLLM tier of the tests
.venv/bin/compstrength vllm setup
phase "setup"
export LITELLM_LOCAL_MODEL_COST_MAP=True
[ "$mode" = --live ] && export COMPSTRENGTH_LIVE_DEEP=1
[ "$mode" = --record ] && export COMPSTRENGTH_RECORD=1 COMPSTRENGTH_LIVE_DEEP=1

# One warm-up for the whole run: the pool's servers start once, and every notebook and test that
# asks for the pool (`local_pool()`) reuses them. Tests of the pool's own lifecycle start theirs
# in a home of their own.
started_pool=0
if ! .venv/bin/compstrength pool status --json | .venv/bin/python -c "import json,sys; sys.exit(0 if all(s['up'] for s in json.load(sys.stdin)) else 1)"; then
  .venv/bin/compstrength pool up; started_pool=1
fi
trap '[ $started_pool = 1 ] && .venv/bin/compstrength pool down >/dev/null 2>&1; table' EXIT
phase "pool up (one warm-up, shared)"

if [ "$mode" = --record ]; then
  echo "== recording the main job (compstrength run --live --record)"
  .venv/bin/compstrength run --live --record --out results
  echo "== recording the protocols (every protocol live on 3 items)"
  .venv/bin/python -m pytest -q tests/test_protocols.py -k protocol_live
  phase "record: main job and protocols"
  # The notebooks and tests below then run against the new recordings (01_local and 13_cli rewrite
  # theirs from their #| slow cells).
fi

# Both phases always run (a failing notebook does not hide the tests' results); either failing fails the run.
# Every notebook runs once, as `nbdev-test --flags slow` runs it (its examples and checks against recorded
# replays, its #| slow cells live on the pool), and that one execution is also rendered into the documentation
# site, which tests/test_docs_site.py then opens in Chromium (COMPSTRENGTH_DOCS_SITE) instead of executing every
# notebook a second time.
echo "== the notebooks: every one executed (#| slow cells live on the embedded pool) into the docs site"
site=test-artifacts/_docs
set +e
.venv/bin/compstrength docs --renderer offline --flags slow --workers 2 --out "$site"
nb_rc=$?
set -e
[ $nb_rc -eq 0 ] && export COMPSTRENGTH_DOCS_SITE="$PWD/$site"  # a failed build leaves the docs tests to build their own
phase "notebooks, live slow cells (= docs site)"

echo "== pytest"
set +e
.venv/bin/python -m pytest -q -rs --durations=25 tests
rc=$?
set -e
phase "pytest"
if [ $rc -eq 5 ]; then echo "pytest collected no tests"; rc=1; fi
[ $nb_rc -ne 0 ] && echo "!! a notebook failed (exit $nb_rc): see the notebook errors above"
[ $rc -ne 0 ] && echo "!! pytest failed (exit $rc)"
[ $nb_rc -eq 0 ] && [ $rc -eq 0 ]
