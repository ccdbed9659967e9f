// FmhaFwd::can_implement / select_kernel / get_workspace_size on a CPU machine: every bad input gets its own
// status code and a message naming the argument and value; the heuristic picks the expected instance.
// Pointers are fake but aligned: nothing here dereferences them. Assumes the default kernel set.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "check.h"
#include "fp8attn/fmha/device/fmha_fwd.h"

using fp8attn::DataType;
using fp8attn::Layout;
using fp8attn::Status;
using fp8attn::StatusCode;
using fp8attn::fmha::DescaleRef;
using fp8attn::fmha::TensorRef;
using Fmha = fp8attn::fmha::device::FmhaFwd;

namespace {

void* fake(uintptr_t address) { return reinterpret_cast<void*>(address); }
float const* fake_float(uintptr_t address) { return reinterpret_cast<float const*>(address); }

Fmha::Arguments valid_fp8(int batch = 2, int heads = 8, int seqlen = 8192, int head_dim = 128, bool causal = false) {
  Fmha::Arguments a;
  a.problem = {batch, heads, heads, seqlen, seqlen, head_dim, causal, DataType::kE4M3, DataType::kBF16};
  a.q = TensorRef::packed(fake(0x100000), Layout::kBSHD, seqlen, heads, head_dim);
  a.k = TensorRef::packed(fake(0x200000), Layout::kBSHD, seqlen, heads, head_dim);
  a.v = TensorRef::packed(fake(0x300000), Layout::kBSHD, seqlen, heads, head_dim);
  a.o = TensorRef::packed(fake(0x400000), Layout::kBSHD, seqlen, heads, head_dim);
  a.q_descale = DescaleRef::per_tensor(fake_float(0x500000));
  a.k_descale = DescaleRef::per_tensor(fake_float(0x500010));
  a.v_descale = DescaleRef::per_head(fake_float(0x500020), heads);
  return a;
}

/// The failure must have this code and mention every fragment.
void expect_error(Fmha::Arguments const& a, StatusCode code, std::string const& fragment, std::string const& case_name) {
  Status s = Fmha::can_implement(a);
  CHECK(!s.ok(), case_name + ": accepted, expected " + fp8attn::to_string(code));
  CHECK(s.code() == code, case_name + ": got " + s.to_string());
  CHECK(s.message().find(fragment) != std::string::npos,
        case_name + ": message '" + s.message() + "' does not name '" + fragment + "'");
}

std::string selected(Fmha::Arguments const& a) {
  std::string name;
  Status s = Fmha::select_kernel(a, &name);
  return s.ok() ? name : "error: " + s.to_string();
}

bool contains(std::string const& text, std::string const& part) { return text.find(part) != std::string::npos; }

}  // namespace

