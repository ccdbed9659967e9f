"""Operation paged: decode attention over a paged FP8 KV cache, and the append that fills it.

    fp8attn_sm90_paged_append_e4m3_p<PAGE>x<D>_w<warps>
    fp8attn_sm90_paged_decode_e4m3_bf16_p<PAGE>x<D>_r<ROWS>_n<BLOCK_N>_w<warps>_s<stages>[_pairs][_gluon]
    fp8attn_sm90_paged_combine_f32_bf16_x<D>_r<ROWS>_w<warps>

PAGE: tokens per page; BLOCK_N: keys per decode iteration (gathered across pages); ROWS: query rows per program
(the query heads of a kv head times the new tokens, in chunks of ROWS). Kernels: kernels/paged/paged_decode_triton.py;
_gluon: kernels/paged/paged_decode_gluon.py (TMA page loads from a producer warp; <stages> is its ring depth of
BLOCK_N-key stages); _pairs: two kv heads per work item (the kernel's HEAD_PAIRS; ROWS / 2 rows each).
The layout: docs/PAGED_CACHE.md.
"""

import re
from dataclasses import dataclass

from operations.fmha_fwd import gluon_tensordesc
from params import Param

NAME = "paged"
CPP_KIND = "kPaged"  # library::OperationKind
ARCH = "sm90"


@dataclass(frozen=True)
class PagedConfig:
    stage: str       # append | decode | combine
    page: int        # 0 for combine
    head_dim: int
    rows: int        # 0 for append
    warps: int
    stages: int = 1
    block_n: int = 0  # decode only
    family: str = "triton"
    head_pairs: bool = False  # Gluon decode only: two kv heads per work item (HEAD_PAIRS)

    operation = NAME


_RE = re.compile(
    rf"fp8attn_{ARCH}_paged_(?:"
    r"append_e4m3_p(?P<ap>\d+)x(?P<ad>\d+)_w(?P<aw>\d+)"
    r"|decode_e4m3_bf16_p(?P<dp>\d+)x(?P<dd>\d+)_r(?P<dr>\d+)_n(?P<dn>\d+)_w(?P<dw>\d+)_s(?P<ds>\d+)(?P<dpairs>_pairs)?(?P<dg>_gluon)?"
    r"|combine_f32_bf16_x(?P<cd>\d+)_r(?P<cr>\d+)_w(?P<cw>\d+))")


def name_of(c: PagedConfig) -> str:
    if c.stage == "append":
        return f"fp8attn_{ARCH}_paged_append_e4m3_p{c.page}x{c.head_dim}_w{c.warps}"
    if c.stage == "decode":
        return (f"fp8attn_{ARCH}_paged_decode_e4m3_bf16_p{c.page}x{c.head_dim}_r{c.rows}_n{c.block_n}_w{c.warps}"
                f"_s{c.stages}" + ("_pairs" if c.head_pairs else "") + ("_gluon" if c.family == "gluon" else ""))
    return f"fp8attn_{ARCH}_paged_combine_f32_bf16_x{c.head_dim}_r{c.rows}_w{c.warps}"


def parse(name: str):
    m = _RE.fullmatch(name)
    if not m:
        return None
    if m["ap"]:
        return PagedConfig("append", int(m["ap"]), int(m["ad"]), 0, int(m["aw"]))
    if m["dp"]:
        return PagedConfig("decode", int(m["dp"]), int(m["dd"]), int(m["dr"]), int(m["dw"]), int(m["ds"]),
                           block_n=int(m["dn"]), family="gluon" if m["dg"] else "triton", head_pairs=bool(m["dpairs"]))
    return PagedConfig("combine", 0, int(m["cd"]), int(m["cr"]), int(m["cw"]))


_DESCALE_STRIDES = [Param("descale_stride_page", "i64"), Param("descale_stride_head", "i64")]

