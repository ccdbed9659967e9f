"""Decode over a paged FP8 KV cache (fp8attn.paged.decode) against BF16 decode on a contiguous cache (torch SDPA:
cuDNN and FlashAttention backends), issue 9's table.

Effective read bandwidth: the bytes of K and V the call must read (every sequence's keys and values once, in the
provider's own type: 1 byte for fp8attn, 2 for BF16) divided by the time. GQA 32/8, D=128 unless stated; one
query token unless stated; page size 64 (and 16). Timing: CUDA events around back-to-back calls after warm-up,
median of --repeats samples (bench_vs_cudnn.time_cuda).

    PYTHONPATH=build/python python3 bench/bench_decode.py --csv out.csv

This is a benchmark, never a test: it prints a table and writes what --csv names.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_vs_cudnn as bvc  # noqa: E402  (time_cuda)

# (name, batch, context, heads_q, heads_kv, q_len, page)
CASES = [
    ("b32_s32k", 32, 32768, 32, 8, 1, 64),
    ("b8_s128k", 8, 131072, 32, 8, 1, 64),
    ("b128_s4k", 128, 4096, 32, 8, 1, 64),
    # The same bytes as b128_s4k in fewer and in more work items (512 and 2048 of 8k / 2k keys; the Gluon decode
    # runs two programs per SM, 264): how much a work item's start and end cost.
    ("b64_s8k", 64, 8192, 32, 8, 1, 64),
    ("b256_s2k", 256, 2048, 32, 8, 1, 64),
    ("b1_s128k", 1, 131072, 32, 8, 1, 64),
    ("b32_s32k_page16", 32, 32768, 32, 8, 1, 16),
    ("b32_s32k_q4", 32, 32768, 32, 8, 4, 64),
    ("b32_s32k_mqa", 32, 32768, 32, 1, 1, 64),
    ("b8_s128k_window4k", 8, 131072, 32, 8, 1, 64, 4095),  # sliding window: only the window's bytes count
]
HEAD_DIM = 128
TARGETS = {"b32_s32k": 4.2, "b8_s128k": 4.2, "b128_s4k": 4.2, "b1_s128k": 3.5}


def make_case(case):
    """The inputs of one case: (q, cache, table, seqlens, out); random cache bytes, pages in random order."""
    import torch

    from fp8attn.paged import PagedKVCache

    name, batch, context, heads_q, heads_kv, q_len, page = case[:7]
    gen = torch.Generator(device="cuda").manual_seed(0)
    pages_per_seq = context // page
    num_pages = batch * pages_per_seq
    cache = PagedKVCache(num_pages, page, heads_kv, HEAD_DIM, k_descale=[0.02] * heads_kv, v_descale=[0.01] * heads_kv)
    cache.k_pages.view(torch.uint8).copy_(torch.randint(0, 0x7E, cache.k_pages.shape, generator=gen, device="cuda",
                                                        dtype=torch.uint8))
    cache.v_pages.view(torch.uint8).copy_(torch.randint(0, 0x7E, cache.v_pages.shape, generator=gen, device="cuda",
                                                        dtype=torch.uint8))
    table = torch.randperm(num_pages, generator=gen, device="cuda").to(torch.int32).reshape(batch, pages_per_seq)
    seqlens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    q = torch.randn((batch, q_len, heads_q, HEAD_DIM), generator=gen, device="cuda").to(torch.bfloat16)
    return q, cache, table, seqlens, torch.empty_like(q)


def run_case(case, args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from fp8attn.paged import decode, decode_with_name

    name, batch, context, heads_q, heads_kv, q_len, page = case[:7]
    window = case[7] if len(case) > 7 else -1
    q, cache, table, seqlens, out = make_case(case)
    gen = torch.Generator(device="cuda").manual_seed(1)
    rec = {"case": name}
    read = context if window < 0 else min(context, window + q_len)
    fp8_bytes = 2 * batch * read * heads_kv * HEAD_DIM
    ms = bvc.time_cuda(lambda: decode(q, cache, table, seqlens, context, out=out, window_left=window), args)
    rec["fp8attn-paged-fp8"] = fp8_bytes / (ms * 1e-3) / 1e12
    rec["fp8attn_ms"] = ms
    rec["fp8attn_kernel"] = short(decode_with_name(q, cache, table, seqlens, context, out=out, window_left=window)[1])
    if args.instances:
        # Every compiled decode instance for this page size and head dim whose rows hold the case's rows, at each
        # split count asked for: columns "<instance>@s<splits>" (s0: automatic).
        rows_needed = q_len * heads_q // heads_kv
        ref = out.clone()
        for name in decode_instances(page, HEAD_DIM, rows_needed):
            for splits in args.splits:
                def call(name=name, splits=splits):
                    return decode(q, cache, table, seqlens, context, out=out, kernel_name=name, num_splits=splits,
                                  window_left=window)
                try:
                    call()
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 - an instance that refuses the case (e.g. a head-pair one
                    # where the case needs splits) is a cell, not the end of the run
                    rec[f"{short(name)}@s{splits}"] = f"refused: {e}"[:70]
                    continue
                if not torch.allclose(out.float(), ref.float(), rtol=2e-2, atol=2e-2):
                    rec[f"{short(name)}@s{splits}"] = "MISMATCH"
                    continue
                t = bvc.time_cuda(call, args)
                rec[f"{short(name)}@s{splits}"] = fp8_bytes / (t * 1e-3) / 1e12
    cache = None  # frees the pages before the BF16 cache is allocated
    torch.cuda.empty_cache()
    # BF16 on a contiguous cache [B, H_kv, S, D] (what SDPA reads), the same shapes.
    if not args.no_sdpa and window < 0:  # SDPA has no sliding window without a mask tensor
        k = torch.randn((batch, heads_kv, context, HEAD_DIM), generator=gen, device="cuda").to(torch.bfloat16)
        v = torch.randn((batch, heads_kv, context, HEAD_DIM), generator=gen, device="cuda").to(torch.bfloat16)
        qh = q.transpose(1, 2)
        for provider, backend in (("cudnn-bf16", SDPBackend.CUDNN_ATTENTION), ("flash-bf16", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    def call():
                        # No mask among several new tokens: SDPA's is_causal aligns the mask top-left (query t
                        # would see keys 0..t only and read almost nothing); without it the call reads the same
                        # bytes as the causal one would.
                        return F.scaled_dot_product_attention(qh, k, v, enable_gqa=heads_q != heads_kv)
                    ms = bvc.time_cuda(call, args)
                rec[provider] = 2 * fp8_bytes / (ms * 1e-3) / 1e12
            except Exception as e:  # noqa: BLE001 - record and go on
                rec[provider] = None
                rec[f"{provider}_failure"] = f"{type(e).__name__}: {e}"[:200]
        del k, v
        torch.cuda.empty_cache()
    return rec


def decode_instances(page, head_dim, rows_needed):
    import fp8attn

    prefix = f"fp8attn_sm90_paged_decode_e4m3_bf16_p{page}x{head_dim}_r"
    names = [op["name"] for op in fp8attn.list_operations() if op["name"].startswith(prefix)]
    return [n for n in names if int(n[len(prefix):].split("_")[0]) >= min(rows_needed, 64)]


def short(name):
    return name.replace("fp8attn_sm90_paged_decode_e4m3_bf16_", "")


# Issue 9's sliding-window row, one definition for bench_decode.py --window, clock_under_load.py --window,
# ncu_targets.py's window targets and sweep_gluon.py --window: prefill at S=32k, causal, full against a 4k left
# window.
WINDOW_SHAPE = (1, 32768, 32, 128)  # batch, seqlen, heads (q and kv), head_dim
WINDOW_LEFT = 4095


def causal_pairs(seqlen, window_left=-1):
    """The (query, key) pairs a square causal call keeps, with a left window of window_left keys (-1: none)."""
    w = window_left + 1
    if window_left < 0 or seqlen <= w:
        return seqlen * (seqlen + 1) // 2
    return w * (w + 1) // 2 + (seqlen - w) * w


def window_fp8_inputs():
    """The window pair's FP8 inputs with V^T made once (the attention kernel alone): (q, k, vt, fmha_fwd keyword
    arguments of the full causal call; add window=(WINDOW_LEFT, -1) for the window call)."""
    import torch

    import fp8attn

    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(WINDOW_SHAPE, generator=gen, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
    vt = fp8attn.transpose_v(v, key_permuted=True)
    one = torch.ones(1, device="cuda")
    return q, k, vt, dict(q_descale=one, k_descale=one, v_descale=one, causal=True, v_key_permuted=True)


def window_candidates(dtype):
    import fp8attn

    prefix = f"fp8attn_sm90_fmha_fwd_{dtype}_{dtype}_f32_bf16_"
    return sorted(o["name"] for o in fp8attn.list_operations()
                  if isinstance(o, dict) and o["name"].startswith(prefix) and "x128_" in o["name"]
                  and "_causal" in o["name"] and o["name"].endswith("_gluon") and "varlen" not in o["name"]
                  and "vnat" not in o["name"] and "softcap" not in o["name"])


# Untimed calls before each timed sample of the window pair (bench_vs_cudnn.time_cuda_interleaved, settle_ms):
# four times the ~25 ms the H200's clock took to follow a switch between the two kernels.
WINDOW_SETTLE_MS = 100.0


def run_window(args):
    """Issue 9's sliding-window row: prefill at S=32k, causal, full vs a 4k left window (4.3x less work)."""
    import torch

    import fp8attn

    rows = []
    for dtype in ("bf16", "e4m3"):
        gen = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(WINDOW_SHAPE, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
        kw = {}
        if dtype == "e4m3":
            (q, qd), (k, kd), (v, vd) = fp8attn.quantize(q), fp8attn.quantize(k), fp8attn.quantize(v)
            kw = dict(q_descale=qd, k_descale=kd, v_descale=vd)
        def full_and_window(vv, **extra):
            """The full causal call and the 4k-window one on V (or V^T) vv; extra: more fmha_fwd arguments of the
            window call (kernel_name) or of both."""
            window_kw = {**kw, **extra}
            full_kw = {key: val for key, val in window_kw.items() if key != "kernel_name"}
            return [lambda: fp8attn.fmha_fwd(q, k, vv, causal=True, **full_kw),
                    lambda: fp8attn.fmha_fwd(q, k, vv, causal=True, window=(WINDOW_LEFT, -1), **window_kw)]

        # The two calls timed interleaved (samples alternating), so that the machine's drift during the run (clock,
        # power) falls on both: timed one after the other the ratio read 3.45-3.83x over four runs of one tree.
        full, local = bvc.time_cuda_interleaved(full_and_window(v), args)
        rec = {"case": f"window4k_s32k_{dtype}", "full_causal_ms": full, "window_ms": local, "speedup": full / local}
        print(f"{dtype}: full causal {full:.3f} ms, 4k window {local:.3f} ms: {full / local:.2f}x (target >= 3.8x)",
              flush=True)
        # The same pair with each timed sample preceded by WINDOW_SETTLE_MS of its own calls, so that each kernel
        # is timed at the clock its own power draw settles to (bench_vs_cudnn.time_cuda_interleaved's settle_ms):
        # both ratios are reported.
        full_s, local_s = bvc.time_cuda_interleaved(full_and_window(v), args, settle_ms=WINDOW_SETTLE_MS)
        rec.update(full_causal_settled_ms=full_s, window_settled_ms=local_s, speedup_settled=full_s / local_s)
        print(f"{dtype}, settled {WINDOW_SETTLE_MS:.0f} ms before each sample: full causal {full_s:.3f} ms, 4k window "
              f"{local_s:.3f} ms: {full_s / local_s:.2f}x", flush=True)
        if dtype == "e4m3":
            # The same two calls on a V^T made once outside them (what a quantization pass that writes V^T gives):
            # the attention kernels alone, without the V transpose each FP8 call above makes (the same cost in
            # both calls, ~3% of the window's).
            vt = fp8attn.transpose_v(v, key_permuted=True)
            full_vt, local_vt = bvc.time_cuda_interleaved(full_and_window(vt, v_key_permuted=True), args)
            rec.update(full_causal_vt_ms=full_vt, window_vt_ms=local_vt, speedup_vt=full_vt / local_vt)
            print(f"{dtype}, V^T given: full causal {full_vt:.3f} ms, 4k window {local_vt:.3f} ms: "
                  f"{full_vt / local_vt:.2f}x", flush=True)
        if args.instances:
            # The window call on every dense causal Gluon instance of this dtype at D=128, by name (ms).
            for name in window_candidates(dtype):
                tag = name.replace("fp8attn_sm90_fmha_fwd_", "")
                try:
                    # Interleaved with the full causal call, as the row above: each ratio from its own pair.
                    full_again, ms = bvc.time_cuda_interleaved(full_and_window(v, kernel_name=name), args)
                    rec[tag] = ms
                    print(f"    {tag:<60} {ms:.3f} ms: {full_again / ms:.2f}x", flush=True)
                except Exception as e:  # an instance that refuses the call is recorded, not fatal
                    rec[tag] = f"refused: {str(e)[:60]}"
        rows.append(rec)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default="")
    ap.add_argument("--cases", default="", help="comma-separated substrings of the case names to keep")
    ap.add_argument("--no-sdpa", action="store_true")
    ap.add_argument("--window", action="store_true", help="also the sliding-window prefill row")
    ap.add_argument("--instances", action="store_true",
                    help="also every compiled decode instance of the case's page size by name, at each --splits")
    ap.add_argument("--splits", default="0", help="split counts for --instances, e.g. 0,1,2,4 (0: automatic)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--target-ms", type=float, default=20.0)
    args = ap.parse_args()
    args.splits = [int(x) for x in args.splits.split(",")]
    cases = [c for c in CASES if not args.cases or any(w in c[0] for w in args.cases.split(","))]
    providers = ["fp8attn-paged-fp8", "cudnn-bf16", "flash-bf16"]
    print(f"{'TB/s effective':<18}" + "".join(f"{p:>20}" for p in providers) + f"{'target':>10}")
    rows = []
    for case in cases:
        rec = run_case(case, args)
        rows.append(rec)
        cells = "".join(f"{rec[p]:>20.2f}" if rec.get(p) else f"{'-':>20}" for p in providers)
        print(f"{case[0]:<18}{cells}{TARGETS.get(case[0], ''):>10}   {rec['fp8attn_kernel']}", flush=True)
        swept = {k: v for k, v in rec.items() if "@s" in k}
        for k, v in sorted(swept.items(), key=lambda kv: -kv[1] if isinstance(kv[1], float) else 0):
            print(f"    {k:<40} {v if isinstance(v, str) else f'{v:.2f}'}", flush=True)
    if args.window:
        rows += run_window(args)
    if args.csv:
        bvc.write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
