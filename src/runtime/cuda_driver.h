#pragma once
// The CUDA driver API, opened at run time (dlopen "libcuda.so.1") rather than linked, so that the library
// loads, validates arguments and lists its kernels on machines without a GPU or driver.

#include <cuda.h>

#include <string>

#include "fp8attn/status.h"

// The _v2 entry points behind cuda.h's macros are looked up by their real names in cuda_driver.cpp.

namespace fp8attn::detail {

struct CudaDriver {
  decltype(&::cuInit) cuInit;
  decltype(&::cuGetErrorString) cuGetErrorString;
  decltype(&::cuCtxGetCurrent) cuCtxGetCurrent;
  decltype(&::cuCtxSetCurrent) cuCtxSetCurrent;
  decltype(&::cuCtxGetDevice) cuCtxGetDevice;
  decltype(&::cuCtxGetId) cuCtxGetId;
  decltype(&::cuDeviceGet) cuDeviceGet;
  decltype(&::cuDeviceGetAttribute) cuDeviceGetAttribute;
  decltype(&::cuDeviceGetName) cuDeviceGetName;
  decltype(&::cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain;
  decltype(&::cuModuleLoadData) cuModuleLoadData;
  decltype(&::cuModuleGetFunction) cuModuleGetFunction;
  decltype(&::cuFuncSetAttribute) cuFuncSetAttribute;
  decltype(&::cuLaunchKernelEx) cuLaunchKernelEx;
  decltype(&::cuModuleGetGlobal) cuModuleGetGlobal;
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled;
};

/// The driver, loaded and initialized once (thread-safe). On failure *driver is null and the status says why.
Status cuda_driver(CudaDriver const** driver);

/// "cuModuleLoadData failed: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)" style message.
Status driver_error(CudaDriver const& driver, CUresult result, char const* what);

/// The current context, or the primary context of device 0 made current when there is none.
Status current_context(CudaDriver const& driver, CUcontext* context);

}  // namespace fp8attn::detail