APPEND_PARAMS = [
    Param("K", "ptr", True), Param("V", "ptr", True), Param("KPages", "ptr", True), Param("VPages", "ptr", True),
    Param("KDescale", "ptr"), Param("VDescale", "ptr"), Param("BlockTable", "ptr"), Param("Positions", "ptr"),
    Param("new_tokens", "i32"), Param("heads_kv", "i32"), Param("num_pages", "i32"), Param("max_pages", "i32"),
    Param("stride_kb", "i64", True), Param("stride_ks", "i64", True), Param("stride_kh", "i64", True),
    Param("stride_vb", "i64", True), Param("stride_vs", "i64", True), Param("stride_vh", "i64", True),
] + _DESCALE_STRIDES

DECODE_PARAMS = [
    Param("Q", "ptr", True), Param("KPages", "ptr", True), Param("VPages", "ptr", True), Param("KDescale", "ptr"),
    Param("VDescale", "ptr"), Param("BlockTable", "ptr"), Param("Seqlens", "ptr"), Param("O", "ptr", True),
    Param("PartialO", "ptr", True), Param("PartialML", "ptr", True),
    Param("softmax_scale", "f32"), Param("q_len", "i32"), Param("heads_q", "i32"), Param("heads_kv", "i32"),
    Param("num_pages", "i32"), Param("max_pages", "i32"), Param("pages_per_split", "i32"), Param("num_splits", "i32"),
    Param("row_chunks", "i32"),
    Param("stride_qb", "i64", True), Param("stride_qs", "i64", True), Param("stride_qh", "i64", True),
    Param("stride_ob", "i64", True), Param("stride_os", "i64", True), Param("stride_oh", "i64", True),
] + _DESCALE_STRIDES + [Param("window_left", "i32"), Param("softcap", "f32")]

# The Gluon decode: the Triton kernel's parameters with the page pointers replaced by two TMA descriptors over them
# (K pages as [num_pages * PAGE, heads_kv * D]; V^T pages as [num_pages * heads_kv * D, PAGE], at pages of 16 the
# same bytes in rows of 128: gluon_vt_box).
# It is persistent: num_items work items (the Triton kernel's programs) over however many programs are launched.
GLUON_DECODE_PARAMS = [Param("k_desc", "tensordesc", rank=2), Param("vt_desc", "tensordesc", rank=2)] + [
    p for p in DECODE_PARAMS if p.name not in ("KPages", "VPages")] + [Param("num_items", "i32")]

COMBINE_PARAMS = [
    Param("PartialO", "ptr", True), Param("PartialML", "ptr", True), Param("O", "ptr", True),
    Param("q_len", "i32"), Param("heads_q", "i32"), Param("heads_kv", "i32"), Param("num_splits", "i32"),
    Param("row_chunks", "i32"),
    Param("stride_ob", "i64", True), Param("stride_os", "i64", True), Param("stride_oh", "i64", True),
]

_MODULE = "paged.paged_decode_triton"
KERNELS = {
    "triton_append": (_MODULE, "paged_append_kernel", APPEND_PARAMS, "PagedAppendTritonParams"),
    "triton_decode": (_MODULE, "paged_decode_kernel", DECODE_PARAMS, "PagedDecodeTritonParams"),
    "triton_combine": (_MODULE, "paged_combine_kernel", COMBINE_PARAMS, "PagedCombineTritonParams"),
    "gluon_decode": ("paged.paged_decode_gluon", "paged_decode_gluon_kernel", GLUON_DECODE_PARAMS,
                     "PagedDecodeGluonParams"),
}

# Registers per thread of the Gluon decode: its 8 launched warps (the producer's padded to a warpgroup) x 80 leave
# room for three CTAs per SM, which is what hides each CTA's per-stage chain (H200: one CTA with 255 registers ran
# 3.48-3.93 TB/s, three 3.82-4.25; docs/perf/NOTES.md).
GLUON_DECODE_MAXNREG = 80
# With 32 query rows and more (MQA: a kv head's 32 query heads) S^T, O^T and the row sums are four times wider than
# at 8 rows and 80 registers spill; 128 fit them with two CTAs per SM (H200, sweep_decode.py, MQA (32, 32k): a
# Gluon r32 at 128 registers 1.86 TB/s against the Triton r32 instance's 1.64 through the same JIT, 2026-12-01).
GLUON_DECODE_MAXNREG_WIDE = 128


