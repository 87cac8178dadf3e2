#!/usr/bin/env bash
# Builds llama.cpp's Python binding (llama-cpp-python) from its source package into the active
# environment, CPU only, for bench/llama_cpp_peer.py. Not part of CI: ~15-25 minutes on 2 cores.
# Usage: bash bench/llama_cpp_build.sh [version]   (default 0.3.36)
set -euo pipefail
version="${1:-0.3.36}"
export CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF \
 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
python -m pip install --no-binary llama-cpp-python --no-deps --verbose \
  "llama-cpp-python==${version}" diskcache jinja2 typing-extensions
python -c "import llama_cpp; print('llama_cpp', llama_cpp.__version__)"
