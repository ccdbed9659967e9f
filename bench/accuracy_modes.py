"""Every accuracy mode of fp8attn.attention on synthetic inputs, with cuDNN FP8 beside it, and the speed of every
mode with its quantization included.

Accuracy (--accuracy): error vs float64 attention on the UNQUANTIZED inputs (bf16 values; every provider
quantizes them its own way), relative L2 over a slice (batch 0, two heads, 128 query rows spread over the
sequence), for three input kinds at D=128, 8 heads, causal, S in --lengths:
  gaussian   q, k, v ~ N(0, 1)
  sink       as tests/gpu/test_fmha_accuracy_long.py: every query shares a component 3u along a unit direction u
             (per head), key 0 is 4 sqrt(D) u (logit ~12 against ~N(0, 1) for the others), its value small
             (0.1 v_0), and the values share a mean direction, so the mass of the other keys carries the output
  outliers   gaussian with 0.1% of q, k, v entries drawn from N(0, 10) (FlashAttention-3's FP8 test)
Providers: fp8attn in every mode (fp8attn.MODES), and cuDNN FP8 through JAX (per-tensor e4m3 descales from the
same bf16 values, in its own process). The inputs come from numpy generators seeded by (kind, length), so
both processes build the same values without moving them.

Speed (--speed): TFLOP/s of fp8attn.attention per mode on the standard suite (bench/suites/standard.csv), from
BF16 q, k, v: quantization included; "fp8-kernel" and "int8-kernel" are fmha_fwd alone on inputs quantized
beforehand as the fp8 and int8_qk modes quantize them.

    PYTHONPATH=build/python python3 bench/accuracy_modes.py --accuracy --speed --csv out.csv --plot out.png

--draws N repeats every accuracy case on N inputs of its kind and adds a table of each mode's mean error and its
paired difference to fp8 over the same draws: whether a mode is worse than fp8 beyond the draw-to-draw spread.

This is a benchmark, never a test: it prints tables and writes what --csv and --plot name.
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_vs_cudnn as bvc  # noqa: E402  (suite, timing, the cuDNN FP8 call's conventions)

KINDS = ("gaussian", "sink", "outliers")
# Speed columns of the attention kernel alone: column -> the mode whose quantization makes its operands.
KERNEL_COLUMNS = {"fp8-kernel": "fp8", "int8-kernel": "int8_qk"}
HEADS, HEAD_DIM = 8, 128
E4M3_MAX = 448.0


def make_inputs(kind, seqlen, draw=0):
    """float32 numpy q, k, v [1, S, H, D] for an input kind, then rounded to bf16 values (as float32). draw > 0
    gives other inputs of the same kind (--draws); draw 0 is the table's (and cuDNN's) input."""
    seed = 1000 * KINDS.index(kind) + int(math.log2(seqlen)) + 100000 * draw
    rng = np.random.default_rng(seed)
    shape = (1, seqlen, HEADS, HEAD_DIM)
    q, k, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
    if kind == "sink":
        u = rng.standard_normal((1, 1, HEADS, HEAD_DIM), dtype=np.float32)
        u /= np.linalg.norm(u, axis=-1, keepdims=True)
        q += 3.0 * u
        k[:, 0] = 4.0 * math.sqrt(HEAD_DIM) * u[:, 0]
        v += rng.standard_normal((1, 1, HEADS, HEAD_DIM), dtype=np.float32)
        v[:, 0] *= 0.1
    elif kind == "outliers":
        for x in (q, k, v):
            mask = rng.random(shape) < 1e-3
            x[mask] = rng.standard_normal(int(mask.sum()), dtype=np.float32) * 10.0
    return tuple(_bf16_round(x) for x in (q, k, v))


def _bf16_round(x):
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def reference_slice(q, k, v):
    """float64 causal attention on the slice rows of heads slice_heads: {h: [rows, D]}."""
    seqlen = q.shape[1]
    rows = np.array(bvc.slice_rows(seqlen))
    out = {}
    for h in bvc.slice_heads(bvc.Config(1, HEADS, HEADS, seqlen, HEAD_DIM, True)):
        qs, ks, vs = q[0, rows, h].astype(np.float64), k[0, :, h].astype(np.float64), v[0, :, h].astype(np.float64)
        s = qs @ ks.T / math.sqrt(HEAD_DIM)
        s = np.where(np.arange(seqlen)[None, :] <= rows[:, None], s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[h] = (p / p.sum(axis=1, keepdims=True)) @ vs
    return out


def slice_error(o_bshd, ref):
    rows = np.array(bvc.slice_rows(o_bshd.shape[1]))
    num = den = 0.0
    for h, r in ref.items():
        o = o_bshd[0, rows, h].astype(np.float64)
        num += float(((o - r) ** 2).sum())
        den += float((r ** 2).sum())
    return math.sqrt(num / den)


# ---- cuDNN FP8 (JAX, its own process) -----------------------------------------------------------------------

def jax_worker(spec_path, out_path):
    import jax
    import jax.numpy as jnp
    from jax._src.cudnn import fused_attention_stablehlo as fa

    spec = json.load(open(spec_path))
    keys = getattr(fa, "fp8_params_keys", [
        "amax_dQ", "amax_dK", "amax_dV", "amax_dP", "descale_q", "descale_k", "descale_v", "descale_s",
        "scale_s", "scale_o", "descale_o", "descale_dO", "descale_dP", "scale_dQ", "scale_dK", "scale_dV",
        "scale_dP"])
    results = {}

    def scalar(x):
        return jnp.full((1, 1, 1, 1), x, dtype=jnp.float32)

    def quantize(x):  # numpy [1, S, H, D] -> e4m3 BNTH, descale
        x = jnp.asarray(x).transpose(0, 2, 1, 3)
        descale = jnp.max(jnp.abs(x)) / E4M3_MAX
        return jnp.clip(x / descale, -E4M3_MAX, E4M3_MAX).astype(jnp.float8_e4m3fn), descale

    for kind, seqlen in spec["cases"]:
        key = f"{kind}/{seqlen}"
        try:
            q, k, v = make_inputs(kind, seqlen)
            (q8, qd), (k8, kd), (v8, vd) = quantize(q), quantize(k), quantize(v)
            fn = jax.jit(lambda a, b, c, p: fa.dot_product_attention(
                a, b, c, scale=1.0 / math.sqrt(HEAD_DIM), mask_type=fa.MaskType.CAUSAL, qkv_layout="BNTH",
                use_fp8=True, fp8_params=p))

            def params(scale_o):
                p = {name: scalar(1.0) for name in keys}
                p.update(descale_q=qd.reshape(1, 1, 1, 1), descale_k=kd.reshape(1, 1, 1, 1),
                         descale_v=vd.reshape(1, 1, 1, 1), scale_s=scalar(E4M3_MAX),
                         descale_s=scalar(1.0 / E4M3_MAX), scale_o=scalar(scale_o), descale_o=scalar(1.0 / scale_o))
                return p

            amax = float(np.asarray(fn(q8, k8, v8, params(1.0))[2]).reshape(-1)[0])
            scale_o = 0.9 * E4M3_MAX / amax if amax > 0 else 1.0
            out = fn(q8, k8, v8, params(scale_o))[0]
            o = np.asarray(out.astype(jnp.float32)).transpose(0, 2, 1, 3) / scale_o  # -> [1, S, H, D]
            results[key] = {"error": slice_error(o, reference_slice(q, k, v))}
        except Exception as e:  # noqa: BLE001 - record and go on
            results[key] = {"failure": f"{type(e).__name__}: {e}"[:400]}
        json.dump(results, open(out_path, "w"))


def run_cudnn(cases, timeout):
    with tempfile.TemporaryDirectory() as tmp:
        spec, out = os.path.join(tmp, "spec.json"), os.path.join(tmp, "out.json")
        json.dump({"cases": cases}, open(spec, "w"))
        env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--jax-worker", spec, "--jax-out", out],
                                  env=env, capture_output=True, text=True, timeout=timeout)
            failure = None if proc.returncode == 0 else f"JAX worker exited {proc.returncode}: {proc.stderr[-400:]}"
        except subprocess.TimeoutExpired:
            failure = f"JAX worker timed out after {timeout} s"
        results = json.load(open(out)) if os.path.exists(out) else {}
    return {f"{k}/{s}": results.get(f"{k}/{s}", {"failure": failure or "no result"}) for k, s in cases}


# ---- fp8attn ------------------------------------------------------------------------------------------------

def run_modes(cases, draws=1):
    """{case: {mode: {"error": draw 0's error, "errors": every draw's} or {"failure": ...}}}."""
    import torch

    import fp8attn

    results = {}
    for kind, seqlen in cases:
        key = f"{kind}/{seqlen}"
        for draw in range(draws):
            q, k, v = make_inputs(kind, seqlen, draw)
            ref = reference_slice(q, k, v)
            tq, tk, tv = (torch.from_numpy(x).to("cuda", torch.bfloat16) for x in (q, k, v))
            for mode in fp8attn.MODES:
                cell = results.setdefault(key, {}).setdefault(mode, {"errors": []})
                if "failure" in cell:
                    continue
                try:
                    o = fp8attn.attention(tq, tk, tv, mode=mode, causal=True)
                    cell["errors"].append(slice_error(o.float().cpu().numpy(), ref))
                    cell.setdefault("error", cell["errors"][0])
                except Exception as e:  # noqa: BLE001
                    results[key][mode] = {"failure": f"{type(e).__name__}: {e}"[:300]}
            del tq, tk, tv
            torch.cuda.empty_cache()
        if draws > 1:  # each case as it finishes: a run cut short by a time limit still says what it measured
            print(f"# {key}, {draws} draws, mean error: " + ", ".join(
                f"{m} {np.mean(c['errors']):.4f}" for m, c in results[key].items() if c.get("errors")), flush=True)
            base = results[key].get("fp8", {}).get("errors")
            if base:
                print(f"# {key}, minus fp8 (mean +- 2 s.e.): " + ", ".join(
                    f"{m} {d:+.5f} +- {2 * se:.5f}" for m, c in results[key].items()
                    if m != "fp8" and c.get("errors") for d, se in [paired_against(c["errors"], base)]), flush=True)
    return results


def paired_against(errors, baseline):
    """(mean, standard error) of errors[i] - baseline[i] over the draws: the same inputs in both, so what the
    inputs do to both cancels and only the modes' difference is left."""
    d = np.asarray(errors, np.float64) - np.asarray(baseline, np.float64)
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else float("nan")


