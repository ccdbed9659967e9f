#pragma once
// Reads what the library needs from a torch.Tensor (data pointer, shape, strides, device, dtype) through the
// Python object protocol, without linking torch and without DLPack: exporting a DLPack capsule costs several
// microseconds per tensor in torch, more than the whole C++ side of a call. The dtype is recognized by
// identity against the torch dtype objects registered once at import (register_dtypes).

#include <Python.h>

#include <cstdint>
#include <string>

#include "fp8attn/types.h"

namespace fp8attn_py {

struct TensorView {
  bool present = false;  ///< false for None
  uintptr_t data = 0;
  int ndim = 0;
  int64_t shape[4] = {};
  int64_t stride[4] = {};  ///< in elements
  int device = -1;         ///< CUDA device index; -1 for a CPU tensor
  int dtype = -1;          ///< index into the registered dtype table (kF32 etc. below), -1 if unknown
};

/// Registered dtypes, in this order (fp8attn/fmha.py registers the torch objects).
enum TorchDtype { kTorchE4M3 = 0, kTorchE5M2, kTorchBF16, kTorchF16, kTorchF32, kTorchI8, kTorchI32, kNumTorchDtypes };

/// Stores the torch dtype objects (borrowed references kept alive for the module's lifetime).
void register_dtypes(PyObject* const* dtypes);

/// The library's DataType of a registered torch dtype.
fp8attn::DataType data_type_of(int torch_dtype);

/// Reads `object` (a torch.Tensor or None) into *view; raises (returns false with a Python error set) when it
/// is not a tensor, has more than 4 dimensions, or its attributes cannot be read. `name` goes into messages.
bool read_tensor(char const* name, PyObject* object, TensorView* view);

}  // namespace fp8attn_py
