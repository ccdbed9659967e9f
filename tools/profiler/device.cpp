// Opening the GPU, with a message that says what is missing.

#include "device.h"

#include <dlfcn.h>

#include <cstdio>

namespace fp8attn::profiler {

bool open_device(cudaDeviceProp* prop) {
  // Without the driver library the CUDA runtime reports "CUDA driver version is insufficient for CUDA runtime
  // version", which sends one looking for a driver upgrade. Ask the dynamic loader first, as the library does.
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); driver == nullptr) {
    char const* why = dlerror();
    std::fprintf(stderr,
                 "fp8attn_profiler: no NVIDIA driver is installed (libcuda.so.1 cannot be loaded: %s); profiling "
                 "needs a Hopper GPU and its driver (--list works without)\n",
                 why != nullptr ? why : "unknown reason");
    return false;
  }  // else left loaded: the runtime opens the same library next
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::fprintf(stderr, "fp8attn_profiler: no CUDA device available (%s)\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0");
    return false;
  }
  if ((err = cudaSetDevice(0)) != cudaSuccess || (err = cudaFree(nullptr)) != cudaSuccess ||
      (err = cudaGetDeviceProperties(prop, 0)) != cudaSuccess) {
    std::fprintf(stderr, "fp8attn_profiler: cannot initialize CUDA device 0: %s\n", cudaGetErrorString(err));
    return false;
  }
  // Kernels and the device reference are built for sm_90a only; anything else cannot run a single row.
  if (prop->major != 9) {
    std::fprintf(stderr, "fp8attn_profiler: device 0 (%s) is sm_%d%d; fp8attn is built for Hopper (sm_90a)\n",
                 prop->name, prop->major, prop->minor);
    return false;
  }
  return true;
}

}  // namespace fp8attn::profiler