def gluon_decode_maxnreg(rows):
    """ptxas's register cap of a Gluon decode instance with `rows` query rows per program; the host's persistent grid
    counts the CTAs that fit from it (cpp_config's max_registers, src/paged/decode_grid.h)."""
    return GLUON_DECODE_MAXNREG if rows <= 16 else GLUON_DECODE_MAXNREG_WIDE


def gluon_vt_box(page, block_n, head_dim):
    """(box, swizzle bytes) of the Gluon decode's V^T descriptor: a page slice of SUB = min(page, BLOCK_N) tokens
    as [head_dim, SUB] with the widest swizzle that fits a row; pages of 16 as their 2 KB in rows of 128 bytes,
    unswizzled, over the V^T pages viewed as [..., 128] (kernels/paged/paged_decode_gluon.py, vt_desc). Whoever
    encodes the descriptor views the pages in rows of the box's width when it is unswizzled (src/paged/paged.cpp,
    bench/sweep_decode.py)."""
    sub = min(page, block_n)
    if sub >= 32:
        return [head_dim, sub], min(128, sub)
    return [head_dim * sub // 128, 128], 0


def kernel_of(c: PagedConfig):
    key = f"{c.family}_{c.stage}"
    if key not in KERNELS:
        raise ValueError(f"{name_of(c)}: no {key} kernel for {NAME}")
    return KERNELS[key]


def compile_spec(c: PagedConfig):
    _, _, params, _ = kernel_of(c)
    if c.stage == "append":
        types = {"K": "*bf16", "V": "*bf16", "KPages": "*fp8e4nv", "VPages": "*fp8e4nv", "KDescale": "*fp32",
                 "VDescale": "*fp32", "BlockTable": "*i32", "Positions": "*i32"}
        constexprs = {"HEAD_DIM": c.head_dim, "PAGE": c.page}
    elif c.stage == "decode" and c.family == "gluon":
        # S^T's MMA has BLOCK_N as its M (64 per warpgroup); pages of 32 (a 32-byte swizzle) are untested.
        if c.head_pairs and c.rows % 2:
            raise ValueError(f"{name_of(c)}: head pairs split the rows in two halves")
        if (c.rows % 8 or c.rows > 64 or c.head_dim != 128 or not (c.page == 16 or c.page >= 64) or
                c.block_n % 64):
            raise ValueError(f"{name_of(c)}: the Gluon decode takes rows 8..64 (multiples of 8), head_dim 128, "
                             "pages of 16 or of 64 tokens and more, a multiple of 64 keys per stage")
        sub = min(c.page, c.block_n)
        vt_box, vt_swizzle = gluon_vt_box(c.page, c.block_n, c.head_dim)
        types = {"k_desc": gluon_tensordesc("fp8e4nv", [sub, c.head_dim], 128),
                 "vt_desc": gluon_tensordesc("fp8e4nv", vt_box, vt_swizzle),
                 "Q": "*bf16", "KDescale": "*fp32", "VDescale": "*fp32", "BlockTable": "*i32", "Seqlens": "*i32",
                 "O": "*bf16", "PartialO": "*fp32", "PartialML": "*fp32"}
        # PREFETCH_ITEM (the next work item's Q and length loaded an item ahead): off, no gain beyond the spread
        # (bench/sweep_decode.py, gluon=1,PREFETCH_ITEM=1; docs/perf/NOTES.md).
        constexprs = {"HEAD_DIM": c.head_dim, "PAGE": c.page, "ROWS": c.rows, "BLOCK_N": c.block_n,
                      "NUM_STAGES": c.stages, "PREFETCH_ITEM": False, "HEAD_PAIRS": c.head_pairs,
                      # K_HEAD_MAJOR (K pages head-major): a sweep switch, not measured; the cache layout stays
                      # vLLM's token-major key cache (docs/PAGED_CACHE.md).
                      "K_HEAD_MAJOR": False,
                      # UNIFORM_PAGE (a stage inside one page: scalar table entry and descales, masks only where
                      # a row's visible keys end in the stage): on; it takes effect where PAGE >= BLOCK_N.
                      "UNIFORM_PAGE": True,
                      "PAIR_SPLITS": pair_splits(c),
                      # BALANCED_SPLITS (splits of the plan's iterations differing by one at most): a sweep switch.
                      "BALANCED_SPLITS": False}
        return params, types, constexprs, c.warps, 1  # the ring's depth is NUM_STAGES; Triton's pipeliner has no part
    elif c.stage == "decode":
        if c.head_pairs:
            raise ValueError(f"{name_of(c)}: head pairs are a Gluon decode switch")
        if c.rows < 16:
            raise ValueError(f"{name_of(c)}: the MMA needs at least 16 rows")
        types = {"Q": "*bf16", "KPages": "*fp8e4nv", "VPages": "*fp8e4nv", "KDescale": "*fp32", "VDescale": "*fp32",
                 "BlockTable": "*i32", "Seqlens": "*i32", "O": "*bf16", "PartialO": "*fp32", "PartialML": "*fp32"}
        if c.block_n < 16 or c.block_n & (c.block_n - 1):
            raise ValueError(f"{name_of(c)}: BLOCK_N must be a power of two >= 16")
        constexprs = {"HEAD_DIM": c.head_dim, "PAGE": c.page, "ROWS": c.rows, "BLOCK_N": c.block_n}
    else:
        types = {"PartialO": "*fp32", "PartialML": "*fp32", "O": "*bf16"}
        # The library launches the combine as a programmatic dependent of the decode (src/paged/paged.cpp).
        constexprs = {"HEAD_DIM": c.head_dim, "ROWS": c.rows, "AFTER_DECODE": True}
    return params, types, constexprs, c.warps, c.stages


def compile_options(c: PagedConfig):
    return {"maxnreg": gluon_decode_maxnreg(c.rows)} if c.family == "gluon" else {}


def check_sass(c, mma_counts, sass="", ttgir=""):
    """The decode's products must be FP8 wgmma (QGMMA) on the cache's bytes; an HMMA means Triton widened the
    operands (the first versions did, and were bound by the widening instructions)."""
    if c.stage == "decode" and (mma_counts.get("QGMMA", 0) == 0 or mma_counts.get("HMMA", 0) > 0):
        raise RuntimeError(f"{name_of(c)}: expected QGMMA and no HMMA in SASS ({mma_counts})")


# Head-pair items split over the keys (the Gluon decode's PAIR_SPLITS: each head's rows into its kv head's partials,
# as a one-head item's). The C++ record carries it, and the host plans splits of pair items only for an instance
# whose record says so (src/paged/paged.cpp find_head_pairs); without it a head-pair instance runs one split.
# On: H100, 2026-12-06 (bench/sweep_decode.py, two alternations, TB/s, the one-head instance / pair splits): (32, 32k)
# 3.01 / 3.03 and 3.05 / 3.06, (8, 128k) 3.01 / 3.09 and 3.02 / 3.09, (1, 128k) 2.71 / 2.72 and 2.72 / 2.73; the GPU
# tests of the library path (test_paged.py) passed with it on.
LIBRARY_PAIR_SPLITS = True


def pair_splits(c: PagedConfig) -> bool:
    return c.head_pairs and LIBRARY_PAIR_SPLITS


def requires(c: PagedConfig):
    """A decode instance needs the combine of its head dim and rows (split-KV)."""
    if c.stage != "decode":
        return []
    return [PagedConfig("combine", 0, c.head_dim, c.rows, 4)]


CPP_HEADER = "paged/paged_kernel_config.h"
_CPP_STAGE = {"append": "kAppend", "decode": "kDecode", "combine": "kCombine"}


def cpp_config(c: PagedConfig):
    return ("paged::detail::PagedKernelConfig",
            f"{{paged::detail::PagedStage::{_CPP_STAGE[c.stage]}, {c.page}, {c.head_dim}, {c.rows}, {c.warps}, "
            f"{c.stages}, {c.block_n}, {'true' if c.head_pairs else 'false'}, "
            f"{'true' if pair_splits(c) else 'false'}, {compile_options(c).get('maxnreg', 0)}}}")
