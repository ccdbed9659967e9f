// PagedDecode / PagedAppend argument checks on a CPU machine: valid sets are accepted, every refusal names the
// argument and value, the split plan and workspace follow the shapes. Pointers are fake but aligned.

#include <cstdint>
#include <cstdio>
#include <cmath>
#include <string>

#include "check.h"
#include "fp8attn/library/operation.h"
#include "fp8attn/paged/device/paged.h"

using fp8attn::Layout;
using fp8attn::Status;
using fp8attn::StatusCode;
using fp8attn::fmha::TensorRef;
using fp8attn::paged::PagedAppendArguments;
using fp8attn::paged::PagedCache;
using fp8attn::paged::PagedDecodeArguments;
using fp8attn::paged::device::PagedAppend;
using fp8attn::paged::device::PagedDecode;

namespace {

template <typename T>
T* fake(uintptr_t address) { return reinterpret_cast<T*>(address); }

PagedCache cache(int page = 64, int head_dim = 128) {
  PagedCache c;
  c.k_pages = fake<void>(0x10000000);
  c.v_pages = fake<void>(0x20000000);
  c.k_descale = fake<float const>(0x30000000);
  c.v_descale = fake<float const>(0x30001000);
  c.descale_stride_page = 8;
  c.num_pages = 4096;
  c.page_size = page;
  c.heads_kv = 8;
  c.head_dim = head_dim;
  c.block_table = fake<int32_t const>(0x40000000);
  c.max_pages = 512;  // 32k tokens of 64
  c.seqlens = fake<int32_t const>(0x50000000);
  return c;
}

PagedDecodeArguments decode(int batch = 32, int q_len = 1) {
  PagedDecodeArguments a;
  a.batch = batch;
  a.q_len = q_len;
  a.heads_q = 32;
  a.q = TensorRef::packed(fake<void const>(0x60000000), Layout::kBSHD, q_len, 32, 128);
  a.o = TensorRef::packed(fake<void const>(0x70000000), Layout::kBSHD, q_len, 32, 128);
  a.cache = cache();
  a.max_seqlen = 32768;
  return a;
}

template <typename Op, typename Args>
void expect_error(Args const& a, StatusCode code, std::string const& fragment, std::string const& what) {
  Status s = Op::can_implement(a);
  CHECK(s.code() == code, what + ": got " + s.to_string());
  CHECK(s.message().find(fragment) != std::string::npos, what + ": '" + s.message() + "' does not name '" + fragment + "'");
}

bool compiled_op(std::string const& name) {
  for (auto const* op : fp8attn::library::operations(fp8attn::library::OperationKind::kPaged)) {
    if (op->description().name == name) return true;
  }
  return false;
}

}  // namespace

