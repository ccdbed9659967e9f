#pragma once
// --list: the compiled operations of this build, from the library's registry. Needs no GPU.

#include "options.h"

namespace fp8attn::profiler {

/// Prints every compiled operation of every kind (only --operation's kind when it was given) whose name matches
/// --kernels: name, kind, family, launch warps, shared memory, whether it writes LSE (attention) and its summary.
/// Throws UsageError, naming the filter, when --kernels matches none of them.
void print_operations(Options const& options);

}  // namespace fp8attn::profiler
