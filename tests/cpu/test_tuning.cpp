// The tuning table: parsing (every malformed line refused with its line number, the rest kept), matching
// (GPU name substring, seqlen bucket), the runtime table (FP8ATTN_TUNING_FILE first, stale names kept: their
// bucket runs the manifest order), and
// the selection step (a named instance overrides the manifest order, an instance that cannot run the problem
// is passed over).

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "check.h"
#include "fmha/fmha_internal.h"
#include "fmha/fmha_tuning.h"
#include "fp8attn/library/operation.h"

using fp8attn::DataType;
using fp8attn::fmha::FmhaProblem;
using fp8attn::fmha::detail::TuningEntry;
namespace detail = fp8attn::fmha::detail;

namespace {

bool contains(std::string const& s, std::string const& part) { return s.find(part) != std::string::npos; }

std::string const kHeader = "gpu,input_type,head_dim,causal,max_seqlen_k,kernel\n";

fp8attn::fmha::device::FmhaFwd::Arguments fp8_args(int seqlen, bool causal) {
  fp8attn::fmha::device::FmhaFwd::Arguments a;
  a.problem = {2, 8, 8, seqlen, seqlen, 128, causal, DataType::kE4M3, DataType::kBF16};
  auto fake = [](uintptr_t p) { return reinterpret_cast<void*>(p); };
  a.q = fp8attn::fmha::TensorRef::packed(fake(0x100000), fp8attn::Layout::kBSHD, seqlen, 8, 128);
  a.k = fp8attn::fmha::TensorRef::packed(fake(0x200000), fp8attn::Layout::kBSHD, seqlen, 8, 128);
  a.v = fp8attn::fmha::TensorRef::packed(fake(0x300000), fp8attn::Layout::kBSHD, seqlen, 8, 128);
  a.o = fp8attn::fmha::TensorRef::packed(fake(0x400000), fp8attn::Layout::kBSHD, seqlen, 8, 128);
  static float descale_storage alignas(16)[4];
  a.q_descale.ptr = a.k_descale.ptr = a.v_descale.ptr = descale_storage;
  return a;
}

}  // namespace

