"""Variant sweep of the paged decode kernel through the JIT (device only): tile, pipeline depth, warps, split count
and register cap side by side on bench_decode.py's cases, each variant's output checked against the first
variant's before its time counts. Used to decide what goes into the manifest and the kernel.

    python3 bench/sweep_decode.py --variant n128s5=BLOCK_N=128,stages=5 --variant s7=BLOCK_N=128,stages=7

A variant is name=KEY=int,...: BLOCK_N, stages, warps, splits (0: the library's automatic choice, as
src/paged/paged.cpp plans it), target (with splits=0: split every case into target // programs, e.g. 396 for three
programs per SM, instead), maxnreg (0: none), gluon=1 (the Gluon kernel, kernels/paged/paged_decode_gluon.py: TMA
page loads from a producer warp; ROWS may be 8 there), per_sm (Gluon: launch at most per_sm programs per SM, each
walking work items persistently; 0: one program per work item), balance=1 (with per_sm: as few programs as give
every program the same number of items, +-1), and the kernel's switches by name (upper-case constexprs, e.g. NAME=1;
K_HEAD_MAJOR=1, with gluon=1, copies the K pages head-major for the kernel; only a variant after a plain first one
has its output checked). HEAD_PAIRS=1 (Gluon: two kv heads per work item) takes cases whose rows fit half of ROWS
and that need no split (the others print an error row): batch * heads_kv / 2 items; with PAIR_SPLITS=1 as well, the
pairs are split over the keys as one-head items would be (the split count from the pair items) and the combine
merges each head's partials. BALANCED_SPLITS=1 (Gluon): splits of the plan's iterations that differ by one at
most, where the library's splits all have the same number of pages but the last.
Effective read: bytes of K and V the call must read / time (bench_decode.py's measure).
"""

import argparse
import csv
import os
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "kernels"))
sys.path.insert(0, os.path.join(HERE, "..", "codegen"))

import bench_vs_cudnn as bvc  # noqa: E402  (time_cuda)
from bench_decode import CASES, HEAD_DIM  # noqa: E402  (one definition of the cases)
from operations.paged import gluon_vt_box  # noqa: E402  (the library's descriptor)
from paged.paged_decode_gluon import paged_decode_gluon_kernel as _gluon_kernel  # noqa: E402
from paged.paged_decode_triton import paged_combine_kernel  # noqa: E402
from paged.paged_decode_triton import paged_decode_kernel as _library_kernel  # noqa: E402

# Integer arguments equal to 1 (q_len, num_splits, a stride) are not specialized to constants (the kernel calls
# .to() on them; the library's build never specializes them). Pointers keep the JIT's 16-byte alignment
# specialization, which the library's build declares for the q, o, page and partial buffers: without it every
# cache load is 4 bytes wide (a first sweep read 0.96 TB/s that way). The JIT also sees i32 strides where the
# library passes i64 ones.
_INTS = ("q_len", "heads_q", "heads_kv", "num_pages", "max_pages", "pages_per_split", "num_splits", "row_chunks",
         "stride_qb", "stride_qs", "stride_qh", "stride_ob", "stride_os", "stride_oh", "descale_stride_page",
         "descale_stride_head", "window_left")
paged_decode_kernel = triton.jit(_library_kernel.fn, do_not_specialize=list(_INTS))
paged_decode_gluon_kernel = gluon.jit(_gluon_kernel.fn, do_not_specialize=list(_INTS))

DEFAULTS = {"BLOCK_N": 128, "stages": 5, "warps": 4, "splits": 0, "target": 0, "maxnreg": 0, "ROWS": 16, "gluon": 0,
            "per_sm": 0, "balance": 0}
# The library's automatic split choice (src/paged/paged.cpp: splits_of).
SPLIT_BELOW, TARGET_PROGRAMS, MIN_PAGES_PER_SPLIT = 132, 264, 4


def parse_variant(spec):
    name, _, rest = spec.partition("=")
    v = dict(DEFAULTS, **{k: int(x) for k, x in (kv.split("=") for kv in rest.split(",") if kv)})
    return name, v


