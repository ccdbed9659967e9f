#pragma once
// Loads each instance's cubin lazily, once per CUDA context, and hands out its CUfunction (thread-safe).

#include <cuda.h>

#include "cuda_driver.h"
#include "kernel_instance.h"

namespace fp8attn::detail {

/// The instance's function in the current context, loading the module (and raising its dynamic shared
/// memory limit) on first use. Fails with a clear status on a device that is not sm_90.
Status get_function(CudaDriver const& driver, KernelInstance const& instance, CUfunction* function);

/// The number of SMs of the current context's device (persistent kernels launch at most one program per SM).
/// Cached per thread for the last context asked about, so initialize() stays cheap.
Status multiprocessor_count(CudaDriver const& driver, int* count);

/// The name of the current context's device (device 0 when no context is current; none is created), e.g.
/// "NVIDIA H200". Cached per thread for the last context asked about.
Status device_name(CudaDriver const& driver, std::string* name);

/// A float 1.0f in device memory of the current context (a module global, loaded once per context): the
/// descale the kernels read when the caller passes none (BF16/FP16 inputs), so run() needs no memset.
Status constant_one(CudaDriver const& driver, CUdeviceptr* one);

}  // namespace fp8attn::detail