int main() {
  // ---- the runtime table reads FP8ATTN_TUNING_FILE once: set it before anything asks ----
  std::string const path = "test_tuning_file.csv";
  // A compiled FP8 D=128 full Triton instance: the heuristic's first choice for S=8192 is a Gluon one (checked
  // below, after the table is read: asking the heuristic now would read the table before the file exists).
  std::string another_instance;
  {
    for (auto const& op : fp8attn::library::fmha_operations()) {
      if (op.qk_type == DataType::kE4M3 && op.head_dim == 128 && !op.causal &&
          op.family == fp8attn::library::KernelFamily::kTriton && !op.warp_specialized && op.v_transposed &&
          another_instance.empty()) {
        another_instance = op.name;
      }
    }
    std::ofstream f(path);
    f << "# a user's file\n" << kHeader << "NVIDIA H200,e4m3,128,0,4096," << another_instance << "\n"
      << "NVIDIA H200,e4m3,128,0,8192,fp8attn_sm90_no_such_kernel\n";
  }
  setenv("FP8ATTN_TUNING_FILE", path.c_str(), 1);

  // ---- parsing ----
  {
    std::vector<std::string> warnings;
    auto t = detail::parse_tuning_table(
        "# comment\n\n" + kHeader + "H200,e4m3,128,1,4096,kernel_a\n" + " H100 , bf16 , 64 , 0 , 16384 , kernel_b \n" +
            "H200,e4m3,128,1,4096\n" +             // line 6: 5 fields
            "H200,int4,128,1,4096,k\n" +           // line 7: no such type
            "H200,e4m3,128,2,4096,k\n" +           // line 8: causal not 0/1
            "H200,e4m3,128,0,0,k\n" +              // line 9: max_seqlen_k not positive
            "H200,e4m3,x,0,5,k\n" +                // line 10: head_dim
            ",e4m3,128,0,5,k\n",                   // line 11: empty gpu
        "t.csv", &warnings);
    CHECK(t.size() == 2, "two good lines, got " + std::to_string(t.size()));
    if (t.size() == 2) {
      CHECK(t[0].gpu == "H200" && t[0].input_type == DataType::kE4M3 && t[0].head_dim == 128 && t[0].causal &&
                t[0].max_seqlen_k == 4096 && t[0].kernel == "kernel_a",
            "first entry");
      CHECK(t[1].gpu == "H100" && t[1].input_type == DataType::kBF16 && t[1].head_dim == 64 && !t[1].causal &&
                t[1].kernel == "kernel_b",
            "fields are trimmed");
    }
    CHECK(warnings.size() == 6, "one warning per bad line, got " + std::to_string(warnings.size()));
    char const* expected[] = {"t.csv:6: expected 6", "t.csv:7: input_type 'int4'", "t.csv:8: causal '2'",
                              "t.csv:9: max_seqlen_k '0'", "t.csv:10: head_dim 'x'", "t.csv:11: empty gpu"};
    for (size_t i = 0; i < 6 && i < warnings.size(); ++i) {
      CHECK(contains(warnings[i], expected[i]), warnings[i] + " should say " + expected[i]);
    }
    warnings.clear();
    CHECK(detail::parse_tuning_table("H200,e4m3,128,1,4096,k\n", "nohead.csv", &warnings).empty() &&
              warnings.size() == 1 && contains(warnings[0], "header"),
          "a file without the header is ignored whole");
  }

  // ---- matching ----
  {
    TuningEntry e{"NVIDIA H200", DataType::kE4M3, 128, false, 4096, "k"};
    FmhaProblem p{1, 8, 8, 4096, 4096, 128, false, DataType::kE4M3, DataType::kBF16};
    CHECK(detail::entry_matches(e, "NVIDIA H200", p, false), "the device name, seqlen_k at the bound");
    TuningEntry h20{"NVIDIA H20", DataType::kE4M3, 128, false, 4096, "k"};
    CHECK(!detail::entry_matches(h20, "NVIDIA H200", p, false), "an H20 entry (a prefix of the name) is not an H200's");
    // Packed sequences take the rows naming "_varlen" instances, dense calls the others.
    TuningEntry packed{"NVIDIA H200", DataType::kE4M3, 128, false, 4096, "fp8attn_sm90_x_varlen_gluon"};
    CHECK(detail::entry_is_varlen(packed) && !detail::entry_is_varlen(e), "a _varlen name is a varlen row");
    CHECK(!detail::entry_matches(e, "NVIDIA H200", p, true), "a dense row does not apply to a varlen call");
    CHECK(detail::entry_matches(packed, "NVIDIA H200", p, true), "a varlen row applies to a varlen call");
    CHECK(!detail::entry_matches(packed, "NVIDIA H200", p, false), "a varlen row does not apply to a dense call");
    p.seqlen_k = 4097;
    CHECK(!detail::entry_matches(e, "NVIDIA H200", p, false), "seqlen_k past the bucket");
    p.seqlen_k = 16;
    CHECK(!detail::entry_matches(e, "NVIDIA H100 80GB HBM3", p, false), "another GPU");
    p.causal = true;
    CHECK(!detail::entry_matches(e, "NVIDIA H200", p, false), "causal differs");
  }

  // ---- selection step ----
  if (another_instance.empty()) {
    std::printf("not applicable in this build: no second FP8 D=128 full instance to tune to\n");
  } else {
    std::vector<TuningEntry> table{{"NVIDIA H200", DataType::kE4M3, 128, false, 8192, another_instance},
                                   {"NVIDIA H200", DataType::kE4M3, 128, false, 16384, "fp8attn_sm90_not_compiled"}};
    auto a = fp8_args(8192, false);
    auto const* k = detail::tuned_instance(a, table, "NVIDIA H200");
    CHECK(k && k->name == another_instance, "the table's instance for its bucket");
    // Only the first bucket holding seqlen_k counts: when it cannot be used, the manifest order decides, never
    // an entry measured for longer lengths.
    std::vector<TuningEntry> first_unusable{
        {"NVIDIA H200", DataType::kE4M3, 128, false, 8192, "fp8attn_sm90_not_compiled"},
        {"NVIDIA H200", DataType::kE4M3, 128, false, 16384, another_instance}};
    CHECK(!detail::tuned_instance(a, first_unusable, "NVIDIA H200"), "no fall-through to another bucket's entry");
    CHECK(!detail::tuned_instance(a, table, "NVIDIA H100 80GB HBM3"), "no entry for this GPU: the manifest order decides");
    // select_instance asks rows_gpu whose rows apply: a GPU without rows of its own takes the reference GPU's.
    CHECK(detail::rows_gpu(table, "NVIDIA H100 80GB HBM3") == detail::kReferenceGpu, "no rows of its own: the H200's");
    auto const* fallback = detail::tuned_instance(a, table, detail::rows_gpu(table, "NVIDIA H100 80GB HBM3"));
    CHECK(fallback && fallback->name == another_instance, "through rows_gpu, an H100 call gets the H200 row's pick");
    CHECK(detail::rows_gpu(table, "NVIDIA H200") == "NVIDIA H200", "the reference GPU: its own rows");
    // Rows of its own, for another bucket only: its own rows alone (the H200's S=8192 row does not apply), so the
    // S=8192 call runs the manifest order.
    std::vector<TuningEntry> own = table;
    own.push_back({"NVIDIA H100 80GB HBM3", DataType::kE4M3, 64, true, 4096, another_instance});
    CHECK(detail::rows_gpu(own, "NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3", "rows of its own: its own");
    CHECK(!detail::tuned_instance(a, own, detail::rows_gpu(own, "NVIDIA H100 80GB HBM3")),
          "a GPU with rows of its own does not take the reference GPU's for the buckets it leaves out");
    auto longer = fp8_args(32768, false);
    CHECK(!detail::tuned_instance(longer, table, "NVIDIA H200"), "seqlen_k past every bucket");
    // An instance that cannot run the problem (head_dim 64 call, D=128 instance) is passed over.
    auto d64 = a;
    d64.problem.head_dim = 64;
    std::vector<TuningEntry> wrong{{"NVIDIA H200", DataType::kE4M3, 64, false, 8192, another_instance}};
    CHECK(!detail::tuned_instance(d64, wrong, "NVIDIA H200"), "an entry whose instance cannot run is passed over");
  }

  // ---- the runtime table: the user's file first, the stale name kept (its bucket runs the manifest order) ----
  {
    std::string first_choice;
    fp8attn::fmha::device::FmhaFwd::select_kernel(fp8_args(8192, false), &first_choice);
    CHECK(first_choice != another_instance, "the test's instance must differ from the heuristic's pick");
    auto const& table = detail::tuning_table();
    bool has_user = false;
    size_t stale_at = table.size();
    for (size_t i = 0; i < table.size(); ++i) {
      has_user = has_user || (table[i].kernel == another_instance && table[i].max_seqlen_k == 4096);
      if (table[i].kernel == "fp8attn_sm90_no_such_kernel" && stale_at == table.size()) stale_at = i;
    }
    CHECK(another_instance.empty() || has_user, "FP8ATTN_TUNING_FILE's entry is used");
    // Dropped, the stale row would let the S=8192 call fall to a later row of the table (one measured for longer
    // rows); kept, it is that call's first matching row and names nothing compiled: the manifest order decides.
    CHECK(stale_at < table.size(), "an entry naming a kernel this build lacks stays in the table");
    auto const s8192 = fp8_args(8192, false);
    CHECK(!detail::tuned_instance(s8192, table, "NVIDIA H200"), "the stale row's bucket runs the manifest order");
  }
  std::remove(path.c_str());
  return fp8attn_test::finish("test_tuning");
}
