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

  // The calls a thread made last, without the lock (initialize() runs once per call of a serving loop).
  struct Recent {
    unsigned long long context_id = 0;
    KernelInstance const* instance = nullptr;
    CUfunction function = nullptr;
  };
  thread_local Recent recent[4];
  thread_local unsigned next = 0;

  CUcontext context = nullptr;
  if (Status s = current_context(d, &context); !s) return s;
  unsigned long long context_id = 0;
  if (CUresult r = d.cuCtxGetId(context, &context_id); r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetId");
  for (Recent const& r : recent) {
    if (r.instance == &instance && r.context_id == context_id) {
      *function = r.function;
      return Status::success();
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(context_id, &instance);
  if (auto it = functions.find(key); it != functions.end()) {
    *function = it->second;
    recent[next++ % 4] = {context_id, &instance, *function};
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
  recent[next++ % 4] = {context_id, &instance, *function};
  return Status::success();
}

Status multiprocessor_count(CudaDriver const& d, int* count) {
  thread_local unsigned long long last_context_id = 0;
  thread_local int last_count = 0;
  CUcontext context = nullptr;
  if (Status s = current_context(d, &context); !s) return s;
  unsigned long long context_id = 0;
  if (CUresult r = d.cuCtxGetId(context, &context_id); r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetId");
  if (last_count > 0 && context_id == last_context_id) {
    *count = last_count;
    return Status::success();
  }
  CUdevice device;
  if (CUresult r = d.cuCtxGetDevice(&device); r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetDevice");
  int n = 0;
  if (CUresult r = d.cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device); r != CUDA_SUCCESS) {
    return driver_error(d, r, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  }
  if (n <= 0) return Status(StatusCode::kErrorInternal, "device reports no multiprocessors");
  last_context_id = context_id;
  last_count = n;
  *count = n;
  return Status::success();
}

Status device_name(CudaDriver const& d, std::string* name) {
  thread_local CUcontext last_context = nullptr;
  thread_local unsigned long long last_context_id = 0;
  thread_local std::string last_name;
  CUcontext context = nullptr;
  if (CUresult r = d.cuCtxGetCurrent(&context); r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetCurrent");
  unsigned long long context_id = 0;
  if (context) {
    if (CUresult r = d.cuCtxGetId(context, &context_id); r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetId");
  }
  if (!last_name.empty() && context == last_context && context_id == last_context_id) {
    *name = last_name;
    return Status::success();
  }
  CUdevice device;
  CUresult r = context ? d.cuCtxGetDevice(&device) : d.cuDeviceGet(&device, 0);
  if (r != CUDA_SUCCESS) return driver_error(d, r, context ? "cuCtxGetDevice" : "cuDeviceGet");
  char text[256] = {};
  if ((r = d.cuDeviceGetName(text, sizeof(text) - 1, device)) != CUDA_SUCCESS) return driver_error(d, r, "cuDeviceGetName");
  last_context = context;
  last_context_id = context_id;
  last_name = text;
  *name = last_name;
  return Status::success();
}

Status constant_one(CudaDriver const& d, CUdeviceptr* one) {
  // A module global, not an allocation: it lives and dies with the module, i.e. with its context, so nothing
  // is leaked when a context goes away (cuMemAlloc'ed memory would be, to memcheck's eyes, at exit).
  static char const kOnePtx[] =
      ".version 7.8\n.target sm_90\n.address_size 64\n"
      ".visible .global .align 4 .f32 fp8attn_one = 0f3F800000;\n";
  static std::mutex mutex;
  static std::map<unsigned long long, CUdeviceptr> ones;

  thread_local unsigned long long recent_context = 0;  // context IDs start at 1
  thread_local CUdeviceptr recent_one = 0;

  CUcontext context = nullptr;
  if (Status s = current_context(d, &context); !s) return s;
  unsigned long long context_id = 0;
  if (CUresult r = d.cuCtxGetId(context, &context_id); r != CUDA_SUCCESS) return driver_error(d, r, "cuCtxGetId");
  if (context_id == recent_context && recent_one) {
    *one = recent_one;
    return Status::success();
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = ones.find(context_id); it != ones.end()) {
    *one = recent_one = it->second;
    recent_context = context_id;
    return Status::success();
  }
  CUmodule module;
  if (CUresult r = d.cuModuleLoadData(&module, kOnePtx); r != CUDA_SUCCESS) return driver_error(d, r, "cuModuleLoadData(1.0f)");
  CUdeviceptr p = 0;
  size_t bytes = 0;
  if (CUresult r = d.cuModuleGetGlobal(&p, &bytes, module, "fp8attn_one"); r != CUDA_SUCCESS) {
    return driver_error(d, r, "cuModuleGetGlobal(fp8attn_one)");
  }
  ones.emplace(context_id, p);
  *one = recent_one = p;
  recent_context = context_id;
  return Status::success();
}

}  // namespace fp8attn::detail
