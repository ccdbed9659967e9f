#!/usr/bin/env bash
# Everything the H200 has to show, in one device call: build (with the Python module), every test (CPU and
# GPU), the profiler over the standard suite, and the benchmark against cuDNN. Logs and CSVs go to $OUT, bundled at
# exit into $OUT/device_check.tgz (the device tool returns at most 8 files).
#   STEPS="build test profile bench" bash scripts/device_check.sh
# Steps not in the default set (each needs a build, i.e. the build step in the same call or a kept build/):
#   sanitize   scripts/sanitize.sh: compute-sanitizer memcheck, racecheck, initcheck, synccheck (~6 min)
#   hostbench  host overhead per call: bench/bench_host_overhead.py (Python, vs torch SDPA, with CUDA graphs)
#              and build/bench/fp8attn_bench_host_overhead (C++), under a minute
#   sweep      bench/sweep_gluon.py: the Gluon kernel's switches side by side on the suite's D=64, 128 and 256
#              points (SWEEP_VARIANTS overrides the list; the default: the library's settings against
#              the plain key order; SWEEP_HEAD_DIMS and SWEEP_SEQLENS narrow the points; SWEEP_ARGS adds arguments,
#              e.g. "--window" for issue 9's window pair or "--bf16"), a few minutes; needs
#              no build
#   modes      bench/accuracy_modes.py: every accuracy mode's error on Gaussian / sink / outlier inputs up to 128k
#              (cuDNN FP8 beside it) and every mode's speed on the standard suite, quantization included (~4 min)
#   decode     bench/bench_decode.py: paged FP8 decode vs BF16 SDPA (cuDNN, FlashAttention), TB/s (~2 min;
#              DECODE_ARGS adds arguments, e.g. --instances)
#   decodesweep bench/sweep_decode.py: the decode kernel's settings through the JIT on bench_decode's cases
#              (DECODE_VARIANTS overrides the list; the default: the library's Gluon decode, two programs per SM
#              as gluon_decode_grid picks for these cases, against PREFETCH_ITEM; DECODE_CASES the cases),
#              under a minute; needs no build
#   varlen     bench/bench_varlen.py: packed sequences vs the dense call at the same work (~1 min)
#   guard      bench/bench_guard.py: the quality guard's overhead when it does not trigger (~1 min)
#   int8       INT8 Q.K^T at D=64: bench/sweep_gluon.py --int8 over the kernel's settings (INT8_VARIANTS overrides,
#              INT8_SEQLENS narrows the points, INT8_HEAD_DIMS=64,128 adds D=128), then bench/bench_int8_instances.py,
#              every compiled INT8 instance by name (~4 min; INT8_INSTANCES=0 skips the second part)
#   ratio      issue 7's int8_qk / fp8 end to end over the suite, the modes timed after each other and each settled
#              (bench_int8_instances.py --modes-only), then bench_quantize_instances.py (~4 min)
#   quantsweep bench/sweep_quantize.py: the quantize kernels' variants through the JIT on the accuracy modes' recipes
#              (QUANT_VARIANTS overrides the list; the default: the library's apply against the Gluon apply),
#              apply alone and the whole quantization, outputs checked byte for byte; under a minute; needs no build
#   stages     bench/mode_stage_times.py: every kernel of one fp8 / fp8_smooth_rotate / int8_qk call and its time, at
#              D=64 S=8192 and D=128 S=2048 (~1 min)
#   clocks     bench/clock_under_load.py: SM clock and board power while cuDNN FP8 (JAX), fp8attn FP8 / BF16 and SDPA
#              BF16 run back to back at D=128 S=8192 (whether the card holds its clock or its power limit holds it
#              back) (~40 s a point, two by default); CLOCK_POINTS names other points of the standard suite,
#              CLOCK_ARGS=--window adds issue 9's window pair (fp8attn FP8 at S=32k, full causal and a 4k window)
#   candidates every Gluon instance, the extra set's candidates included (D=128 with 3 stages, D=64 with 2), timed by
#              name beside the default ones over the standard suite, e4m3 and bf16 (fp8attn_profiler
#              --providers=instance); needs a build with FP8ATTN_KERNELS=* (~3 min)
#   ncu        Nsight Compute on one launch each of the prefill attention kernel (D=128 S=8192 causal) and the
#              paged decode kernel (32 x 32k), bench/ncu_targets.py: speed of light, pipe utilization (tensor,
#              exponential), issue slots, warp stall reasons, memory throughput; clocks left alone (~2 min).
#              NCU_TARGETS overrides the list (ncu_targets.py's varlen_dense / varlen_packed profile a call's V
#              transpose and attention kernel, decode_b128 / decode_b8 the decode at (128, 4k) / (8, 128k),
#              window / window_causal the 4k sliding window at S=32k and plain causal there (the same instance),
#              apply_fp8 / apply_int8_qk one fused accuracy-mode call's three quantize apply launches at D=128
#              S=2048 B=16, mode_fp8_d64 / mode_int8_d64 the attention kernel alone on the two modes' operands at
#              D=64 S=2048 full, mode_*_d64_causal8k the same at D=64 S=8192 causal); NCU_STALLS=1 adds every
#              stall reason and pipe utilization as metrics (NCU_LINES: how many lines of each profile to print)
#   consan     Triton's concurrency sanitizer (ConSan, FP8ATTN_CONSAN=1: shared-memory and mbarrier races
#              checked on the device) over every Gluon instance (attention and paged decode), built instrumented
#              into build-consan and run through the GPU tests that force each instance by name, and beside
#              them scripts/consan_selftest.py (the checker shown to catch two removed waits) (~6 min);
#              CONSAN_SET=paged: the paged decode instances and test_paged only, no self-test (~2 min)
#   STEPS="build sanitize hostbench" bash scripts/device_check.sh
# Instances outside the default set (codegen/manifest.py's extra set, e.g. the Gluon D=128 3-stage
# ones) are built with a filter; '*' builds every instance, and the GPU tests then force each by name:
#   BUILD_ARGS="-DFP8ATTN_BUILD_PYTHON=ON -DFP8ATTN_KERNELS=*" STEPS="build test" bash scripts/device_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fp8attn_out}
STEPS=${STEPS:-build profile test bench}
mkdir -p "$OUT"
# The device tool returns at most 8 files from $OUT: at exit (also an early one), everything this call wrote goes
# into one archive, $OUT/device_check.tgz, and only it and the summary stay ($OUT/summary.txt: this script's own
# output). BUNDLE=0 leaves the files as they are.
if [[ ${BUNDLE:-1} == 1 ]]; then
  exec > >(tee "$OUT/summary.txt") 2>&1
  bundle() {
    local rc=$?
    sleep 1  # let tee flush
    tar czf /tmp/device_check.tgz -C "$OUT" --exclude summary.txt . 2>/dev/null &&
      find "$OUT" -mindepth 1 -maxdepth 1 ! -name summary.txt -exec rm -rf {} + &&
      mv /tmp/device_check.tgz "$OUT/device_check.tgz"
    exit $rc
  }
  trap bundle EXIT
