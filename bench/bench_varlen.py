"""Varlen prefill (fp8attn.fmha_fwd_varlen, packed sequences) against the dense call at the same total work, issue
9's "within 5% of the dense kernel's TFLOP/s": B sequences of equal length S packed, each call as the library
picks it (FP8: the Gluon "_varlen" instance for varlen, the dense Gluon one for dense), and both calls forced onto
the same Triton instance beside them (the path BF16 and a sequence-contiguous V take). FP8 (quantized once, V
transpose included in both) and BF16, D=128, H_q = H_kv = 32, causal and not.

    PYTHONPATH=build/python python3 bench/bench_varlen.py [--instances] [--csv out.csv]

--instances: also every compiled Gluon "_varlen" instance of the case's type and mask forced by name, each timed
interleaved with the dense call (what the tuning table's varlen rows are decided from).

A benchmark, never a test: it prints a table and writes what --csv names.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_vs_cudnn as bvc  # noqa: E402  (time_cuda)

CASES = [(8, 4096), (2, 16384), (32, 1024)]  # (batch, seqlen): 32k tokens each
HEADS, HEAD_DIM = 32, 128


def triton_instance(kernels, dtype, causal):
    """The first triton.language instance in manifest order that takes packed sequences (not the warp-specialized
    even-N, V-natural or soft-capping specializations)."""
    return next(k["name"] for k in kernels if k["qk_type"] == dtype and k["head_dim"] == HEAD_DIM
                and k["causal"] == causal and k["family"] == "triton" and k["varlen"]
                and not any(tag in k["name"] for tag in ("_vnat", "_softcap")))


def run(dtype, causal, batch, seqlen, args):
    import torch

    import fp8attn

    gen = torch.Generator(device="cuda").manual_seed(0)
    shape = (batch, seqlen, HEADS, HEAD_DIM)
    q, k, v = (torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
    kw = {}
    if dtype == "e4m3":
        (q, qd), (k, kd), (v, vd) = fp8attn.quantize(q), fp8attn.quantize(k), fp8attn.quantize(v)
        kw = dict(q_descale=qd, k_descale=kd, v_descale=vd)
    flops = 4 * batch * HEADS * seqlen * seqlen * HEAD_DIM / (2 if causal else 1)
    lens = torch.full((batch,), seqlen, dtype=torch.int32)
    cu = torch.cat([torch.zeros(1, dtype=torch.int32), lens.cumsum(0).to(torch.int32)]).cuda()
    qp, kp, vp = (t.reshape(batch * seqlen, HEADS, HEAD_DIM) for t in (q, k, v))
    kernels = fp8attn.list_kernels()
    name = triton_instance(kernels, dtype, causal)
    # The instance the library's varlen call takes (the tuning table's varlen rows, else the manifest order).
    pick = fp8attn.select_kernel_varlen(qp, kp, vp, cu, cu, seqlen, seqlen, causal=causal, **kw)
    rec = {"dtype": dtype, "causal": causal, "batch": batch, "seqlen": seqlen, "varlen_instance": pick,
           "triton_instance": name}
    calls = [("dense", lambda: fp8attn.fmha_fwd(q, k, v, causal=causal, **kw)),
             ("varlen", lambda: fp8attn.fmha_fwd_varlen(qp, kp, vp, cu, cu, seqlen, seqlen, causal=causal, **kw)),
             ("triton_dense", lambda: fp8attn.fmha_fwd(q, k, v, causal=causal, kernel_name=name, **kw)),
             ("triton_varlen", lambda: fp8attn.fmha_fwd_varlen(qp, kp, vp, cu, cu, seqlen, seqlen, causal=causal,
                                                               kernel_name=name, **kw))]
    # Each ratio's two calls timed interleaved (samples alternating), so that the machine's drift during the run
    # lands on both alike (timed one after the other, the same point moved by up to 4% between runs).
    for pair in (calls[:2], calls[2:]):
        try:
            times = bvc.time_cuda_interleaved([fn for _, fn in pair], args)
            for (label, _), ms in zip(pair, times):
                rec[label] = flops / (ms * 1e-3) / 1e12
        except Exception:  # noqa: BLE001 - a row, not a crash
            for label, fn in pair:  # one at a time, so that a failing call does not hide the other's time
                try:
                    rec[label] = flops / (bvc.time_cuda(fn, args) * 1e-3) / 1e12
                except Exception as e1:  # noqa: BLE001
                    rec[label] = None
                    rec[f"{label}_failure"] = f"{type(e1).__name__}: {e1}"[:200]
    for ratio, num, den in (("varlen_vs_dense", "varlen", "dense"), ("triton_varlen_vs_dense", "triton_varlen",
                                                                      "triton_dense")):
        if rec.get(num) and rec.get(den):
            rec[ratio] = rec[num] / rec[den]
    if args.instances:
        names = [kk["name"] for kk in kernels if kk["family"] == "gluon" and kk["varlen"] and kk["qk_type"] == dtype
                 and kk["head_dim"] == HEAD_DIM and kk["causal"] == causal]
        for n in names:
            forced = (lambda n=n: fp8attn.fmha_fwd_varlen(qp, kp, vp, cu, cu, seqlen, seqlen, causal=causal,
                                                         kernel_name=n, **kw))
            try:
                dense_ms, ms = bvc.time_cuda_interleaved([calls[0][1], forced], args)
                rec[f"instance:{n}"] = dense_ms / ms
            except Exception as e:  # noqa: BLE001 - a row, not a crash
                rec[f"instance:{n}"] = f"{type(e).__name__}: {e}"[:200]
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default="")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--target-ms", type=float, default=20.0)
    ap.add_argument("--instances", action="store_true", help="also every Gluon _varlen instance by name")
    args = ap.parse_args()
    rows = []
    print(f"{'dtype':>5} {'causal':>6} {'B x S':>10} {'dense':>7} {'varlen':>7} {'ratio':>6}   {'triton dense':>12} "
          f"{'varlen':>7} {'ratio':>6}   varlen instance")
    for dtype in ("e4m3", "bf16"):
        for causal in (False, True):
            for batch, seqlen in CASES:
                r = run(dtype, causal, batch, seqlen, args)
                rows.append(r)
                cell = lambda key, w: f"{r[key]:>{w}.0f}" if r.get(key) else f"{'-':>{w}}"  # noqa: E731
                ratio = lambda key: f"{r[key]:>6.3f}" if r.get(key) else f"{'-':>6}"  # noqa: E731
                print(f"{dtype:>5} {int(causal):>6} {f'{batch}x{seqlen}':>10} {cell('dense', 7)} {cell('varlen', 7)} "
                      f"{ratio('varlen_vs_dense')}   {cell('triton_dense', 12)} {cell('triton_varlen', 7)} "
                      f"{ratio('triton_varlen_vs_dense')}   {r['varlen_instance']}", flush=True)
                for key, val in r.items():
                    if key.startswith("instance:"):
                        shown = f"{val:.3f}" if isinstance(val, float) else val
                        print(f"{'':>24} {shown:>7} of dense   {key[len('instance:'):]}", flush=True)
    if args.csv:
        bvc.write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