int main() {
  // ---- valid problems and the heuristic -------------------------------------------------------------
  {
    auto a = valid_fp8();
    Status s = Fmha::can_implement(a);
    CHECK(s.ok(), s.to_string());
    CHECK(contains(selected(a), "e4m3_e4m3_f32_bf16_128x128x128") && contains(selected(a), "_ws_evenn"),
          "S=8192 non-causal should take the warp-specialized evenn instance, got " + selected(a));
    size_t vt = size_t(2) * 8 * 128 * 8192;
    CHECK(Fmha::get_workspace_size(a) >= vt, "workspace must hold V^T: " + std::to_string(Fmha::get_workspace_size(a)));
  }
  {
    auto a = valid_fp8(1, 4, 1000);
    CHECK(Fmha::can_implement(a).ok(), "odd length");
    CHECK(!contains(selected(a), "_ws") && contains(selected(a), "strided_full"),
          "seqlen_k=1000 cannot use evenn: " + selected(a));
    a.problem.seqlen_k = 4097;
    a.k = TensorRef::packed(fake(0x200000), Layout::kBSHD, 4097, 4, 128);
    a.v = a.k;
    CHECK(Fmha::can_implement(a).ok(), "seqlen_q != seqlen_k");
  }
  {
    // Asking for LSE steers the heuristic away from the warp-specialized instance, which cannot write it.
    auto a = valid_fp8();
    a.lse = reinterpret_cast<float*>(0x600000);
    CHECK(Fmha::can_implement(a).ok(), "lse: " + Fmha::can_implement(a).to_string());
    CHECK(!contains(selected(a), "_ws"), "LSE must not select a warp-specialized instance: " + selected(a));
    a.kernel_name = selected(valid_fp8());
    expect_error(a, StatusCode::kErrorNotSupported, "lse was requested", "forced ws instance with LSE");
  }
  {
    auto a = valid_fp8(2, 8, 8192, 128, true);
    CHECK(contains(selected(a), "strided_causal"), "causal instance: " + selected(a));
  }
  for (int d : {64, 128, 256}) {
    auto a = valid_fp8(1, 4, 512, d);
    CHECK(Fmha::can_implement(a).ok(), "fp8 head_dim " + std::to_string(d));
    CHECK(contains(selected(a), "x" + std::to_string(d) + "_"), "head_dim in name: " + selected(a));
    a.problem.input_type = DataType::kBF16;
    a.q_descale = a.k_descale = a.v_descale = DescaleRef{};
    CHECK(Fmha::can_implement(a).ok(), "bf16 without descales, head_dim " + std::to_string(d));
    CHECK(contains(selected(a), "bf16_bf16_f32_bf16"), "bf16 instance: " + selected(a));
    CHECK(Fmha::get_workspace_size(a) > 0, "null descales need the 1.0 slot in the workspace");
  }
  {
    auto a = valid_fp8(2, 8, 1024);
    a.problem.heads_kv = 2;  // GQA 8/2
    a.k = TensorRef::packed(fake(0x200000), Layout::kBHSD, 1024, 2, 128);
    a.v = TensorRef::packed(fake(0x300000), Layout::kBHSD, 1024, 2, 128);
    CHECK(Fmha::can_implement(a).ok(), "GQA with BHSD K/V: " + Fmha::can_implement(a).to_string());
    size_t with_transpose = Fmha::get_workspace_size(a);
    // V already sequence-contiguous ([b, h, d, s]): no V^T copy.
    a.v.stride_s = 1;
    a.v.stride_d = 1024;
    a.v.stride_h = 128 * 1024;
    a.v.stride_b = 2 * 128 * 1024;
    CHECK(Fmha::can_implement(a).ok(), "sequence-contiguous V: " + Fmha::can_implement(a).to_string());
    CHECK(Fmha::get_workspace_size(a) + size_t(2) * 2 * 128 * 1024 <= with_transpose, "no V^T for sequence-contiguous V");
  }
  {
    auto a = valid_fp8(1, 4, 0);  // zero-length sequences: a defined no-op, pointers may be null
    a.q.ptr = a.o.ptr = a.k.ptr = a.v.ptr = nullptr;
    CHECK(Fmha::can_implement(a).ok(), "seqlen 0: " + Fmha::can_implement(a).to_string());
    auto b = valid_fp8(1, 4, 128);
    b.problem.seqlen_k = 0;
    b.k.ptr = b.v.ptr = nullptr;
    CHECK(Fmha::can_implement(b).ok(), "seqlen_k 0: " + Fmha::can_implement(b).to_string());
  }

  // ---- bad problems ---------------------------------------------------------------------------------
  {
    auto a = valid_fp8(1, 4, 512, 96);
    expect_error(a, StatusCode::kErrorNotSupported, "head_dim=96", "head_dim 96");
    expect_error(a, StatusCode::kErrorNotSupported, "compiled: 64,128,256", "head_dim list");
  }
  {
    auto a = valid_fp8();
    a.problem.heads_q = 12;
    a.problem.heads_kv = 5;
    expect_error(a, StatusCode::kErrorInvalidProblem, "heads_q=12 is not a multiple of heads_kv=5", "GQA ratio");
  }
  { auto a = valid_fp8(); a.problem.batch = -1; expect_error(a, StatusCode::kErrorInvalidProblem, "batch=-1", "batch"); }
  { auto a = valid_fp8(); a.problem.seqlen_q = -3; expect_error(a, StatusCode::kErrorInvalidProblem, "seqlen_q=-3", "seqlen_q"); }
  { auto a = valid_fp8(); a.problem.heads_kv = 0; expect_error(a, StatusCode::kErrorInvalidProblem, "heads_kv=0", "heads_kv"); }
  {
    auto a = valid_fp8(4096, 32, 128);
    expect_error(a, StatusCode::kErrorInvalidProblem, "batch*heads_q=131072", "grid limit");
  }
  { auto a = valid_fp8(); a.problem.input_type = DataType::kE5M2; expect_error(a, StatusCode::kErrorNotSupported, "input_type=e5m2", "dtype"); }
  { auto a = valid_fp8(); a.problem.output_type = DataType::kF32; expect_error(a, StatusCode::kErrorNotSupported, "output_type=f32", "out dtype"); }

  // ---- bad operands ---------------------------------------------------------------------------------
  { auto a = valid_fp8(); a.q.ptr = nullptr; expect_error(a, StatusCode::kErrorNullPointer, "q.ptr is null", "null q"); }
  { auto a = valid_fp8(); a.o.ptr = nullptr; expect_error(a, StatusCode::kErrorNullPointer, "o.ptr is null", "null o"); }
  { auto a = valid_fp8(); a.k.ptr = fake(0x200001); expect_error(a, StatusCode::kErrorMisalignedOperand, "k.ptr=", "misaligned k"); }
  { auto a = valid_fp8(); a.o.stride_d = 2; expect_error(a, StatusCode::kErrorInvalidProblem, "o.stride_d=2", "o stride_d"); }
  { auto a = valid_fp8(); a.q.stride_s = 4104; expect_error(a, StatusCode::kErrorMisalignedOperand, "q.stride_s=4104", "q stride_s"); }
  { auto a = valid_fp8(); a.k.stride_h = -128; expect_error(a, StatusCode::kErrorInvalidProblem, "k.stride_h=-128", "negative stride"); }
  { auto a = valid_fp8(); a.o.stride_h = 0; expect_error(a, StatusCode::kErrorInvalidProblem, "alias", "aliasing output"); }
  {
    auto a = valid_fp8(1, 4, 512);
    a.problem.input_type = DataType::kBF16;
    a.v.stride_s = 1;
    a.v.stride_d = 512;
    expect_error(a, StatusCode::kErrorInvalidProblem, "v.stride_d=512", "bf16 V must be head_dim-contiguous");
  }
  { auto a = valid_fp8(); a.v_descale.ptr = nullptr; expect_error(a, StatusCode::kErrorNullPointer, "v_descale.ptr is null", "fp8 descale"); }
  { auto a = valid_fp8(); a.q_descale.ptr = fake_float(0x500002); expect_error(a, StatusCode::kErrorMisalignedOperand, "q_descale.ptr=", "descale align"); }
  { auto a = valid_fp8(); a.lse = reinterpret_cast<float*>(0x600004); expect_error(a, StatusCode::kErrorMisalignedOperand, "lse=", "lse align"); }
  {
    auto a = valid_fp8();
    a.softmax_scale = std::numeric_limits<float>::quiet_NaN();
    expect_error(a, StatusCode::kErrorInvalidProblem, "softmax_scale=nan", "NaN scale");
    a.softmax_scale = -1.0f;
    expect_error(a, StatusCode::kErrorInvalidProblem, "softmax_scale=-1", "negative scale");
  }

  // ---- forcing an instance by name -------------------------------------------------------------------
  { auto a = valid_fp8(); a.kernel_name = "nope"; expect_error(a, StatusCode::kErrorKernelNotFound, "kernel_name=nope", "unknown kernel"); }
  {
    auto a = valid_fp8(1, 4, 1000);
    a.kernel_name = selected(valid_fp8());  // the evenn instance
    expect_error(a, StatusCode::kErrorNotSupported, "seqlen_k=1000", "evenn with a tail");
    a = valid_fp8(1, 4, 1024);
    a.kernel_name = selected(valid_fp8(1, 4, 1024, 128, true));
    expect_error(a, StatusCode::kErrorNotSupported, "causal=false", "causal instance on a non-causal problem");
  }

  // ---- life cycle without a launch ---------------------------------------------------------------------
  {
    Fmha op;
    Status s = op.run(nullptr);
    CHECK(s.code() == StatusCode::kErrorNotInitialized, "run before initialize: " + s.to_string());
    auto a = valid_fp8();
    s = op.initialize(a, nullptr, nullptr);
    CHECK(s.code() == StatusCode::kErrorWorkspaceNull && contains(s.message(), "get_workspace_size()="),
          "null workspace: " + s.to_string());
    s = op.initialize(a, fake(0x7000001), nullptr);
    CHECK(s.code() == StatusCode::kErrorMisalignedOperand && contains(s.message(), "workspace="), "misaligned workspace: " + s.to_string());
    // With an aligned (fake) workspace, initialize reaches the driver: on a machine without one it must say so.
    s = op.initialize(a, fake(0x7000000), nullptr);
    CHECK(s.ok() || s.code() == StatusCode::kErrorCudaDriver || s.code() == StatusCode::kErrorNotSupported,
          "initialize: " + s.to_string());
    CHECK(s.ok() || !s.message().empty(), "a driver failure must say why");
  }
  return fp8attn_test::finish("test_can_implement");
}