def run_speed(configs, args):
    import torch

    import fp8attn

    rows = []
    for cfg in configs:
        gen = torch.Generator(device="cuda").manual_seed(0)
        shape_q = (cfg.batch, cfg.seqlen, cfg.heads_q, cfg.head_dim)
        shape_kv = (cfg.batch, cfg.seqlen, cfg.heads_kv, cfg.head_dim)
        q = torch.randn(shape_q, generator=gen, device="cuda").to(torch.bfloat16)
        k, v = (torch.randn(shape_kv, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
        rec = {"config": cfg.name}
        for mode in fp8attn.MODES:
            try:
                ms = bvc.time_cuda(lambda: fp8attn.attention(q, k, v, mode=mode, causal=cfg.causal), args)
                rec[mode] = cfg.flops / (ms * 1e-3) / 1e12
            except Exception as e:  # noqa: BLE001
                rec[mode] = None
                rec[f"{mode}_failure"] = f"{type(e).__name__}: {e}"[:200]
        # The attention kernel alone, on operands quantized beforehand: what each mode's quantization costs is the
        # difference to the mode's own column.
        # A head dim the build has no instance of for a mode (INT8 Q.K^T stops at D=128) is an empty cell and a
        # *_failure column, as the modes' own columns are.
        for column, mode in KERNEL_COLUMNS.items():
            try:
                q8, k8, v8, qd, kd, vd = fp8attn.modes.quantize_for(mode, q, k, v)
                paired = fp8attn.modes.k_descale_paired(mode, k)
                ms = bvc.time_cuda(lambda: fp8attn.fmha_fwd(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd,
                                                            causal=cfg.causal, k_descale_paired=paired), args)
                rec[column] = cfg.flops / (ms * 1e-3) / 1e12
            except Exception as e:  # noqa: BLE001
                rec[column] = None
                rec[f"{column}_failure"] = f"{type(e).__name__}: {e}"[:200]
        rows.append(rec)
        print(f"{cfg.name:<28}" + "".join(f"{(rec.get(m) or 0):>18.0f}" for m in (*fp8attn.MODES, *KERNEL_COLUMNS)),
              flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--accuracy", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--lengths", default="1024,4096,32768,131072")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--draws", type=int, default=1,
                    help="accuracy: inputs per case (draw 0 is the table's); with more, a second table compares "
                         "every mode with fp8 on the same draws (mean difference and its standard error)")
    ap.add_argument("--no-cudnn-fp8", action="store_true")
    ap.add_argument("--jax-timeout", type=float, default=600.0)
    ap.add_argument("--configs", default="", help="speed: substrings of the suite's config names to keep")
    ap.add_argument("--csv", default="")
    ap.add_argument("--plot", default="")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--target-ms", type=float, default=20.0)
    ap.add_argument("--jax-worker", help=argparse.SUPPRESS)
    ap.add_argument("--jax-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.jax_worker:
        jax_worker(args.jax_worker, args.jax_out)
        return
    out_rows = []
    if args.accuracy:
        cases = [(k, int(s)) for k in args.kinds.split(",") for s in args.lengths.split(",")]
        cudnn = {} if args.no_cudnn_fp8 else run_cudnn(cases, args.jax_timeout)
        modes = run_modes(cases, args.draws)
        import fp8attn

        names = [*fp8attn.MODES, "cudnn-fp8"]
        print(f"{'error vs float64 (unquantized)':<22}" + "".join(f"{n:>18}" for n in names))
        for kind, seqlen in cases:
            key = f"{kind}/{seqlen}"
            cells = {**modes.get(key, {}), "cudnn-fp8": cudnn.get(key, {"failure": "skipped"})}
            print(f"{key:<22}" + "".join(f"{cells[n]['error']:>18.4f}" if "error" in cells.get(n, {}) else
                                         f"{'-':>18}" for n in names), flush=True)
            for n in names:
                c = cells.get(n, {})
                out_rows.append({"table": "accuracy", "case": key, "provider": n, "value": c.get("error", ""),
                                 "note": c.get("failure", "")})
        if args.draws > 1:
            print_draws(cases, modes, args.draws, out_rows)
        if args.plot:
            write_plot(args.plot, cases, names, out_rows)
    if args.speed:
        configs = bvc.standard_suite()
        if args.configs:
            configs = [c for c in configs if any(w in c.name for w in args.configs.split(","))]
        import fp8attn

        print(f"{'TFLOP/s (quantization included)':<28}" + "".join(f"{m:>18}" for m in (*fp8attn.MODES, *KERNEL_COLUMNS)))
        for rec in run_speed(configs, args):
            for m in (*fp8attn.MODES, *KERNEL_COLUMNS):
                out_rows.append({"table": "speed", "case": rec["config"], "provider": m, "value": rec.get(m) or "",
                                 "note": rec.get(f"{m}_failure", "")})
    if args.csv and out_rows:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["table", "case", "provider", "value", "note"])
            w.writeheader()
            w.writerows(out_rows)


def print_draws(cases, modes, draws, out_rows):
    """Per case and mode: the mean error over the draws and the paired difference to fp8 (mean +- 2 standard
    errors). A slice's error is dominated by its first rows (row 0 attends one key, so its output is a single
    value row and carries most of the reference's norm), so one draw's ranking of two modes is mostly their
    rounding of a few hundred values; the paired difference over draws is what says whether a mode is worse."""
    import fp8attn

    others = [m for m in fp8attn.MODES if m != "fp8"]
    print(f"\n{'mean error, ' + str(draws) + ' draws':<22}{'fp8':>10}" +
          "".join(f"{m:>30}" for m in others) + "   (each: mean, then minus fp8: mean +- 2 s.e.)")
    for kind, seqlen in cases:
        key = f"{kind}/{seqlen}"
        base = modes.get(key, {}).get("fp8", {}).get("errors", [])
        line = f"{key:<22}" + (f"{np.mean(base):>10.4f}" if base else f"{'-':>10}")
        for m in others:
            errs = modes.get(key, {}).get(m, {}).get("errors", [])
            if not errs or len(errs) != len(base):
                line += f"{'-':>30}"
                continue
            diff, se = paired_against(errs, base)
            worse = diff - 2 * se > 0
            line += f"{np.mean(errs):>10.4f} {diff:>+9.4f} +-{2 * se:.4f}{'*' if worse else ' '}"
            out_rows.append({"table": "accuracy_draws", "case": key, "provider": m, "value": float(np.mean(errs)),
                             "note": f"minus fp8 {diff:+.5f} +- {2 * se:.5f} (2 s.e., {len(errs)} draws)"
                                     + ("; worse than fp8" if worse else "")})
        if base:
            out_rows.append({"table": "accuracy_draws", "case": key, "provider": "fp8", "value": float(np.mean(base)),
                             "note": f"{len(base)} draws"})
        print(line, flush=True)
    print("(* = worse than fp8 by more than two standard errors of the paired difference)")


def write_plot(path, cases, names, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(KINDS), figsize=(15, 4.5), sharey=False)
    for ax, kind in zip(axes, KINDS):
        lengths = sorted({s for k, s in cases if k == kind})
        for n in names:
            ys = [next((r["value"] for r in rows if r["case"] == f"{kind}/{s}" and r["provider"] == n
                        and r["value"] != ""), float("nan")) for s in lengths]
            ax.plot(lengths, ys, marker="o", label=n)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(kind)
        ax.set_xlabel("sequence length")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("relative L2 error vs float64")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
