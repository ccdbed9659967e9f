"""Running fp8attn's triton.language kernels on the CPU in Triton 3.6's interpreter (TRITON_INTERPRET=1),
without torch: numpy buffers as tensors (HostTensor), e4m3/bf16 encoding, the GPU's float32 -> e4m3 rounding in
place of the interpreter's, and a bounds check on every load and store of a launch (launch()).

Import this module before triton is imported anywhere else in the process (it sets TRITON_INTERPRET).
The interpreter's own float32 -> e4m3 conversion truncates the mantissa without carrying into the exponent
(7.84 becomes 4.0); the GPU runs cvt.rn.satfinite.e4m3x2.f32 (round to nearest even, saturating to +-448, NaN
stays NaN), which `encode_e4m3` does and which replaces the interpreter's here. Its e4m3 -> float conversion
reads the NaN encodings (0x7F, 0xFF) as +-480; the table decode replaces it.
Needs numpy < 2.4 (the interpreter calls int() on 1-element arrays, an error from numpy 2.4 on) and triton
3.6.0: scripts/interpreter_env.sh makes that environment.
"""

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import triton.language as tl  # noqa: E402
import triton.runtime.interpreter as interpreter  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "kernels"))

from common.numerics import E4M3_MAX  # noqa: E402


# ---- numpy buffers as the interpreter's tensors ----------------------------------------------------------

class _Dtype:
    """Triton reads the element type from str(tensor.dtype), as for torch. One object per name for the whole
    process (_dtype): Triton's argument specialization caches by the dtype object's identity, so a freed
    dtype whose id a new one of another name reuses would get the old element type."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


_DTYPES = {}


def _dtype(name):
    return _DTYPES.setdefault(name, _Dtype(name))


class _Storage:
    def __init__(self, tensor):
        self.tensor = tensor

    def data_ptr(self):
        return self.tensor.array.ctypes.data

    def cpu(self):  # already host memory: the interpreter works on it in place
        return self

    def copy_(self, other):
        pass


class HostTensor:
    """A numpy array (of the element type's storage: uint16 for bf16, uint8 for e4m3) that Triton's interpreter
    takes where it expects a torch tensor."""

    def __init__(self, array, dtype_name):
        self.array, self.dtype = array, _dtype(dtype_name)

    def data_ptr(self):
        return self.array.ctypes.data

    def untyped_storage(self):
        return _Storage(self)

    def new_empty(self, *args, **kwargs):
        return HostTensor(self.array, self.dtype.name)

    def set_(self, *args):
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)


def to_bf16_bits(x):
    """float -> bfloat16 bits (uint16), rounded to nearest even."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


def from_bf16_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _e4m3_table():
    b = np.arange(256)
    sign = np.where(b >> 7, -1.0, 1.0)
    e, m = (b >> 3) & 15, b & 7
    value = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e - 7))
    value = sign * value
    value[(e == 15) & (m == 7)] = np.nan
    return value


E4M3_VALUES = _e4m3_table()  # byte -> value (0x7F, 0xFF: NaN)
_POSITIVE = E4M3_VALUES[:0x7F]  # 0 .. 448, increasing with the byte


def decode_e4m3(bytes_):
    return E4M3_VALUES[bytes_.astype(np.int64)]


def encode_e4m3(x):
    """float32 -> e4m3 bytes as cvt.rn.satfinite.e4m3x2.f32: nearest, ties to the even byte, +-448 beyond."""
    x = np.asarray(x, np.float64)
    a = np.minimum(np.abs(np.nan_to_num(x, nan=0.0)), E4M3_MAX)
    hi = np.clip(np.searchsorted(_POSITIVE, a), 0, 0x7E)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - _POSITIVE[lo], _POSITIVE[hi] - a
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    out = (pick | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), out).astype(np.uint8)


_interpreter_convert_float = interpreter._convert_float


