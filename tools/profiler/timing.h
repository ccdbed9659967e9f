#pragma once
// Timing with CUDA events: warm-up runs, then each run between its own pair of events; the median is reported.

#include <functional>

#include "fp8attn/status.h"
#include "fp8attn/types.h"

namespace fp8attn::profiler {

/// Runs `launch` warmup times untimed, then `iterations` times, each timed by events on `stream`; writes the
/// median in milliseconds. Stops at the first launch error or CUDA error and returns it.
Status time_median_ms(std::function<Status()> const& launch, int warmup, int iterations, StreamHandle stream,
                      double* median_ms);

}  // namespace fp8attn::profiler
