"""Variant sweep of the quantize kernels through the JIT (device only, no build): versions of
kernels/quantize/quantize_triton.py and constexpr settings side by side on the recipes the accuracy modes run, each
variant's output, descales and mean checked byte for byte against the first variant's (a variant that differs is
still timed, its verdict beside the time says what differs and by how much; one that fails to compile or launch
reads FAILED with the error's first line and is left out of the timing, the others go on).

    python3 bench/sweep_quantize.py --variant lib=kernels/quantize/quantize_triton.py \
        --variant hf=kernels/quantize/quantize_triton.py:HEADS_FASTEST=1 [--csv out.csv]

A variant is name=path[:CONST=int,...]; the constants go to the stats and apply kernels (each takes those it
declares), except PERSISTENT=n (the apply's persistent variant with n programs per SM), WARPS=w (the stats and apply
launches' warps, 4 by default, 8 at head_dim 256) and MAXNREG=r (the apply's register cap, ptxas's .maxnreg: 168
lets three 128-thread programs share an SM's registers). The launches mirror src/quant/quantize.cpp: 64-token blocks, 4 warps (8 at head_dim 256), the rotation
table once, stats and reduce where the recipe needs them. Timed interleaved (bench_vs_cudnn.time_cuda_interleaved):
the apply launch alone, and the whole quantization (stats, reduce and apply; the rotation table is built once per
call by the library too and is included). GB/s counts the apply's bf16 read and its 1-byte write.

A variant whose path is kernels/quantize/quantize_apply_gluon.py (or a copy defining quantize_apply_gluon_kernel)
runs that Gluon apply where it applies (the [b, s, h, d] output at head dims 64 and 128: the Q and K recipes) and
quantize_triton.py's stages everywhere else (stats, reduce, the rotation table; V^T's apply): CTAS=n its programs an
SM (by default the library's: as many as its shared memory lets an SM hold, at most 4), NUM_STAGES its ring
of input blocks and OUT_BUFFERS its output blocks in shared memory (by default the library's). Its rows read "gluon"
or "triton" in the kernel column.
"""

import argparse
import importlib.util
import os
import sys

import torch
import triton
from triton.experimental import gluon

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "kernels"))

import bench_vs_cudnn as bvc  # noqa: E402  (time_cuda_interleaved)
from bench_quantize_instances import RECIPES, SHAPES  # noqa: E402  (the recipes and shapes of the modes)
from common.numerics import DESCALE_BLOCK_TOKENS as BLOCK_S  # noqa: E402
from common.numerics import E4M3_MAX, INT8_QMAX, ROTATION_TABLE_MAX_HEAD_DIM  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "codegen"))
from operations.quantize import APPLY_PARAMS, GLUON_APPLY_PARAMS, REDUCE_PARAMS, STATS_PARAMS  # noqa: E402
# The library's Gluon apply: its ring, its output buffers and its grid.
from operations.quantize import GLUON_APPLY_OUT_BUFFERS, GLUON_APPLY_STAGES, gluon_apply_programs_per_sm  # noqa: E402

POINTERS = {p.name for p in APPLY_PARAMS + STATS_PARAMS + REDUCE_PARAMS if p.kind == "ptr"}

VT_ALIGN = 32  # include/fp8attn/fmha/device/transpose_v.h's kVtSeqAlign
DEVICE = "cuda"


def as_compiled(kernel, params):
    """The kernel re-jitted so that the JIT specializes its arguments as the ahead-of-time build does: no i32 argument
    becomes a constant when it is 1 (the JIT's default would compile the rotate / smooth / per_block branches out)
    and only the pointers and integers codegen declares divisible by 16 are assumed aligned."""
    loose = [p.name for p in params if p.name in kernel.arg_names and not p.divisible_by_16]
    return triton.jit(kernel.fn, do_not_specialize=[p for p in loose if p not in POINTERS],
                      do_not_specialize_on_alignment=[p for p in loose if p in POINTERS])


# The Gluon apply's run-time integers, none specialized (the build never does: `rotate` and the others equal to 1
# would otherwise compile their branches out).
GLUON_APPLY_INTS = [p.name for p in GLUON_APPLY_PARAMS if p.kind == "i32"]
LIBRARY_KERNELS = os.path.join(HERE, "..", "kernels", "quantize", "quantize_triton.py")