fi
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
status=0
step() { [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"

if step build; then
  start=$(date +%s)
  scripts/build.sh ${BUILD_ARGS:--DFP8ATTN_BUILD_PYTHON=ON} > "$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -40 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
fi
if step profile; then
  build/tools/profiler/fp8attn_profiler --operation=all --suite=standard --output="$OUT/profiler_standard.csv" > "$OUT/profiler.txt" 2>&1 || status=1
  cat "$OUT/profiler.txt" | cut -c1-230
fi
if step test; then
  ctest --test-dir build --output-on-failure > "$OUT/ctest.log" 2>&1 || status=1
  grep -E "tests passed|Failed|\*\*\*|passed,|failed," "$OUT/ctest.log" | tail -15
  # The pytest summary of the GPU suite: ctest keeps every test's output in LastTest.log, passed or not.
  grep -E "^(FAILED|ERROR|SKIPPED)|[0-9]+ (passed|failed|skipped)" build/Testing/Temporary/LastTest.log | tail -25
fi
if step bench; then
  PYTHONPATH=build/python timeout 300 python3 bench/bench_vs_cudnn.py --output "$OUT/bench_vs_cudnn.csv" \
    --plot "$OUT/bench_vs_cudnn.png" > "$OUT/bench.txt" 2>&1 || status=1
  tail -30 "$OUT/bench.txt"
  # Against the committed run (docs/perf/bench_vs_cudnn.csv): any fp8attn point more than 5% slower fails the step.
  python3 bench/compare_runs.py "$OUT/bench_vs_cudnn.csv" > "$OUT/compare_runs.txt" 2>&1 || status=1
  grep -E "REGRESSION|^# " "$OUT/compare_runs.txt"
fi
if step sweep; then
  K=kernels/fmha_fwd/fmha_fwd_gluon.py
  variants=${SWEEP_VARIANTS:-"lib=$K:KEY_PERMUTED=1 plain=$K:KEY_PERMUTED=0"}
  args=()
  for v in $variants; do args+=(--variant "$v"); done
  [[ -n "${SWEEP_SEQLENS:-}" ]] && args+=(--seqlens "$SWEEP_SEQLENS")
  [[ -n "${SWEEP_ARGS:-}" ]] && args+=(${SWEEP_ARGS})
  timeout 400 python3 bench/sweep_gluon.py "${args[@]}" --head-dims "${SWEEP_HEAD_DIMS:-64,128,256}" --csv "$OUT/sweep.csv" \
    > "$OUT/sweep.txt" 2>&1 || status=1
  tail -50 "$OUT/sweep.txt"
fi
if step decodesweep; then
  g=gluon=1,ROWS=8,BLOCK_N=64,stages=4,maxnreg=80,per_sm=2
  variants=${DECODE_VARIANTS:-"lib=$g prefetch=$g,PREFETCH_ITEM=1"}
  args=()
  for v in $variants; do args+=(--variant "$v"); done
  timeout 300 python3 bench/sweep_decode.py "${args[@]}" \
    --cases "${DECODE_CASES:-b32_s32k,b8_s128k,b128_s4k,b1_s128k,b32_s32k_page16}" \
    --csv "$OUT/sweep_decode.csv" > "$OUT/sweep_decode.txt" 2>&1 || status=1
  cat "$OUT/sweep_decode.txt"
fi
if step candidates; then
  build/tools/profiler/fp8attn_profiler --list --kernels="128x128x128_w4_s3*gluon" > /dev/null 2>&1 ||
    { echo "candidates: the extra set is not in this build (BUILD_ARGS=\"... -DFP8ATTN_KERNELS=*\")"; status=1; }
  for dtype in e4m3 bf16; do
    build/tools/profiler/fp8attn_profiler --operation=fmha_fwd --suite=standard --dtype=$dtype --providers=instance \
      --kernels=gluon --output="$OUT/candidates_$dtype.csv" > "$OUT/candidates_$dtype.txt" 2>&1 || status=1
    tail -1 "$OUT/candidates_$dtype.txt"
  done
fi
if step ncu; then
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  # NCU_TARGETS: bench/ncu_targets.py's targets (default prefill decode); the varlen pair profiles both kernels of
  # one call (the V transpose and the attention kernel).
  for target in ${NCU_TARGETS:-prefill decode}; do
    kernels="fmha_fwd|paged_decode" skip=3 count=1
    [[ $target == varlen_* ]] && kernels="fmha_fwd|transpose_v" skip=6 count=2
    # apply_*: one fused mode call's three quantize apply launches (Q, K, V), the 4th call's.
    [[ $target == apply_* ]] && kernels="quantize_apply" skip=9 count=3
    # NCU_STALLS=1 adds each stall reason's warps per issued instruction and each pipe's share of its peak (the
    # sections print only the top reasons); the grep then shows them.
    metrics=()
    [[ ${NCU_STALLS:-0} == 1 ]] && metrics=(--metrics
      "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active")
    profile() {
      PYTHONPATH=build/python timeout 300 "$NCU" --clock-control none --kernel-name regex:"$kernels" \
        --launch-skip $skip --launch-count $count --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section Occupancy \
        "$@" python3 bench/ncu_targets.py $target > "$OUT/ncu_$target.txt" 2>&1
    }
    # A metric this ncu does not know fails the run: then the sections alone, and say so.
    profile "${metrics[@]}" || { [[ ${#metrics[@]} -gt 0 ]] && echo "ncu $target: the stall metrics failed" &&
      profile; } || status=1
    grep -E "kernel:|transpose_v|fmha_fwd|quantize_apply|Duration|Throughput|Hit Rate|Issue Slots|Issued Warp|Stall|Pipe|Eligible|issue_stalled|inst_executed_pipe" \
      "$OUT/ncu_$target.txt" | head -${NCU_LINES:-60}
  done
fi
if step modes; then
  PYTHONPATH=build/python timeout 420 python3 bench/accuracy_modes.py --accuracy --speed --csv "$OUT/accuracy_modes.csv" \
    --plot "$OUT/accuracy_modes.png" > "$OUT/modes.txt" 2>&1 || status=1
  tail -40 "$OUT/modes.txt"
fi
if step decode; then
  # DECODE_ARGS: more arguments, e.g. "--instances" (every compiled decode instance by name beside the pick).
  # shellcheck disable=SC2086
  PYTHONPATH=build/python timeout 300 python3 bench/bench_decode.py --window ${DECODE_ARGS:-} \
    --csv "$OUT/bench_decode.csv" > "$OUT/decode.txt" 2>&1 || status=1
  cat "$OUT/decode.txt"
fi
if step varlen; then
  PYTHONPATH=build/python timeout 200 python3 bench/bench_varlen.py --csv "$OUT/bench_varlen.csv" > "$OUT/varlen.txt" 2>&1 \
    || status=1
  cat "$OUT/varlen.txt"
fi
if step guard; then
  PYTHONPATH=build/python timeout 300 python3 bench/bench_guard.py --csv "$OUT/bench_guard.csv" > "$OUT/guard.txt" 2>&1 \
    || status=1
  cat "$OUT/guard.txt"
fi
if step clocks; then
  # CLOCK_POINTS: the standard suite's points to run (default D=128 S=8192 full and causal; ~40 s a point, the
  # timeout 90 s a point; the CSV is rewritten after every row).
  points=${CLOCK_POINTS:-d128_s8192_full,d128_s8192_causal}
  n_points=$(( $(tr -cd , <<< "$points" | wc -c) + 1 ))
  # shellcheck disable=SC2086
  PYTHONPATH=build/python timeout $(( 90 * n_points + 60 )) python3 bench/clock_under_load.py \
    --csv "$OUT/clock_under_load.csv" --points "$points" ${CLOCK_ARGS:-} \
    > "$OUT/clocks.txt" 2>&1 || status=1
  cat "$OUT/clocks.txt"
fi
if step int8; then
  # INT8 Q.K^T (issue 7's int8_qk mode): the kernel's INT8 settings through the JIT at D=64 (the library's 128-row
  # kernel with its ring of 2, three consumers, and four single-warpgroup CTAs an SM, fmha_fwd_gluon_solo.py; the
  # four-consumer and two-CTA variants, measured on an H100 on 2026-12-05 (docs/perf/NOTES.md), are sweep switches:
  # NUM_CONSUMERS=4,BLOCK_N=64 and BLOCK_N=64,CONSUMER_REGS=104,MAXNREG=80,CTAS_PER_SM=2), INT8_VARIANTS overrides,
  # INT8_SEQLENS narrows the points; then every compiled INT8 instance by name through the library (the extra set's
  # only with a FP8ATTN_KERNELS=* build).
  K=kernels/fmha_fwd/fmha_fwd_gluon.py
  S=KEY_PERMUTED=1,NUM_STAGES=2
  variants=${INT8_VARIANTS:-"lib=$K:$S c3=$K:$S,NUM_CONSUMERS=3
    solo=kernels/fmha_fwd/fmha_fwd_gluon_solo.py:$S,NUM_CONSUMERS=1,MAXNREG=128,CTAS_PER_SM=4"}
  args=()
  for v in $variants; do args+=(--variant "$v"); done
  [[ -n "${INT8_SEQLENS:-}" ]] && args+=(--seqlens "$INT8_SEQLENS")
  # INT8_HEAD_DIMS (default 64) sets the sweep's head dims and the suite configs the instances run on.
  int8_dims=${INT8_HEAD_DIMS:-64}
  # The variants compiled on a fresh machine and four points (the CSV is written per point).
  timeout 420 python3 bench/sweep_gluon.py --int8 "${args[@]}" --head-dims "$int8_dims" --csv "$OUT/int8_sweep.csv" \
    > "$OUT/int8_sweep.txt" 2>&1 || status=1
  tail -20 "$OUT/int8_sweep.txt"
  if [[ "${INT8_INSTANCES:-1}" != 0 ]]; then  # INT8_INSTANCES=0: the sweep alone (a call's 10 minutes)
    PYTHONPATH=build/python timeout 200 python3 bench/bench_int8_instances.py --configs "d${int8_dims//,/,d}" \
      --csv "$OUT/int8_instances.csv" > "$OUT/int8_instances.txt" 2>&1 || status=1
    cat "$OUT/int8_instances.txt"
  fi
fi
if step ratio; then
  # Issue 7's ratio, int8_qk / fp8 end to end (quantization included), on every point of the standard suite the
  # build has INT8 instances for, timed two ways: the two modes right after each other, and each settled (100 ms of
  # its own calls before every sample: each at the clock its own power draw settles to; docs/perf/NOTES.md,
  # 2026-12-06, twenty-third session); then every quantize apply instance by name (the Gluon and Triton applies of
  # each recipe, int8_qk's K per 128 tokens among them).
  for settle in 0 100; do
    PYTHONPATH=build/python timeout 240 python3 bench/bench_int8_instances.py --end-to-end --modes-only \
      --settle-ms $settle --csv "$OUT/ratio_settle$settle.csv" > "$OUT/ratio_settle$settle.txt" 2>&1 || status=1
    echo "settle ${settle} ms:"; grep "int8_qk / fp8" "$OUT/ratio_settle$settle.txt"
  done
  PYTHONPATH=build/python timeout 200 python3 bench/bench_quantize_instances.py --csv "$OUT/quantize_instances.csv" \
    > "$OUT/quantize_instances.txt" 2>&1 || status=1
  cat "$OUT/quantize_instances.txt"
fi
if step quantsweep; then
  # The quantize kernels' variants through the JIT, outputs checked byte for byte (QUANT_VARIANTS overrides the
  # list; the default: the library's apply against the Gluon apply (kernels/quantize/quantize_apply_gluon.py, Q and
  # K recipes: as many programs an SM as fit, rings of 3 and 4 blocks, and one program an SM); each twice, the order
  # reversed).
  q=kernels/quantize/quantize_triton.py
  g=kernels/quantize/quantize_apply_gluon.py
  variants=${QUANT_VARIANTS:-"lib=$q g=$g gs4=$g:NUM_STAGES=4 g1=$g:CTAS=1 g1_=$g:CTAS=1 gs4_=$g:NUM_STAGES=4 g_=$g
    lib_=$q"}
  args=()
  for v in $variants; do args+=(--variant "$v"); done
  timeout 300 python3 bench/sweep_quantize.py "${args[@]}" --csv "$OUT/sweep_quantize.csv" \
    > "$OUT/sweep_quantize.txt" 2>&1 || status=1
  cat "$OUT/sweep_quantize.txt"
fi
if step stages; then
  # Every kernel one accuracy-mode call launches, with its duration (fp8, fp8_smooth_rotate and int8_qk: D=64
  # S=8192 full, H=64, and D=128 S=2048 full, H=32, B=16: where the rotation's cost showed most)
  PYTHONPATH=build/python timeout 120 python3 bench/mode_stage_times.py --modes fp8,fp8_smooth_rotate,int8_qk \
    > "$OUT/stages.txt" 2>&1 || status=1
  PYTHONPATH=build/python timeout 120 python3 bench/mode_stage_times.py --modes fp8,fp8_smooth_rotate,int8_qk \
    --head-dim 128 --heads 32 --batch 16 --seqlen 2048 >> "$OUT/stages.txt" 2>&1 || status=1
  grep -v Warning "$OUT/stages.txt" | cut -c1-140
fi
if step consan; then
  # The checker itself (the Gluon kernel intact must pass, with a wait removed ConSan must stop it): JIT only, so it
  # runs beside the instrumented build and tests.
  # CONSAN_SET=paged: only the paged decode instances and test_paged (the checker's self-test is the attention
  # kernel's and is left out then).
  consan_kernels=gluon,quantize,paged
  consan_tests="tests/gpu/test_fmha_fwd.py tests/gpu/test_window_softcap.py tests/gpu/test_int8_qk.py tests/gpu/test_varlen.py tests/gpu/test_paged.py"
  selftest=""
  if [[ ${CONSAN_SET:-all} == paged ]]; then
    # (a build needs one attention instance: a Triton one, which FP8ATTN_CONSAN leaves uninstrumented)
    consan_kernels=paged,fmha_fwd_bf16_bf16_f32_bf16_128x128x64_w8_s2_strided_full; consan_tests=tests/gpu/test_paged.py
  else
    timeout 700 python3 scripts/consan_selftest.py > "$OUT/consan_selftest.txt" 2>&1 &
    selftest=$!
  fi
  # FP8ATTN_CONSAN=1: codegen/aot_compile.py instruments the Gluon instances only (debug on, device asserts kept),
  # with a Triton cache of their own (the cache key does not include the instrumentation mode).
  if FP8ATTN_BUILD_DIR=build-consan FP8ATTN_CONSAN=1 \
      scripts/build.sh -DFP8ATTN_BUILD_PYTHON=ON "-DFP8ATTN_KERNELS=$consan_kernels" \
      > "$OUT/consan_build.log" 2>&1; then
    PYTHONPATH=build-consan/python timeout 400 python3 -m pytest -q -p no:cacheprovider $consan_tests \
      -k "gluon or every_instance or every_int8_instance or each_decode_instance or head_pair" \
      > "$OUT/consan.txt" 2>&1 || status=1
    tail -15 "$OUT/consan.txt"
  else
    echo "CONSAN BUILD FAILED"; tail -20 "$OUT/consan_build.log"; status=1
  fi
  if [[ -n $selftest ]]; then
    wait $selftest || status=1
    cat "$OUT/consan_selftest.txt"
  fi
fi
if step sanitize; then
  OUT="$OUT" scripts/sanitize.sh > "$OUT/sanitize.txt" 2>&1 || status=1
  tail -8 "$OUT/sanitize.txt"
fi
if step hostbench; then
  PYTHONPATH=build/python timeout 300 python3 bench/bench_host_overhead.py --cuda-graph \
    --csv "$OUT/host_overhead_python.csv" > "$OUT/hostbench.txt" 2>&1 || status=1
  timeout 300 build/bench/fp8attn_bench_host_overhead --csv="$OUT/host_overhead_cpp.csv" >> "$OUT/hostbench.txt" 2>&1 \
    || status=1
  cat "$OUT/hostbench.txt"
fi
exit $status
