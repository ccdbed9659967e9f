"""One kernel of interest, launched a few times, for Nsight Compute (device_check's `ncu` step): the counters that
say what bounds a kernel (tensor / exponential / issue / memory), which a timing cannot.

    prefill   the FP8 attention call of the suite's D=128 S=8192 causal point (B=4, H=32), V^T given in the
              key-permuted order, so only the attention kernel runs (the library's pick, Gluon today);
    prefill_full  the same point without the causal mask (the 128x256x128 instance)
    decode    paged FP8 decode, bench_decode.py's (32, 32k) case (GQA 32/8, D=128, pages of 64)
    decode_b128  the same at (128, 4k): 1024 work items of 4k keys (the case furthest from its target)
    decode_b8    the same at (8, 128k): 64 kv heads of 128k keys, split (4.07 TB/s on one H200, 4.36 on another)
    varlen_dense / varlen_packed
              bench_varlen.py's e4m3 32 x 1024 causal point (D=128, H=32), the dense call and the packed one: each
              call launches the V transpose and the attention kernel (the pair where varlen trails dense most)
    window / window_causal
              bench_decode.py --window's FP8 pair (S=32768, B=1, H=32, D=128, V^T given in the key-permuted order):
              causal with a 4k left window, and plain causal: the same instance at 17 against 64.5 key tiles a block
              on average (issue 9's 3.8x, read 3.53-3.65x), to split a block's fixed cost from its tiles' cost
    mode_fp8_d64 / mode_int8_d64
              the attention kernel alone on operands quantized as the fp8 and int8_qk modes make them (quantized once,
              before the launches), at the suite's D=64 S=2048 full point (B=16, H=64): where the INT8 kernel trails
              the FP8 one most (0.82 on the H200, 2026-12-05), its stall reasons beside FP8's
    mode_fp8_d64_causal8k / mode_int8_d64_causal8k
              the same at the suite's D=64 S=8192 causal point (B=4, H=64; INT8 at 0.785 of FP8 there on the H200)
    apply_fp8 / apply_int8_qk
              one fused accuracy-mode call (fp8attn.modes.attention_fused, BF16 q, k, v) at D=128 S=2048 B=16 H=32,
              where int8_qk's quantize apply passes cost 545 us against fp8's 361 (mode_stage_times.py, 2026-12-04):
              the apply kernel's three launches of one call (Q, K, V) side by side for the two modes

    ncu --clock-control none --kernel-name regex:"fmha_fwd|paged_decode" --launch-skip 3 --launch-count 1 \\
        python3 bench/ncu_targets.py prefill
    ncu --clock-control none --kernel-name regex:"fmha_fwd|transpose_v" --launch-skip 6 --launch-count 2 \\
        python3 bench/ncu_targets.py varlen_packed      (the 4th call's transpose and attention kernel)
    ncu --clock-control none --kernel-name regex:"quantize_apply" --launch-skip 9 --launch-count 3 \\
        python3 bench/ncu_targets.py apply_int8_qk      (the 4th call's three apply launches)

--clock-control none: Nsight Compute would otherwise lock the clocks to base for the measurement; the GPU's
settings are left as they are. Launches: 5 of the kernel (warm-up, then the profiled one).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_decode import WINDOW_LEFT, window_fp8_inputs  # noqa: E402  (issue 9's window pair)

LAUNCHES = 5


def prefill(causal=True):
    import torch

    import fp8attn

    b, s, h, d = 4, 8192, 32, 128
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn((b, s, h, d), generator=gen, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
    vt = fp8attn.transpose_v(v, key_permuted=True)
    one = torch.ones(1, device="cuda")
    print("kernel:", fp8attn.select_kernel(q, k, vt, q_descale=one, k_descale=one, v_descale=one, causal=causal,
                                           v_key_permuted=True))
    for _ in range(LAUNCHES):
        fp8attn.fmha_fwd(q, k, vt, q_descale=one, k_descale=one, v_descale=one, causal=causal,
                         v_key_permuted=True)
    torch.cuda.synchronize()


def window(window_left=WINDOW_LEFT):
    import torch

    import fp8attn

    q, k, vt, kw = window_fp8_inputs()
    if window_left >= 0:
        kw["window"] = (window_left, -1)
    print("kernel:", fp8attn.select_kernel(q, k, vt, **kw))
    for _ in range(LAUNCHES):
        fp8attn.fmha_fwd(q, k, vt, **kw)
    torch.cuda.synchronize()


def decode(case_name="b32_s32k"):
    import torch

    import bench_decode
    from fp8attn.paged import decode_with_name

    case = next(c for c in bench_decode.CASES if c[0] == case_name)
    q, cache, table, seqlens, out = bench_decode.make_case(case)
    for _ in range(LAUNCHES):
        _, name = decode_with_name(q, cache, table, seqlens, case[2], out=out)
    print("kernel:", name)
    torch.cuda.synchronize()


def _varlen_point(packed):
    import torch

    import fp8attn

    b, s, h, d = 32, 1024, 32, 128
    gen = torch.Generator(device="cuda").manual_seed(0)
    (q, qd), (k, kd), (v, vd) = (fp8attn.quantize(torch.randn((b, s, h, d), generator=gen, device="cuda")
                                                  .to(torch.bfloat16)) for _ in range(3))
    cu = torch.arange(0, b + 1, dtype=torch.int32, device="cuda") * s
    for _ in range(LAUNCHES):
        if packed:
            fp8attn.fmha_fwd_varlen(*(t.reshape(b * s, h, d) for t in (q, k, v)), cu, cu, s, s, causal=True,
                                    q_descale=qd, k_descale=kd, v_descale=vd)
        else:
            fp8attn.fmha_fwd(q, k, v, causal=True, q_descale=qd, k_descale=kd, v_descale=vd)
    torch.cuda.synchronize()


def _bf16_qkv(b, s, h, d):
    """Seeded BF16 q, k, v of shape [b, s, h, d] on the GPU, as a mode call takes them."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    return tuple(torch.randn((b, s, h, d), generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))


