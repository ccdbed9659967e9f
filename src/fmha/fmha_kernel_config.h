#pragma once
// The configuration record of an attention instance (codegen/operations/fmha_fwd.py: cpp_config writes it).

#include "fp8attn/types.h"

namespace fp8attn::fmha::detail {

struct FmhaKernelConfig {
  DataType qk_type;
  DataType v_type;
  DataType acc_type;
  DataType out_type;
  int block_m;            ///< query rows per CTA
  int block_n;            ///< keys per main-loop tile
  int head_dim;
  int warps;              ///< num_warps at compile time (the name's w<N>)
  int stages;
  bool causal;
  bool warp_specialized;
  bool even_n;            ///< no masked tail: needs seqlen_k % block_n == 0, never causal
  bool v_transposed;      ///< reads V sequence-contiguous (FP8 but not "vnat"); else V head_dim-contiguous
  bool v_key_permuted;    ///< "vkperm": reads the key-permuted V^T of the kperm transpose, never a caller's V
  bool block_descale;     ///< "bdesc": per-block q and k descales (DescaleRef::stride_block) applied in the tile
  bool softcap;           ///< "softcap": logit soft-capping (Arguments::softcap)
  bool varlen;            ///< "varlen" (gluon): packed sequences only; the other gluon instances refuse them
  bool k_descale_unit_stride;  ///< reads k descales at block stride 1 only (the Gluon INT8 instances)
  int programs_per_sm;         ///< Gluon: persistent programs an SM holds (the grid's multiple of the SM count)
  bool k_descale_paired;       ///< "kpair": one k descale per 128-key tile (Arguments::k_descale_paired only)

  bool fp8() const { return is_fp8(qk_type); }
  bool v_fp8() const { return is_fp8(v_type); }  ///< FP8 V (also under INT8 Q.K^T): read as V^T
};

}  // namespace fp8attn::fmha::detail
