#pragma once
// The configuration record of a paged-cache instance (codegen/operations/paged.py: cpp_config).

namespace fp8attn::paged::detail {

enum class PagedStage { kAppend, kDecode, kCombine };

struct PagedKernelConfig {
  PagedStage stage;
  int page;      ///< tokens per page (0 for combine)
  int head_dim;
  int rows;      ///< query rows per decode / combine program (0 for append)
  int warps;
  int stages;
  int block_n;   ///< keys per decode iteration (0 for append and combine)
  bool head_pairs;  ///< Gluon decode: two kv heads per work item (ROWS / 2 rows each, one row chunk)
  bool pair_splits;  ///< head_pairs: its items split over the keys like one-head ones (else one split only)
  int max_registers;  ///< ptxas's cap on registers per thread (the Gluon decode's; 0: none set)
};

}  // namespace fp8attn::paged::detail
