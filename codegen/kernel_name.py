"""Procedural kernel names (CUTLASS style): one function formats, one parses, and they round-trip.

Attention:
    fp8attn_sm90_fmha_fwd_<qk>_<v>_<acc>_<out>_<BM>x<BN>x<D>_w<warps>_s<stages>_<layout>_<mask>[_ws][_evenn]

    layout  "strided": any (batch, seq, head) strides with head_dim contiguous (BSHD and BHSD alike)
    mask    "causal" or "full"
    ws      warp-specialized main loop (a producer partition issues the TMA loads)
    evenn   no masked tail: only valid when seqlen_k % BN == 0 and not causal

V transpose (the FP8 P.V operand must be sequence-contiguous):
    fp8attn_sm90_transpose_v_<type>_<BS>x<D>_w<warps>
"""

import re
from dataclasses import dataclass

ARCH = "sm90"
TYPES = ("e4m3", "e5m2", "bf16", "f16", "f32", "u8")


@dataclass(frozen=True)
class FmhaConfig:
    qk_type: str
    v_type: str
    acc_type: str
    out_type: str
    block_m: int
    block_n: int
    head_dim: int
    warps: int
    stages: int
    causal: bool
    warp_specialized: bool = False
    even_n: bool = False
    layout: str = "strided"

    @property
    def is_fp8(self):
        return self.qk_type in ("e4m3", "e5m2")


@dataclass(frozen=True)
class TransposeConfig:
    dtype: str
    block_s: int
    head_dim: int
    warps: int


_FMHA_RE = re.compile(
    rf"fp8attn_{ARCH}_fmha_fwd_(?P<qk>[a-z0-9]+)_(?P<v>[a-z0-9]+)_(?P<acc>[a-z0-9]+)_(?P<out>[a-z0-9]+)_"
    r"(?P<bm>\d+)x(?P<bn>\d+)x(?P<d>\d+)_w(?P<w>\d+)_s(?P<s>\d+)_(?P<layout>strided)_(?P<mask>causal|full)"
    r"(?P<ws>_ws)?(?P<evenn>_evenn)?")
_TRANSPOSE_RE = re.compile(rf"fp8attn_{ARCH}_transpose_v_(?P<t>[a-z0-9]+)_(?P<bs>\d+)x(?P<d>\d+)_w(?P<w>\d+)")


def fmha_name(c: FmhaConfig) -> str:
    name = (f"fp8attn_{ARCH}_fmha_fwd_{c.qk_type}_{c.v_type}_{c.acc_type}_{c.out_type}_"
            f"{c.block_m}x{c.block_n}x{c.head_dim}_w{c.warps}_s{c.stages}_{c.layout}_"
            f"{'causal' if c.causal else 'full'}")
    if c.warp_specialized:
        name += "_ws"
    if c.even_n:
        name += "_evenn"
    return name


def transpose_name(c: TransposeConfig) -> str:
    return f"fp8attn_{ARCH}_transpose_v_{c.dtype}_{c.block_s}x{c.head_dim}_w{c.warps}"


def parse_name(name: str):
    """FmhaConfig or TransposeConfig from a name; ValueError naming the name if it is not one of ours."""
    m = _FMHA_RE.fullmatch(name)
    if m:
        for field in ("qk", "v", "acc", "out"):
            if m[field] not in TYPES:
                raise ValueError(f"kernel name {name!r}: unknown type {m[field]!r}")
        return FmhaConfig(m["qk"], m["v"], m["acc"], m["out"], int(m["bm"]), int(m["bn"]), int(m["d"]),
                          int(m["w"]), int(m["s"]), m["mask"] == "causal", bool(m["ws"]), bool(m["evenn"]),
                          m["layout"])
    m = _TRANSPOSE_RE.fullmatch(name)
    if m and m["t"] in TYPES:
        return TransposeConfig(m["t"], int(m["bs"]), int(m["d"]), int(m["w"]))
    raise ValueError(f"kernel name {name!r} is not an fp8attn kernel name")


def name_of(config) -> str:
    return fmha_name(config) if isinstance(config, FmhaConfig) else transpose_name(config)
