#!/usr/bin/env bash
# Writes the racecheck suppression records (racecheck_warp_specialize_state.xml.in) into OUT_DIR with the paged
# decode kernel's two source lines filled in: the line of `def paged_decode_gluon_kernel(` and of the
# `gl.warp_specialize(` statement in its body, where racecheck reports the warp-specialization state byte. Looked
# up here because edits above the kernel move them (413 -> 491 -> 647) and a record with stale lines matches nothing.
#   scripts/sanitize/render_race_records.sh OUT_DIR [KERNEL_SOURCE]
# Prints the written file's path; exits 1 naming the source when either line is not found.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out_dir=${1:?usage: render_race_records.sh OUT_DIR [KERNEL_SOURCE]}
src=${2:-$here/../../kernels/paged/paged_decode_gluon.py}
if [[ ! -r "$src" ]]; then
  echo "render_race_records: $src: cannot read the kernel source" >&2
  exit 1
fi
def_line=$(grep -n "^def paged_decode_gluon_kernel(" "$src" | head -1 | cut -d: -f1 || true)
# The call as a statement of the kernel's own body: a line that starts with it (not a comment that mentions it),
# before the next top-level def or decorator.
ws_line=$(awk -v d="${def_line:-0}" 'd > 0 && NR > d && /^(def |@)/ { exit }
  d > 0 && NR > d && /^[[:space:]]+gl\.warp_specialize\(/ { print NR; exit }' "$src")
if [[ -z "$def_line" || -z "$ws_line" ]]; then
  echo "render_race_records: $src: no 'def paged_decode_gluon_kernel(' or no gl.warp_specialize( after it" \
       "(def line '${def_line}', call line '${ws_line}'): the racecheck record cannot name its lines" >&2
  exit 1
fi
mkdir -p "$out_dir"
sed -e "s/@PAGED_DECODE_KERNEL_DEF@/$def_line/g" -e "s/@PAGED_DECODE_WARP_SPECIALIZE@/$ws_line/g" \
  "$here/racecheck_warp_specialize_state.xml.in" > "$out_dir/racecheck_warp_specialize_state.xml"
echo "$out_dir/racecheck_warp_specialize_state.xml"
