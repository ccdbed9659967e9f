// CUTLASS filter semantics; the Python twin used at build time is codegen/kernel_filter.py.
#include "fp8attn/library/operation.h"

namespace fp8attn::library {

bool matches_filter(std::string_view name, std::string_view filter) {
  if (filter.empty()) return true;
  size_t begin = 0;
  while (begin <= filter.size()) {
    size_t end = filter.find(',', begin);
    if (end == std::string_view::npos) end = filter.size();
    std::string_view alternative = filter.substr(begin, end - begin);
    // Trim spaces so "a, b" reads like "a,b".
    while (!alternative.empty() && alternative.front() == ' ') alternative.remove_prefix(1);
    while (!alternative.empty() && alternative.back() == ' ') alternative.remove_suffix(1);
    if (!alternative.empty()) {
      size_t pos = 0;
      bool all = true;
      size_t part_begin = 0;
      while (part_begin <= alternative.size()) {
        size_t part_end = alternative.find('*', part_begin);
        if (part_end == std::string_view::npos) part_end = alternative.size();
        std::string_view part = alternative.substr(part_begin, part_end - part_begin);
        size_t found = name.find(part, pos);
        if (found == std::string_view::npos) {
          all = false;
          break;
        }
        pos = found + part.size();
        part_begin = part_end + 1;
      }
      if (all) return true;
    }
    begin = end + 1;
  }
  return false;
}

}  // namespace fp8attn::library
