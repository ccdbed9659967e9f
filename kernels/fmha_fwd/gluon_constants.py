"""Constants of the Gluon attention kernel (fmha_fwd_gluon.py and its parts): the numerics it shares with the Triton
kernel and the tests' emulation (common/numerics.py) as Gluon constexprs, and the rows of one consumer warpgroup."""

from triton.experimental.gluon import language as gl

from common import numerics

LOG2E = gl.constexpr(numerics.LOG2E)
LN2 = gl.constexpr(numerics.LN2)
P_EXPONENT_BIAS = gl.constexpr(numerics.P_EXPONENT_BIAS)
INT_TO_FLOAT_BITS = gl.constexpr(numerics.INT_TO_FLOAT_BITS)
INT_TO_FLOAT_OFFSET = gl.constexpr(numerics.INT_TO_FLOAT_OFFSET)
NEG_BIG = gl.constexpr(numerics.NEG_BIG)
REF_FLOOR = gl.constexpr(numerics.REF_FLOOR)
LAZY_GROWTH = gl.constexpr(numerics.LAZY_GROWTH)
DESCALE_BLOCK = gl.constexpr(numerics.DESCALE_BLOCK_TOKENS)
FLT_MIN = gl.constexpr(1.1754943508222875e-38)  # float32's smallest normal

# Rows per consumer warpgroup (one wgmma M extent over 4 warps).
WG_M = gl.constexpr(64)
