"""Variant sweep of the Gluon attention kernel through the JIT (device only): several versions of the kernel
source and constexpr settings side by side on the D=128 points of the standard suite, each checked against
a float64 reference before its time counts. Used to decide what goes into kernels/fmha_fwd/fmha_fwd_gluon.py.

    python3 bench/sweep_gluon.py --variant new=kernels/fmha_fwd/fmha_fwd_gluon.py:KEY_PERMUTED=1 \
        --variant old=/tmp/old_gluon.py [--csv out.csv] [--seqlens 512,8192]

A variant is name=path[:CONST=int,...] (BLOCK_N among them sets the key tile, the library's per head dim
otherwise; NUM_CONSUMERS=3 (4) runs 192-row (256-row) query blocks over three (four) consumer warpgroups;
CONSUMER_REGS sets the worker consumers' registers, MAXNREG the registers a thread starts with (a compile option),
CTAS_PER_SM the programs per SM of the persistent grid: CTAS_PER_SM=2,MAXNREG=80,CONSUMER_REGS=104 runs two 12-warp
CTAs an SM; kernels/fmha_fwd/fmha_fwd_gluon_solo.py with NUM_CONSUMERS=1,MAXNREG=128,CTAS_PER_SM=4 runs four
single-warpgroup CTAs an SM); the path is a module defining
fmha_fwd_gluon_kernel with the argument list of the library's kernel (kernels/ is put on sys.path for its
imports). The library's kernel imports its parts (kernels/fmha_fwd/gluon_*.py) as the package fmha_fwd, so every
variant loaded by path shares this checkout's parts: a variant that changes a part is a self-contained copy (as
the kernel was in one file before 2026-12-05, e.g. `git show <rev>:kernels/fmha_fwd/fmha_fwd_gluon.py` of an
older revision), or the switch lives in this checkout's parts.

A variant with TRANSPOSE_V=1 (and KEY_PERMUTED=1) gets V itself, head_dim contiguous, and transposes it in the
kernel; the e2e column adds the library's transpose kernel (timed on the same V) to every other variant's time.

--window: bench_decode.py --window's pair as two more points, S=32768 causal at D=128 (B=1, H=32) with and without
a 4k left window (window_left 4095; issue 9's 3.8x is their time ratio, the ms column).

--settle-ms MS: each point's variants are also timed interleaved (bench_vs_cudnn.time_cuda_interleaved, samples
alternating between the variants, each sample after MS ms of its own calls), the ms_settled column. do_bench runs
one variant back to back and the next after it, so on a power-limited card each variant's time carries the clock
the one before left (on an H100, 2026-12-07: +-5% between variants whose executed code was the same); the settled,
interleaved times are meant to resolve 1-2% (not yet run through this script: docs/perf/NOTES.md, 2026-12-07). A
variant whose call takes longer than MS settles for no call before its samples.

--bitwise-ref NAME: every later variant's output is compared bit for bit with NAME's at each point (bits=same or
DIFFERENT, no-ref where NAME failed at that point; the bits column): for switches that must not change the
arithmetic (how a mask is applied, where a store goes).
--time-wrong: the time of a variant whose output is wrong is shown anyway (a probe that drops work on purpose
bounds what that work costs).

--trace-dir DIR: a variant whose kernel takes a `Trace` argument (an instrumented copy of the kernel, e.g. clock64
stamps at each query block's start, first S, last P.V and end) gets a zeroed int64 buffer of [programs, 64, 4]
stamps, saved after the checked launch as DIR/trace_<variant>_<point>.pt (the buffer only, torch.save).

--bf16: every variant runs BF16 Q, K and V (V_NATURAL=1: V read as given, P rounded to bf16; unit descales), with
the library's BF16 key tile (64 keys at D=256) and 2 stages unless the variant sets them.

--int8: every variant runs INT8 Q.K^T (QK_INT8=1, BLOCK_DESCALE=1) on int8 Q and K with
one descale per 64 tokens of each head (as the int8_qk mode's quantization makes them, quantized here in torch so
that the sweep needs no build; K not smoothed) and the
key-permuted e4m3 V^T; the reference attends over the dequantized values. The ring depth stays the FP8 instances'
(gluon_stages) unless a variant sets NUM_STAGES (the INT8 D=64 instances run 2). --kpair quantizes K per 128
tokens instead, the int8_qk mode's block_pair (each pair's scale in both of its 64-token entries), so that variants
with K_DESCALE_PAIRED=1 (the library's "kpair" instances) compute what they compute in the library.
"""

