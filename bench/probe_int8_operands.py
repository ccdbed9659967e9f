"""Why the int8_qk mode's INT8 kernel column (bench/accuracy_modes.py) reads below bench/bench_int8_instances.py's:
for the standard suite's D=64 rows, the instance fmha_fwd picks for the mode's operands (Q and K rotated, V plain) and
for a V^T given in the vkperm order, and the rates of three calls timed interleaved: rotated operands with V plain
(the library transposes V), rotated with V^T given, unrotated with V^T given (the instance bench's inputs).

    PYTHONPATH=build/python python3 bench/probe_int8_operands.py

H100, 2026-12-06 (docs/perf/NOTES.md): the same instance either way; V plain costs 1-7% (the transpose), the
rotation nothing."""
import sys
from pathlib import Path

import torch

import fp8attn
from fp8attn import modes

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_cudnn as bvc  # noqa: E402


class Timing:  # accuracy_modes.py's defaults (the --speed columns this probe explains)
    warmup = 3
    repeats = 7
    target_ms = 20.0


def main():
    for cfg in bvc.standard_suite():
        if not cfg.name.startswith("d64"):
            continue
        gen = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(cfg.batch, cfg.seqlen, cfg.heads_q, cfg.head_dim, generator=gen, device="cuda").bfloat16()
        k, v = (torch.randn(cfg.batch, cfg.seqlen, cfg.heads_kv, cfg.head_dim, generator=gen,
                            device="cuda").bfloat16() for _ in range(2))
        q8, k8, v8, qd, kd, vd = modes.quantize_for("int8_qk", q, k, v)
        vt, _ = fp8attn.quantize(v, layout="vt_kperm")
        # Unrotated INT8 operands: bench_int8_instances' inputs.
        qn, qnd = fp8attn.quantize(q, dtype="int8", granularity="block")
        kn, knd = fp8attn.quantize(k, dtype="int8", granularity="block", smooth=True)
        common = dict(v_descale=vd, causal=cfg.causal)
        plain = dict(q_descale=qd, k_descale=kd, **common)
        print(cfg.name, "pick, V plain:", fp8attn.select_kernel(q8, k8, v8, **plain),
              "| V^T given:", fp8attn.select_kernel(q8, k8, vt, v_key_permuted=True, **plain), flush=True)
        calls = [lambda: fp8attn.fmha_fwd(q8, k8, v8, **plain),
                 lambda: fp8attn.fmha_fwd(q8, k8, vt, v_key_permuted=True, **plain),
                 lambda: fp8attn.fmha_fwd(qn, kn, vt, q_descale=qnd, k_descale=knd, v_key_permuted=True, **common)]
        ms = bvc.time_cuda_interleaved(calls, Timing)
        print("  TFLOP/s rotated V plain / rotated V^T / unrotated V^T:",
              [round(cfg.flops / (t * 1e-3) / 1e12, 1) for t in ms], flush=True)


if __name__ == "__main__":
    main()
