#!/usr/bin/env bash
# compute-sanitizer over fp8attn on small problems (H200 only; needs a build: scripts/build.sh):
#   memcheck, racecheck, initcheck, synccheck, each over
#     (a) fp8attn_profiler: head dims 64/128/256, e4m3 and bf16, causal and not, odd lengths (1, 17, 113, 1000),
#         GQA and MQA, S_q != S_k (causal rows that see no key), bhsd, and every compiled instance once
#         (--providers=instance, including the warp-specialized even-N ones and every V transpose), attention
#         and V transpose (--operation=all), one run each (--profiling-iterations=1 --warmup-iterations=0)
#         plus the device reference's verification;
#     (b) the C++ two-contexts test (tests/gpu/test_two_contexts.cpp: several contexts, LSE written).
#   racecheck instruments every shared-memory access and is the slow one: it gets smaller lengths (17, 300)
#   and leaves the test harness's kernels (namespace fp8attn::reference: input fill, device reference,
#   comparison) unchecked with --kernel-name-exclude. An exclude, not an include filter: a name filter that
#   matches nothing makes the tool check nothing, silently. Budget: about 6 minutes on the H200 in all.
#   Where this compute-sanitizer has them, every tool also checks TMA bulk copies and wgmma operand accesses
#   (--check-bulk-copy, --check-warpgroup-mma, as CCCL's CI runs it) and memcheck pads allocations by 512
#   bytes (--padding, so that a read just past a buffer lands in no neighbouring allocation).
#
#   OUT=/tmp/out bash scripts/sanitize.sh                  all four tools
#   SANITIZE_TOOLS="memcheck racecheck" bash scripts/sanitize.sh
#   SANITIZE_SET=paged bash scripts/sanitize.sh           only the paged decode: every compiled instance forced by
#       name (Triton and Gluon, pages of 16 and 64), one and four query tokens, lengths 17 and 1000 (a masked
#       tail, several stages, split-KV with the combine), a batch of 64 with one split (the head-pair
#       instance's case) and MQA (the 32-row instances), under every tool (a minute in all)
#
# Each tool's log (program output and reports): $OUT/sanitize_<tool>.log. One summary line per tool. Exit 1
# when a tool reports an error, a program fails or times out under it, or a program is missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/fp8attn_out}
BUILD=${FP8ATTN_BUILD_DIR:-build}
TOOLS=${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
TIMEOUT_S=${SANITIZE_TIMEOUT_S:-240}  # per program run under a tool
mkdir -p "$OUT"

SANITIZER=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
if [[ -z "$SANITIZER" ]]; then
  for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [[ -x "$c" ]] && SANITIZER=$c && break
  done
fi
if [[ -z "$SANITIZER" || ! -x "$SANITIZER" ]]; then
  echo "sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER=/path/to/compute-sanitizer)"
  exit 1
fi
PROFILER=$BUILD/tools/profiler/fp8attn_profiler
TWO_CONTEXTS=$BUILD/tests/gpu/test_two_contexts

# ---- Suppressions --------------------------------------------------------------------------------------------
# Empty on purpose: add an entry only for a report proven to be a false positive, and keep next to it WHY (the
# mechanism, e.g. a hazard the tool cannot see through an mbarrier/TMA handshake) and the EVIDENCE (the log
# lines, compute-sanitizer version, an NVIDIA release note or forum thread, a run showing the result is right).
# Two precise mechanisms (compute-sanitizer manual, "Command Line Options"):
#   --suppressions=<file.xml>  ignores exactly the recorded reports. Make the file from the failing run:
#         compute-sanitizer --tool racecheck --xml --save=scripts/sanitize/racecheck_<what>.xml <program ...>
#     keep only the offending <record>(s) of its <ComputeSanitizerOutput> (kind, what/text, where/func and the
#     stack frames; func and module take regular expressions), put the why and the evidence in an XML comment
#     above each record (CCCL's ci/compute-sanitizer-suppressions.xml is a worked example), and commit it.
#   --kernel-name-exclude kns=<substring>  does not check the kernels whose name holds the substring at all.
#     Coarse: only for a kernel the tool cannot model, never for one of ours that merely reports.
# The two in use: each file states the mechanism and the evidence above its records. Both are matched on the
# kernel and its source lines; the kernel's line numbers are part of the match, so moving the lines they name in
# kernels/fmha_fwd/fmha_fwd_triton.py means re-checking (a report that no longer matches fails the run). The paged
# decode's record names its kernel's def and its gl.warp_specialize call: scripts/sanitize/render_race_records.sh
# looks those two lines up in the source and writes the record into $OUT, since edits above the kernel move them.
race_records=$(scripts/sanitize/render_race_records.sh "$OUT") || exit 1
# shellcheck disable=SC2034  # read through ${!suppress_var} below
SUPPRESS_memcheck=()
# shellcheck disable=SC2034
SUPPRESS_racecheck=(--suppressions="$race_records")
# shellcheck disable=SC2034
SUPPRESS_initcheck=(--suppressions=scripts/sanitize/initcheck_tma_descriptor_copy.xml)
# shellcheck disable=SC2034
SUPPRESS_synccheck=()

# ---- What runs under each tool ----------------------------------------------------------------------------------
COMMON_PROFILER=(--profiling-iterations=1 --warmup-iterations=0 --verification-providers=device)
# Full set: memcheck, initcheck, synccheck.
FULL_RUNS=(
  "$PROFILER ${COMMON_PROFILER[*]} --operation=all --batch=2 --heads_q=4 --heads_kv=2 --seqlen_q=1,17,113,1000 --head_dim=64,128,256 --dtype=e4m3,bf16 --causal=0,1"
  "$PROFILER ${COMMON_PROFILER[*]} --batch=1 --heads_q=8 --heads_kv=1 --seqlen_q=113,1000 --seqlen_k=17,1000 --head_dim=128 --dtype=e4m3,bf16 --causal=0,1 --layout=bshd,bhsd"
  "$PROFILER ${COMMON_PROFILER[*]} --operation=all --providers=instance --batch=1 --heads_q=2 --seqlen_q=256 --head_dim=64,128,256 --dtype=e4m3,bf16 --causal=0,1"
  "$TWO_CONTEXTS"
)
# Small set: racecheck (shared-memory hazards depend on the code path, not the size: lengths below one tile,
# a full tile plus a masked tail, the causal diagonal, and every instance once).
RACE_RUNS=(
  "$PROFILER ${COMMON_PROFILER[*]} --batch=1 --heads_q=2 --heads_kv=1 --seqlen_q=17,300 --head_dim=64,128,256 --dtype=e4m3,bf16 --causal=0,1"
  "$PROFILER ${COMMON_PROFILER[*]} --operation=all --providers=instance --batch=1 --heads_q=1 --seqlen_q=256 --head_dim=64,128,256 --dtype=e4m3,bf16 --causal=0,1"
  "$TWO_CONTEXTS"
)

if [[ ${SANITIZE_SET:-all} == paged ]]; then
  # The second run has one split (64 x 8 kv heads fill the GPU), which the head-pair instance needs; the third is
  # MQA (32 query rows per kv head: the 32-row instances, Gluon and Triton).
  FULL_RUNS=("$PROFILER ${COMMON_PROFILER[*]} --operation=paged --providers=instance --batch=2 --heads_q=32 --heads_kv=8 --seqlen_q=1,4 --seqlen_k=17,1000 --head_dim=128"
             "$PROFILER ${COMMON_PROFILER[*]} --operation=paged --providers=instance --batch=64 --heads_q=32 --heads_kv=8 --seqlen_q=1 --seqlen_k=1000 --head_dim=128"
             "$PROFILER ${COMMON_PROFILER[*]} --operation=paged --providers=instance --batch=2 --heads_q=32 --heads_kv=1 --seqlen_q=1 --seqlen_k=17,1000 --head_dim=128")
  RACE_RUNS=("${FULL_RUNS[@]}")
fi

HELP=$("$SANITIZER" --help 2>&1)
has_option() { grep -q -- "$1" <<< "$HELP"; }

tool_options() {
  if has_option --check-bulk-copy; then echo "--check-bulk-copy yes"; fi
  if has_option --check-warpgroup-mma; then echo "--check-warpgroup-mma yes"; fi
  case "$1" in
    memcheck)
      echo "--leak-check full"
      if has_option --padding; then echo "--padding 512"; fi
      ;;
    racecheck) echo "--kernel-name-exclude kns=reference" ;;
  esac
}

