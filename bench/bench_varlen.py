"""Varlen prefill (fp8attn.fmha_fwd_varlen, packed sequences) against the dense call at the same total work, issue
9's "within 5% of the dense kernel's TFLOP/s": B sequences of equal length S packed, vs the dense [B, S, H, D]
call forced onto the same Triton instance, and (FP8) the varlen call forced onto the Gluon instance against the
dense call's own pick (the Gluon kernel: the library does not pick it for varlen until this table says so). FP8
(quantized once, V transpose included in both) and BF16, D=128, H_q = H_kv = 32, causal and not.

    PYTHONPATH=build/python python3 bench/bench_varlen.py --csv out.csv

A benchmark, never a test: it prints a table and writes what --csv names.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_vs_cudnn as bvc  # noqa: E402  (time_cuda)

CASES = [(8, 4096), (2, 16384), (32, 1024)]  # (batch, seqlen): 32k tokens each
HEADS, HEAD_DIM = 32, 128


def varlen_instance(kernels, dtype, causal):
    """The instance a varlen call takes: the first in manifest order (the heuristic's preference) that runs packed
    sequences, i.e. a triton.language one without the warp-specialized even-N, V-natural or soft-capping
    specializations. (A window used to single it out, until the Gluon kernel took windows too.)"""
    return next(k["name"] for k in kernels if k["qk_type"] == dtype and k["head_dim"] == HEAD_DIM
                and k["causal"] == causal
                and not any(tag in k["name"] for tag in ("_gluon", "_evenn", "_ws", "_vnat", "_softcap")))


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
    name = varlen_instance(kernels, dtype, causal)
    # The Gluon FP8 instance the dense call picks first (manifest order: key-permuted V^T first).
    gluon = next((kk["name"] for kk in kernels if kk["family"] == "gluon" and kk["qk_type"] == dtype == "e4m3"
                  and kk["head_dim"] == HEAD_DIM and kk["causal"] == causal and "softcap" not in kk["name"]), None)
    rec = {"dtype": dtype, "causal": causal, "batch": batch, "seqlen": seqlen, "triton_instance": name,
           "gluon_instance": gluon or ""}
    calls = [("dense_best", lambda: fp8attn.fmha_fwd(q, k, v, causal=causal, **kw)),
             ("dense_same_instance", lambda: fp8attn.fmha_fwd(q, k, v, causal=causal, kernel_name=name, **kw)),
             ("varlen", lambda: fp8attn.fmha_fwd_varlen(qp, kp, vp, cu, cu, seqlen, seqlen, causal=causal, **kw))]
    if gluon:
        calls.append(("varlen_gluon", lambda: fp8attn.fmha_fwd_varlen(qp, kp, vp, cu, cu, seqlen, seqlen,
                                                                     causal=causal, kernel_name=gluon, **kw)))
    for label, fn in calls:
        try:
            rec[label] = flops / (bvc.time_cuda(fn, args) * 1e-3) / 1e12
        except Exception as e:  # noqa: BLE001 - a row, not a crash
            rec[label] = None
            rec[f"{label}_failure"] = f"{type(e).__name__}: {e}"[:200]
    if rec.get("varlen") and rec.get("dense_same_instance"):
        rec["varlen_vs_dense"] = rec["varlen"] / rec["dense_same_instance"]
    if rec.get("varlen_gluon") and rec.get("dense_best"):
        rec["varlen_gluon_vs_dense_best"] = rec["varlen_gluon"] / rec["dense_best"]
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default="")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--target-ms", type=float, default=20.0)
    args = ap.parse_args()
    rows = []
    print(f"{'dtype':>5} {'causal':>6} {'B x S':>10} {'dense (best)':>13} {'dense (same)':>13} {'varlen':>8} "
          f"{'ratio':>6} {'varlen gluon':>13} {'vs best':>8}")
    for dtype in ("e4m3", "bf16"):
        for causal in (False, True):
            for batch, seqlen in CASES:
                r = run(dtype, causal, batch, seqlen, args)
                rows.append(r)
                cell = lambda key: f"{r[key]:.0f}" if r.get(key) else "-"  # noqa: E731
                ratio = f"{r['varlen_vs_dense']:.3f}" if r.get("varlen_vs_dense") else "-"
                gratio = f"{r['varlen_gluon_vs_dense_best']:.3f}" if r.get("varlen_gluon_vs_dense_best") else "-"
                print(f"{dtype:>5} {int(causal):>6} {f'{batch}x{seqlen}':>10} {cell('dense_best'):>13} "
                      f"{cell('dense_same_instance'):>13} {cell('varlen'):>8} {ratio:>6} {cell('varlen_gluon'):>13} "
                      f"{gratio:>8}", flush=True)
    if args.csv:
        bvc.write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
