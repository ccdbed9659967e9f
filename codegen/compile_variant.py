"""Compile a kernel instance for sm_90, with constexpr overrides, on a machine without a GPU, and summarize its
SASS: what a kernel experiment can learn before it spends device time (spills, the registers each partition asks
for, the instructions of each loop).

    python codegen/compile_variant.py NAME [CONST=int ...] [--out DIR]

NAME: a manifest instance, or any attention name the fmha_fwd operation parses (e.g. a block shape the manifest
does not list yet). CONST=int overrides one of the instance's constexprs (e.g. NUM_STAGES=3, CONSUMER_REGS=104);
the kernel must take it. Shapes come from the name (the descriptors' boxes follow it): HEAD_DIM, BLOCK_N, BLOCK_M
and NUM_CONSUMERS are not overrides (BLOCK_M only with --kernel, for a kernel of other rows on the name's Q box).
--kernel FILE compiles FILE's kernel of the instance's function name and parameters instead of the library's.
--maxnreg N sets the registers a thread starts with. Writes DIR/NAME.sass and .ptx, and prints:

    shared, warps    from the compiled metadata
    setmaxnreg       the register counts the warp-specialized partitions request (SASS USETMAXREG)
    spills           local-memory loads and stores (LDL / STL), in the whole kernel
    loops            every loop's body (a predicated backward branch's): instructions, MMAs (wgmma), MUFU,
                     local-memory traffic; a consumer's key-tile loop is the innermost one with MMAs (every path
                     of its body counted once: the masked tiles' path is part of it)
    serialized       ptxas's C7512 message when it serialized the wgmma for lack of registers

Nothing here is a build output: the build (aot_compile.py) compiles only manifest instances, with their own
constexprs."""

import argparse
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "kernels"))

import manifest  # noqa: E402
from aot_compile import PINNED_TRITON, compile_kernel, kernel_spec, sass_of, wgmma_serialized  # noqa: E402
from operations import fmha_fwd, module_of  # noqa: E402
from sass_loops import instructions, loops  # noqa: E402


def config_of(name):
    try:
        return manifest.find(name)
    except KeyError:
        config = fmha_fwd.parse(name)
        if config is None:
            raise SystemExit(f"{name}: neither a manifest instance nor an attention name")
        return config


def summarize(sass):
    instrs = instructions(sass)
    ops = Counter(o.split(".")[0] for _, o, _ in instrs)
    maxreg = [(kind, int(m, 0)) for kind, m in re.findall(r"USETMAXREG\.(\w+)\S*\s+(?:U?P\w+,\s*)?(0x[0-9a-f]+|\d+)",
                                                          sass)]
    lines = [f"spills: {ops['LDL']} LDL, {ops['STL']} STL", f"setmaxnreg: {sorted(set(maxreg))}"]
    mma_ops = ("QGMMA", "HGMMA", "IGMMA")
    for start, end, body in loops(instrs):
        n = sum(body.values())
        mmas = sum(body[o] for o in mma_ops)
        if n < 8:
            continue
        lines.append(f"loop {start:#x}-{end:#x}: {n} instructions, {mmas} wgmma, {body['MUFU']} MUFU, "
                     f"{body['FFMA']} FFMA, {body['FADD'] + body['FMUL']} FADD/FMUL, "
                     f"{body['LDL'] + body['STL']} local")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("overrides", nargs="*", help="CONST=int")
    ap.add_argument("--maxnreg", type=int, default=None,
                    help="registers a thread at launch (e.g. 80: two 12-warp CTAs an SM); the instance's otherwise")
    ap.add_argument("--kernel", default=None,
                    help="a file defining a kernel of the instance's name with the instance's parameters (e.g. "
                         "kernels/fmha_fwd/fmha_fwd_gluon_solo.py); constexprs it does not take are dropped")
    ap.add_argument("--out", default=None, help="directory for the .sass and .ptx (default: a temporary one)")
    args = ap.parse_args()

    import triton

    if triton.__version__ != PINNED_TRITON:
        raise SystemExit(f"triton=={triton.__version__}; the build pins {PINNED_TRITON}")
    config = config_of(args.name)
    fn, params, types, constexprs, num_warps, num_stages, options = kernel_spec(config)
    function = module_of(config).kernel_of(config)[1]
    if args.kernel:
        import importlib.util

        spec = importlib.util.spec_from_file_location("variant_kernel", args.kernel)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, function)
        constexprs = {k: v for k, v in constexprs.items() if k in fn.arg_names}
    shapes = {"HEAD_DIM", "BLOCK_N", "NUM_CONSUMERS"} | ({"BLOCK_M"} if not args.kernel else set())
    for item in args.overrides:
        key, eq, value = item.partition("=")
        if not eq or not value.lstrip("-").isdigit():
            ap.error(f"{item!r}: an override is CONST=int")
        if key in shapes:
            ap.error(f"{key}: a shape comes from the name (its descriptors follow it); name the shape instead")
        if key not in constexprs:
            ap.error(f"{key}: not a constexpr of {function} "
                     f"(its constexprs: {', '.join(sorted(k for k in constexprs if k in fn.arg_names))})")
        constexprs[key] = int(value)
    if args.maxnreg:
        options = {**options, "maxnreg": args.maxnreg}
    compiled = compile_kernel(config, fn, params, types, constexprs, num_warps, num_stages, options)
    out = Path(args.out or tempfile.mkdtemp(prefix="variant_"))
    out.mkdir(parents=True, exist_ok=True)
    cubin = out / f"{args.name}.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    (out / f"{args.name}.ptx").write_text(compiled.asm["ptx"])
    sass = sass_of(cubin)
    (out / f"{args.name}.sass").write_text(sass)
    md = compiled.metadata
    print(f"{args.name} {' '.join(args.overrides)}")
    print(f"shared {md.shared} B, {md.num_warps} warps; SASS in {out}")
    for line in summarize(sass):
        print(line)
    serialized = wgmma_serialized(sass, compiled.asm["ptx"])
    print(f"serialized: {serialized or 'no'}")


if __name__ == "__main__":
    main()