def _mode_call(mode):
    import torch

    import fp8attn.modes

    q, k, v = _bf16_qkv(16, 2048, 32, 128)
    for _ in range(LAUNCHES):
        fp8attn.modes.attention_fused(q, k, v, mode=mode)
    torch.cuda.synchronize()


def _mode_kernel(mode, b=16, s=2048, h=64, d=64, causal=False):
    import torch

    import fp8attn.modes

    q, k, v = _bf16_qkv(b, s, h, d)
    q8, k8, v8, qd, kd, vd = fp8attn.modes.quantize_for(mode, q, k, v)
    kw = dict(q_descale=qd, k_descale=kd, v_descale=vd, causal=causal,
              k_descale_paired=fp8attn.modes.k_descale_paired(mode, k))
    print("kernel:", fp8attn.select_kernel(q8, k8, v8, **kw))
    for _ in range(LAUNCHES):
        fp8attn.fmha_fwd(q8, k8, v8, **kw)
    torch.cuda.synchronize()


def varlen_dense():
    _varlen_point(False)


def varlen_packed():
    _varlen_point(True)


if __name__ == "__main__":
    targets = {"prefill": prefill, "prefill_full": lambda: prefill(causal=False), "decode": decode,
               "decode_b128": lambda: decode("b128_s4k"), "decode_b8": lambda: decode("b8_s128k"),
               "varlen_dense": varlen_dense, "varlen_packed": varlen_packed,
               "apply_fp8": lambda: _mode_call("fp8"), "apply_int8_qk": lambda: _mode_call("int8_qk"),
               "window": window, "window_causal": lambda: window(-1),
               "mode_fp8_d64": lambda: _mode_kernel("fp8"), "mode_int8_d64": lambda: _mode_kernel("int8_qk"),
               "mode_fp8_d64_causal8k": lambda: _mode_kernel("fp8", b=4, s=8192, causal=True),
               "mode_int8_d64_causal8k": lambda: _mode_kernel("int8_qk", b=4, s=8192, causal=True)}
    if len(sys.argv) != 2 or sys.argv[1] not in targets:
        sys.exit(f"usage: ncu_targets.py {{{','.join(targets)}}}")
    targets[sys.argv[1]]()
