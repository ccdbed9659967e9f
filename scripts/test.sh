#!/usr/bin/env bash
# Build, then run the tests: CPU tests always; GPU tests (label gpu) when an NVIDIA GPU is visible.
# Says plainly when the GPU tests were not run. With a GPU visible the GPU tests are required: the build is
# configured with the Python module ON (the GPU tests run through it; a missing nanobind fails the configure),
# and a build that registers no gpu-labelled test fails here instead of reporting 100% of the CPU tests.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FP8ATTN_BUILD_DIR:-build}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  scripts/build.sh -DFP8ATTN_BUILD_PYTHON=ON "$@"
  gpu_tests=$(ctest --test-dir "$build" -N -L gpu | sed -n 's/^Total Tests: *//p')
  if [ "${gpu_tests:-0}" -eq 0 ]; then
    echo "fp8attn: ERROR: a GPU is visible but $build registers no gpu-labelled test (ctest -N -L gpu lists none)." >&2
    echo "fp8attn: the GPU tests need the Python module (FP8ATTN_BUILD_PYTHON=ON, nanobind, torch); check the" >&2
    echo "fp8attn: configure output of $build. Not reporting success with only the CPU tests run." >&2
    exit 1
  fi
  echo "fp8attn: GPU visible: running the CPU tests and ${gpu_tests} gpu-labelled test(s)"
  ctest --test-dir "$build" --output-on-failure
else
  # The kernels' CPU check in Triton's interpreter needs its own small environment (triton, numpy < 2.4).
  interpreter_python=$(scripts/interpreter_env.sh)
  scripts/build.sh -DFP8ATTN_INTERPRETER_PYTHON="$interpreter_python" "$@"
  echo "fp8attn: no GPU visible: running the CPU tests only (the gpu-labelled tests are NOT run here)"
  ctest --test-dir "$build" --output-on-failure -LE gpu
fi
