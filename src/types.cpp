#include "fp8attn/types.h"

namespace fp8attn {

char const* to_string(DataType type) {
  switch (type) {
    case DataType::kE4M3: return "e4m3";
    case DataType::kE5M2: return "e5m2";
    case DataType::kBF16: return "bf16";
    case DataType::kF16: return "f16";
    case DataType::kF32: return "f32";
    case DataType::kI8: return "i8";
  }
  return "unknown";
}

std::optional<DataType> parse_data_type(std::string_view name) {
  for (DataType t : {DataType::kE4M3, DataType::kE5M2, DataType::kBF16, DataType::kF16, DataType::kF32,
                     DataType::kI8}) {
    if (name == to_string(t)) return t;
  }
  return std::nullopt;
}

int size_of(DataType type) {
  switch (type) {
    case DataType::kE4M3:
    case DataType::kE5M2:
    case DataType::kI8: return 1;
    case DataType::kBF16:
    case DataType::kF16: return 2;
    case DataType::kF32: return 4;
  }
  return 0;
}

char const* to_string(Layout layout) { return layout == Layout::kBSHD ? "bshd" : "bhsd"; }

std::optional<Layout> parse_layout(std::string_view name) {
  if (name == "bshd") return Layout::kBSHD;
  if (name == "bhsd") return Layout::kBHSD;
  return std::nullopt;
}

}  // namespace fp8attn
