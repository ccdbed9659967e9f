#!/usr/bin/env bash
# The real-model evaluation on the H200 from the installed wheel (issue 8's "proven on a real trained model"),
# in two device calls, because the model file (98 MB) is larger than what one call can carry (64 MiB):
#
#   here:   python3.12 -m pip wheel . --no-deps -w .whl/      # the wheel for the H200's Python (3.12)
#           pip download --no-deps --only-binary=:all: gguf==0.19.0 -d .whl/   # the H200 lacks gguf
#           split -b 48M -d SmolLM2-135M-Instruct.Q4_1.gguf .whl/model.part  # .whl/ is git-ignored
#   call 1: STAGE=1 bash scripts/real_model_check.sh   carrying .whl/model.part00 (copied to /tmp/fp8attn_model)
#   call 2: STAGE=2 bash scripts/real_model_check.sh   carrying .whl/model.part01, the wheels; within 30 s of call 1
#           (the machine is given back, /tmp with it, about 30 s after a call ends)
#
# Stage 2 joins the parts, checks the sha256, installs the wheel into a fresh target directory (so `import
# fp8attn` is the wheel, not the build tree), and runs bench/real_model_perplexity.py over every mode at windows
# of 2048 and 8192, with greedy and left-padded batched generation. Results: $OUT/real_model.csv and .txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fp8attn_out}
STAGE=${STAGE:?set STAGE=1 or STAGE=2}
MODELS=/tmp/fp8attn_model
mkdir -p "$OUT" "$MODELS"
if [ "$STAGE" = 1 ]; then
  cp .whl/model.part00 "$MODELS/" && ls -l "$MODELS"
  exit $?
fi
cp .whl/model.part01 "$MODELS/" || exit 1
cat "$MODELS"/model.part00 "$MODELS"/model.part01 > "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" || exit 1
sha256sum "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" | tee "$OUT/model_sha256.txt"
site=/tmp/fp8attn_site
rm -rf "$site"
python3 -m pip install --quiet --no-deps --no-index --target "$site" .whl/fp8attn-*.whl .whl/gguf-*.whl \
  > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
PYTHONPATH="$site" python3 -c "import fp8attn; print('fp8attn from', fp8attn.__file__)" | tee "$OUT/real_model.txt"
PYTHONPATH="$site" timeout ${TIMEOUT:-540} python3 bench/real_model_perplexity.py \
  --gguf "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" --modes "${MODES:-sdpa,bf16,fp8,fp8_per_head,fp8_smooth_rotate,int8_qk}" \
  --windows "${WINDOWS:-2048,8192}" --csv "$OUT/real_model.csv" --generate >> "$OUT/real_model.txt" 2>&1
status=$?
tail -60 "$OUT/real_model.txt"
exit $status