import argparse
import csv
import importlib.util
import math
import os
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kernels"))
sys.path.insert(0, os.path.join(HERE, "..", "codegen"))

from bench_decode import WINDOW_LEFT, WINDOW_SHAPE, causal_pairs  # noqa: E402  (issue 9's window pair)
from bench_vs_cudnn import time_cuda_interleaved  # noqa: E402  (--settle-ms)
from common.numerics import DESCALE_BLOCK_TOKENS as DESCALE_BLOCK  # noqa: E402  (the descales' token blocks)
from aot_compile import sass_of, wgmma_serialized  # noqa: E402  (the build's check, on each variant's cubin)
from manifest import gluon_block_n as block_n_of  # noqa: E402  (the library's key tile per head dim)
from manifest import gluon_stages as stages_of  # noqa: E402  (and its ring depth, unless a variant sets one)
from operations.fmha_fwd import (gluon_half_last, gluon_int8_inf_selects, gluon_pv_pipelined,  # noqa: E402
                                 gluon_q_in_regs, gluon_tile_info_handoff)

E4M3 = torch.float8_e4m3fn
BLOCK_M, WG_M = 128, 64

SWITCH_DEFAULTS = {"KEY_PERMUTED": 0, "SUM_ON_TC": 0, "QK_INT8": 0, "BLOCK_DESCALE": 0, "TRANSPOSE_V": 0}


