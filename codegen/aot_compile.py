"""Ahead-of-time compile of one manifest instance to a cubin, on a machine with or without a GPU.

    python codegen/aot_compile.py --name <kernel name> --out <dir> [--dump sass|ptx|ttgir|llir]

Writes <out>/<name>.cubin, .json (metadata and kernel parameter list), .ptx, .ttgir, .llir and <name>.cpp
(the cubin embedded as a KernelInstance for the C++ registry). The instance's operation module
(operations/) gives its kernel, parameters and checks; its family module (families/) compiles it. An
instance is recompiled only when its cache key changed: its own kernel module and what that imports, the
compiler code it goes through, its configuration and the Triton version. Each operation checks the SASS
(FP8 attention must contain QGMMA), and the PTX parameter list must equal the declared one.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "kernels"))

import manifest  # noqa: E402
import params as kernel_params  # noqa: E402
from families import FAMILIES  # noqa: E402
from operations import module_of  # noqa: E402

PINNED_TRITON = "3.6.0"
TARGET_ARCH = 90


def kernel_sources(module_name):
    """The kernel module's file and, transitively, every module under kernels/ it imports (read with ast, so
    the key is computed without importing Triton). Editing one kernel recompiles only its own instances."""
    import ast

    root = ROOT / "kernels"
    seen, todo = [], [module_name]
    while todo:
        name = todo.pop()
        path = root / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = root / name.replace(".", "/") / "__init__.py"
        if not path.exists() or path in seen:
            continue  # not ours (triton, the standard library)
        seen.append(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                todo.append(node.module)
                todo += [f"{node.module}.{a.name}" for a in node.names]  # "from pkg import module"
    return sorted(seen)


def cache_key(name, config, triton_version):
    """What an instance's cubin depends on: its kernel sources, the compiler's own code, its configuration."""
    operation = module_of(config)
    module_name = operation.kernel_of(config)[0]
    compiler = [Path(__file__), HERE / "params.py", Path(operation.__file__),
                Path(FAMILIES[config.family].__file__)]
    h = hashlib.sha256()
    for path in kernel_sources(module_name) + compiler:
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    h.update(repr(config).encode())
    h.update(name.encode())
    h.update(triton_version.encode())
    h.update(consan_mode(config).encode())  # an instrumented cubin is a different build output
    return h.hexdigest()


def consan_mode(config):
    """"consan" when FP8ATTN_CONSAN=1 asks for Triton's concurrency sanitizer and the instance is a Gluon kernel
    (the checks are for its hand-written mbarrier/TMA protocol; an instrumented triton.language kernel would also
    want global scratch its launcher does not allocate), else ""."""
    return "consan" if os.environ.get("FP8ATTN_CONSAN") == "1" and config.family == "gluon" else ""


def cuobjdump():
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def sass_of(cubin_path):
    return subprocess.run([str(cuobjdump()), "-sass", str(cubin_path)], check=True, capture_output=True,
                          text=True).stdout


def ptxas():
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"


def wgmma_one_per_group(sass):
    """True when every wgmma of the SASS is a group of its own (each HGMMA/QGMMA/IGMMA carries gsb0, between a
    WARPGROUP.ARRIVE and a DEPBAR): each MMA waits for the one before. The Gluon instances close a group at most every
    third instruction; some triton.language instances have this shape by Triton's own lowering."""
    mmas = [line for line in sass.splitlines() if re.search(r"\b[QHI]GMMA\.", line)]
    return len(mmas) > 1 and all("gsb0" in line for line in mmas)


def wgmma_serialized(sass, ptx):
    """ptxas's message when it serialized the kernel's wgmma for lack of registers (C7512), else "". Triton
    discards ptxas's messages on success, and a serialized kernel passes every test, only slower (BF16 D=256 with
    three quarters of Q in registers, 2026-12-05). ptxas runs again only on SASS of that shape."""
    if not wgmma_one_per_group(sass):
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        run = subprocess.run([str(ptxas()), f"-arch=sm_{TARGET_ARCH}a", "-v", str(src), "-o", str(Path(tmp) / "k.o")],
                             capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"ptxas failed on the kernel's PTX: {run.stderr[-2000:]}")
    log = run.stderr
    return "\n".join(line for line in log.splitlines() if "C7512" in line)