def _gpu_like_e4m3_conversion(data, input_dtype, output_dtype, rounding_mode):
    if input_dtype == tl.float32 and output_dtype == tl.float8e4nv:
        return encode_e4m3(data.view(np.float32))
    # e4m3 -> wider: exact, and 0x7F / 0xFF are NaN (the interpreter's own conversion reads them as +-480).
    if input_dtype == tl.float8e4nv and output_dtype in (tl.float32, tl.float16):
        return E4M3_VALUES[data.view(np.uint8).astype(np.int64)].astype(
            np.float32 if output_dtype == tl.float32 else np.float16)
    if input_dtype == tl.float32 and output_dtype == tl.bfloat16:  # cvt.rn.bf16.f32 (the interpreter truncates)
        bits = data.view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        return np.where(np.isnan(data.view(np.float32)), np.uint16(0x7FC0), rounded)
    if input_dtype == tl.float8e4nv and output_dtype == tl.bfloat16:  # exact: the top half of the float32
        return (E4M3_VALUES[data.view(np.uint8).astype(np.int64)].astype(np.float32).view(np.uint32) >> 16).astype(
            np.uint16)
    return _interpreter_convert_float(data, input_dtype, output_dtype, rounding_mode)


interpreter._convert_float = _gpu_like_e4m3_conversion


# The interpreter keeps bf16 as its uint16 bits and its tl.dot multiplies those bits as integers; the GPU's MMA
# multiplies the values (exact products, float32 sums), which is what this does.
_interpreter_create_dot = interpreter.InterpreterBuilder.create_dot


def _bf16_values(handle):
    return (handle.data.astype(np.uint32) << 16).view(np.float32)


def _create_dot_with_bf16(self, a, b, d, input_precision, max_num_imprecise_acc):
    if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
        a_data = _bf16_values(a) if a.dtype.scalar == tl.bfloat16 else a.data.astype(np.float32)
        b_data = _bf16_values(b) if b.dtype.scalar == tl.bfloat16 else b.data.astype(np.float32)
        return interpreter.TensorHandle(np.matmul(a_data, b_data, dtype=np.float32) + d.data, d.dtype.scalar)
    return _interpreter_create_dot(self, a, b, d, input_precision, max_num_imprecise_acc)


interpreter.InterpreterBuilder.create_dot = _create_dot_with_bf16


# Bounds check: every address a launch loads or stores (where its mask is true) must lie inside one of the
# buffers passed to that launch. On the GPU an out-of-bounds access may go unnoticed; here it fails the test.
_LAUNCH_BUFFERS = []


def _span(array):
    """Bytes from an array's first element to the end of its last (a strided view's whole extent)."""
    if array.size == 0:
        return 0
    return sum((n - 1) * abs(st) for n, st in zip(array.shape, array.strides)) + array.itemsize


def launch(kernel, programs, **kwargs):
    _LAUNCH_BUFFERS[:] = [(v.data_ptr(), v.data_ptr() + _span(v.array), f"{kernel.__name__}:{name}")
                          for name, v in kwargs.items() if isinstance(v, HostTensor)]
    kernel[(programs,)](**kwargs)


def _check_bounds(ptrs, mask, what):
    size = np.dtype(interpreter._get_np_dtype(ptrs.get_element_ty())).itemsize
    addresses = ptrs.data.astype(np.int64)
    active = np.broadcast_to(mask.data, addresses.shape)
    inside = np.zeros(addresses.shape, bool)
    for first, end, _ in _LAUNCH_BUFFERS:
        inside |= (addresses >= first) & (addresses + size <= end)
    outside = active & ~inside
    if outside.any():
        bad = addresses[outside]
        raise AssertionError(f"{what} of {int(outside.sum())} elements at [{bad.min():#x}, {bad.max():#x}] outside "
                             f"the launch's buffers {[(n, hex(a), hex(b)) for a, b, n in _LAUNCH_BUFFERS]}")


_interpreter_load = interpreter.InterpreterBuilder.create_masked_load
_interpreter_store = interpreter.InterpreterBuilder.create_masked_store


def _checked_load(self, ptrs, mask, other, *args, **kwargs):
    _check_bounds(ptrs, mask, "load")
    return _interpreter_load(self, ptrs, mask, other, *args, **kwargs)


def _checked_store(self, ptrs, value, mask, *args, **kwargs):
    _check_bounds(ptrs, mask, "store")
    return _interpreter_store(self, ptrs, value, mask, *args, **kwargs)


interpreter.InterpreterBuilder.create_masked_load = _checked_load
interpreter.InterpreterBuilder.create_masked_store = _checked_store
