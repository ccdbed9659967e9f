#!/usr/bin/env bash
# Configure and build fp8attn into ./build (or $FP8ATTN_BUILD_DIR). Extra arguments go to the configure step,
# e.g. scripts/build.sh -DFP8ATTN_KERNELS='e4m3*causal'. Needs no GPU: kernels are compiled ahead of time.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FP8ATTN_BUILD_DIR:-build}
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" "${generator[@]}" "$@"
else
  cmake -S . -B "$build" "$@"
fi
cmake --build "$build" -j "$(nproc)"
