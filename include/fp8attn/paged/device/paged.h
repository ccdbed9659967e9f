#pragma once
// fp8attn::paged: a paged FP8 KV cache (docs/PAGED_CACHE.md), the append that writes new tokens into it and decode
// attention over it (1 to 8 new query tokens per sequence for decode, up to 4096 for chunked prefill; causal
// among them; GQA/MQA; split-KV).
//
//   PagedCache cache{...};                 // e4m3 pages, descales, block table, lengths (device pointers)
//   PagedAppend append;  append(PagedAppendArguments{...}, stream);       // bf16 K/V rows -> e4m3 slots
//   PagedDecode decode;  decode.initialize(PagedDecodeArguments{...}, workspace, stream); decode.run(stream);
//
// Device data (block tables, lengths, positions) is never read on the host: can_implement checks what the host
// knows (shapes, types, page size, pointers, max_seqlen against the table's width), and the kernels turn an
// invalid table entry or a length beyond the table into NaN output rows, never a read outside the cache.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fp8attn/fmha/device/fmha_fwd.h"
#include "fp8attn/status.h"

namespace fp8attn::paged {

struct PagedCache {
  void* k_pages = nullptr;  ///< e4m3 [num_pages, page_size, heads_kv, head_dim]
  void* v_pages = nullptr;  ///< e4m3 [num_pages, heads_kv, head_dim, page_size]: V transposed inside each page
  float const* k_descale = nullptr;  ///< element (page, kv head) at page * descale_stride_page + head * descale_stride_head
  float const* v_descale = nullptr;
  int64_t descale_stride_page = 0;   ///< 0: one descale per kv head for every page (static)
  int64_t descale_stride_head = 1;
  int num_pages = 0;
  int page_size = 0;                 ///< tokens per page (compiled: 16, 64)
  int heads_kv = 0;
  int head_dim = 0;
  int32_t const* block_table = nullptr;  ///< int32 [batch, max_pages]
  int max_pages = 0;                     ///< the block table's width
  int32_t const* seqlens = nullptr;      ///< int32 [batch]: tokens in the cache per sequence
};

struct PagedDecodeArguments {
  int batch = 0;
  int q_len = 1;    ///< new tokens per sequence (1..4096; > 8 is chunked prefill); their keys are already in the cache
  int heads_q = 0;  ///< a multiple of cache.heads_kv
  fmha::TensorRef q;  ///< bf16 [batch, q_len, heads_q, head_dim] (the TensorRef's s is the token)
  fmha::TensorRef o;  ///< bf16 [batch, q_len, heads_q, head_dim], written
  PagedCache cache;
  /// A host-side bound on the lengths: splits are planned from it, and it must fit the table (max_seqlen <=
  /// max_pages * page_size). A sequence longer than it gets NaN rows (never silently fewer keys): when replaying a
  /// captured graph while sequences grow, capture with the largest length the graph will see.
  int max_seqlen = 0;
  float softmax_scale = 0.0f;  ///< 0: 1/sqrt(head_dim)
  int num_splits = 0;          ///< split-KV: 0 picks from batch * heads_kv and max_seqlen; 1 writes O directly
  /// Sliding window: query token t (at position p = seqlen - q_len + t) sees keys p - window_left <= j <= p; -1
  /// unlimited. Splits then cover only the keys some row can see; blocks before them are never read.
  int window_left = -1;
  float softcap = 0.0f;        ///< > 0: scores s become softcap * tanh(s / softcap) (Gemma 2); 0: none
  std::string kernel_name;     ///< empty: the decode instance for page_size, head_dim and the rows needed
};

struct PagedAppendArguments {
  int batch = 0;
  int new_tokens = 0;   ///< per sequence
  fmha::TensorRef k;    ///< bf16 [batch, new_tokens, heads_kv, head_dim]
  fmha::TensorRef v;
  int32_t const* positions = nullptr;  ///< int32 [batch]: the first new token's position per sequence
  PagedCache cache;     ///< the pages written; block_table must cover the new positions
  std::string kernel_name;
};

namespace device {

class PagedDecode {
 public:
  using Arguments = PagedDecodeArguments;
  static Status can_implement(Arguments const& args);
  /// Bytes of the split-KV partials (0 with one split), plus, in a build whose decode is instrumented by Triton's
  /// concurrency sanitizer, that decode's per-program global scratch.
  static size_t get_workspace_size(Arguments const& args);
  /// The splits the arguments get (num_splits, or the automatic choice).
  static int splits_of(Arguments const& args);
  /// The decode instance the arguments would run (kernel_name, or the heuristic's pick; null when none is
  /// compiled), before can_implement's checks of it.
  static char const* instance_of(Arguments const& args);
  Status initialize(Arguments const& args, void* workspace, StreamHandle stream = nullptr);
  Status run(StreamHandle stream = nullptr);
  Status operator()(Arguments const& args, void* workspace, StreamHandle stream = nullptr);
  char const* kernel_name() const;

 private:
  struct Plan;
  std::shared_ptr<Plan> plan_;
};

class PagedAppend {
 public:
  using Arguments = PagedAppendArguments;
  static Status can_implement(Arguments const& args);
  Status initialize(Arguments const& args, StreamHandle stream = nullptr);
  Status run(StreamHandle stream = nullptr);
  Status operator()(Arguments const& args, StreamHandle stream = nullptr);

 private:
  struct Plan;
  std::shared_ptr<Plan> plan_;
};

}  // namespace device
}  // namespace fp8attn::paged
