#pragma once
// Launch of a loaded kernel with packed parameters, through cuLaunchKernelEx.

#include <cuda.h>

#include "cuda_driver.h"
#include "kernel_instance.h"
#include "param_pack.h"

namespace fp8attn::runtime {

/// Grid, block and dynamic shared memory of one launch; decided in initialize(), reused by every run().
struct LaunchConfig {
  unsigned grid_x = 1;
  unsigned grid_y = 1;
  unsigned grid_z = 1;
  unsigned block_x = 0;
  unsigned shared_bytes = 0;
  /// Programmatic dependent launch: the kernel may be launched while the stream's previous kernel still runs,
  /// and must itself wait for that kernel (griddepcontrol.wait) before reading what it wrote. Hides the launch
  /// gap between two kernels of one call (the paged decode's combine after the decode).
  bool after_previous_kernel = false;

  /// A one-dimensional grid of `programs` CTAs of the instance's block size and shared memory.
  static LaunchConfig for_instance(detail::KernelInstance const& instance, unsigned programs);
};

/// Launches `function` on `stream` with `params`; `name` goes into the error message.
Status launch(detail::CudaDriver const& driver, CUfunction function, LaunchConfig const& config,
              ParamPack const& params, CUstream stream, char const* name);

}  // namespace fp8attn::runtime