def split_count(programs, pages, target=0):
    """Splits for `programs` unsplit programs over `pages` pages: the library's choice, or with a target, as many
    as bring the programs to it."""
    if not target:
        if programs >= SPLIT_BELOW:
            return 1
        target = TARGET_PROGRAMS
    return max(1, min(target // programs, pages // MIN_PAGES_PER_SPLIT, 256))


def make_inputs(case):
    name, batch, context, heads_q, heads_kv, q_len, page = case[:7]
    gen = torch.Generator(device="cuda").manual_seed(0)
    num_pages = batch * (context // page)
    def e4m3_bytes(shape):  # any sign, magnitudes below the NaN code 0x7F
        magnitude = torch.randint(0, 0x7E, shape, generator=gen, device="cuda", dtype=torch.uint8)
        return magnitude | (torch.randint(0, 2, shape, generator=gen, device="cuda", dtype=torch.uint8) << 7)

    k = e4m3_bytes((num_pages, page, heads_kv, HEAD_DIM))
    vt = e4m3_bytes((num_pages, heads_kv, HEAD_DIM, page))
    table = torch.randperm(num_pages, generator=gen, device="cuda").to(torch.int32).reshape(batch, -1)
    q = torch.randn((batch, q_len, heads_q, HEAD_DIM), generator=gen, device="cuda").to(torch.bfloat16)
    return {"k": k.view(torch.float8_e4m3fn), "vt": vt.view(torch.float8_e4m3fn), "table": table, "q": q,
            "seqlens": torch.full((batch,), context, dtype=torch.int32, device="cuda"),
            "kd": torch.full((heads_kv,), 0.02, device="cuda"), "vd": torch.full((heads_kv,), 0.01, device="cuda")}


def launcher(case, inp, v):
    name, batch, context, heads_q, heads_kv, q_len, page = case[:7]
    window = case[7] if len(case) > 7 else -1
    rows = q_len * heads_q // heads_kv
    chunks = (rows + v["ROWS"] - 1) // v["ROWS"]
    keys = context if window < 0 else min(context, window + q_len + v["BLOCK_N"] - 1)
    pages = (keys + page - 1) // page
    pair_splits = bool(v.get("PAIR_SPLITS"))
    # PAIR_SPLITS: the automatic count from the pair items (half the one-head programs), as the host would plan it.
    splits = v["splits"] or split_count(batch * heads_kv * chunks // (2 if pair_splits else 1), pages, v["target"])
    per_iter = max(1, v["BLOCK_N"] // page)
    per_split = max(1, (pages + splits - 1) // splits)
    pages_per_split = (per_split + per_iter - 1) // per_iter * per_iter
    if v.get("BALANCED_SPLITS"):  # the kernel's argument is then the plan's iterations of BLOCK_N keys
        pages_per_split = (keys + v["BLOCK_N"] - 1) // v["BLOCK_N"]
    programs = batch * heads_kv * chunks * splits
    partial_rows = programs * v["ROWS"]  # the combine's layout: per kv head, pairs or not
    if v.get("HEAD_PAIRS"):
        # kernels/paged/paged_decode_gluon.py HEAD_PAIRS: an item is a pair of kv heads, one row chunk, one split
        # (PAIR_SPLITS: any split count, each head's rows written to its own partials).
        if not v["gluon"] or heads_kv % 2 or 2 * rows > v["ROWS"] or (splits != 1 and not pair_splits):
            raise ValueError(f"HEAD_PAIRS needs the Gluon kernel, an even heads_kv ({heads_kv}), rows <= ROWS / 2 "
                             f"({rows} of {v['ROWS']}) and one split ({splits}) unless PAIR_SPLITS=1")
        programs //= 2
    q = inp["q"]
    out = torch.empty_like(q)
    part_o = torch.empty((partial_rows, HEAD_DIM), device="cuda", dtype=torch.float32)
    part_ml = torch.empty((partial_rows, 2), device="cuda", dtype=torch.float32)
    extra = {"maxnreg": v["maxnreg"]} if v["maxnreg"] else {}
    # The kernel's own switches (upper-case names other than the tile's), e.g. NAME=1.
    switches = {k: bool(x) for k, x in v.items() if k.isupper() and k not in ("BLOCK_N", "ROWS")}
    extra.update({"num_items": programs} if v["gluon"] else {})

    common = (inp["kd"], inp["vd"], inp["table"], inp["seqlens"], out, part_o, part_ml,
              HEAD_DIM ** -0.5, q_len, heads_q, heads_kv, inp["k"].shape[0], inp["table"].shape[1], pages_per_split,
              splits, chunks, q.stride(0), q.stride(1), q.stride(2), out.stride(0), out.stride(1), out.stride(2),
              0, 1, window, 0.0)
    if v["gluon"]:
        decode = gluon_decode(case, inp, v, programs, common, extra, switches)
    else:
        def decode():
            paged_decode_kernel[(programs,)](
                q, inp["k"], inp["vt"], *common,
                HEAD_DIM=HEAD_DIM, PAGE=page, ROWS=v["ROWS"], BLOCK_N=v["BLOCK_N"], **switches,
                num_warps=v["warps"], num_stages=v["stages"], **extra)

    def call():
        decode()
        if splits > 1:
            # As the library launches it: a programmatic dependent of the decode, waiting for its partials.
            paged_combine_kernel[(batch * heads_kv * chunks * v["ROWS"],)](
                part_o, part_ml, out, q_len, heads_q, heads_kv, splits, chunks,
                out.stride(0), out.stride(1), out.stride(2), HEAD_DIM=HEAD_DIM, ROWS=v["ROWS"], AFTER_DECODE=True,
                num_warps=4, launch_pdl=True)
        return out

    read = context if window < 0 else min(context, window + q_len)
    return call, 2 * batch * read * heads_kv * HEAD_DIM, splits


def gluon_decode(case, inp, v, programs, common, extra, switches):
    """The Gluon kernel's launch: the Triton kernel's arguments after its cache pointers, K and V^T read through
    two-dimensional TMA descriptors over the pages."""
    page, heads_kv = case[6], case[4]
    sub = min(page, v["BLOCK_N"])
    if switches.get("K_HEAD_MAJOR"):  # the same K bytes, pages head-major: [num_pages * heads_kv * page, D]
        k2 = inp["k"].view(torch.uint8).permute(0, 2, 1, 3).contiguous().view(torch.float8_e4m3fn).view(-1, HEAD_DIM)
    else:
        k2 = inp["k"].view(-1, heads_kv * HEAD_DIM)  # [num_pages * page, heads_kv * D]
    vt_box, vt_swizzle = gluon_vt_box(page, v["BLOCK_N"], HEAD_DIM)
    # V^T pages [num_pages * heads_kv * D, page]; an unswizzled box (pages of 16) reads rows of its own width.
    vt2 = inp["vt"].view(-1, vt_box[1] if vt_swizzle == 0 else page)
    k_desc = TensorDescriptor.from_tensor(k2, [sub, HEAD_DIM], gl.NVMMASharedLayout(128, 8, 2))
    vt_desc = TensorDescriptor.from_tensor(vt2, vt_box, gl.NVMMASharedLayout(vt_swizzle, 8, 2))

    grid = min(programs, v["per_sm"] * torch.cuda.get_device_properties(0).multi_processor_count) if v["per_sm"] \
        else programs
    if v["balance"]:
        grid = -(-programs // -(-programs // grid))

    def decode():
        paged_decode_gluon_kernel[(grid,)](
            k_desc, vt_desc, inp["q"], *common,
            HEAD_DIM=HEAD_DIM, PAGE=page, ROWS=v["ROWS"], BLOCK_N=v["BLOCK_N"], NUM_STAGES=v["stages"],
            num_warps=4, **switches, **extra)
    return decode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--cases", default="", help="comma-separated names of bench_decode.py's cases (default: all)")
    ap.add_argument("--csv", default="")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--target-ms", type=float, default=10.0)
    args = ap.parse_args()
    variants = [parse_variant(s) for s in args.variant]
    cases = [c for c in CASES if not args.cases or c[0] in args.cases.split(",")]
    records = []
    print("case".ljust(20) + "".join(n[:14].rjust(15) for n, _ in variants), flush=True)
    for case in cases:
        inp = make_inputs(case)
        ref, line = None, case[0].ljust(20)
        for name, v in variants:
            rec = {"case": case[0], "variant": name, **v}
            try:
                call, nbytes, splits = launcher(case, inp, v)
                got = call().float()
                torch.cuda.synchronize()
                if ref is None:
                    ref = got.clone()
                ok = torch.allclose(got, ref, rtol=2e-2, atol=2e-2) and bool(torch.isfinite(got).all())
                rec["splits_used"] = splits
                ms = bvc.time_cuda(call, args)
                rec["ms"], rec["tbps"] = ms, nbytes / (ms * 1e-3) / 1e12
                if not ok:  # timed all the same (a wrong kernel's speed still says whether its design is worth fixing)
                    rec["mismatch"] = float((got - ref).abs().nan_to_num(float("inf")).max())
                    print(f"  {case[0]} {name}: MISMATCH, max |diff| {rec['mismatch']:.3g} vs the first variant; "
                          f"{rec['tbps']:.2f} TB/s", flush=True)
                    rec["tbps"] = "MISMATCH"
            except Exception as e:  # noqa: BLE001 - a variant that does not compile or launch is a row, not an end
                rec["tbps"] = f"{type(e).__name__}: {e}"[:120]
            records.append(rec)
            t = rec["tbps"]
            line += (f"{t:15.2f}" if isinstance(t, float) else str(t)[:14].rjust(15))
        print(line, flush=True)
        del inp
        torch.cuda.empty_cache()
    if args.csv:
        keys = sorted({k for r in records for k in r}, key=lambda k: (k not in ("case", "variant"), k))
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(records)


if __name__ == "__main__":
    main()
