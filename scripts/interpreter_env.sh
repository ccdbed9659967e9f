#!/usr/bin/env bash
# The environment of the interpreter tests (tests/cpu/test_quantize_interpreter.py): Triton's interpreter runs
# the triton.language kernels on the CPU over numpy buffers (no torch, no GPU). Creates <source>/.venv-interp
# once (pip's cache makes later runs fast) and prints its python. Pins: triton==3.6.0 (the AOT compiler's
# version) and numpy<2.4 (Triton 3.6's interpreter calls int() on 1-element arrays, an error from numpy 2.4 on).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-interp
python=$venv/bin/python
want_triton=3.6.0
if ! "$python" -c "import numpy, triton; assert triton.__version__ == '$want_triton'; \
assert tuple(map(int, numpy.__version__.split('.')[:2])) < (2, 4)" >/dev/null 2>&1; then
  python3 -m venv "$venv" >&2
  "$python" -m pip install --quiet --disable-pip-version-check "triton==$want_triton" "numpy<2.4" >&2
fi
echo "$(pwd)/$python"
