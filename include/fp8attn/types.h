#pragma once
// Element types and tensor layouts shared by every operation.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct CUstream_st;  // CUDA's stream type (cudaStream_t and CUstream are both CUstream_st*)

namespace fp8attn {

enum class DataType { kE4M3, kE5M2, kBF16, kF16, kF32, kI8 };  ///< kI8: symmetric int8 (quantize's INT8 Q, K)

/// Short name used in kernel names and on the command line: "e4m3", "bf16", ...
char const* to_string(DataType type);
std::optional<DataType> parse_data_type(std::string_view name);
/// Bytes per element.
int size_of(DataType type);
/// Whether `type` is an 8-bit float (e4m3, e5m2): FP8 inputs need descales and read V sequence-contiguous.
constexpr bool is_fp8(DataType type) { return type == DataType::kE4M3 || type == DataType::kE5M2; }

/// Memory order of a [batch, seqlen, heads, head_dim] operand. Kernels take arbitrary (b, s, h) strides
/// with head_dim contiguous; a Layout is only a shorthand for packed strides.
enum class Layout { kBSHD, kBHSD };

char const* to_string(Layout layout);
std::optional<Layout> parse_layout(std::string_view name);

/// Opaque CUDA stream (the same type as cudaStream_t and CUstream), so this header needs no CUDA header.
using StreamHandle = ::CUstream_st*;

}  // namespace fp8attn
