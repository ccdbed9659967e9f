// CUDA-event timing for fp8attn_profiler.

#include "timing.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

namespace fp8attn::profiler {
namespace {

Status cuda_error(cudaError_t err, char const* what) {
  return Status(StatusCode::kErrorCudaDriver, std::string(what) + " failed: " + cudaGetErrorString(err));
}

// Owns the events so that every exit path destroys them.
struct EventList {
  std::vector<cudaEvent_t> events;
  ~EventList() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
};

}  // namespace

Status time_median_ms(std::function<Status()> const& launch, int warmup, int iterations, StreamHandle stream,
                      double* median_ms) {
  for (int i = 0; i < warmup; ++i) {
    if (Status s = launch(); !s) return s;
  }
  // iterations + 1 events on one stream: run i lies between events i and i + 1. Queued back to back, so the
  // host never stalls the GPU between runs.
  EventList list;
  for (int i = 0; i <= iterations; ++i) {
    cudaEvent_t e = nullptr;
    if (cudaError_t err = cudaEventCreate(&e); err != cudaSuccess) return cuda_error(err, "cudaEventCreate");
    list.events.push_back(e);
  }
  if (cudaError_t err = cudaEventRecord(list.events[0], stream); err != cudaSuccess) {
    return cuda_error(err, "cudaEventRecord");
  }
  for (int i = 0; i < iterations; ++i) {
    if (Status s = launch(); !s) return s;
    if (cudaError_t err = cudaEventRecord(list.events[i + 1], stream); err != cudaSuccess) {
      return cuda_error(err, "cudaEventRecord");
    }
  }
  if (cudaError_t err = cudaEventSynchronize(list.events.back()); err != cudaSuccess) {
    return cuda_error(err, "cudaEventSynchronize (timed runs)");
  }
  std::vector<double> times(iterations);
  for (int i = 0; i < iterations; ++i) {
    float ms = 0.0f;
    if (cudaError_t err = cudaEventElapsedTime(&ms, list.events[i], list.events[i + 1]); err != cudaSuccess) {
      return cuda_error(err, "cudaEventElapsedTime");
    }
    times[i] = ms;
  }
  std::sort(times.begin(), times.end());
  size_t const mid = times.size() / 2;
  *median_ms = times.size() % 2 == 1 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
  return Status::success();
}

}  // namespace fp8attn::profiler
