#!/usr/bin/env bash
# README command 1: set everything up, check the embedded local pool answers (live, cached),
# then run the main job (the study of configs/study.toml, replayed; extra arguments go to `compstrength run`).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
echo "== the embedded pool answers (compstrength smoke: live on first run, then from the call cache)"
.venv/bin/compstrength smoke
echo "== the main job (compstrength run)"
exec .venv/bin/compstrength run "$@"
