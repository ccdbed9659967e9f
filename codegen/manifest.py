"""The manifest: the one table of kernel instances. Names, compile jobs and the C++ registry all come from it.

Each row is a configuration plus whether it is in the default build. The tile choices carry the reason
(H200, triton 3.6.0, D=128, S=8192, B=4, H=32 unless noted; full tables in docs/perf/NOTES.md):

FP8 (e4m3 Q, K, V; P rounded per tile; two-level accumulation; bf16 out)
  * 128x128 w4 s2 warp-specialized, non-causal, seqlen_k % 128 == 0 ("evenn"): 749 TFLOP/s, the fastest.
    Triton 3.6's Hopper warp specialization gave NaN or wrong results as soon as a masked tile ran in the
    same kernel (causal diagonal, seqlen tail), so this instance has no masked path at all.
  * 128x128 w8 s3 for everything else (any length, causal): 661 non-causal / 599 causal. w4 s2 without
    warp specialization: 516 / 485. w4 s3 with warp specialization: out of shared memory with a masked
    loop; without one (evenn) it compiles but returns wrong results (profiler: incorrect; 733 TFLOP/s).
  * D=256: 128x128 w8 s2 (506 / 544); s3 does not fit in shared memory with a 128x256 Q tile.
  * D=64: 128x128 w8 s3.
  * Since 2026-12-01 the Gluon kernel (below) runs FP8 at every head dim when V^T is fp8attn's own (the
    key-permuted order); the Triton instances above serve a caller's sequence-contiguous V^T, packed sequences and
    soft-capping.
BF16 (V read in the caller's layout)
  * D=64/128: the Gluon kernel (below); the Triton 128x128 w8 s2 instances for what it does not run (soft-capping,
    packed sequences) and D=64 full attention at long sequences (the tuning table).
  * D=256: the Gluon kernel too (one O buffer the two consumer warpgroups share); Triton 128x64 w8 s2 for
    soft-capping and packed sequences.

The full set (FP8ATTN_ALL_KERNELS=ON) adds the runners-up above, for the profiler and for tuning.

A row is a configuration: its type says which operation it implements (operations/), its `family` field
which front end compiles it (families/). Helper instances an operation needs (the V transpose of each FP8
head dim) are declared by the operation (`requires`) and added to any selection that needs them.
"""

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))  # the kernels' numerics (common/)

from common.numerics import DESCALE_BLOCK_TOKENS  # noqa: E402
from operations import module_of, name_of  # noqa: E402
from operations.fmha_fwd import FmhaConfig  # noqa: E402
from operations.paged import PagedConfig  # noqa: E402
from operations.quantize import QuantizeConfig  # noqa: E402
from operations.transpose_v import TransposeConfig  # noqa: E402

HEAD_DIMS = (64, 128, 256)


def _fmha(qk, d, bm, bn, w, s, causal, ws=False, even_n=False, vnat=False, softcap=False):
    out = "bf16"
    return FmhaConfig(qk, qk, "f32", out, bm, bn, d, w, s, causal, ws, even_n, v_natural=vnat, softcap=softcap)


def _int8_qk(d, causal):
    # INT8 Q.K^T with per-block descales, e4m3 V (the int8_qk accuracy mode): the e4m3 instances' tile.
    return FmhaConfig("i8", "e4m3", "f32", "bf16", 128, 128, d, 8, 3, causal, block_descale=True)


def gluon_block_n(head_dim, bf16=False):
    """The Gluon kernel's key tile per head dim (bench/sweep_gluon.py uses the same): 128 keys, except BF16 at
    D=256, whose bf16 Q and K/V stages leave shared memory for 64 only. FP8 at D=256 with 128-key tiles uses 229824
    of the 232448 bytes (Q 32 KB, two K and two V^T stages of 32 KB, two O buffers of 32 KB); against 64-key tiles
    on the H200 (2026-12-02, bench/sweep_gluon.py, TFLOP/s): S=2048 846 -> 1002 full, 706 -> 786 causal; S=8192
    881 -> 1043, 831 -> 905 (half the per-tile row work and barriers per key, -24% loop instructions)."""
    return 64 if head_dim == 256 and bf16 else 128


