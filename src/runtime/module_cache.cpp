#include "module_cache.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace fp8attn::detail {
namespace {

Status check_device(CudaDriver const& d) {
  CUdevice device;
  CUresult r = d.cuCtxGetDevice(&device);
  if (r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetDevice");
  int major = 0, minor = 0;
  d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  if (major != 9 || minor != 0) {
    return Status(StatusCode::kErrorNotSupported, "device compute capability is " + std::to_string(major) + "." +
                                                      std::to_string(minor) +
                                                      "; fp8attn kernels are compiled for sm_90 (Hopper) only");
  }
  return Status::success();
}

}  // namespace

Status get_function(CudaDriver const& d, KernelInstance const& instance, CUfunction* function) {
  // Keyed by the context's unique ID, not its pointer: a destroyed context's address can be reused by a
  // new one, whose modules are not loaded.
  static std::mutex mutex;
  static std::map<std::pair<unsigned long long, KernelInstance const*>, CUfunction> functions;

  CUcontext context = nullptr;
  if (Status s = current_context(d, &context); !s) return s;
  unsigned long long context_id = 0;
  if (CUresult r = d.cuCtxGetId(context, &context_id); r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetId");
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(context_id, &instance);
  if (auto it = functions.find(key); it != functions.end()) {
    *function = it->second;
    return Status::success();
  }
  if (Status s = check_device(d); !s) return s;
  CUmodule module;
  CUresult r = d.cuModuleLoadData(&module, instance.cubin);
  if (r != CUDA_SUCCESS) return driver_error(d, r, (std::string("cuModuleLoadData(") + instance.name + ")").c_str());
  if ((r = d.cuModuleGetFunction(function, module, instance.function)) != CUDA_SUCCESS) {
    return driver_error(d, r, (std::string("cuModuleGetFunction(") + instance.function + ")").c_str());
  }
  // Above 48 KB, dynamic shared memory must be opted into per function.
  r = d.cuFuncSetAttribute(*function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, instance.shared_bytes);
  if (r != CUDA_SUCCESS) return driver_error(d, r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  functions.emplace(key, *function);  // modules live as long as their context
  return Status::success();
}

Status constant_one(CudaDriver const& d, CUdeviceptr* one) {
  static std::mutex mutex;
  static std::map<unsigned long long, CUdeviceptr> ones;

  CUcontext context = nullptr;
  if (Status s = current_context(d, &context); !s) return s;
  unsigned long long context_id = 0;
  if (CUresult r = d.cuCtxGetId(context, &context_id); r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetId");
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = ones.find(context_id); it != ones.end()) {
    *one = it->second;
    return Status::success();
  }
  CUdeviceptr p = 0;
  if (CUresult r = d.cuMemAlloc(&p, sizeof(float)); r != CUDA_SUCCESS) return driver_error(d, r, "cuMemAlloc(1.0f)");
  float const value = 1.0f;
  if (CUresult r = d.cuMemcpyHtoD(p, &value, sizeof(value)); r != CUDA_SUCCESS) return driver_error(d, r, "cuMemcpyHtoD(1.0f)");
  ones.emplace(context_id, p);  // lives as long as its context
  *one = p;
  return Status::success();
}

}  // namespace fp8attn::detail
