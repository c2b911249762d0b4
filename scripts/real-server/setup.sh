#!/usr/bin/env bash
# Builds the real server the `real_server` integration tests run against: llama.cpp's
# llama-server (CPU build, from the llama.cpp tree vendored in the PyPI sdist of
# llama-cpp-python) and tiny-qwen3.gguf, a 2-layer random-weight Qwen3-architecture model that
# carries the real Qwen3 tokenizer and chat template (from testdata/tokenizers/qwen3).
#
# Usage: scripts/real-server/setup.sh [DIR]
#   DIR defaults to $SERVEBENCH_REAL_SERVER_DIR, else ~/.cache/servebench-real-server: outside
#   the clone, so a machine pays the build once. Idempotent; prints DIR.
# Cost on 2 cores: several minutes of compiling the first time (cmake is installed from Debian
# when missing); the model is made in seconds (PyPI gguf and numpy, in a venv under DIR).
# The tests find the result through $SERVEBENCH_REAL_SERVER_DIR or the default DIR.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DIR=${1:-${SERVEBENCH_REAL_SERVER_DIR:-$HOME/.cache/servebench-real-server}}
VERSION=0.3.36
mkdir -p "$DIR/dl"
cd "$DIR"

if [ ! -x build/bin/llama-server ]; then
  if ! command -v cmake >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends cmake >/dev/null
  fi
  sdist="dl/llama_cpp_python-$VERSION.tar.gz"
  [ -f "$sdist" ] || python3 -m pip download -q --no-deps --no-binary :all: -d dl "llama-cpp-python==$VERSION"
  if [ ! -f src/CMakeLists.txt ]; then
    tar xzf "$sdist" -C dl
    mkdir -p src
    cp -a "dl/llama_cpp_python-$VERSION/vendor/llama.cpp/." src/
    rm -f src/.git # a submodule link into the sdist's own repository, which is not here
  fi
  # The compiler's output goes to build.log, shown only when the build fails.
  if ! { cmake -S src -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
           -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
           -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON &&
         cmake --build build --target llama-server -j "$(nproc)"; } >build.log 2>&1; then
    tail -n 40 build.log >&2
    echo "error: building llama-server failed; the whole log is $DIR/build.log" >&2
    exit 1
  fi
fi

if [ ! -f tiny-qwen3.gguf ]; then
  [ -x venv/bin/python ] || { python3 -m venv venv && venv/bin/pip install -q gguf numpy; }
  venv/bin/python "$HERE/make_tiny_gguf.py" tiny-qwen3.gguf "$REPO/testdata/tokenizers/qwen3" >/dev/null
fi
echo "$DIR"
