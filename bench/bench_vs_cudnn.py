"""fp8attn FP8 vs cuDNN FP8 vs cuDNN/FlashAttention BF16, side by side on one GPU.

Providers, on the standard prefill suite, bench/suites/standard.csv (the one definition, which the profiler embeds
too: fp8attn_profiler --suite=standard; 32768 tokens per problem, H_q * D = 4096, plus GQA 64/8):
  fp8attn-fp8   the Python module (heuristic pick), e4m3 inputs with per-tensor descales, BF16 output
  fp8attn-bf16  the same with BF16 inputs (compared with cudnn-bf16: the issue's BF16 target)
  fp8attn-fp8-vt  fp8attn-fp8 with V^T made once outside the timed calls (fp8attn.transpose_v(key_permuted=True),
                fmha_fwd(v_key_permuted=True)): the attention kernel alone, what a quantization pass that writes
                V^T directly gives; informational, the ratio columns use fp8attn-fp8
  cudnn-fp8     cuDNN FP8 attention through JAX (jax._src.cudnn.fused_attention_stablehlo, use_fp8=True,
                BNTH), in a separate process with XLA_PYTHON_CLIENT_PREALLOCATE=false; its output is e4m3
                (scale_o set from amax_o for the error column); a failure is recorded and the run goes on
  cudnn-bf16    torch SDPA, SDPBackend.CUDNN_ATTENTION
  flash-bf16    torch SDPA, SDPBackend.FLASH_ATTENTION

FLOPs: the library's own count, fp8attn.flops (FmhaProblem::flops: 4 * B * H_q * S_q * S_k * D, halved for causal
when S_q == S_k), so the benchmark and the profiler cannot disagree. Timing: warm-up, then CUDA events around
back-to-back calls (about --target-ms per sample), median of --repeats samples; JAX has no CUDA events, so
cudnn-fp8 is timed by wall clock around the same number of asynchronous dispatches and a final
block_until_ready. Inputs are Gaussian and larger than L2. The error column is ||O - ref|| / ||ref|| against
float64 on the provider's own (quantized) inputs, over a slice: batch 0, two heads, 128 query rows.

This is a benchmark, never a test: it prints a table and writes what --output (CSV) and --plot (PNG) name.

    PYTHONPATH=build/python python3 bench/bench_vs_cudnn.py --output docs/perf/fmha_vs_cudnn.csv \\
        --plot docs/perf/fmha_vs_cudnn.png
    python3 bench/bench_vs_cudnn.py --list-configs      # the suite as read, no GPU needed
"""

import argparse
import csv
import dataclasses
import datetime
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

PROVIDERS = ["fp8attn-fp8", "fp8attn-fp8-vt", "cudnn-fp8", "fp8attn-bf16", "cudnn-bf16", "flash-bf16"]
# (provider, its reference): the ratio columns of the table and the CSV.
RATIOS = [("fp8attn-fp8", "cudnn-fp8"), ("fp8attn-bf16", "cudnn-bf16")]
E4M3_MAX = 448.0
SLICE_ROWS = 128
STANDARD_SUITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suites", "standard.csv")
SUITE_COLUMNS = ("batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal")


def flops(batch, heads_q, seqlen_q, seqlen_k, head_dim, causal):
    """FLOPs of attention forward as the library counts them (fp8attn.flops, i.e. FmhaProblem::flops, which the
    profiler uses too); imported here so that listing the configurations needs no built module."""
    import fp8attn

    return fp8attn.flops(batch, heads_q, seqlen_q, seqlen_k, head_dim, causal)


@dataclasses.dataclass
class Config:
    batch: int
    heads_q: int
    heads_kv: int
    seqlen: int
    head_dim: int
    causal: bool

    @property
    def name(self):
        gqa = f"_gqa{self.heads_q}_{self.heads_kv}" if self.heads_q != self.heads_kv else ""
        return f"d{self.head_dim}_s{self.seqlen}_{'causal' if self.causal else 'full'}{gqa}"

    @property
    def flops(self):
        return flops(self.batch, self.heads_q, self.seqlen, self.seqlen, self.head_dim, self.causal)