def ptx_params(ptx, function):
    """Types of the .entry parameters in order, e.g. ['u64', 'u32', 'f32', ...]; a 128-byte by-value
    parameter (`.param .align 64 .b8 name[128]`, a host TMA descriptor) reads 'tensormap'."""
    m = re.search(rf"\.entry\s+{re.escape(function)}\s*\((.*?)\)", ptx, re.S)
    if not m:
        raise RuntimeError(f"no .entry {function} in the PTX")
    out = []
    for decl in re.findall(r"\.param\s+([^,]*)", m.group(1)):
        if re.search(r"\.b8\s+\w+\[128\]", decl):
            out.append("tensormap")
        else:
            out.append(re.match(r"\.(\w+)", decl).group(1))
    return out


def kernel_spec(config):
    """(kernel function, params, types, constexprs, num_warps, num_stages, compile options) of an instance, as its
    operation module declares them; codegen/compile_variant.py compiles variants from the same."""
    import importlib

    operation = module_of(config)
    module_name, function, _, _ = operation.kernel_of(config)
    fn = getattr(importlib.import_module(module_name), function)
    params, types, constexprs, num_warps, num_stages = operation.compile_spec(config)
    options = operation.compile_options(config) if hasattr(operation, "compile_options") else {}
    return fn, params, types, constexprs, num_warps, num_stages, options


def compile_kernel(config, fn, params, types, constexprs, num_warps, num_stages, options):
    """The instance's family compiles fn for sm_90 (no GPU needed)."""
    from triton.backends.compiler import GPUTarget

    signature, attrs = kernel_params.triton_signature(fn, params, types, constexprs)
    return FAMILIES[config.family].compile(fn, signature, constexprs, attrs, num_warps, num_stages,
                                           GPUTarget("cuda", TARGET_ARCH, 32), options)


