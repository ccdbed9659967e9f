#include "cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace fp8attn::detail {
namespace {

template <typename Fn>
bool load_symbol(void* lib, char const* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return *fn != nullptr;
}

Status load(CudaDriver* d) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    char const* why = dlerror();
    return Status(StatusCode::kErrorCudaDriver,
                  std::string("the CUDA driver (libcuda.so.1) could not be loaded: ") + (why ? why : "unknown"));
  }
  // Plain names: this library is built without per-thread default streams, so no _ptsz variants.
  bool ok = load_symbol(lib, "cuInit", &d->cuInit) && load_symbol(lib, "cuGetErrorString", &d->cuGetErrorString) &&
            load_symbol(lib, "cuCtxGetCurrent", &d->cuCtxGetCurrent) &&
            load_symbol(lib, "cuCtxSetCurrent", &d->cuCtxSetCurrent) &&
            load_symbol(lib, "cuCtxGetDevice", &d->cuCtxGetDevice) && load_symbol(lib, "cuCtxGetId", &d->cuCtxGetId) &&
            load_symbol(lib, "cuDeviceGet", &d->cuDeviceGet) &&
            load_symbol(lib, "cuDeviceGetAttribute", &d->cuDeviceGetAttribute) &&
            load_symbol(lib, "cuDeviceGetName", &d->cuDeviceGetName) &&
            load_symbol(lib, "cuDevicePrimaryCtxRetain", &d->cuDevicePrimaryCtxRetain) &&
            load_symbol(lib, "cuModuleLoadData", &d->cuModuleLoadData) &&
            load_symbol(lib, "cuModuleGetFunction", &d->cuModuleGetFunction) &&
            load_symbol(lib, "cuFuncSetAttribute", &d->cuFuncSetAttribute) &&
            load_symbol(lib, "cuLaunchKernelEx", &d->cuLaunchKernelEx) &&
            load_symbol(lib, "cuModuleGetGlobal_v2", &d->cuModuleGetGlobal) &&
            load_symbol(lib, "cuTensorMapEncodeTiled", &d->cuTensorMapEncodeTiled);
  if (!ok) {
    return Status(StatusCode::kErrorCudaDriver,
                  "the CUDA driver lacks a required entry point (cuCtxGetId needs a CUDA 12 driver, >= 525)");
  }
  CUresult r = d->cuInit(0);
  if (r != CUDA_SUCCESS) return driver_error(*d, r, "cuInit");
  return Status::success();
}

}  // namespace

Status cuda_driver(CudaDriver const** driver) {
  static CudaDriver instance{};
  static Status status;
  static std::once_flag once;
  std::call_once(once, [] { status = load(&instance); });
  *driver = status.ok() ? &instance : nullptr;
  return status;
}

Status driver_error(CudaDriver const& driver, CUresult result, char const* what) {
  char const* text = nullptr;
  if (driver.cuGetErrorString) driver.cuGetErrorString(result, &text);
  return Status(StatusCode::kErrorCudaDriver, std::string(what) + " failed: CUresult=" + std::to_string(result) +
                                                  " (" + (text ? text : "unknown error") + ")");
}

Status current_context(CudaDriver const& d, CUcontext* context) {
  CUresult r = d.cuCtxGetCurrent(context);
  if (r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetCurrent");
  if (*context) return Status::success();
  CUdevice device;
  if ((r = d.cuDeviceGet(&device, 0)) != CUDA_SUCCESS) return driver_error(d, r, "cuDeviceGet(0)");
  if ((r = d.cuDevicePrimaryCtxRetain(context, device)) != CUDA_SUCCESS) {
    return driver_error(d, r, "cuDevicePrimaryCtxRetain");
  }
  if ((r = d.cuCtxSetCurrent(*context)) != CUDA_SUCCESS) return driver_error(d, r, "cuCtxSetCurrent");
  return Status::success();
}

}  // namespace fp8attn::detail
