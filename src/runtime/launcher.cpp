#include "launcher.h"

#include <string>

namespace fp8attn::runtime {

LaunchConfig LaunchConfig::for_instance(detail::KernelInstance const& instance, unsigned programs) {
  LaunchConfig c;
  c.grid_x = programs;
  c.block_x = 32u * static_cast<unsigned>(instance.launch_warps);
  c.shared_bytes = static_cast<unsigned>(instance.shared_bytes);
  return c;
}

Status launch(detail::CudaDriver const& d, CUfunction function, LaunchConfig const& c, ParamPack const& params,
              CUstream stream, char const* name) {
  if (!params.ok()) {
    return Status(StatusCode::kErrorInternal, std::string("parameters of ") + name + " overflow the ParamPack");
  }
  void* pointers[ParamPack::kMaxParams];
  params.pointers(pointers);
  CUlaunchConfig config = {};
  config.gridDimX = c.grid_x;
  config.gridDimY = c.grid_y;
  config.gridDimZ = c.grid_z;
  config.blockDimX = c.block_x;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = c.shared_bytes;
  config.hStream = stream;
  CUlaunchAttribute attribute = {};
  if (c.after_previous_kernel) {
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  CUresult r = d.cuLaunchKernelEx(&config, function, pointers, nullptr);
  if (r != CUDA_SUCCESS) return detail::driver_error(d, r, (std::string("launch of ") + name).c_str());
  return Status::success();
}

}  // namespace fp8attn::runtime