int main() {
  if (!compiled_op("fp8attn_sm90_paged_decode_e4m3_bf16_p64x128_r16_n128_w4_s5")) {
    std::printf("not applicable in this build: no paged decode instance for pages of 64 at D=128\n");
    return fp8attn_test::finish("test_paged_arguments");
  }
  {
    // The split rule of one-head instances (the head-pair instance's items are pairs: its checks below).
    auto a = decode();
    a.kernel_name = "fp8attn_sm90_paged_decode_e4m3_bf16_p64x128_r16_n128_w4_s5";
    CHECK(PagedDecode::can_implement(a).ok(), PagedDecode::can_implement(a).to_string());
    CHECK(PagedDecode::splits_of(a) == 1, "32 sequences x 8 kv heads fill the GPU: one split, got " +
                                              std::to_string(PagedDecode::splits_of(a)));
    CHECK(PagedDecode::get_workspace_size(a) == 0, "one split: no partials");
    a.batch = 1;
    a.max_seqlen = 131072;
    a.cache.max_pages = 2048;
    int const splits = PagedDecode::splits_of(a);
    CHECK(splits == 33, "batch 1 at 128k: 264 / 8 programs -> 33 splits, got " + std::to_string(splits));
    // 8 kv heads x 33 splits x (rows x (head_dim + 1)) floats: 8 rows (the Gluon decode) or 16 (the Triton one).
    CHECK(PagedDecode::get_workspace_size(a) >= size_t(8) * 33 * 8 * 129 * 4, "split partials in the workspace");
    a.batch = 8;
    a.cache.max_pages = 2048;
    CHECK(PagedDecode::splits_of(a) == 4, "batch 8 at 128k: 64 programs -> 4 splits (one wave of 256), got " +
                                              std::to_string(PagedDecode::splits_of(a)));
    a.batch = 1;
    a.max_seqlen = 64;
    a.cache.max_pages = 512;
    CHECK(PagedDecode::splits_of(a) == 1, "one page: no split");
    a.num_splits = 5;
    CHECK(PagedDecode::splits_of(a) == 5, "num_splits given is kept");
  }
  {
    // MQA (32 query heads on one kv head, bench_decode's case): the 32 rows are one program of the 32-row instance,
    // so 32 sequences are 32 programs before splitting: 8 splits fill 264 slots (counting the rows in chunks of 16,
    // as this function once did, gave 4 and left half the slots idle).
    auto a = decode();
    a.cache.heads_kv = 1;
    CHECK(PagedDecode::can_implement(a).ok(), "MQA: " + PagedDecode::can_implement(a).to_string());
    CHECK(PagedDecode::splits_of(a) == 8, "MQA, 32 sequences at 32k: 32 programs -> 8 splits, got " +
                                              std::to_string(PagedDecode::splits_of(a)));
    // Two instances hold 32 rows at pages of 64: the Gluon one is the pick (src/paged/paged.cpp find), the Triton
    // one where the Gluon decode cannot run (soft-capping) and at pages of 16 (no Gluon 32-row instance there).
    std::string const gluon32 = "fp8attn_sm90_paged_decode_e4m3_bf16_p64x128_r32_n64_w4_s4_gluon";
    if (compiled_op(gluon32.c_str())) {
      char const* pick = PagedDecode::instance_of(a);
      CHECK(pick != nullptr && pick == gluon32, std::string("MQA: the Gluon 32-row instance, got ") + (pick ? pick : "null"));
      a.softcap = 30.0f;
      pick = PagedDecode::instance_of(a);
      CHECK(pick != nullptr && std::string(pick).find("_r32_") != std::string::npos &&
                std::string(pick).find("gluon") == std::string::npos,
            std::string("MQA soft-capped: a Triton 32-row instance, got ") + (pick ? pick : "null"));
      CHECK(PagedDecode::splits_of(a) == 8, "MQA soft-capped: 8 splits, got " + std::to_string(PagedDecode::splits_of(a)));
      a.softcap = 0.0f;
      a.cache.page_size = 16;
      a.cache.max_pages = 32768 / 16;
      pick = PagedDecode::instance_of(a);
      CHECK(pick != nullptr && std::string(pick).find("_p16x128_r32_") != std::string::npos &&
                std::string(pick).find("gluon") == std::string::npos,
            std::string("MQA at pages of 16: the Triton 32-row instance, got ") + (pick ? pick : "null"));
    } else {
      std::printf("the Gluon 32-row decode is not in this build: its pick is not checked\n");
    }
  }
  bool const pairs_compiled = compiled_op("fp8attn_sm90_paged_decode_e4m3_bf16_p64x128_r8_n64_w4_s2_pairs_gluon") &&
                              compiled_op("fp8attn_sm90_paged_decode_e4m3_bf16_p64x128_r8_n64_w4_s4_gluon");
  if (!pairs_compiled) std::printf("the head-pair checks are not applicable in this build\n");
  if (pairs_compiled) {
    // The heuristic's head-pair pick (src/paged/paged.cpp find_head_pairs): from 256 work items of pairs of kv heads
    // (pairs x splits), GQA 4:1 of one token; every condition broken once leaves the one-head instance.
    auto is_pairs = [](PagedDecodeArguments const& a) {
      char const* name = PagedDecode::instance_of(a);
      return name != nullptr && std::string(name).find("_pairs") != std::string::npos;
    };
    auto a = decode(64);  // 64 x 8 kv heads = 256 pairs
    CHECK(is_pairs(a), std::string("batch 64: the head-pair instance, got ") + PagedDecode::instance_of(a));
    CHECK(PagedDecode::can_implement(a).ok(), "pairs: " + PagedDecode::can_implement(a).to_string());
    CHECK(PagedDecode::splits_of(a) == 1, "pairs: one split, got " + std::to_string(PagedDecode::splits_of(a)));
    CHECK(PagedDecode::get_workspace_size(a) == 0, "pairs: no partials");
    a.batch = 128;
    CHECK(is_pairs(a), "batch 128: the head-pair instance");
    a.num_splits = 1;
    CHECK(is_pairs(a), "num_splits=1 given: still pairs");
    // Whether this build's head-pair instance splits pairs over the keys (codegen/operations/paged.py
    // LIBRARY_PAIR_SPLITS, in the record and so in the summary): the plan differs, each side checked.
    std::string const pairs_name = "fp8attn_sm90_paged_decode_e4m3_bf16_p64x128_r8_n64_w4_s2_pairs_gluon";
    bool const pair_splits =
        fp8attn::library::find_operation(pairs_name)->description().summary.find("split over the keys") !=
        std::string::npos;
    std::printf("head-pair instance: %s\n", pair_splits ? "splits pairs over the keys" : "one split");
    a.num_splits = 2;
    if (pair_splits) {
      CHECK(is_pairs(a), "num_splits=2 given: pairs, split");
      CHECK(PagedDecode::can_implement(a).ok(), "num_splits=2: " + PagedDecode::can_implement(a).to_string());
      // Split pairs write partials per kv head (the combine's layout): batch x heads_kv x splits slots of 8 rows.
      size_t const slots = size_t{128} * 8 * 2 * 8;
      CHECK(PagedDecode::get_workspace_size(a) >= slots * (128 + 2) * sizeof(float),
            "pairs, 2 splits: partials for every kv head, got " + std::to_string(PagedDecode::get_workspace_size(a)));
    } else {
      CHECK(!is_pairs(a), "num_splits=2: not pairs");
      CHECK(PagedDecode::can_implement(a).ok(), "num_splits=2: " + PagedDecode::can_implement(a).to_string());
    }
    a = decode(63);  // 252 pairs, one split (at least kSplitBelowPrograms items)
    CHECK(!is_pairs(a), "batch 63 (252 pairs, below kPairMinItems): not pairs");
    a = decode(128);
    a.softcap = 30.0f;
    CHECK(!is_pairs(a), "soft-capping (no Gluon decode): not pairs");
    a = decode(128, 2);  // 2 tokens x group 4 = 8 rows per kv head, more than half of 8
    CHECK(!is_pairs(a), "8 rows per kv head: not pairs");
    a = decode(128);
    a.heads_q = 28;
    a.cache.heads_kv = 7;
    CHECK(!is_pairs(a), "odd heads_kv: not pairs");
    a = decode(128);
    a.kernel_name = "fp8attn_sm90_paged_decode_e4m3_bf16_p64x128_r8_n64_w4_s4_gluon";
    char const* named = PagedDecode::instance_of(a);
    CHECK(named != nullptr && std::string(named) == a.kernel_name, "kernel_name given wins");
    a = decode(32);
    a.num_splits = 1;
    CHECK(!is_pairs(a), "batch 32, num_splits=1 given (128 items): not pairs");
    if (pair_splits) {
      // Fewer pairs than kSplitBelowPrograms: split over the keys like one-head items, pairs x splits items.
      a = decode(32);  // 128 pairs x 2 splits (32k keys)
      CHECK(is_pairs(a), std::string("batch 32: pairs, split, got ") + PagedDecode::instance_of(a));
      CHECK(PagedDecode::splits_of(a) == 2, "batch 32: 2 splits, got " + std::to_string(PagedDecode::splits_of(a)));
      a = decode(8);  // 32 pairs x 8 splits
      a.max_seqlen = 131072;
      a.cache.max_pages = 131072 / 64;
      CHECK(is_pairs(a), "batch 8, 128k: pairs, split");
      CHECK(PagedDecode::splits_of(a) == 8, "batch 8, 128k: 8 splits, got " + std::to_string(PagedDecode::splits_of(a)));
      a.max_seqlen = 512;  // 8 pages: two splits of 4 at most, 64 items
      CHECK(!is_pairs(a), "batch 8, 512 keys (64 pair items): not pairs");
    } else {
      a = decode(32);  // 128 pairs: one CTA per SM, slower than the one-head instance (3.21 / 4.38 TB/s)
      CHECK(!is_pairs(a), "batch 32: not pairs");
    }
    // Named with automatic splits at a small batch: split like the others, or the pair instance's one split.
    a = decode(4);
    a.kernel_name = pairs_name;
    CHECK(PagedDecode::can_implement(a).ok(), "pairs named, automatic splits: " + PagedDecode::can_implement(a).to_string());
    if (pair_splits) {
      CHECK(PagedDecode::splits_of(a) > 1, "pairs named, automatic: split, got " +
                                               std::to_string(PagedDecode::splits_of(a)));
      a.num_splits = 3;
      CHECK(PagedDecode::can_implement(a).ok(), "pairs named, 3 splits: " + PagedDecode::can_implement(a).to_string());
    } else {
      CHECK(PagedDecode::splits_of(a) == 1, "pairs named, automatic: one split, got " +
                                                std::to_string(PagedDecode::splits_of(a)));
      a.num_splits = 2;
      expect_error<PagedDecode>(a, StatusCode::kErrorNotSupported, "runs one split", "pairs named, 2 splits");
    }
  }
  {
    auto a = decode(4, 8);  // 8 speculative tokens x group 4 = 32 rows: the 64-row instance
    std::string name;
    CHECK(PagedDecode::can_implement(a).ok(), "8 tokens: " + PagedDecode::can_implement(a).to_string());
    auto mqa = decode(2, 8);
    mqa.cache.heads_kv = 1;
    CHECK(PagedDecode::can_implement(mqa).ok(), "MQA, 8 tokens (256 rows in chunks): " +
                                                    PagedDecode::can_implement(mqa).to_string());
  }
  { auto a = decode(); a.q_len = 4097; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "q_len=4097", "q_len"); }
  { auto a = decode(); a.q_len = 0; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "q_len=0", "q_len 0"); }
  {
    auto a = decode(4, 512);  // chunked prefill: 512 new tokens x group 4 = 2048 rows, in chunks of 64
    a.max_seqlen = 32768;
    CHECK(PagedDecode::can_implement(a).ok(), "chunked prefill: " + PagedDecode::can_implement(a).to_string());
  }
  { auto a = decode(); a.window_left = -2; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "window_left=-2", "window"); }
  { auto a = decode(); a.cache.max_pages = 1 << 25; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "cache.max_pages=33554432", "table wider than 2^31 tokens"); }
  { auto a = decode(); a.softcap = -1.0f; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "softcap=-1", "softcap"); }
  { auto a = decode(); a.softcap = std::nanf(""); expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "softcap=nan", "softcap nan"); }
  {
    // A 4k window at 128k: the splits cover the window (4095 + 1 + 255 keys of alignment slack: 68 pages, at least
    // 4 per split: 17 splits), not the whole context (33).
    auto a = decode(1);
    a.max_seqlen = 131072;
    a.cache.max_pages = 2048;
    size_t const full = PagedDecode::get_workspace_size(a);
    a.window_left = 4095;
    CHECK(PagedDecode::can_implement(a).ok(), PagedDecode::can_implement(a).to_string());
    CHECK(PagedDecode::splits_of(a) == 17, "splits over the window, got " + std::to_string(PagedDecode::splits_of(a)));
    CHECK(PagedDecode::get_workspace_size(a) < full, "fewer splits, fewer partials");
    a.window_left = 0;
    CHECK(PagedDecode::splits_of(a) == 1, "a window of one key: " + std::to_string(PagedDecode::splits_of(a)));
  }
  { auto a = decode(); a.heads_q = 12; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "heads_q=12", "gqa"); }
  { auto a = decode(); a.cache.page_size = 32; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "max_seqlen=32768", "table too short for 32-token pages"); }
  {
    auto a = decode();
    a.cache.page_size = 32;
    a.cache.max_pages = 1024;
    expect_error<PagedDecode>(a, StatusCode::kErrorNotSupported, "cache.page_size=32", "page size not compiled");
  }
  { auto a = decode(); a.cache.head_dim = 96; expect_error<PagedDecode>(a, StatusCode::kErrorNotSupported, "cache.head_dim=96", "head_dim"); }
  { auto a = decode(); a.max_seqlen = 32769; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "max_seqlen=32769", "beyond the table"); }
  { auto a = decode(); a.cache.block_table = nullptr; expect_error<PagedDecode>(a, StatusCode::kErrorNullPointer, "cache.block_table is null", "table"); }
  { auto a = decode(); a.cache.seqlens = nullptr; expect_error<PagedDecode>(a, StatusCode::kErrorNullPointer, "cache.seqlens is null", "lengths"); }
  { auto a = decode(); a.cache.k_pages = fake<void>(0x10000008); expect_error<PagedDecode>(a, StatusCode::kErrorMisalignedOperand, "cache.k_pages=", "pages align"); }
  { auto a = decode(); a.q.stride_h = 100; expect_error<PagedDecode>(a, StatusCode::kErrorMisalignedOperand, "q.stride_h=100", "q stride"); }
  { auto a = decode(); a.cache.descale_stride_page = -1; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "page=-1", "descale stride"); }
  { auto a = decode(); a.num_splits = -2; expect_error<PagedDecode>(a, StatusCode::kErrorInvalidProblem, "num_splits=-2", "splits"); }
  { auto a = decode(); a.kernel_name = "fp8attn_sm90_paged_decode_e4m3_bf16_p16x128_r16_n64_w4_s5"; expect_error<PagedDecode>(a, StatusCode::kErrorNotSupported, "does not decode pages of 64", "wrong instance"); }
  {
    auto a = decode(0);
    a.q.ptr = nullptr;
    a.cache.seqlens = nullptr;
    CHECK(PagedDecode::can_implement(a).ok(), "batch 0 is a no-op: " + PagedDecode::can_implement(a).to_string());
  }
  // Append
  {
    PagedAppendArguments a;
    a.batch = 32;
    a.new_tokens = 1;
    a.k = TensorRef::packed(fake<void const>(0x60000000), Layout::kBSHD, 1, 8, 128);
    a.v = TensorRef::packed(fake<void const>(0x61000000), Layout::kBSHD, 1, 8, 128);
    a.positions = fake<int32_t const>(0x62000000);
    a.cache = cache();
    CHECK(PagedAppend::can_implement(a).ok(), PagedAppend::can_implement(a).to_string());
    auto b = a;
    b.positions = nullptr;
    expect_error<PagedAppend>(b, StatusCode::kErrorNullPointer, "positions is null", "positions");
    b = a;
    b.cache.head_dim = 256;
    expect_error<PagedAppend>(b, StatusCode::kErrorNotSupported, "cache.head_dim=256", "append head_dim");
    b = a;
    b.new_tokens = -1;
    expect_error<PagedAppend>(b, StatusCode::kErrorInvalidProblem, "new_tokens=-1", "new tokens");
  }
  // The registry: combine instances refuse to run alone.
  for (auto const* op : fp8attn::library::operations(fp8attn::library::OperationKind::kPaged)) {
    if (op->description().name.find("_combine_") == std::string::npos) continue;
    auto a = decode();
    Status s = op->can_implement(&a);
    CHECK(s.code() == StatusCode::kErrorNotSupported && s.message().find("internal stage") != std::string::npos,
          op->description().name + ": " + s.to_string());
  }
  return fp8attn_test::finish("test_paged_arguments");
}