# The key tile of the Gluon FP8 instances for longer sequences (dense, key-permuted V^T, D=64 and 128): half the
# per-tile work (row reductions, the fold, barriers) per key. H200, 2026-12-02, bench/sweep_gluon.py (two runs):
# D=128 full +7-11% at S=1024-4096 and 16384, +0-4% at 8192, causal S>=8192 +4-6%, S=4096 even, shorter causal
# and S=512 slower (half of each diagonal tile is past the diagonal); D=64 full +9-11%, causal S=8192 +3-6%,
# S=2048 -7-10%. The tuning table (src/fmha/tuning/tuning_table.csv) sends each bucket to the faster tile.
GLUON_WIDE_BLOCK_N = 256


def gluon_stages(head_dim):
    """The Gluon FP8 instances' K/V ring depth in the default set per head dim (bench/sweep_gluon.py uses the
    same): 3 stages at D=64 (+1-4% on the H200, 2026-12-01), 2 otherwise."""
    return 3 if head_dim == 64 else 2


def _gluon(causal, stages, vkperm=True, head_dim=128, int8=False, varlen=False, block_n=None, vnat=False, block_m=128,
           lsum=False):
    return FmhaConfig("i8" if int8 else "e4m3", "e4m3", "f32", "bf16", block_m, block_n or gluon_block_n(head_dim),
                      head_dim, 4, stages, causal, family="gluon", v_natural=vnat, v_key_permuted=vkperm and not vnat,
                      block_descale=int8, varlen=varlen, row_sum_mma=lsum)


def _gluon_bf16(causal, head_dim, varlen=False):
    # BF16 on the Gluon kernel: V read as given (no transpose), P rounded to bf16.
    return FmhaConfig("bf16", "bf16", "f32", "bf16", 128, gluon_block_n(head_dim, bf16=True), head_dim, 4, 2, causal,
                      family="gluon", varlen=varlen)


