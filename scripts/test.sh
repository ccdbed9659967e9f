#!/usr/bin/env bash
# Build, then run the tests: CPU tests always; GPU tests (label gpu) when an NVIDIA GPU is visible.
# Says plainly when the GPU tests were not run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FP8ATTN_BUILD_DIR:-build}
scripts/build.sh "$@"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  ctest --test-dir "$build" --output-on-failure
else
  echo "fp8attn: no GPU visible: running the CPU tests only (the gpu-labelled tests are NOT run here)"
  ctest --test-dir "$build" --output-on-failure -LE gpu
fi
