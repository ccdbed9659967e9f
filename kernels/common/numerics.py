"""Numerical constants of the attention kernels, as plain Python numbers.

The Triton kernels wrap them in tl.constexpr; the tests' float64 emulation (tests/gpu/fmha_utils.py) and the
runtime (through the generated C++) read the same values, so the emulation rounds exactly where the kernel
rounds. Change a value here and every user follows.
"""

# exp(x) = exp2(x * LOG2E); LSE = log2-domain value * LN2.
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

# Largest finite e4m3 (OCP E4M3FN) value.
E4M3_MAX = 448.0

# P is stored as p * 2^P_EXPONENT_BIAS (at most 256 <= 448), which moves e4m3's smallest subnormal from 2^-9
# to 2^-17 of the tile's row maximum. Exact in binary, undone in FP32 after the MMA.
P_EXPONENT_BIAS = 8.0

# A tile's P is rounded against its own row maximum, but never one more than 2^REF_FLOOR below the running
# maximum, so every rescale factor stays within FP32's range.
REF_FLOOR = 64.0

# LAZY_RESCALE (BF16 Gluon, a sweep switch): a row's frame moves only when a tile's maximum exceeds it by more than
# LAZY_GROWTH (log2 units) above the frame, so P stays at most 2^LAZY_GROWTH: far inside bf16's and float32's range
# (a row sum of 2^17 keys at most 2^33), while most tiles keep the frame and skip the accumulator's rescale.
LAZY_GROWTH = 16.0

# Finite "minus infinity" for the running maximum: fully masked rows never compute (-inf) - (-inf).
NEG_BIG = -1.0e30

# Tokens per block of the per-block descales (the quantize operation's blocks; the attention kernels index
# q and k descales by row // DESCALE_BLOCK_TOKENS). src/quant: kQuantizeBlockTokens holds the same value
# (tests/cpu/test_codegen.py compares them).
DESCALE_BLOCK_TOKENS = 64

# Largest INT8 magnitude used by the symmetric INT8 quantizer (-127..127; -128 is never produced).
INT8_QMAX = 127.0

# INT8 Q.K^T's int32 scores to float32 without I2F (which issues on the pipe of MUFU.EX2, the softmax's
# exponentials): the bits of x + INT_TO_FLOAT_BITS read as a float32 are exactly INT_TO_FLOAT_OFFSET + x for
# |x| < 2^22, and |q . k| <= 127^2 * 256 < 2^22 at every head dim the kernels compile (<= 256).
INT_TO_FLOAT_BITS = 0x4B400000  # the float32 1.5 * 2^23
INT_TO_FLOAT_OFFSET = 12582912.0  # 1.5 * 2^23

# The random-sign Hadamard rotation's signs: sign(i) = +1 or -1 from bit 0 of hash(seed, i), a 32-bit integer
# hash computed the same way by the quantize kernel (kernels/quantize/quantize_triton.py) and by Python
# (python/fp8attn/quant.py), so Q and K rotated by either agree exactly.
HASH_SEED_MUL = 0x9E3779B1
HASH_INDEX_MUL = 0x85EBCA77
HASH_MIX_MUL = 0x2C1B3C6D

# Head dims up to this one rotate with the matrix the quantize operation's rotation stage writes into the
# workspace once per call (kernels/quantize/quantize_triton.py); 256 multiplies by two 16x16 factors instead.
# src/quant/quantize.cpp reads it through the generated numerics.h (which calls launch the stage).
ROTATION_TABLE_MAX_HEAD_DIM = 128


def hadamard_sign(seed, i):
    """+1 or -1: the sign of row i of the random-sign Hadamard rotation for `seed` (plain integers)."""
    mask = 0xFFFFFFFF
    h = ((seed & mask) * HASH_SEED_MUL + i * HASH_INDEX_MUL) & mask
    h ^= h >> 15
    h = (h * HASH_MIX_MUL) & mask
    h ^= h >> 12
    return 1 - 2 * (h & 1)