def read_suite(path=STANDARD_SUITE):
    """The problems of a suite file (bench/suites/*.csv), as the profiler reads it: '#' comment lines and blank
    lines skipped, a header naming the columns, one problem per line. This benchmark needs seqlen_q == seqlen_k."""
    rows = []
    with open(path, newline="") as f:
        lines = [(n, line) for n, line in enumerate(f, 1) if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ValueError(f"{path}: no header line")
    reader = csv.DictReader([line for _, line in lines], skipinitialspace=True)
    missing = [c for c in SUITE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path}:{lines[0][0]}: the header line has no column {missing[0]}")
    for (n, _), row in zip(lines[1:], reader):
        try:
            v = {c: int(row[c]) for c in SUITE_COLUMNS}
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}:{n}: {e}") from None
        if v["causal"] not in (0, 1):
            raise ValueError(f"{path}:{n}: causal={v['causal']} is not 0 or 1")
        if v["seqlen_q"] != v["seqlen_k"]:
            raise ValueError(f"{path}:{n}: seqlen_q={v['seqlen_q']} != seqlen_k={v['seqlen_k']}; "
                             "bench_vs_cudnn.py compares square problems only")
        rows.append(Config(v["batch"], v["heads_q"], v["heads_kv"], v["seqlen_q"], v["head_dim"], bool(v["causal"])))
    if not rows:
        raise ValueError(f"{path}: no problem")
    return rows


def standard_suite():
    return read_suite(STANDARD_SUITE)