status=0
summaries=()
runlog=$(mktemp)
trap 'rm -f "$runlog"' EXIT
for tool in $TOOLS; do
  log=$OUT/sanitize_$tool.log
  : > "$log"
  if [[ $tool == racecheck ]]; then runs=("${RACE_RUNS[@]}"); else runs=("${FULL_RUNS[@]}"); fi
  suppress_var="SUPPRESS_${tool}[@]"
  errors=0 failed=0 start=$(date +%s)
  for run in "${runs[@]}"; do
    program=${run%% *}
    if [[ ! -x "$program" ]]; then
      echo "MISSING: $program (build it: scripts/build.sh)" | tee -a "$log"
      failed=$((failed + 1))
      continue
    fi
    # shellcheck disable=SC2206,SC2207  # the tool's options and the run line are word lists on purpose
    cmd=("$SANITIZER" --tool "$tool" $(tool_options "$tool") "${!suppress_var}" --error-exitcode 86
         --print-limit 200 $run)
    echo "=== ${cmd[*]}" >> "$log"
    timeout "$TIMEOUT_S" "${cmd[@]}" > "$runlog" 2>&1
    rc=$?
    cat "$runlog" >> "$log"
    # compute-sanitizer ends each run with "========= ERROR SUMMARY: N errors" (racecheck: also a RACECHECK
    # SUMMARY of hazards); N counts what the tool reports as errors.
    n=$(grep -E "ERROR SUMMARY: [0-9]+ error" "$runlog" | tail -1 | sed -E 's/.*ERROR SUMMARY: ([0-9]+) error.*/\1/')
    case $rc in
      0) ;;
      86) ;;  # the tool found errors: counted from its summary
      124) echo "TIMEOUT after ${TIMEOUT_S} s: $run" | tee -a "$log"; failed=$((failed + 1)) ;;
      *) echo "FAILED (exit $rc) under $tool: $run" | tee -a "$log"; failed=$((failed + 1)) ;;
    esac
    if [[ $rc != 124 && -n "$n" ]]; then errors=$((errors + n)); fi
    if [[ $rc == 86 && ( -z "$n" || "$n" == 0 ) ]]; then errors=$((errors + 1)); fi
    echo >> "$log"
  done
  line=$(printf "%-9s ERROR SUMMARY: %d errors, %d of %d runs failed or missing (%d s) -> %s" "$tool" "$errors" \
         "$failed" "${#runs[@]}" "$(( $(date +%s) - start ))" "$log")
  summaries+=("$line")
  echo "sanitize: $line"
  if (( errors > 0 || failed > 0 )); then status=1; fi
done

echo "---- compute-sanitizer summary ($($SANITIZER --version 2>/dev/null | grep -Eo '[0-9]{4}\.[0-9.]+' | head -1))"
printf '%s\n' "${summaries[@]}"
exit $status