def load_variant(spec):
    name, rest = spec.split("=", 1)
    path, _, consts = rest.partition(":")
    module_spec = importlib.util.spec_from_file_location(f"gluon_variant_{name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    kernel = module.fmha_fwd_gluon_kernel
    # Defaults for the switches this version of the kernel has; name=value overrides.
    defaults = {k: v for k, v in SWITCH_DEFAULTS.items() if k in kernel.arg_names}
    constexprs = dict(defaults, **{k: int(v) for k, v in (kv.split("=") for kv in consts.split(",") if kv)})
    return name, kernel, constexprs


def suite_points(path, seqlens, head_dims):
    with open(path) as f:
        lines = [l for l in f if l.strip() and not l.startswith("#")]
    rows = list(csv.DictReader(lines))
    points = [{k: int(v) for k, v in r.items()} for r in rows]
    points = [p for p in points if p["head_dim"] in head_dims]
    if seqlens:
        points = [p for p in points if p["seqlen_q"] in seqlens]
    return points


def quantize(x):
    scale = x.abs().amax().float() / 448.0
    return (x / scale).to(E4M3), scale.reshape(1)


def quantize_int8_blocks(x, tokens=DESCALE_BLOCK):
    """x [b, s, h, d] float -> (int8 x, descales [b, h, s // DESCALE_BLOCK]): one scale per `tokens` tokens of a
    head (64, or 128 for --kpair: the pair's scale written to both of its 64-token entries, as the library's
    block_pair quantization does)."""
    b, s, h, d = x.shape
    blocks = x.reshape(b, s // tokens, tokens, h, d)
    scale = blocks.abs().amax(dim=(2, 4)).clamp_min(1e-30) / 127.0  # [b, nblk, h]
    q = torch.round(blocks / scale[:, :, None, :, None]).clamp(-127, 127).to(torch.int8).reshape(b, s, h, d)
    return q, scale.repeat_interleave(tokens // DESCALE_BLOCK, dim=1).permute(0, 2, 1).contiguous()


def dequantize_int8_blocks(q, scale):
    """The float64 values int8 q [b, s, h, d] with scale [b, h, nblk] stand for."""
    return q.double() * scale.double().permute(0, 2, 1).repeat_interleave(DESCALE_BLOCK, dim=1)[..., None]


def key_permutation(length, device):
    """Position -> key of the key-permuted V^T: in each 32-key block, position 16h + 4t + 2j + e holds key
    16h + 8j + 2t + e (the order in which a thread's accumulator fragment holds the keys)."""
    pos = torch.arange(length, device=device)
    base, r = pos - pos % 32, pos % 32
    h, t, j, e = r // 16, (r // 4) % 4, (r // 2) % 2, r % 2
    return base + 16 * h + 8 * j + 2 * t + e


def layout(bits, row_bytes, rank=4):
    """The shared layout of a box whose innermost row has row_bytes bytes (swizzle at most 128 bytes)."""
    return gl.NVMMASharedLayout(swizzle_byte_width=min(128, row_bytes), element_bitwidth=bits, rank=rank)


_SERIALIZED = {}  # compiled kernel hash -> whether ptxas serialized its wgmma (Problem.serialized)


class Problem:
    def __init__(self, p, int8=False, bf16=False, kpair=False):
        torch.manual_seed(0)
        b, hq, hkv, s, sk, d = (p[k] for k in ("batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim"))
        self.p, self.causal, self.int8, self.bf16 = p, bool(p["causal"]), int8, bf16
        if bf16:
            one = torch.ones(1, device="cuda")
            (self.q, self.qd), (self.k, self.kd) = ((torch.randn(b, n, h, d, device="cuda").to(torch.bfloat16), one)
                                                    for n, h in ((s, hq), (sk, hkv)))
            self.descale_strides = {}
        elif int8:
            k_tokens = 2 * DESCALE_BLOCK if kpair else DESCALE_BLOCK
            assert s % DESCALE_BLOCK == 0 and sk % k_tokens == 0, f"--int8: whole {k_tokens}-token k descale blocks"
            (self.q, self.qd) = quantize_int8_blocks(torch.randn(b, s, hq, d, device="cuda"))
            (self.k, self.kd) = quantize_int8_blocks(torch.randn(b, sk, hkv, d, device="cuda"), k_tokens)
            # DescaleRef strides: q per (batch, query head, block), k per (batch, kv head, block).
            self.descale_strides = dict(q_descale_stride_b=hq * (s // DESCALE_BLOCK), q_descale_stride_h=0,
                                        q_descale_stride_hq=s // DESCALE_BLOCK, q_descale_stride_blk=1,
                                        k_descale_stride_b=hkv * (sk // DESCALE_BLOCK),
                                        k_descale_stride_h=sk // DESCALE_BLOCK, k_descale_stride_blk=1)
        else:
            (self.q, self.qd) = quantize(torch.randn(b, s, hq, d, device="cuda"))
            (self.k, self.kd) = quantize(torch.randn(b, sk, hkv, d, device="cuda"))
            self.descale_strides = {}
        if bf16:
            (self.v, self.vd) = (torch.randn(b, sk, hkv, d, device="cuda").to(torch.bfloat16), self.qd)
        else:
            (self.v, self.vd) = quantize(torch.randn(b, sk, hkv, d, device="cuda"))
        self.vt = self.v.permute(0, 2, 3, 1).contiguous()  # [b, hkv, d, sk], sequence contiguous
        assert sk % 32 == 0, "the sweep's key-permuted V^T needs whole 32-key blocks"
        self.vt_perm = self.vt[..., key_permutation(sk, self.vt.device)].contiguous()
        self.o = torch.empty(b, s, hq, d, device="cuda", dtype=torch.bfloat16)
        self.block_n = block_n_of(d, bf16=bf16)
        self.lse = torch.empty(b, hq, s, device="cuda", dtype=torch.float32)
        self._descs = {}
        # Q in one warpgroup's 64-row boxes (the three-consumer variants), made once like the others.
        self.bits = 16 if bf16 else 8
        self.q_box_desc = TensorDescriptor.from_tensor(self.q, [1, WG_M, 1, d], layout(self.bits, d * self.bits // 8))
        self.no_offsets = torch.zeros(b + 1, dtype=torch.int32, device="cuda")
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count
        self.window_left = p.get("window_left", -1)
        if self.window_left >= 0:  # the (query, key) pairs a causal left window keeps, counted
            assert self.causal and s == sk, "window points: causal and square (the count and the reference)"
            self.flops = 4 * b * hq * d * causal_pairs(s, self.window_left)
        else:
            self.flops = 4 * b * hq * s * sk * d / (2 if self.causal and s == sk else 1)

    def descriptors(self, bn):
        """(q, k, V^T, o descriptors, the key-permuted V^T's, V's own) for key tiles of bn keys, made once per
        bn."""
        if bn not in self._descs:
            d = self.p["head_dim"]
            bits, row = self.bits, d * self.bits // 8
            self._descs[bn] = ((
                TensorDescriptor.from_tensor(self.q, [1, BLOCK_M, 1, d], layout(bits, row)),
                TensorDescriptor.from_tensor(self.k, [1, bn, 1, d], layout(bits, row)),
                TensorDescriptor.from_tensor(self.vt, [1, 1, d, bn], layout(bits, bn * bits // 8)),
                TensorDescriptor.from_tensor(self.o, [1, WG_M, 1, d], layout(16, 2 * d)),
            ), TensorDescriptor.from_tensor(self.vt_perm, [1, 1, d, bn], layout(bits, bn * bits // 8)),
                TensorDescriptor.from_tensor(self.v, [1, bn, 1, d], layout(bits, row)))
        return self._descs[bn]

    def launch(self, kernel, constexprs):
        p = self.p
        # A variant may set its key tile (BLOCK_N); the library's per head dim otherwise.
        constexprs = dict(constexprs)
        block_n = constexprs.pop("BLOCK_N", self.block_n)
        # Two CTAs an SM (CTAS_PER_SM=2 with MAXNREG=80 and CONSUMER_REGS=104: 12 warps at 80 registers a thread
        # each): not constexprs but the grid and a compile option.
        ctas_per_sm = constexprs.pop("CTAS_PER_SM", 1)
        options = {"maxnreg": constexprs.pop("MAXNREG")} if "MAXNREG" in constexprs else {}
        plain, permuted, natural = self.descriptors(block_n)
        descs = list(plain)
        # NUM_CONSUMERS = 3: 192-row query blocks, Q loaded as three 64-row boxes (a box has power-of-two extents).
        block_m = WG_M * constexprs.get("NUM_CONSUMERS", 2)
        if "NUM_CONSUMERS" not in kernel.arg_names:  # the single-warpgroup kernel: NUM_CONSUMERS=1 sets its 64 rows
            constexprs.pop("NUM_CONSUMERS", None)
        if block_m != BLOCK_M:
            descs[0] = self.q_box_desc
        # The library's ring depth and P.V schedule for this point, unless the variant sets them.
        library = {"NUM_STAGES": 2 if self.bf16 else stages_of(p["head_dim"])}
        if "PV_PIPELINED" in kernel.arg_names and not self.bf16:
            library["PV_PIPELINED"] = int(gluon_pv_pipelined(p["head_dim"], self.causal))
        if "TILE_INFO_HANDOFF" in kernel.arg_names:
            library["TILE_INFO_HANDOFF"] = int(gluon_tile_info_handoff(p["head_dim"], block_m, block_n, self.causal))
        constexprs = {**library, **constexprs}
        # The library's policies (codegen/operations/fmha_fwd.py) for the switches a variant does not set.
        e4m3_kperm = (not self.bf16 and not self.int8 and bool(constexprs.get("KEY_PERMUTED"))
                      and not constexprs.get("TRANSPOSE_V"))
        if "Q_IN_REGS" in kernel.arg_names and "Q_IN_REGS" not in constexprs:
            constexprs["Q_IN_REGS"] = int(gluon_q_in_regs(p["head_dim"], block_m, block_n, self.causal, False,
                                                          e4m3_kperm, self.bf16))
        if "HALF_LAST" in kernel.arg_names and "HALF_LAST" not in constexprs:
            constexprs["HALF_LAST"] = int(gluon_half_last(p["head_dim"], block_m, block_n, self.causal, False,
                                                          e4m3_kperm))
        if "INT8_INF_SELECTS" in kernel.arg_names and "INT8_INF_SELECTS" not in constexprs:
            constexprs["INT8_INF_SELECTS"] = int(gluon_int8_inf_selects(
                p["head_dim"], block_m, block_n, self.causal, self.int8, bool(constexprs.get("SUM_ON_TC"))))
        if self.bf16:  # V read as given
            descs[2] = natural
            constexprs.update(V_NATURAL=True, KEY_PERMUTED=0)  # a bool: the kernel combines it with `or`
        elif constexprs.get("TRANSPOSE_V"):  # the kernel transposes V itself (key-permuted)
            descs[2] = natural
        elif constexprs.get("KEY_PERMUTED"):
            descs[2] = permuted
        # Persistent versions take the batch and launch at most one program per SM.
        persistent = "batch" in kernel.arg_names
        programs = triton.cdiv(p["seqlen_q"], block_m) * p["batch"] * p["heads_q"]
        grid = (min(programs, ctas_per_sm * self.sms),) if persistent else (programs,)
        extra = {"batch": p["batch"]} if persistent else {}
        # By keyword: the kernel's parameter list grows (descale strides, windows) and positions would shift.
        # Per-tensor descales: every descale stride 0; no window (-1: unlimited), no soft-capping.
        strides = {n: 0 for n in kernel.arg_names if "descale_stride" in n}
        strides.update(self.descale_strides)
        optional = {n: v for n, v in (("window_left", self.window_left), ("window_right", -1), ("softcap", 0.0))
                    if n in kernel.arg_names}
        if "varlen" in kernel.arg_names:  # dense: varlen 0, the offsets never read (a placeholder int32 tensor)
            optional.update(O=self.o, stride_os=self.o.stride(1), stride_oh=self.o.stride(2),
                            cu_seqlens_q=self.no_offsets, cu_seqlens_k=self.no_offsets, varlen=0, total_q=0,
                            total_k=0)
        if "stride_vs" in kernel.arg_names:  # read by the BF16 varlen path only
            if self.bf16:
                optional.update(V=self.v, stride_vs=self.v.stride(1), stride_vh=self.v.stride(2))
            else:
                optional.update(V=self.vt, stride_vs=self.vt.stride(2), stride_vh=self.vt.stride(1))
        if "Trace" in kernel.arg_names:  # an instrumented variant (--trace-dir); every launch stamps the same slots
            if getattr(self, "trace", None) is None or self.trace.numel() != grid[0] * 64 * 4:
                self.trace = torch.zeros(grid[0] * 64 * 4, dtype=torch.int64, device="cuda")
            optional["Trace"] = self.trace
        return kernel[grid](*descs, LSE=self.lse, q_descale=self.qd, k_descale=self.kd, v_descale=self.vd,
                            **strides, **optional, softmax_scale=1 / math.sqrt(p["head_dim"]),
                            seqlen_q=p["seqlen_q"], seqlen_k=p["seqlen_k"], heads_q=p["heads_q"],
                            group_size=p["heads_q"] // p["heads_kv"], write_lse=1, **extra,
                            HEAD_DIM=p["head_dim"], BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=self.causal,
                            **constexprs, num_warps=4, **options)

    @staticmethod
    def serialized(compiled):
        """Whether ptxas serialized the wgmma of this compiled variant (the build refuses such an instance:
        codegen/aot_compile.py wgmma_serialized); its time is still shown, flagged. Once per compiled kernel."""
        if compiled.hash not in _SERIALIZED:
            with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                f.write(compiled.asm["cubin"])
                f.flush()
                _SERIALIZED[compiled.hash] = bool(wgmma_serialized(sass_of(Path(f.name)), compiled.asm["ptx"]))
        return _SERIALIZED[compiled.hash]

    def transpose_ms(self):
        """The library's V -> key-permuted V^T transpose (kernels/transpose_v, 128 keys a program, 4 warps) on this
        problem's V, median ms: what a variant reading a V^T pays per call on top of its own time when the caller
        gives V head_dim contiguous (the TRANSPOSE_V variants pay nothing)."""
        from transpose_v.transpose_v_triton import transpose_v_kernel
        b, sk, hkv, d = self.v.shape
        pad = triton.cdiv(sk, 32) * 32
        vt = torch.empty(b, hkv, d, pad, device="cuda", dtype=torch.uint8)
        v8 = self.v.view(torch.uint8)
        grid = (triton.cdiv(pad, 128) * b * hkv,)

        def run():
            transpose_v_kernel[grid](v8, vt, sk, pad, hkv, v8.stride(0), v8.stride(2), v8.stride(1), self.no_offsets,
                                     0, 0, HEAD_DIM=d, BLOCK_S=128, KEY_PERMUTED=True, num_warps=4)
        run()
        torch.cuda.synchronize()
        assert torch.equal(vt[..., :sk], self.vt_perm.view(torch.uint8)[..., :sk]), "transpose_v != the sweep's V^T"
        return triton.testing.do_bench(run, warmup=25, rep=200, return_mode="median")

    def reference(self, head):
        """float64 attention of batch 0, one query head, on the dequantized inputs."""
        g = self.p["heads_q"] // self.p["heads_kv"]
        if self.int8:
            q = dequantize_int8_blocks(self.q[:1, :, head:head + 1], self.qd[:1, head:head + 1])[0, :, 0]
            hk = head // g
            k = dequantize_int8_blocks(self.k[:1, :, hk:hk + 1], self.kd[:1, hk:hk + 1])[0, :, 0]
        else:
            q = self.q[0, :, head].double() * self.qd.double()
            k = self.k[0, :, head // g].double() * self.kd.double()
        v = self.v[0, :, head // g].double() * self.vd.double()
        s = q @ k.T / math.sqrt(q.shape[-1])
        if self.causal:
            sq, sk = s.shape
            keep = torch.ones(sq, sk, dtype=torch.bool, device="cuda").tril(sk - sq)
            if self.window_left >= 0:  # key j visible to query i only within the window: i + sk - sq - j <= left
                keep &= ~torch.ones(sq, sk, dtype=torch.bool, device="cuda").tril(sk - sq - self.window_left - 1)
            s = s.masked_fill(~keep, float("-inf"))
        return torch.softmax(s, -1) @ v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--suite", default=os.path.join(HERE, "suites", "standard.csv"))
    ap.add_argument("--seqlens", default="")
    ap.add_argument("--head-dims", default="128", help="the gluon kernel compiles for 64, 128 and 256")
    ap.add_argument("--csv", default="")
    ap.add_argument("--int8", action="store_true", help="INT8 Q.K^T with per-block descales (see the module's doc)")
    ap.add_argument("--kpair", action="store_true", help="--int8 with K per 128 tokens (see the module's doc)")
    ap.add_argument("--trace-dir", default="", help="where instrumented variants' stamps go (see the module's doc)")
    ap.add_argument("--bf16", action="store_true", help="BF16 Q, K, V (see the module's doc)")
    ap.add_argument("--settle-ms", type=float, default=0.0,
                    help="also time each point's variants interleaved, each timed sample after this many ms of its "
                         "own calls (bench_vs_cudnn.time_cuda_interleaved), the ms_settled column (see the module's "
                         "doc)")
    ap.add_argument("--settle-repeats", type=int, default=15, help="timed samples per variant with --settle-ms")
    ap.add_argument("--bitwise-ref", default="",
                    help="a variant whose output the later ones are compared with bit for bit at each point (a "
                         "switch that should not change the arithmetic, e.g. how a mask is applied)")
    ap.add_argument("--time-wrong", action="store_true",
                    help="show the time of variants whose output is wrong (probes that drop work on purpose)")
    ap.add_argument("--window", action="store_true", help="the 4k-window pair at S=32768 too (see the module's doc)")
    args = ap.parse_args()
    variants = [load_variant(v) for v in args.variant]
    if args.bitwise_ref and args.bitwise_ref not in [name for name, _, _ in variants]:
        ap.error(f"--bitwise-ref {args.bitwise_ref}: not one of the variants")
    if args.int8:
        # After the variant's constants: load_variant already filled QK_INT8 = 0 from SWITCH_DEFAULTS.
        variants = [(name, kernel, {**c, "QK_INT8": 1, "BLOCK_DESCALE": 1}) for name, kernel, c in variants]
    seqlens = {int(s) for s in args.seqlens.split(",") if s}
    rows = []
    print(f"{'variant':>10} {'D':>4} {'S':>6} {'causal':>6} {'window':>6} {'rel_err':>9} {'TFLOP/s':>8} {'e2e':>8} "
          f"{'ms':>8}", flush=True)
    points = suite_points(args.suite, seqlens, {int(d) for d in args.head_dims.split(",")})
    if args.window:
        b, s, h, d = WINDOW_SHAPE
        pair = dict(batch=b, heads_q=h, heads_kv=h, seqlen_q=s, seqlen_k=s, head_dim=d, causal=1)
        points += [pair, dict(pair, window_left=WINDOW_LEFT)]
    for p in points:
        prob = Problem(p, int8=args.int8, bf16=args.bf16, kpair=args.kpair)
        head = p["heads_q"] // 2
        ref = prob.reference(head)
        t_ms = 0.0 if args.bf16 else prob.transpose_ms()  # BF16 reads V as given: no transpose
        ref_bits = None
        timed = []  # (row, launch) of the variants that ran, for --settle-ms
        for name, kernel, constexprs in variants:
            try:
                prob.o.fill_(float("nan"))
                serial = prob.serialized(prob.launch(kernel, constexprs))
                torch.cuda.synchronize()
                out = prob.o[0, :, head].double()
                err = ((out - ref).norm() / ref.norm()).item()
                if args.trace_dir and "Trace" in kernel.arg_names:
                    tag = f"d{p['head_dim']}_s{p['seqlen_q']}_{'causal' if p['causal'] else 'full'}_w{prob.window_left}"
                    torch.save(prob.trace.cpu(), os.path.join(args.trace_dir, f"trace_{name}_{tag}.pt"))
                if torch.isnan(prob.o).any():
                    err = float("nan")
                bits = ""
                if args.bitwise_ref:
                    if name == args.bitwise_ref:
                        ref_bits = prob.o.clone()
                    elif ref_bits is None:
                        bits = "no-ref"
                    else:
                        bits = "same" if torch.equal(prob.o.view(torch.int16), ref_bits.view(torch.int16)) else \
                            "DIFFERENT"
                ms = triton.testing.do_bench(lambda: prob.launch(kernel, constexprs), warmup=25, rep=200,
                                             return_mode="median")
                tf = prob.flops / ms * 1e-9
                # End to end for a caller whose V is head_dim contiguous: the transpose added unless the variant
                # reads V itself.
                tf_e2e = prob.flops / (ms + (0 if constexprs.get("TRANSPOSE_V") else t_ms)) * 1e-9
            except Exception as e:  # a variant that does not compile or run is a row, not a crash
                err, ms, tf, tf_e2e, serial, bits = float("nan"), 0.0, 0.0, 0.0, False, ""
                # A compilation error's text starts with source lines and ends with the cause: show both ends.
                text = str(e)
                shown = text if len(text) <= 600 else text[:200] + " [...] " + text[-400:]
                print(f"# {name}: {type(e).__name__}: {shown}", flush=True)
            ok = math.isfinite(err) and err < 0.05
            if not (ok or args.time_wrong):  # a wrong output's time is not shown (unless a probe asks for it)
                ms, tf, tf_e2e = 0.0, 0.0, 0.0
            print(f"{name:>10} {p['head_dim']:>4} {p['seqlen_q']:>6} {p['causal']:>6} {prob.window_left:>6} "
                  f"{err:>9.2e} {tf:>8.1f} {tf_e2e:>8.1f} {ms:>8.4f}"
                  f"{'' if ok else '  WRONG'}{'  SERIALIZED' if serial else ''}{f'  bits={bits}' if bits else ''}",
                  flush=True)
            if ms > 0:
                timed.append((len(rows), lambda kernel=kernel, constexprs=constexprs: prob.launch(kernel, constexprs)))
            rows.append(dict(variant=name, head_dim=p["head_dim"], seqlen=p["seqlen_q"], causal=p["causal"],
                             window_left=prob.window_left, rel_err=err, tflops=tf, tflops_e2e=tf_e2e, ms=ms,
                             ms_settled=0.0, wgmma_serialized=int(serial), bits=bits))
        if args.settle_ms > 0 and timed:
            settings = argparse.Namespace(warmup=3, repeats=args.settle_repeats, target_ms=30.0)
            settled = time_cuda_interleaved([fn for _, fn in timed], settings, settle_ms=args.settle_ms)
            for (i, _), ms in zip(timed, settled):
                rows[i]["ms_settled"] = ms
                print(f"{rows[i]['variant']:>10} {p['head_dim']:>4} {p['seqlen_q']:>6} {p['causal']:>6} "
                      f"{prob.window_left:>6} settled, interleaved: {ms:.4f} ms", flush=True)
        del prob
        torch.cuda.empty_cache()
        if args.csv:  # rewritten after every point: a sweep cut off by its time limit keeps what it measured
            with open(args.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)


if __name__ == "__main__":
    main()
