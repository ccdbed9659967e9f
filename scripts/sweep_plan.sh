#!/usr/bin/env bash
# The Gluon kernel's pending sweeps (switches compiled and checked on the CPU, not yet measured), grouped so that one
# group fits one device call (600 s) and the device tool's 8 returned files (each device_check.sh run leaves
# device_check.tgz and summary.txt under its own folder of $OUT):
#   bash scripts/sweep_plan.sh A      # then B, C
# What each variant tests, and the prediction written before it runs: docs/perf/NOTES.md (2026-12-05, twelfth
# session). A group is removed from here once its results are in the notes.
set -uo pipefail
cd "$(dirname "$0")/.."
K=kernels/fmha_fwd/fmha_fwd_gluon.py
O=${OUT:?OUT must name the folder that comes back}
# Q_REG_QUARTERS variants set Q_IN_REGS=0: the sweep applies the library's Q_IN_REGS policy to variants that do not
# set it, and the kernel refuses both switches at once.
Q2=Q_IN_REGS=0,Q_REG_QUARTERS=2
Q3=Q_IN_REGS=0,Q_REG_QUARTERS=3

run() {  # run <folder> <device_check.sh's environment...>
  local sub=$1
  shift
  env OUT="$O/$sub" STEPS=sweep "$@" bash scripts/device_check.sh > /dev/null 2>&1
  echo "== $sub"
  tail -25 "$O/$sub/summary.txt"
}

case "${1:-}" in
  A)  # BF16 D=256 (the BF16 gap the power limit does not explain; 3 quarters there make ptxas serialize every wgmma,
      # C7512, so not swept), then e4m3 D=256
    run a SWEEP_SEQLENS=2048,8192 SWEEP_ARGS=--bf16 SWEEP_HEAD_DIMS=256 \
      SWEEP_VARIANTS="lib=$K q2=$K:$Q2 lazy=$K:LAZY_RESCALE=1 q2lazy=$K:$Q2,LAZY_RESCALE=1 \
n128=$K:BLOCK_N=128,NUM_STAGES=1 lib2=$K q22=$K:$Q2"
    run b SWEEP_SEQLENS=2048,8192 SWEEP_HEAD_DIMS=256 \
      SWEEP_VARIANTS="lib=$K:KEY_PERMUTED=1 q2=$K:KEY_PERMUTED=1,$Q2 q3=$K:KEY_PERMUTED=1,$Q3 lib2=$K:KEY_PERMUTED=1"
    ;;
  B)  # BF16 D=128 and D=64, INT8 Q.K^T at D=128
    run c SWEEP_SEQLENS=2048,8192 SWEEP_ARGS=--bf16 SWEEP_HEAD_DIMS=128 \
      SWEEP_VARIANTS="lib=$K q2=$K:$Q2 lazy=$K:LAZY_RESCALE=1 q2lazy=$K:$Q2,LAZY_RESCALE=1 lib2=$K"
    run d SWEEP_SEQLENS=2048,8192 SWEEP_ARGS=--bf16 SWEEP_HEAD_DIMS=64 \
      SWEEP_VARIANTS="lib=$K lazy=$K:LAZY_RESCALE=1 n256=$K:BLOCK_N=256,Q_IN_REGS=0 n256q=$K:BLOCK_N=256,Q_IN_REGS=1"
    # INT8 Q.K^T at D=128 (issue 7's int8_qk mode), the library's 128-key tile
    P=KEY_PERMUTED=1,BLOCK_N=128
    run g SWEEP_SEQLENS=2048,8192 SWEEP_ARGS=--int8 SWEEP_HEAD_DIMS=128 \
      SWEEP_VARIANTS="lib=$K:$P q2=$K:$P,$Q2 q3=$K:$P,$Q3 lib2=$K:$P"
    ;;
  C)  # e4m3 D=128 on 256-key tiles (given V^T and the in-kernel transpose), the window with Q in registers
    P=KEY_PERMUTED=1,BLOCK_N=256
    run e SWEEP_SEQLENS=2048,8192 SWEEP_HEAD_DIMS=128 \
      SWEEP_VARIANTS="lib=$K:$P q2=$K:$P,$Q2 q3=$K:$P,$Q3 lib2=$K:$P"
    run f SWEEP_SEQLENS=512,1024 SWEEP_HEAD_DIMS=128 \
      SWEEP_VARIANTS="vnat=$K:$P,TRANSPOSE_V=1 vnatq2=$K:$P,TRANSPOSE_V=1,$Q2 vnatq3=$K:$P,TRANSPOSE_V=1,$Q3 \
vnat2=$K:$P,TRANSPOSE_V=1"
    run w SWEEP_SEQLENS=1 SWEEP_ARGS=--window SWEEP_HEAD_DIMS=128 \
      SWEEP_VARIANTS="lib=$K:$P q=$K:$P,Q_IN_REGS=1 q2=$K:$P,Q_IN_REGS=1 lib2=$K:$P"
    ;;
  *)
    echo "usage: OUT=<dir> bash scripts/sweep_plan.sh A|B|C" >&2
    exit 2
    ;;
esac