def load_module(name, path):
    module_spec = importlib.util.spec_from_file_location(f"quantize_variant_{name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def load_variant(spec):
    name, rest = spec.split("=", 1)
    path, _, consts = rest.partition(":")
    module = load_module(name, path)
    gluon_apply = getattr(module, "quantize_apply_gluon_kernel", None)
    if gluon_apply is not None:
        # The Gluon apply; every other stage (and the applies it does not cover) from the library's Triton file.
        module = load_module(f"{name}_triton", LIBRARY_KERNELS)
        module.gluon_apply = gluon.jit(gluon_apply.fn, do_not_specialize=GLUON_APPLY_INTS)
    for kernel_name, params in (("quantize_apply_kernel", APPLY_PARAMS), ("quantize_stats_kernel", STATS_PARAMS),
                                ("quantize_reduce_kernel", REDUCE_PARAMS)):
        setattr(module, kernel_name, as_compiled(getattr(module, kernel_name), params))
    return name, module, {k: int(v) for k, v in (kv.split("=") for kv in consts.split(",") if kv)}


SMS = None  # the device's SM count, once


def programs_per_sm_grid(items, per_sm):
    global SMS
    if SMS is None:
        SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 4
    return min(items, per_sm * SMS)


def accepted(kernel, consts):
    """The constants this kernel declares (a variant's switch may exist in one kernel only); PERSISTENT as a
    switch (its value is the grid's programs per SM)."""
    out = {k: v for k, v in consts.items() if k in kernel.arg_names and k not in ("WARPS", "MAXNREG")}
    if "PERSISTENT" in out:
        out["PERSISTENT"] = bool(out["PERSISTENT"])
    return out


class Quantization:
    """One recipe on one input: the launches of src/quant/quantize.cpp for a variant's module."""

    def __init__(self, x, recipe):
        self.x, self.r = x, recipe
        b, s, h, d = x.shape
        self.vt = recipe.get("layout") == "vt_kperm"
        self.seqlen_pad = triton.cdiv(s, VT_ALIGN) * VT_ALIGN
        self.blocks = triton.cdiv(self.seqlen_pad if self.vt else s, BLOCK_S)
        self.bh = b * h
        self.warps = 8 if d == 256 else 4
        self.int8 = recipe["dtype"] == "int8"
        self.group = {"tensor": self.bh, "block": 1}[recipe["granularity"]]
        dev = x.device
        self.rotation = torch.empty(d * d if d <= ROTATION_TABLE_MAX_HEAD_DIM else 1, dtype=x.dtype, device=dev)
        self.mean = torch.zeros(self.bh * d, dtype=torch.float32, device=dev)
        self.sums = torch.empty(self.bh * self.blocks * d, dtype=torch.float32, device=dev)
        self.amax = torch.empty(self.bh * self.blocks, dtype=torch.float32, device=dev)
        n_descale = self.bh * self.blocks if recipe["granularity"] == "block" else self.bh // self.group
        self.descale = torch.empty(n_descale, dtype=torch.float32, device=dev)
        # Typed as the kernel's Out (the JIT takes the pointer's element type from the tensor).
        out_type = torch.int8 if self.int8 else torch.float8_e4m3fn
        shape = (b, h, d, self.seqlen_pad) if self.vt else (b, s, h, d)
        self.out = torch.empty(shape, dtype=out_type, device=dev)
        # The apply's bytes: bf16 in, one byte out.
        self.bytes = x.numel() * x.element_size() + self.out.numel()

    def _common(self):
        b, s, h, d = self.x.shape
        xs = self.x.stride()
        return dict(seqlen=s, heads=h, num_blocks=self.blocks, seed=self.r.get("seed", 0),
                    rotate=int(self.r.get("rotate", False)), smooth=int(self.r.get("smooth", False)),
                    stride_xb=xs[0], stride_xh=xs[2], stride_xs=xs[1], HEAD_DIM=d, BLOCK_S=BLOCK_S)

    def statistics(self, module, consts):
        """The rotation table, then the mean (smoothing) and the per-tensor amax, as the recipe needs them."""
        b, s, h, d = self.x.shape
        c = self._common()
        grid = (self.bh * self.blocks,)
        rotate = self.r.get("rotate", False) and d <= ROTATION_TABLE_MAX_HEAD_DIM
        if rotate:
            module.quantize_rotation_kernel[(1,)](self.rotation, d, c["seed"], WIDTH=ROTATION_TABLE_MAX_HEAD_DIM,
                                                  ROWS=16, num_warps=4)
        qmax = INT8_QMAX if self.int8 else E4M3_MAX
        stats = module.quantize_stats_kernel
        extra = accepted(stats, consts)
        if "sample_stride" in stats.arg_names:  # every block (recipes with a sampled mean are skipped in main)
            extra["sample_stride"] = 1
        if self.r.get("smooth"):
            stats[grid](self.x, self.mean, self.rotation, self.sums, self.amax, what=0, **c, **extra,
                        num_warps=consts.get("WARPS", self.warps))
            module.quantize_reduce_kernel[(self.bh,)](self.sums, self.mean, self.blocks, d, float(s), qmax, c["seed"],
                                                      c["rotate"], WIDTH=256, CHUNK=1024, num_warps=4)
        if self.r["granularity"] != "block":
            stats[grid](self.x, self.mean, self.rotation, self.sums, self.amax, what=1, **c, **extra,
                        num_warps=consts.get("WARPS", self.warps))
            module.quantize_reduce_kernel[(self.bh // self.group,)](self.amax, self.descale, self.group * self.blocks,
                                                                    1, 0.0, qmax, 0, 0, WIDTH=256, CHUNK=1024,
                                                                    num_warps=4)

    def gluon_covers(self, module):
        """Whether the variant's Gluon apply takes this recipe (the [b, s, h, d] output at head dims 64 and 128)."""
        return getattr(module, "gluon_apply", None) is not None and not self.vt and self.x.shape[3] in (64, 128)

    def apply_gluon(self, module, consts):
        """The Gluon apply: TMA descriptors over x and the output ([b, s, h, d], a 64-token box of one head), a
        persistent grid of CTAS programs an SM."""
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        b, s, h, d = self.x.shape
        if getattr(self, "_gluon_descs", None) is None:
            self._gluon_descs = (
                TensorDescriptor.from_tensor(self.x, [1, BLOCK_S, 1, d], gl.NVMMASharedLayout(
                    swizzle_byte_width=128, element_bitwidth=16, rank=4)),
                TensorDescriptor.from_tensor(self.out, [1, BLOCK_S, 1, d], gl.NVMMASharedLayout(
                    swizzle_byte_width=min(128, d), element_bitwidth=8, rank=4)))
        items = self.bh * self.blocks
        stages = consts.get("NUM_STAGES", GLUON_APPLY_STAGES)
        out_buffers = consts.get("OUT_BUFFERS", GLUON_APPLY_OUT_BUFFERS)
        grid = (programs_per_sm_grid(items, consts.get("CTAS", gluon_apply_programs_per_sm(d, stages, out_buffers))),)
        c = self._common()
        module.gluon_apply[grid](*self._gluon_descs, self.descale, self.mean, self.rotation, c["seqlen"], c["heads"],
                                 self.blocks, c["rotate"], c["smooth"], int(self.r["granularity"] == "block"),
                                 self.group, items, HEAD_DIM=d, BLOCK_S=BLOCK_S, OUT_INT8=self.int8,
                                 NUM_STAGES=stages, OUT_BUFFERS=out_buffers, num_warps=4)

    def apply(self, module, consts):
        if self.gluon_covers(module):
            return self.apply_gluon(module, consts)
        apply = module.quantize_apply_kernel
        if self.vt:
            so = dict(stride_ob=0, stride_oh=0, stride_os=0)
        else:
            os_ = self.out.stride()
            so = dict(stride_ob=os_[0], stride_oh=os_[2], stride_os=os_[1])
        items = self.bh * self.blocks
        extra = dict(num_items=items) if "num_items" in apply.arg_names else {}
        per_sm = consts.get("PERSISTENT", 0)
        grid = (programs_per_sm_grid(items, per_sm) if per_sm else items,)
        apply[grid](self.x, self.out, self.descale, self.mean, self.rotation,
                    per_block=int(self.r["granularity"] == "block"), group=self.group, seqlen_pad=self.seqlen_pad,
                    vt=int(self.vt), **extra, **self._common(), **so, OUT_INT8=self.int8, KEY_PERMUTED=self.vt,
                    **accepted(apply, consts), num_warps=consts.get("WARPS", self.warps),
                    **({"maxnreg": consts["MAXNREG"]} if "MAXNREG" in consts else {}))

    def run(self, module, consts):
        self.statistics(module, consts)
        self.apply(module, consts)

    def poison(self, out_byte):
        """Every buffer a stage writes set to what no stage writes (the output to out_byte, the float ones to NaN),
        so that a variant that leaves one unwritten, or reads one before it is written, cannot match."""
        self.out.view(torch.uint8).fill_(out_byte)
        for t in (self.descale, self.mean, self.sums, self.amax):
            t.fill_(float("nan"))

    def results(self):
        """Every buffer's bytes (NaN compares by its bits): output, descales, mean and the stats' partials."""
        return [t.view(torch.uint8).clone() for t in (self.out, self.descale, self.mean, self.sums, self.amax)]


def check_variants(q, variants):
    """'same' or 'DIFFERS' per variant: every buffer's bytes against the first variant's, each run on freshly poisoned
    buffers; the first variant also runs on output poisoned another way (0x00, then 0x7F), which must not show: an
    output byte it leaves unwritten reads 'UNWRITTEN' for every variant."""
    def run(module, consts, out_byte):
        q.poison(out_byte)
        q.run(module, consts)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return q.results()

    _, module0, consts0 = variants[0]
    reference = run(module0, consts0, 0x7F)
    if not all(torch.equal(a, b) for a, b in zip(reference, run(module0, consts0, 0x00))):
        return ["UNWRITTEN"] * len(variants)
    verdicts = []
    for _, module, consts in variants:
        try:
            verdicts.append(_verdict(reference, run(module, consts, 0x7F)))
        except Exception as e:  # noqa: BLE001  (a variant that does not compile or launch; the others go on)
            verdicts.append(f"FAILED({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})")
    return verdicts


def _verdict(reference, got):
    """'same', or 'DIFFERS' with what differs: the output's differing bytes (and, read as int8, the largest
    difference: 1 is a rounding tie decided the other way) and which other buffers differ."""
    if all(torch.equal(a, b) for a, b in zip(reference, got)):
        return "same"
    out_ref, out_got = reference[0], got[0]
    n = int((out_ref != out_got).sum())
    worst = int((out_ref.view(torch.int8).int() - out_got.view(torch.int8).int()).abs().max()) if n else 0
    others = [name for name, a, b in zip(("descale", "mean", "sums", "amax"), reference[1:], got[1:])
              if not torch.equal(a, b)]
    return f"DIFFERS(out {n} B, int8 |d| <= {worst}" + (f"; {','.join(others)}" if others else "") + ")"


def time_some(fns, indices, args):
    """bench_vs_cudnn.time_cuda_interleaved over fns[i] for i in indices; inf for the others."""
    ms = [float("inf")] * len(fns)
    for i, t in zip(indices, bvc.time_cuda_interleaved([fns[i] for i in indices], args)):
        ms[i] = t
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--csv", default="")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--target-ms", type=float, default=20.0)
    args = ap.parse_args()
    variants = [load_variant(v) for v in args.variant]
    rows = []
    print(f"{'variant':>10} {'shape':>18} {'recipe':>8} {'apply_us':>9} {'GB/s':>7} {'total_us':>9}  check",
          flush=True)
    torch.manual_seed(0)
    for b, s, h, d in SHAPES:
        x = torch.randn(b, s, h, d, device=DEVICE, dtype=torch.bfloat16)
        x[:, :, : h // 4] *= 8.0  # some heads with larger values: per-head, per-block descales differ
        for rname, recipe in RECIPES.items():
            if recipe["granularity"] not in ("tensor", "block") or recipe.get("smooth_sample_stride", 1) != 1:
                # Launches this script does not replay (the 128-token pair apply, a sampled mean): timed by
                # bench_quantize_instances.py through the library instead.
                print(f"{'':>10} {str((b, s, h, d)):>18} {rname:>8} skipped: not replayed here", flush=True)
                continue
            q = Quantization(x, recipe)
            checks = check_variants(q, variants)
            # Variants that FAILED are left out of the timing (their rows read 0).
            timed = [i for i, c in enumerate(checks) if not c.startswith("FAILED")]
            apply_ms = time_some([lambda m=m, c=c: q.apply(m, c) for _, m, c in variants], timed, args)
            total_ms = time_some([lambda m=m, c=c: q.run(m, c) for _, m, c in variants], timed, args)
            for (name, module, _), a_ms, t_ms, check in zip(variants, apply_ms, total_ms, checks):
                ok = check == "same" or check.startswith("DIFFERS(")  # shown with the verdict beside it
                shape = f"{b}x{s}x{h}x{d}"
                gbs = q.bytes / (a_ms * 1e-3) / 1e9
                kernel = "gluon" if q.gluon_covers(module) else "triton"
                print(f"{name:>10} {shape:>18} {rname:>8} {a_ms * 1e3 if ok else 0:>9.1f} {gbs if ok else 0:>7.0f} "
                      f"{t_ms * 1e3 if ok else 0:>9.1f}  {check} {kernel}", flush=True)
                rows.append(dict(variant=name, batch=b, seqlen=s, heads=h, head_dim=d, recipe=rname,
                                 apply_us=a_ms * 1e3 if ok else 0.0, apply_gbs=gbs if ok else 0.0,
                                 total_us=t_ms * 1e3 if ok else 0.0, check=check, kernel=kernel))
            del q
        del x
        torch.cuda.empty_cache()
    if args.csv:
        bvc.write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