def _default_instances():
    # Order is preference: the heuristic (src/fmha/fmha_heuristic.cpp) takes the first instance that supports a
    # problem, so specialized fast paths come before the general instances.
    # Gluon (kernels/fmha_fwd/fmha_fwd_gluon.py), the first step of the hand-scheduled kernel: host TMA
    # descriptors, a producer warp feeding a 2-stage K/V ring, two consumer warpgroups of 64 rows. Measured on
    # the H200 at D=128 S=8192 B=4 H=32 (V^T given): 811 / 761 TFLOP/s full / causal vs 763 (ws evenn) / 607
    # (w8 s3) for the Triton instances, same O and LSE bits. 3 stages: 771 / 729 (extra set).
    # vkperm first (V^T written by the kperm transpose: P reaches the P.V MMA without a register shuffle, +2-6%
    # in bench/sweep_gluon.py); the plain instances serve a caller's sequence-contiguous V, which vkperm
    # cannot read.
    rows = [_gluon(False, 2), _gluon(True, 2), _gluon(False, 2, vkperm=False), _gluon(True, 2, vkperm=False)]
    # D=64 on the same kernel (vkperm only; a caller's sequence-contiguous V goes to the Triton instances).
    # bench/sweep_gluon.py on the H200 (2026-12-01, V^T given, H=64): S=2048 547 / 471 TFLOP/s full / causal,
    # S=8192 575 / 563, against 505 / - / 570 / 522 for the Triton D=64 instance.
    # 3 stages (H200, 2026-12-01, fp8attn_profiler --providers=instance, one run): S=2048 539 / 444 TFLOP/s full /
    # causal, S=8192 609 / 566, against 535 / 441 / 589 / 542 with 2 stages (extra set).
    rows += [_gluon(causal, gluon_stages(64), head_dim=64) for causal in (False, True)]
    # 256-key tiles (GLUON_WIDE_BLOCK_N), after the 128-key ones: the tuning table picks them per bucket on the H200.
    # D=64: 3 stages full (664 / 634 TFLOP/s against 2 stages at S=8192), 2 causal (605 / 590).
    rows += [_gluon(False, 2, block_n=GLUON_WIDE_BLOCK_N), _gluon(True, 2, block_n=GLUON_WIDE_BLOCK_N),
             _gluon(False, 3, head_dim=64, block_n=GLUON_WIDE_BLOCK_N),
             _gluon(True, 2, head_dim=64, block_n=GLUON_WIDE_BLOCK_N)]
    # "vnat" on the Gluon kernel: V read as given (head_dim contiguous) and transposed tile by tile by the producer
    # (TRANSPOSE_V), so a call makes one launch instead of the kperm transpose's and the attention's. The kernel
    # runs 9-12% slower than with V^T given, which the saved transpose (0.074 ms at every point of the suite)
    # outweighs only on short rows: end to end (bench/sweep_gluon.py, H200 2026-12-02, TFLOP/s, the best vkperm
    # tile with the transpose -> vnat) D=128 S=512 full 599 -> 657 (256-key tile), causal 355 -> 409, S=1024 causal
    # 515 -> 556, D=64 S=2048 causal 441 -> 456; longer rows 3-19% slower. bench_vs_cudnn.py (H200, 2026-12-02,
    # with the tuning table's rows for the D=128 ones): 583 -> 626 at S=512 full, 327 -> 387 causal, 494 -> 525 at
    # S=1024 causal; D=64 S=2048 causal read 445 -> 443 with it, so no row there. The heuristic's default pass never
    # takes them (manifest order puts the vkperm instances first; vnat instances serve its single-launch pass for
    # tiny calls only, where they replace the Triton vnat ones at D=64/128).
    rows += [_gluon(False, 2, block_n=GLUON_WIDE_BLOCK_N, vnat=True), _gluon(True, 2, vnat=True),
             _gluon(True, gluon_stages(64), head_dim=64, vnat=True)]
    # Varlen (packed sequences) on the Gluon kernel: the vkperm FP8 instances above with the packed-sequence path
    # compiled in (packed sequences only; the dense ones compile the path out: carrying it cost them 1-5% on the
    # suite, H200 2026-12-02). bench_varlen.py on the H200 (2026-12-02, two runs): 0.94-0.99x the dense call at
    # the same work, against 0.48-0.83x for the Triton varlen path.
    rows += [_gluon(causal, gluon_stages(d), head_dim=d, varlen=True) for d in (128, 64) for causal in (False, True)]
    # Varlen as the dense tuning rows run D=128: 256-key tiles (full, and causal from S=8192; the V^T's sequences
    # then start on multiples of 256) and, for short causal rows, V read as given and transposed by the producer
    # (vnat: one launch instead of the varlen transpose's and the attention's). With the 128-key vkperm varlen
    # instance alone the varlen call ran 0.87-0.93x of the dense call (H200, 2026-12-04, bench_varlen.py: the dense
    # picks' 256-key and vnat tiles); a 256-key vnat varlen instance ran 0.78-0.89x (its in-chip transpose costs
    # more than the varlen transpose at every length measured) and was dropped. The tuning table's varlen rows pick
    # them.
    rows += [_gluon(causal, 2, block_n=GLUON_WIDE_BLOCK_N, varlen=True) for causal in (False, True)]
    rows += [_gluon(True, 2, vnat=True, varlen=True)]
    # D=256 on the same kernel (O in column parts, eight parts two in flight: operations/fmha_fwd.py,
    # gluon_pv_pipelined), 128-key tiles since 2026-12-02 (gluon_block_n). With 64-key tiles bench_vs_cudnn.py on
    # the H200 (2026-12-01) read S=2048 807 / 636 TFLOP/s full / causal, S=8192 849 / 712 with V^T given, against
    # 550 / 432 / 604 / 598 for the Triton D=256 instance (transpose included).
    rows += [_gluon(causal, 2, head_dim=256) for causal in (False, True)]
    # BF16 on the Gluon kernel (V read as given, P in bf16): fp8attn_profiler --suite=standard --dtype=bf16
    # --providers=instance on the H200 (2026-12-01): D=128 586-631 TFLOP/s full, 355-559 causal (S=512..16k),
    # against 251-514 / 150-503 for the best Triton BF16 instance; D=64 426 / 379 at S=2048 full / causal against
    # 396 / 309; at D=64 S=8192 full the Triton instance is 1-3% faster (two runs): a tuning-table row
    # (src/fmha/tuning/tuning_table.csv).
    rows += [_gluon_bf16(causal, d) for causal in (False, True) for d in (64, 128)]
    # BF16 varlen on the Gluon kernel (V through a descriptor of each sequence's rows, made on the device):
    # bench_varlen.py on the H200 (2026-12-02): 0.90-1.01x the dense Gluon call at the same work, against 0.52-0.81x
    # for the Triton BF16 varlen path.
    rows += [_gluon_bf16(causal, d, varlen=True) for d in (128, 64) for causal in (False, True)]
    # BF16 at D=256 on the Gluon kernel (one [64, 256] accumulator, one O buffer the two warpgroups share): same
    # profiler run, S=2048 581 / 504 full / causal, S=8192 615 / 536, against 460 / 384 / 495 / 498 for the
    # Triton instance (bench_vs_cudnn.py, the run before).
    rows += [_gluon_bf16(causal, 256) for causal in (False, True)]
    rows += [_fmha("e4m3", 128, 128, 128, 4, 2, False, ws=True, even_n=True)]
    for causal in (False, True):
        rows += [
            _fmha("e4m3", 64, 128, 128, 8, 3, causal),
            _fmha("e4m3", 128, 128, 128, 8, 3, causal),
            _fmha("e4m3", 256, 128, 128, 8, 2, causal),
            _fmha("bf16", 64, 128, 128, 8, 2, causal),
            _fmha("bf16", 128, 128, 128, 8, 2, causal),
            _fmha("bf16", 256, 128, 64, 8, 2, causal),
        ]
    # FP8 reading V head_dim-contiguous and transposing each tile on chip ("vnat"): one launch per call instead
    # of two. Triton 3.6 transposes through registers and shared memory (PRMT + STS), which costs 2.4-3x in
    # throughput: at D=128 (standard suite, H200, 2026-11-30) 269 vs 767 TFLOP/s at S=8192 full, 260 vs 594
    # causal, 185 vs 362 at S=512. So the heuristic takes them only for calls too small for the GPU time to
    # matter, where the second launch's host time (3-4 us) dominates (src/fmha/fmha_heuristic.cpp), and they
    # come after every other attention instance.
    rows += [_fmha("e4m3", d, 128, 128, 8, 3 if d < 256 else 2, causal, vnat=True)
             for causal in (False, True) for d in HEAD_DIMS]
    # Logit soft-capping (Gemma 2: D=256 and its local/global layers, causal), FP8 and BF16, the plain instances'
    # tiles; sliding windows need no instance of their own (runtime bounds on every Triton instance).
    rows += [_fmha("e4m3", 256, 128, 128, 8, 2, True, softcap=True),
             _fmha("bf16", 256, 128, 64, 8, 2, True, softcap=True),
             _fmha("e4m3", 128, 128, 128, 8, 3, True, softcap=True),
             _fmha("bf16", 128, 128, 128, 8, 2, True, softcap=True)]
    # INT8 Q.K^T on the Gluon kernel (IGMMA for S, per-block descales: one q scalar per warpgroup, k per column;
    # reads the kperm V^T), first at D=128: correct on the H200 (every INT8 instance forced by name against its
    # operands) while the int8_qk mode through the Triton instance ran at 264 TFLOP/s (D=128, S=8k, quantization
    # included) against fp8's 772.
    rows += [_gluon(causal, 2, int8=True) for causal in (False, True)]
    # And at D=64 (SmolLM2's head dim): H200, 2026-12-01, S=8192 H=64 B=4, fmha_fwd forced by name on int8
    # operands (V transpose included, scores converted without I2F in both kernels): 429 / 432 TFLOP/s full /
    # causal against 338 / 307 for the Triton D=64 INT8 instance, the same output bits.
    rows += [_gluon(causal, 2, head_dim=64, int8=True) for causal in (False, True)]
    # Three consumer warpgroups (192-row query blocks, the kernel's NUM_CONSUMERS) for INT8 at D=64, full and causal
    # (each with its kpair twin, below); after the 128-row ones, the tuning table picks them for the longer
    # sequences. Full: bench/sweep_gluon.py --int8 on the H200 (2026-12-03, two calls, TFLOP/s against the 128-row
    # instance's ring of 2): S=2048 493 / 485 vs 463 / 463, S=8192 570 / 556 vs 482 / 483. Causal (D=64 from
    # S=4097): through the JIT on an H100 (2026-12-06) S=8192 516-518 TFLOP/s against the single-warpgroup kernel's
    # 485-497, S=2048 324-326 against 428-429 (a 192-row block's diagonal); through the library (H100, 2026-12-06,
    # end to end, settled) the kpair twin 449.6-449.7 at S=8192 against the single-warpgroup twin's 404.9-407.9, and
    # the int8_qk mode with it picked there 0.932-0.936 of the fp8 mode against 0.802-0.806 (two alternations).
    # SASS: 497 / 498 instructions a tile in the steady key loop (full / causal), no ptxas serialization. The same
    # bits as every INT8 instance, so int8_qk's perplexity does not move.
    rows += [_gluon(causal, 2, head_dim=64, int8=True, block_m=192) for causal in (False, True)]
    # The same at D=128, full and causal (bench/sweep_gluon.py --int8, H200, 2026-12-03, one call, TFLOP/s, 192-row
    # against 128-row blocks): full S=2048 785 / 773, S=4096 837 / 793, S=8192 873 / 805, S=16384 848 / 810; causal
    # S=8192 773 / 761, S=16384 813 / 776, GQA 64/8 S=8192 817 / 772; shorter sequences lose (full S=512 589 / 631,
    # causal S<=4096 -12 to -35%). The tuning table picks them from S=2048 full and S=8192 causal.
    rows += [_gluon(causal, 2, int8=True, block_m=192) for causal in (False, True)]
    # The single-warpgroup Gluon kernel (kernels/fmha_fwd/fmha_fwd_gluon_solo.py: 64-row blocks, four CTAs an SM)
    # for INT8 Q.K^T at D=64, full and causal. bench/sweep_gluon.py --int8 on the H200 (2026-12-05, two runs in
    # opposite orders, TFLOP/s): S=2048 full 512 / 513 against the 192-row instance's 494 / 493; causal S=2048
    # 435 / 434 and S=8192 496 / 496 against the 128-row instance's 402 / 402 and 474 / 472; full S=8192 534 against
    # the 192-row instance's 573 / 574 (the H100 agrees). After the others: the tuning table picks it (D=64 INT8 full
    # to S=2048, causal to S=8192).
    rows += [_gluon(causal, 2, head_dim=64, int8=True, block_m=64, block_n=128) for causal in (False, True)]
    # Their "kpair" twins (one k descale a 128-key tile, for k descales in equal pairs: the int8_qk mode's K; the
    # same bits): the 192-row D=128 instance +2.7% full, +4.6% causal, +5.0% GQA 64/8 at S=8192 on the H200
    # (2026-12-06, bench/sweep_gluon.py --int8, two runs each in the order base, paired, paired, base). The host
    # swaps an instance for its twin when Arguments::k_descale_paired is set (src/fmha/fmha_heuristic.cpp).
    rows += [replace(r, k_descale_paired=True) for r in list(rows)
             if isinstance(r, FmhaConfig) and r.family == "gluon" and r.is_int8_qk and r.block_n == 128]
    # INT8 Q.K^T on the Triton kernel (issue 7's best accuracy mode: SmolLM2-135M +0.17% / +0.26% perplexity on
    # the H200), D=64 (that model) and 128 (a caller's sequence-contiguous V^T, which the Gluon one cannot read).
    rows += [_int8_qk(d, causal) for causal in (False, True) for d in (64, 128)]
    # The V transposes: the pointer kernel (what the FP8 instances use; the TMA variant, 2x slower, is in the
    # extra set now that the gluon instances keep the launcher's CUtensorMap path exercised), then the
    # key-permuted V^T the vkperm gluon instances read.
    rows += [TransposeConfig("u8", 128, d, 4) for d in HEAD_DIMS]
    rows += [TransposeConfig("u8", 128, d, 4, key_permuted=True) for d in HEAD_DIMS]
    # Quantization (kernels/quantize/quantize_triton.py): BF16 in, e4m3 and int8 out, 64-token blocks (the
    # per-block granularity measured on SmolLM2 by emulation: INT8 Q, K with 64-token blocks and K smoothing
    # +0.17% perplexity). 8 warps at D=256 keep the [64, 256] float32 tile at 64 registers a thread.
    # The stats and reduce stages come with them (operations/quantize.py: requires).
    # The Gluon apply (kernels/quantize/quantize_apply_gluon.py: persistent, TMA in and out) for Q and K at head dims
    # 64 and 128, first: the library's pick for the rotated recipes it was measured faster on (src/quant/quantize.cpp
    # gluon_apply_preferred); the Triton apply after it serves the rest (unrotated recipes, an unsmoothed rotated one
    # at D=64, V^T layouts, head dim 256, strides TMA cannot take: gluon_apply_refusal).
    rows += [QuantizeConfig("apply", "bf16", out, DESCALE_BLOCK_TOKENS, d, 4, family="gluon")
             for out in ("e4m3", "i8") for d in (64, 128)]
    rows += [QuantizeConfig("apply", "bf16", out, DESCALE_BLOCK_TOKENS, d, 8 if d == 256 else 4)
             for out in ("e4m3", "i8") for d in HEAD_DIMS]
    # INT8 K in 128-token blocks (granularity "block_pair": each block's descale in its two 64-token entries, what the
    # kpair attention instances read once a tile), head dims 64 and 128: the Gluon apply first (the library's pick for
    # int8_qk's smoothed and rotated K, as for 64-token blocks), then the Triton one; 8 warps at 128 keep the Triton
    # apply's [128, 128] float32 tile at 64 registers a thread.
    rows += [QuantizeConfig("apply", "bf16", "i8", 2 * DESCALE_BLOCK_TOKENS, d, 4, family="gluon") for d in (64, 128)]
    rows += [QuantizeConfig("apply", "bf16", "i8", 2 * DESCALE_BLOCK_TOKENS, d, 8 if d == 128 else 4)
             for d in (64, 128)]
    # V^T in the vkperm attention instances' key order, written by the quantization itself (no transpose).
    rows += [QuantizeConfig("apply", "bf16", "e4m3", DESCALE_BLOCK_TOKENS, d, 8 if d == 256 else 4, key_permuted=True)
             for d in HEAD_DIMS]
    # Paged FP8 KV cache (kernels/paged/paged_decode_triton.py): pages of 16 and 64 tokens at D=64 and 128; decode
    # with 16 rows per program (GQA 4:1 with up to 4 new tokens), 32 (MQA 32:1) and 64 (speculative tokens). The
    # first instance of a row count is the heuristic's pick. Measured on the H200 (bench_decode.py --instances,
    # D=128, GQA 32/8, pages of 64): 128 keys per iteration, 4 warps, 5 stages 2.28-3.05 TB/s; 64 keys 1.88-2.62;
    # 8 warps 1.47-2.00; 3 stages 1.56-2.15; 32 rows 1.39-1.60; 64 rows 0.75-0.81. Stages: the K/V loads depend on
    # a block-table load in the same iteration, and Triton's pipeliner splits the stages between the two levels
    # of loads: 3 stages give one K/V buffer, 5 two, 7 three.
    for d in (64, 128):
        for page in (16, 64):
            rows += [PagedConfig("append", page, d, 0, 4)]
            rows += [PagedConfig("decode", page, d, r, w, st, block_n=n)
                     for r, n, w, st in ((16, 128, 4, 5), (16, 64, 4, 5), (32, 64, 4, 5), (64, 64, 4, 5))]
    # The Gluon decode (kernels/paged/paged_decode_gluon.py) for up to 8 rows (GQA 4:1 with one or two new tokens,
    # 8:1 with one) at D=128 and pages of 64 and 16: TMA page loads, 64 keys per stage, 4 stages, three CTAs per SM.
    # H200
    # (sweep_decode.py, TB/s, against the Triton instance above): 4.25 / 4.06 / 3.82 / 2.97 vs 3.66 / 3.60 / 3.33 /
    # 2.55 at (32, 32k), (8, 128k), (128, 4k), (1, 128k). Pages of 16 (V^T read as 128-byte rows): 4.24-4.27 at
    # (32, 32k), the Triton instance 2.02. With 16 rows and more (read in chunks of 8 it would read the cache twice
    # or more) and soft-capping the Triton instances run.
    rows += [PagedConfig("decode", page, 128, 8, 4, 4, block_n=64, family="gluon") for page in (64, 16)]
    # The same with two kv heads per work item (HEAD_PAIRS: up to 4 query rows per kv head, one split): half the
    # item boundaries, and the 8 MMA rows all real (GQA 4:1 fills only 4 of them with one head). A ring of 2 stages
    # of both heads' 64 keys (64 KB), three CTAs per SM by shared memory. H200 (2026-12-04, sweep_decode.py, TB/s,
    # against the instance above): (128, 4k) 4.34 / 4.19, (64, 8k) 4.36 / 4.25, (256, 2k) 4.08 / 3.95, but
    # (32, 32k) 3.21 / 4.38 (128 items: one per SM, 64 KB in flight each); with 3 stages 4.13 / 4.13 / 4.18 / 4.26.
    # The heuristic takes it from kPairMinItems work items (src/paged/paged.cpp).
    rows += [PagedConfig("decode", 64, 128, 8, 4, 2, block_n=64, family="gluon", head_pairs=True)]
    # MQA (32 query heads on one kv head) and other calls of 17-32 rows per kv head at pages of 64: the Gluon decode
    # with 32 rows at 128 registers (two CTAs per SM), preferred to the Triton r32 instance of the same rows
    # (src/paged/paged.cpp: find). Before the page path (UNIFORM_PAGE) the two tied (H200, 2026-12-04, 1.86 / 1.85
    # TB/s at batch 32, 32k, 8 splits); with it, H100 (2026-12-05, sweep_decode.py, the same case): 2.31-2.36
    # against the Triton r32's 1.69.
    rows += [PagedConfig("decode", 64, 128, 32, 4, 4, block_n=64, family="gluon")]
    return rows