def slice_heads(cfg):
    return sorted({0, cfg.heads_q // 2})


def slice_rows(seqlen):
    n = min(SLICE_ROWS, seqlen)
    return sorted({round(i * (seqlen - 1) / max(1, n - 1)) for i in range(n)})


# ---- cuDNN FP8 through JAX (runs in its own process) ---------------------------------------------------------

def jax_worker(spec_path, out_path):
    """Times cuDNN FP8 attention for every config in the spec; writes JSON after each one."""
    import numpy as np

    import jax
    import jax.numpy as jnp
    from jax._src.cudnn import fused_attention_stablehlo as fa

    spec = json.load(open(spec_path))
    env = {"jax": jax.__version__, "device": str(jax.devices()[0])}
    try:
        env["cudnn"] = fa.check_cudnn_version()
    except Exception as e:  # noqa: BLE001
        env["cudnn"] = f"unknown ({e})"
    keys = getattr(fa, "fp8_params_keys", [
        "amax_dQ", "amax_dK", "amax_dV", "amax_dP", "descale_q", "descale_k", "descale_v", "descale_s",
        "scale_s", "scale_o", "descale_o", "descale_dO", "descale_dP", "scale_dQ", "scale_dK", "scale_dV",
        "scale_dP"])
    results = []

    def dump():
        with open(out_path, "w") as f:
            json.dump({"env": env, "results": results}, f)

    def scalar(x):
        return jnp.full((1, 1, 1, 1), x, dtype=jnp.float32)

    def quantize(key, shape):
        x = jax.random.normal(key, shape, jnp.float32)
        descale = jnp.max(jnp.abs(x)) / E4M3_MAX
        return jnp.clip(x / descale, -E4M3_MAX, E4M3_MAX).astype(jnp.float8_e4m3fn), descale

    dump()
    for index, c in enumerate(spec["configs"]):
        cfg = Config(**c)
        rec = {"config": cfg.name}
        try:
            kq, kk, kv = jax.random.split(jax.random.PRNGKey(1000 + index), 3)
            q8, qd = quantize(kq, (cfg.batch, cfg.heads_q, cfg.seqlen, cfg.head_dim))
            k8, kd = quantize(kk, (cfg.batch, cfg.heads_kv, cfg.seqlen, cfg.head_dim))
            v8, vd = quantize(kv, (cfg.batch, cfg.heads_kv, cfg.seqlen, cfg.head_dim))

            def params(scale_o):
                p = {name: scalar(1.0) for name in keys}
                p.update(descale_q=qd.reshape(1, 1, 1, 1), descale_k=kd.reshape(1, 1, 1, 1),
                         descale_v=vd.reshape(1, 1, 1, 1), scale_s=scalar(E4M3_MAX),
                         descale_s=scalar(1.0 / E4M3_MAX), scale_o=scalar(scale_o), descale_o=scalar(1.0 / scale_o))
                return p

            mask = fa.MaskType.CAUSAL if cfg.causal else fa.MaskType.NO_MASK
            fn = jax.jit(functools.partial(fa.dot_product_attention, scale=1.0 / math.sqrt(cfg.head_dim),
                                           mask_type=mask, qkv_layout="BNTH", use_fp8=True))
            try:
                out, _, amax_o = fn(q8, k8, v8, fp8_params=params(1.0))
            except Exception as e:  # noqa: BLE001
                if cfg.heads_q == cfg.heads_kv:
                    raise
                # No GQA in this path: repeat K and V to the query heads (same FLOPs, more memory traffic).
                rec["note"] = f"kv repeated to {cfg.heads_q} heads ({type(e).__name__})"
                group = cfg.heads_q // cfg.heads_kv
                k8, v8 = jnp.repeat(k8, group, axis=1), jnp.repeat(v8, group, axis=1)
                out, _, amax_o = fn(q8, k8, v8, fp8_params=params(1.0))
            # Output e4m3: scale it so that its largest element lands near the top of e4m3's range.
            amax = float(np.asarray(amax_o).reshape(-1)[0])
            scale_o = 0.9 * E4M3_MAX / amax if amax > 0 else 1.0
            p = params(scale_o)
            out = fn(q8, k8, v8, fp8_params=p)[0]
            jax.block_until_ready(out)

            t = time.perf_counter()
            for _ in range(spec["warmup"]):
                out = fn(q8, k8, v8, fp8_params=p)[0]
            jax.block_until_ready(out)
            one = (time.perf_counter() - t) / max(1, spec["warmup"])
            # At most max_iters calls a sample (run_cudnn_fp8: 200, the suite's samples stay short);
            # clock_under_load.py lifts it so that a short call's samples still last target_ms.
            iters = max(1, min(spec["max_iters"], int(spec["target_ms"] / 1e3 / max(one, 1e-6))))
            samples = []
            for _ in range(spec["repeats"]):
                t = time.perf_counter()
                for _ in range(iters):
                    out = fn(q8, k8, v8, fp8_params=p)[0]
                jax.block_until_ready(out)
                samples.append((time.perf_counter() - t) / iters * 1e3)
            rec["ms"] = statistics.median(samples)

            if spec["error"]:
                rows = np.array(slice_rows(cfg.seqlen))
                num = den = 0.0
                group = q8.shape[1] // k8.shape[1]
                for h in slice_heads(cfg):
                    qs = np.asarray(q8[0, h, rows].astype(jnp.float32), dtype=np.float64) * float(qd)
                    ks = np.asarray(k8[0, h // group].astype(jnp.float32), dtype=np.float64) * float(kd)
                    vs = np.asarray(v8[0, h // group].astype(jnp.float32), dtype=np.float64) * float(vd)
                    s = qs @ ks.T / math.sqrt(cfg.head_dim)
                    if cfg.causal:
                        s = np.where(np.arange(cfg.seqlen)[None, :] <= rows[:, None], s, -np.inf)
                    s = np.exp(s - s.max(axis=1, keepdims=True))
                    ref = (s / s.sum(axis=1, keepdims=True)) @ vs
                    o = np.asarray(out[0, h, rows].astype(jnp.float32), dtype=np.float64) / scale_o
                    num += float(np.sum((o - ref) ** 2))
                    den += float(np.sum(ref ** 2))
                rec["error"] = math.sqrt(num / den)
            del q8, k8, v8, out
        except Exception as e:  # noqa: BLE001 - record and go on
            rec["failure"] = f"{type(e).__name__}: {e}"[:600]
        results.append(rec)
        dump()


def run_cudnn_fp8(configs, args):
    """cuDNN FP8 results by config name, from a JAX subprocess; (results, env) or ({}, {"failure": ...}). args: warmup,
    repeats, target_ms, no_error, jax_timeout and optionally max_iters (calls a sample at most; 200)."""
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = os.path.join(tmp, "spec.json")
        out_path = os.path.join(tmp, "out.json")
        with open(spec_path, "w") as f:
            json.dump({"configs": [dataclasses.asdict(c) for c in configs], "warmup": args.warmup,
                       "repeats": args.repeats, "target_ms": args.target_ms, "error": not args.no_error,
                       "max_iters": getattr(args, "max_iters", 200)}, f)
        env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        cmd = [sys.executable, os.path.abspath(__file__), "--jax-worker", spec_path, "--jax-out", out_path]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.jax_timeout)
            failure = None if proc.returncode == 0 else (
                f"JAX worker exited with {proc.returncode}: {proc.stderr.strip()[-600:]}")
        except subprocess.TimeoutExpired:
            failure = f"JAX worker timed out after {args.jax_timeout} s"
        if not os.path.exists(out_path):
            return {}, {"failure": failure or "JAX worker wrote nothing"}
        data = json.load(open(out_path))
    results = {r["config"]: r for r in data["results"]}
    if failure:
        data["env"]["failure"] = failure
        for c in configs:  # configs it never reached
            results.setdefault(c.name, {"config": c.name, "failure": failure})
    return results, data["env"]


# ---- torch providers -------------------------------------------------------------------------------------------

def write_rows(path, rows):
    """rows (dicts) as CSV, the union of their keys as columns in sorted order (missing cells empty)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
        w.writeheader()
        w.writerows(rows)


def time_cuda(fn, args):
    """Median ms per call: CUDA events around back-to-back calls, after warm-up."""
    return time_cuda_interleaved([fn], args)[0]


def time_cuda_interleaved(fns, args, settle_ms=0.0):
    """Median ms per call of each function, their timed samples alternating (A B A B ..., after a warm-up of
    each), so that drift of the machine during the run (clocks, the host's load) lands on all of them alike.

    settle_ms > 0: before each timed sample the function runs untimed for about that long, and each function's
    sample lasts about target_ms of its own calls. For functions of very different power draw: on the
    power-limited H200 the clock follows the draw with a lag of tens of ms (docs/perf/NOTES.md, 2026-12-04, eighth
    session: the 4k window runs slowest and full causal fastest in the first ~25 ms after the other), so samples
    taken right after the switch time each function partly at the other's clock."""
    import torch
    for fn in fns:
        for _ in range(args.warmup):
            fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def ms_of(fn):
        start.record()
        fn()
        end.record()
        end.synchronize()
        return max(start.elapsed_time(end), 1e-3)

    # One untimed call each sets each function's sample length (settle_ms > 0), else the first one's sets all.
    per_call = [ms_of(fn) for fn in fns] if settle_ms > 0 else [ms_of(fns[0])] * len(fns)
    iters = [max(1, min(200, int(args.target_ms / ms))) for ms in per_call]
    settle = [int(settle_ms / ms) for ms in per_call]
    samples = [[] for _ in fns]
    for _ in range(args.repeats):
        for fn, out, n, warm in zip(fns, samples, iters, settle):
            for _ in range(warm):
                fn()
            start.record()
            for _ in range(n):
                fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / n)
    return [statistics.median(s) for s in samples]


def slice_error(o_bhsd, q, k, v, causal, descales=(1.0, 1.0, 1.0)):
    """||O - ref|| / ||ref|| over batch 0, slice_heads, slice_rows; all tensors [B, H, S, D] (any dtype)."""
    import torch
    seqlen, head_dim = q.shape[2], q.shape[3]
    group = q.shape[1] // k.shape[1]
    rows = torch.tensor(slice_rows(seqlen), device=q.device)
    num = den = 0.0
    for h in slice_heads(Config(1, q.shape[1], k.shape[1], seqlen, head_dim, causal)):
        qs = q[0, h, rows].double() * descales[0]
        ks = k[0, h // group].double() * descales[1]
        vs = v[0, h // group].double() * descales[2]
        s = qs @ ks.T / math.sqrt(head_dim)
        if causal:
            keep = torch.arange(seqlen, device=q.device)[None, :] <= rows[:, None]
            s = s.masked_fill(~keep, float("-inf"))
        ref = torch.softmax(s, dim=-1) @ vs
        o = o_bhsd[0, h, rows].double()
        num += float(((o - ref) ** 2).sum())
        den += float((ref ** 2).sum())
    return math.sqrt(num / den)


def run_torch_providers(cfg, args, seed):
    """{provider: record} for fp8attn-fp8, fp8attn-bf16, cudnn-bf16 and flash-bf16 on one config."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    import fp8attn

    out = {}
    gen = torch.Generator(device="cuda").manual_seed(seed)
    shape_q = (cfg.batch, cfg.heads_q, cfg.seqlen, cfg.head_dim)
    shape_kv = (cfg.batch, cfg.heads_kv, cfg.seqlen, cfg.head_dim)
    # BHSD storage for SDPA; fp8attn reads the same tensors as BSHD views' transposes (layout "bhsd").
    q = torch.randn(shape_q, generator=gen, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(shape_kv, generator=gen, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(shape_kv, generator=gen, device="cuda", dtype=torch.bfloat16)

    # fp8attn, FP8 (BSHD, its native layout; quantized per tensor) and BF16 (the same BSHD copies).
    for provider, fp8 in (("fp8attn-fp8", True), ("fp8attn-fp8-vt", True), ("fp8attn-bf16", False)):
        rec = {}
        try:
            qb, kb, vb = (x.transpose(1, 2).contiguous() for x in (q, k, v))
            if fp8:
                (q8, qd), (k8, kd), (v8, vd) = (fp8attn.quantize_e4m3(x) for x in (qb, kb, vb))
                kw = dict(q_descale=qd, k_descale=kd, v_descale=vd, causal=cfg.causal)
                descales = (float(qd), float(kd), float(vd))
                v_err = v8  # the reference reads V in key order
                if provider.endswith("-vt"):
                    if not any(k.get("v_key_permuted") and k.get("head_dim") == cfg.head_dim
                               for k in fp8attn.list_kernels()):
                        rec["not_applicable"] = f"no key-permuted (Gluon) instance at head_dim={cfg.head_dim}"
                        out[provider] = rec
                        continue
                    v8 = fp8attn.transpose_v(v8, key_permuted=True)
                    kw["v_key_permuted"] = True
            else:
                q8, k8, v8 = qb, kb, vb
                v_err = v8
                kw = dict(causal=cfg.causal)
                descales = (1.0, 1.0, 1.0)
            o8 = torch.empty(q8.shape, dtype=torch.bfloat16, device="cuda")
            rec["kernel"] = fp8attn.select_kernel(q8, k8, v8, **kw)
            rec["ms"] = time_cuda(lambda: fp8attn.fmha_fwd(q8, k8, v8, out=o8, **kw), args)
            if not args.no_error:
                fp8attn.fmha_fwd(q8, k8, v8, out=o8, **kw)
                t = (lambda x: x.transpose(1, 2))
                rec["error"] = slice_error(t(o8), t(q8), t(k8), t(v_err), cfg.causal, descales)
            del q8, k8, v8, v_err, o8, qb, kb, vb
        except Exception as e:  # noqa: BLE001
            rec["failure"] = f"{type(e).__name__}: {e}"[:600]
        out[provider] = rec

    for provider, backend in (("cudnn-bf16", SDPBackend.CUDNN_ATTENTION), ("flash-bf16", SDPBackend.FLASH_ATTENTION)):
        rec = {}
        try:
            kk, vv = k, v
            gqa = cfg.heads_q != cfg.heads_kv

            def sdpa():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, kk, vv, is_causal=cfg.causal, enable_gqa=gqa)
            try:
                o = sdpa()
            except RuntimeError as e:
                if not gqa:
                    raise
                rec["note"] = f"kv repeated to {cfg.heads_q} heads ({str(e).splitlines()[0][:80]})"
                group = cfg.heads_q // cfg.heads_kv
                kk, vv = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
                gqa = False
                o = sdpa()
            rec["ms"] = time_cuda(sdpa, args)
            if not args.no_error:
                rec["error"] = slice_error(o, q, kk, vv, cfg.causal)
            del o
        except Exception as e:  # noqa: BLE001
            rec["failure"] = f"{type(e).__name__}: {e}"[:600]
        out[provider] = rec
    del q, k, v
    torch.cuda.empty_cache()
    return out


# ---- Report ----------------------------------------------------------------------------------------------------

def tflops(cfg, rec):
    return cfg.flops / (rec["ms"] * 1e-3) / 1e12 if rec and "ms" in rec else None


def print_table(configs, results):
    head = f"{'config':<28}" + "".join(f"{p:>16}" for p in PROVIDERS) + "".join(
        f"{a.split('-')[1] + ' ratio':>12}" for a, _ in RATIOS)
    print("\nTFLOP/s (error vs float64 on a slice in brackets)")
    print(head)
    print("-" * len(head))
    for cfg in configs:
        line = f"{cfg.name:<28}"
        for p in PROVIDERS:
            t = tflops(cfg, results[cfg.name].get(p))
            missing = "n/a" if "not_applicable" in results[cfg.name].get(p, {}) else "failed"
            line += f"{t:16.1f}" if t is not None else f"{missing:>16}"
        for mine, ref in RATIOS:
            a = tflops(cfg, results[cfg.name].get(mine))
            b = tflops(cfg, results[cfg.name].get(ref))
            line += f"{a / b:12.3f}" if a and b else f"{'-':>12}"
        print(line)
        errs = [results[cfg.name].get(p, {}).get("error") for p in PROVIDERS]
        if any(e is not None for e in errs):
            print(f"{'':<28}" + "".join(f"{f'[{e:.2e}]':>16}" if e is not None else f"{'':>16}" for e in errs))
    for cfg in configs:
        for p in PROVIDERS:
            rec = results[cfg.name].get(p, {})
            if "failure" in rec:
                print(f"  {cfg.name} {p}: FAILED {rec['failure']}")
            if "note" in rec:
                print(f"  {cfg.name} {p}: {rec['note']}")
            if "kernel" in rec:
                print(f"  {cfg.name} {p}: {rec['kernel']}")


def write_csv(path, configs, results):
    fields = ["config", "batch", "heads_q", "heads_kv", "seqlen", "head_dim", "causal", "provider", "ms",
              "tflops", "ratio_vs_cudnn_fp8", "ratio_vs_cudnn_bf16", "error_vs_fp64", "kernel", "note"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for cfg in configs:
            ref = tflops(cfg, results[cfg.name].get("cudnn-fp8"))
            ref_bf16 = tflops(cfg, results[cfg.name].get("cudnn-bf16"))
            for p in PROVIDERS:
                rec = results[cfg.name].get(p, {})
                t = tflops(cfg, rec)
                w.writerow({
                    "config": cfg.name, "batch": cfg.batch, "heads_q": cfg.heads_q, "heads_kv": cfg.heads_kv,
                    "seqlen": cfg.seqlen, "head_dim": cfg.head_dim, "causal": cfg.causal, "provider": p,
                    "ms": f"{rec['ms']:.4f}" if "ms" in rec else "",
                    "tflops": f"{t:.1f}" if t is not None else "",
                    "ratio_vs_cudnn_fp8": f"{t / ref:.3f}" if t is not None and ref else "",
                    "ratio_vs_cudnn_bf16": f"{t / ref_bf16:.3f}" if t is not None and ref_bf16 else "",
                    "error_vs_fp64": f"{rec['error']:.3e}" if "error" in rec else "",
                    "kernel": rec.get("kernel", ""),
                    "note": rec.get("failure", rec.get("not_applicable", rec.get("note", ""))),
                })


def write_plot(path, configs, results, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(10, 1.3 * len(configs)), 5.5))
    width = 0.8 / len(PROVIDERS)
    for i, p in enumerate(PROVIDERS):
        ys = [tflops(c, results[c.name].get(p)) or 0.0 for c in configs]
        xs = [j + (i - (len(PROVIDERS) - 1) / 2) * width for j in range(len(configs))]
        ax.bar(xs, ys, width, label=p)
    for j, c in enumerate(configs):
        a = tflops(c, results[c.name].get("fp8attn-fp8"))
        b = tflops(c, results[c.name].get("cudnn-fp8"))
        if a and b:
            ax.annotate(f"{a / b:.2f}x", (j, max(a, b)), ha="center", va="bottom", fontsize=8,
                        xytext=(0, 3), textcoords="offset points")
    ax.set_xticks(range(len(configs)))
    ax.set_xticklabels([c.name for c in configs], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title + "\n(labels: fp8attn / cuDNN FP8)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", help="CSV file to write (one row per config and provider)")
    parser.add_argument("--plot", help="PNG file to write (TFLOP/s per config and provider)")
    parser.add_argument("--suite", default=STANDARD_SUITE, help="suite file (default: bench/suites/standard.csv)")
    parser.add_argument("--configs", default="", help="comma-separated substrings; keep configs whose name has one")
    parser.add_argument("--list-configs", action="store_true", help="print the configs of the suite and exit")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=15, help="timed samples per measurement (median taken)")
    parser.add_argument("--target-ms", type=float, default=30.0, help="approximate length of one timed sample")
    parser.add_argument("--no-cudnn-fp8", action="store_true", help="skip the JAX (cuDNN FP8) subprocess")
    parser.add_argument("--no-error", action="store_true", help="skip the error-vs-float64 columns")
    parser.add_argument("--jax-timeout", type=float, default=900.0, help="seconds for the whole JAX subprocess")
    parser.add_argument("--jax-worker", help=argparse.SUPPRESS)
    parser.add_argument("--jax-out", help=argparse.SUPPRESS)
    parser.add_argument("--replot", metavar="CSV", help="redraw --plot (and print the table) from a CSV this script "
                        "wrote, e.g. after merging rows of a second run; measures nothing")
    args = parser.parse_args()

    if args.jax_worker:
        jax_worker(args.jax_worker, args.jax_out)
        return

    configs = read_suite(args.suite)
    if args.configs:
        wanted = [w for w in args.configs.split(",") if w]
        configs = [c for c in configs if any(w in c.name for w in wanted)]
    if args.list_configs:
        for c in configs:
            print(f"{c.name:<28} batch={c.batch} heads_q={c.heads_q} heads_kv={c.heads_kv} seqlen={c.seqlen} "
                  f"head_dim={c.head_dim} causal={int(c.causal)}")
        print(f"{len(configs)} configs from {os.path.relpath(args.suite)}")
        return
    results = {c.name: {} for c in configs}
    if args.replot:
        with open(args.replot, newline="") as f:
            for row in csv.DictReader(f):
                if row["config"] in results and row["ms"]:
                    results[row["config"]][row["provider"]] = {"ms": float(row["ms"]), "kernel": row["kernel"]}
        print_table(configs, results)
        if args.plot:
            write_plot(args.plot, configs, results, f"Attention forward, {os.path.basename(args.replot)}")
            print(f"wrote {args.plot}")
        return

    # cuDNN FP8 first, in its own process, before torch holds any GPU memory.
    jax_env = {}
    if not args.no_cudnn_fp8:
        cudnn, jax_env = run_cudnn_fp8(configs, args)
        for c in configs:
            results[c.name]["cudnn-fp8"] = cudnn.get(c.name, {"failure": jax_env.get("failure", "no result")})
    else:
        for c in configs:
            results[c.name]["cudnn-fp8"] = {"failure": "skipped (--no-cudnn-fp8)"}

    import torch

    import fp8attn
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}; torch {torch.__version__} (cuDNN {torch.backends.cudnn.version()}); fp8attn "
          f"{fp8attn.__version__} (triton {fp8attn.triton_version()}); JAX {jax_env.get('jax', '-')} "
          f"(cuDNN {jax_env.get('cudnn', '-')})")
    if "failure" in jax_env:
        print(f"cuDNN FP8 through JAX failed: {jax_env['failure']}")
    for i, cfg in enumerate(configs):
        t = time.perf_counter()
        results[cfg.name].update(run_torch_providers(cfg, args, seed=i))
        print(f"  {cfg.name}: {time.perf_counter() - t:.1f} s", flush=True)

    print_table(configs, results)
    if args.output:
        write_csv(args.output, configs, results)
        print(f"wrote {args.output}")
    if args.plot:
        title = f"Attention forward on {gpu}, {datetime.date.today().isoformat()}"
        write_plot(args.plot, configs, results, title)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
