#pragma once
// The GPU the profiler runs on: device 0, opened only after every command-line check has passed.

#include <cuda_runtime.h>

namespace fp8attn::profiler {

/// Opens CUDA device 0 and makes its primary context current (the library launches through the driver API in
/// the current context). On failure prints why to stderr and returns false: no NVIDIA driver (libcuda.so.1
/// cannot be loaded), no device, or a device that is not Hopper (sm_90).
bool open_device(cudaDeviceProp* prop);

}  // namespace fp8attn::profiler