def _extra_instances():
    rows = []
    for causal in (False, True):
        rows += [
            _fmha("e4m3", 128, 128, 128, 4, 2, causal),
            _fmha("e4m3", 128, 128, 64, 8, 3, causal),
            _fmha("e4m3", 64, 128, 128, 8, 2, causal),
            _fmha("e4m3", 256, 128, 64, 8, 2, causal),
            _fmha("bf16", 128, 128, 64, 8, 3, causal),
        ]
    rows.append(_fmha("e4m3", 64, 128, 128, 4, 2, False, ws=True, even_n=True))
    rows.append(_fmha("e4m3", 256, 128, 64, 4, 2, False, ws=True, even_n=True))
    rows += [_gluon(causal, 3) for causal in (False, True)]
    # D=64 with a 2-stage ring: 1-4% slower than the default 3-stage one (H200, 2026-12-01), kept for comparison.
    rows += [_gluon(causal, 2, head_dim=64) for causal in (False, True)]
    # No FP8 instance with three consumer warpgroups: against the 256-key instances the library runs they lost or
    # tied at every point (H200, 2026-12-03, bench/sweep_gluon.py, TFLOP/s, 192x128 / 128x256: D=128 S=8192 full
    # 901 / 972, causal 798 / 885, S=16384 full 928 / 977; D=64 S=2048 full 597 / 609, S=8192 full 648 / 663,
    # causal 589 / 588). The kernel switch stays (INT8 uses it, the sweep can try it).
    # INT8 Q.K^T at D=64 with the row sums from the tensor cores ("lsum": l from the rounded P that P.V uses), for
    # issue 7's perplexity at windows of 8192; 1-5% slower than the plain ones (H200, 2026-12-03, sweep).
    lsum = [_gluon(causal, 2, head_dim=64, int8=True, lsum=True) for causal in (False, True)]
    # With their kpair twins (int8_qk's K per 128 tokens): candidates for D=64 causal, where int8_qk runs at 0.79-0.82
    # of fp8 settled (H100, 2026-12-06). SASS of the steady key loop per consumer warpgroup, causal: 450 instructions
    # a tile against the plain kpair twin's 501 (the row sums' 64 FADD a tile off the FMA pipe; no spill). Their cost
    # is accuracy (l from the rounded P: +0.03 / +0.08 points of perplexity before the rotation, 2026-12-03).
    rows += lsum + [replace(r, k_descale_paired=True) for r in lsum]
    # INT8 Q.K^T with 256-key tiles (two [64, 128] integer S products per tile) at D=64: candidates, not measured
    # (at D=128 ptxas spills 33 registers inside the loop).
    rows += [_gluon(causal, 2, head_dim=64, int8=True, block_n=256) for causal in (False, True)]
    rows += [TransposeConfig("u8", 128, d, 4, tma=True) for d in HEAD_DIMS]
    rows += [QuantizeConfig("apply", "f16", out, DESCALE_BLOCK_TOKENS, d, 8 if d == 256 else 4)
             for out in ("e4m3", "i8") for d in HEAD_DIMS]
    return rows


DEFAULT = _default_instances()
ALL = DEFAULT + _extra_instances()


def _with_requirements(chosen, pool):
    out = list(chosen)
    for config in chosen:
        for needed in module_of(config).requires(config):
            if needed not in out:
                out.append(needed)
    return out


def instances(filter_text="", all_kernels=False):
    """Configurations selected by a CUTLASS-style filter, plus the helper instances they require (the V
    transposes of the FP8 head dims), which the filter does not need to name."""
    from kernel_filter import matches_filter

    pool = ALL if all_kernels or filter_text else DEFAULT
    chosen = [c for c in pool if matches_filter(name_of(c), filter_text)]
    chosen = _with_requirements(chosen, pool)
    names = [name_of(c) for c in chosen]
    assert len(set(names)) == len(names), "duplicate kernel names in the manifest"
    return chosen


def every_instance():
    """The full manifest with every helper instance, e.g. for looking a name up."""
    return _with_requirements(ALL, ALL)


def find(name):
    for c in every_instance():
        if name_of(c) == name:
            return c
    raise KeyError(f"kernel {name!r} is not in the manifest")
