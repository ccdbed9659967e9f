"""Ahead-of-time compile of one manifest instance to a cubin, on a machine with or without a GPU.

    python codegen/aot_compile.py --name <kernel name> --out <dir> [--dump sass|ptx|ttgir|llir]

Writes <out>/<name>.cubin, .json (metadata and kernel parameter list), .ptx, .ttgir and <name>.cpp (the
cubin embedded as a KernelInstance for the C++ registry). An instance is recompiled only when its cache
key (kernel sources, this compiler's sources, configuration, Triton version) changed. FP8 instances must
contain QGMMA (FP8 wgmma) in their SASS, or the build fails: HMMA alone means a slow path.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "kernels"))

import manifest  # noqa: E402
from kernel_name import FmhaConfig, TransposeConfig  # noqa: E402
from kernel_signature import kernel_signature  # noqa: E402

PINNED_TRITON = "3.6.0"
TARGET_ARCH = 90


def cache_key(name, config, triton_version):
    h = hashlib.sha256()
    for path in sorted(list((ROOT / "kernels").glob("*.py")) + list(HERE.glob("*.py"))):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(repr(config).encode())
    h.update(name.encode())
    h.update(triton_version.encode())
    return h.hexdigest()


def cuobjdump():
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def sass_of(cubin_path):
    return subprocess.run([str(cuobjdump()), "-sass", str(cubin_path)], check=True, capture_output=True,
                          text=True).stdout


def ptx_params(ptx, function):
    """Types of the .entry parameters in order, e.g. ['u64', 'u32', 'f32', ...]."""
    m = re.search(rf"\.entry\s+{re.escape(function)}\s*\((.*?)\)", ptx, re.S)
    if not m:
        raise RuntimeError(f"no .entry {function} in the PTX")
    return re.findall(r"\.param\s+\.(\w+)", m.group(1))


def compile_instance(name, out_dir):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if triton.__version__ != PINNED_TRITON:
        raise SystemExit(f"triton=={triton.__version__} found; fp8attn compiles with triton=={PINNED_TRITON} "
                         "(cubin metadata and parameter expansion change between releases)")
    config = manifest.find(name)
    sig = kernel_signature(config)
    src = ASTSource(fn=sig.fn, signature=sig.signature, constexprs=sig.constexprs, attrs=sig.attrs)
    options = {"num_warps": sig.num_warps, "num_stages": sig.num_stages}
    compiled = triton.compile(src, target=GPUTarget("cuda", TARGET_ARCH, 32), options=options)
    md = compiled.metadata

    if md.profile_scratch_size:
        raise RuntimeError(f"{name}: needs profile scratch ({md.profile_scratch_size} B); not supported")
    cubin_path = out_dir / f"{name}.cubin"
    cubin_path.write_bytes(compiled.asm["cubin"])
    (out_dir / f"{name}.ptx").write_text(compiled.asm["ptx"])
    (out_dir / f"{name}.ttgir").write_text(compiled.asm["ttgir"])
    (out_dir / f"{name}.llir").write_text(compiled.asm["llir"])

    sass = sass_of(cubin_path)
    mma = {op: len(re.findall(rf"\b{op}\b", sass)) for op in ("QGMMA", "HGMMA", "HMMA")}
    if isinstance(config, FmhaConfig) and config.is_fp8 and mma["QGMMA"] == 0:
        raise RuntimeError(f"{name}: no QGMMA in SASS ({mma}); the FP8 dots fell back to a slow path")

    params = ptx_params(compiled.asm["ptx"], md.name)
    expected = sig.param_types + ["u64", "u64"]  # + global scratch, profile scratch (hidden)
    if params != expected:
        raise RuntimeError(f"{name}: kernel parameters {params} differ from the launcher's {expected}")

    meta = {
        "name": name,
        "function": md.name,
        "kind": "fmha_fwd" if isinstance(config, FmhaConfig) else "transpose_v",
        "config": config.__dict__,
        "num_warps": md.num_warps,  # warps launched (warp specialization adds partitions)
        "num_ctas": md.num_ctas,
        "shared": md.shared,
        "global_scratch_size": md.global_scratch_size,
        "global_scratch_align": md.global_scratch_align,
        "triton_version": triton.__version__,
        "params": sig.param_names,
        "param_types": params,
        "divisible_by_16": sig.divisible_names,
        "sass_mma_counts": mma,
    }
    (out_dir / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def emit_cpp(meta, cubin, out_path):
    """The instance as C++: cubin bytes plus a KernelInstance record (see src/kernel_instance.h)."""
    c = meta["config"]
    cname = meta["name"]
    hex_rows = []
    for i in range(0, len(cubin), 24):
        hex_rows.append("  " + "".join(f"0x{b:02x}," for b in cubin[i:i + 24]))
    if meta["kind"] == "fmha_fwd":
        fields = (f"KernelKind::kFmhaFwd, {c['head_dim']}, {c['block_m']}, {c['block_n']}, {c['warps']}, "
                  f"{c['stages']}, {str(c['causal']).lower()}, {str(c['warp_specialized']).lower()}, "
                  f"{str(c['even_n']).lower()}, \"{c['qk_type']}\", \"{c['v_type']}\", \"{c['acc_type']}\", "
                  f"\"{c['out_type']}\"")
    else:
        fields = (f"KernelKind::kTransposeV, {c['head_dim']}, {c['block_s']}, 0, {c['warps']}, 0, false, false, "
                  f"false, \"{c['dtype']}\", \"{c['dtype']}\", \"\", \"{c['dtype']}\"")
    out_path.write_text(
        "// Generated by codegen/aot_compile.py from the manifest. Do not edit; do not commit.\n"
        '#include "kernel_instance.h"\n\n'
        "namespace fp8attn::detail {\nnamespace {\n"
        f"alignas(16) const unsigned char kCubin[] = {{\n" + "\n".join(hex_rows) + "\n};\n}  // namespace\n\n"
        f"extern const KernelInstance kInstance_{cname};\n"
        f"const KernelInstance kInstance_{cname} = {{\n"
        f"  \"{cname}\", \"{meta['function']}\", kCubin, sizeof(kCubin),\n"
        f"  {meta['num_warps']}, {meta['shared']}, {meta['global_scratch_size']}, "
        f"{meta['global_scratch_align']},\n  {fields}}};\n\n"
        "}  // namespace fp8attn::detail\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", required=True, help="kernel instance name (see codegen/list_instances.py)")
    ap.add_argument("--out", required=True, type=Path, help="output folder")
    ap.add_argument("--dump", choices=["sass", "ptx", "ttgir", "llir"], help="print this form after compiling")
    ap.add_argument("--force", action="store_true", help="recompile even if the cache key is unchanged")
    args = ap.parse_args()
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # compile for sm_90 without touching any GPU here
    args.out.mkdir(parents=True, exist_ok=True)

    import triton

    config = manifest.find(args.name)
    key = cache_key(args.name, config, triton.__version__)
    key_path = args.out / f"{args.name}.key"
    cpp_path = args.out / f"{args.name}.cpp"
    cubin_path = args.out / f"{args.name}.cubin"
    fresh = (not args.force and key_path.exists() and key_path.read_text() == key and cpp_path.exists()
             and cubin_path.exists())
    if fresh:
        print(f"[fp8attn] up to date: {args.name}")
    else:
        t0 = time.time()
        meta = compile_instance(args.name, args.out)
        emit_cpp(meta, cubin_path.read_bytes(), cpp_path)
        key_path.write_text(key)
        print(f"[fp8attn] compiled {args.name}: {meta['num_warps']} warps, {meta['shared']} B shared, "
              f"MMA {meta['sass_mma_counts']}, {time.time() - t0:.1f} s", flush=True)
    if args.dump == "sass":
        print(sass_of(cubin_path))
    elif args.dump:
        print((args.out / f"{args.name}.{args.dump}").read_text())


if __name__ == "__main__":
    main()
