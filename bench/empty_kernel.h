#pragma once
// An empty kernel, the floor of any launch, for bench/host_overhead.cpp (compiled by nvcc in empty_kernel.cu so
// that host_overhead.cpp stays plain C++).

#include <cuda.h>
#include <cuda_runtime.h>

/// Launches the empty kernel (1 block of 32 threads) through the runtime API: cudaLaunchKernel.
cudaError_t launch_empty_kernel(cudaStream_t stream);
/// The empty kernel as a driver-API function, to launch it the way the library launches: cuLaunchKernelEx.
cudaError_t empty_kernel_function(CUfunction* function);
