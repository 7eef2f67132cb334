#!/usr/bin/env bash
# README command 1: set everything up, then run the main job on the embedded local pool.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
exec .venv/bin/compstrength run "$@"