def compile_instance(name, out_dir):
    import triton

    if triton.__version__ != PINNED_TRITON:
        raise SystemExit(f"triton=={triton.__version__} found; fp8attn compiles with triton=={PINNED_TRITON} "
                         "(cubin metadata and parameter expansion change between releases)")
    config = manifest.find(name)
    operation = module_of(config)
    fn, params, types, constexprs, num_warps, num_stages, options = kernel_spec(config)
    # ConSan: the pass reads triton.knobs at compile time; debug keeps its device asserts (the JIT path sets both).
    # Triton's cache key does not include the instrumentation mode, so an instrumented cubin would be handed to
    # the next ordinary build of the same kernel (it was, here): instrumented compiles use a cache of their own.
    triton.knobs.compilation.instrumentation_mode = consan_mode(config)
    if consan_mode(config):
        options = {**options, "debug": True}
        triton.knobs.cache.dir = str(Path(triton.knobs.cache.dir).parent / "cache-consan")
    compiled = compile_kernel(config, fn, params, types, constexprs, num_warps, num_stages, options)
    md = compiled.metadata

    if md.profile_scratch_size:
        raise RuntimeError(f"{name}: needs profile scratch ({md.profile_scratch_size} B); not supported")
    if md.global_scratch_size and not (operation.NAME == "fmha_fwd" or getattr(config, "stage", "") == "decode"):
        # Only the attention and the paged decode launchers allocate a per-program scratch area
        # (src/fmha/fmha_params.cpp, src/paged/paged.cpp: decode_workspace); the others pass a null global_scratch.
        raise RuntimeError(f"{name}: needs {md.global_scratch_size} B of global scratch per program, which the "
                           f"{operation.NAME} launcher does not allocate")
    cubin_path = out_dir / f"{name}.cubin"
    cubin_path.write_bytes(compiled.asm["cubin"])
    for form in ("ptx", "ttgir", "llir"):
        (out_dir / f"{name}.{form}").write_text(compiled.asm[form])

    sass = sass_of(cubin_path)
    mma = {op: len(re.findall(rf"\b{op}\b", sass)) for op in ("QGMMA", "HGMMA", "HMMA", "IMMA", "IGMMA")}
    operation.check_sass(config, mma, sass, compiled.asm["ttgir"])
    serialized = wgmma_serialized(sass, compiled.asm["ptx"])
    if serialized:
        raise RuntimeError(f"{name}: ptxas serialized the wgmma (each MMA runs to completion before the next): "
                           f"{serialized}")

    ptx = ptx_params(compiled.asm["ptx"], md.name)
    expected = kernel_params.ptx_types(params)
    if ptx != expected:
        raise RuntimeError(f"{name}: kernel parameters {ptx} differ from the declared list {expected}")

    meta = {
        "name": name,
        "function": md.name,
        "operation": operation.NAME,
        "family": config.family,
        "config": {k: v for k, v in config.__dict__.items()},
        "num_warps": md.num_warps,  # warps launched (warp specialization adds partitions)
        "num_ctas": md.num_ctas,
        "shared": md.shared,
        "global_scratch_size": md.global_scratch_size,
        "global_scratch_align": md.global_scratch_align,
        "triton_version": triton.__version__,
        "params": [p.name for p in params],
        "param_types": ptx,
        "divisible_by_16": [p.name for p in params if p.divisible_by_16],
        "sass_mma_counts": mma,
        # Per host descriptor parameter: how the kernel expects it encoded (swizzle, element type, box).
        "tensordesc_meta": [dict(m) for m in (getattr(md, "tensordesc_meta", None) or [])],
    }
    (out_dir / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def emit_cpp(meta, cubin, out_path):
    """The instance as C++: cubin bytes, its configuration record and a KernelInstance
    (src/runtime/kernel_instance.h) pointing at both."""
    config = manifest.find(meta["name"])
    operation = module_of(config)
    config_type, config_init = operation.cpp_config(config)
    cname = meta["name"]
    hex_rows = []
    for i in range(0, len(cubin), 24):
        hex_rows.append("  " + "".join(f"0x{b:02x}," for b in cubin[i:i + 24]))
    # Host TMA descriptors: the encoding the compiled kernel expects (Triton picks the swizzle and may split
    # the box), in parameter order. elem_type is Triton's device enum; the host's differs for 8, 9 and 10 (bf16).
    host_type = {8: 10, 9: 8, 10: 9}
    descs = [f"{{{m['swizzle']}, {m['elem_size']}, {host_type.get(m['elem_type'], m['elem_type'])}, "
             f"{len(m['block_size'])}, {{{', '.join(str(b) for b in m['block_size'])}}}}}"
             for m in meta["tensordesc_meta"]]
    desc_table = (f"const TensorDescMeta kTensorDescs[] = {{{', '.join(descs)}}};\n" if descs else "")
    desc_ref = ("kTensorDescs, " + str(len(descs))) if descs else "nullptr, 0"
    out_path.write_text(
        "// Generated by codegen/aot_compile.py from the manifest. Do not edit; do not commit.\n"
        '#include "runtime/kernel_instance.h"\n'
        f'#include "{operation.CPP_HEADER}"\n\n'
        "namespace fp8attn::detail {\nnamespace {\n"
        f"alignas(16) const unsigned char kCubin[] = {{\n" + "\n".join(hex_rows) + "\n};\n"
        f"const {config_type} kConfig = {config_init};\n" + desc_table +
        "}  // namespace\n\n"
        f"extern const KernelInstance kInstance_{cname};\n"
        f"const KernelInstance kInstance_{cname} = {{\n"
        f"  \"{cname}\", \"{meta['function']}\", kCubin, sizeof(kCubin),\n"
        f"  {meta['num_warps']}, {meta['shared']}, {meta['global_scratch_size']}, {meta['global_scratch_align']},\n"
        f"  library::OperationKind::{operation.CPP_KIND}, library::KernelFamily::{FAMILIES[config.family].CPP_NAME},\n"
        f"  &kConfig, {desc_ref}}};\n\n"
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
