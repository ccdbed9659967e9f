"""Where the host time of one fp8attn.fmha_fwd call goes (a diagnostic beside bench_host_overhead.py).

Times, per call, each piece a Python call is made of, on a tiny problem (B=1, H=1, S=128, D=128): torch's own
costs (an allocation, reading a tensor's metadata, the current stream), the C++ crossing without a launch
(select_kernel: tensor reads + validation), and the whole call for BF16 and FP8. Host time only: calls are
issued back to back and synchronized outside the timed loop.

    PYTHONPATH=build/python python3 bench/host_call_breakdown.py
"""

import statistics
import time

import torch

import fp8attn
from fp8attn import fmha as _fmha


def per_call_us(fn, n=300, loops=30):
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(loops):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


def main():
    dev = torch.device("cuda")
    b, s, h, d = 1, 128, 1, 128
    qb = torch.randn(b, s, h, d, device=dev, dtype=torch.bfloat16)
    q8 = qb.to(torch.float8_e4m3fn)
    one = torch.ones(1, device=dev)
    out = torch.empty_like(qb)
    ext = fp8attn._fp8attn_ext
    rows = [
        ("torch.empty(out)", lambda: torch.empty(qb.shape, dtype=torch.bfloat16, device=dev)),
        ("torch.empty(workspace bytes)", lambda: torch.empty((65536,), dtype=torch.uint8, device=dev)),
        ("q.data_ptr()", lambda: qb.data_ptr()),
        ("q.shape", lambda: qb.shape),
        ("q.stride()", lambda: qb.stride()),
        ("q.get_device()", lambda: qb.get_device()),
        ("current_device()", lambda: torch.cuda.current_device()),
        ("raw current stream", lambda: torch._C._cuda_getCurrentRawStream(0)),
        ("ext.select_kernel bf16 (read + validate)",
         lambda: ext.select_kernel(qb, qb, qb, out, None, None, None, None, False, 0.0, "", False, False)),
        ("ext.select_kernel e4m3",
         lambda: ext.select_kernel(q8, q8, q8, out, None, one, one, one, False, 0.0, "", False, False)),
        ("ext.fmha_fwd bf16, out given",
         lambda: ext.fmha_fwd(qb, qb, qb, out, None, None, None, None, False, 0.0, "", False, False,
                              stream=torch._C._cuda_getCurrentRawStream(0), allocate=_fmha._workspace_alloc,
                              release=_fmha._workspace_free)),
        ("raw alloc + free (workspace)",
         lambda: _fmha._workspace_free(_fmha._workspace_alloc(65536, torch._C._cuda_getCurrentRawStream(0)))),
        ("torch.empty_like(q)", lambda: torch.empty_like(qb)),
        ("q.new_empty(q.shape)", lambda: qb.new_empty(qb.shape)),
        ("torch.empty(shape, dtype, device=dev)", lambda: torch.empty(qb.shape, dtype=torch.bfloat16, device=dev)),
        ("torch.empty(shape, dtype, device='cuda')",
         lambda: torch.empty(qb.shape, dtype=torch.bfloat16, device="cuda")),
        ("fmha_fwd bf16", lambda: fp8attn.fmha_fwd(qb, qb, qb)),
        ("fmha_fwd bf16 out=", lambda: fp8attn.fmha_fwd(qb, qb, qb, out=out)),
        ("fmha_fwd e4m3", lambda: fp8attn.fmha_fwd(q8, q8, q8, q_descale=one, k_descale=one, v_descale=one)),
        ("torch sdpa bf16", lambda: torch.nn.functional.scaled_dot_product_attention(qb, qb, qb)),
    ]
    print(f"# host microseconds per call (median of loops), {torch.cuda.get_device_name()}")
    for name, fn in rows:
        print(f"{name:45s} {per_call_us(fn):8.2f}")


if __name__ == "__main__":
    main()
