"""The Gluon attention kernel's tensor-core steps: S = Q K^T issued and waited for (_s_issue, _s_wait; two halves
under SPLIT_S), P.V issued and folded into O (_pv_issue, _pv_fold; D=256 in column parts: _pv_parts,
_pv_parts_pipelined), and a ring stage viewed as an MMA operand (_k_tile, _v_tile)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait

from fmha_fwd.gluon_constants import WG_M


@gluon.jit
def _k_tile(k_bufs, s, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Stage s of the K ring, [BLOCK_N, HEAD_DIM] head_dim contiguous, viewed K-major as S = Q K^T's B."""
    return k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))


@gluon.jit
def _v_tile(v_bufs, s, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, V_NATURAL: gl.constexpr):
    """Stage s of the V ring as P.V's B operand [BLOCK_N, HEAD_DIM]. FP8: V^T's [HEAD_DIM, BLOCK_N] tile
    (sequence contiguous) viewed K-major (FP8 wgmma needs both operands K-major). BF16 (V_NATURAL): V's own
    [BLOCK_N, HEAD_DIM] tile, head_dim contiguous (16-bit wgmma reads an N-major B)."""
    if V_NATURAL:
        tile = v_bufs.index(s).reshape([BLOCK_N, HEAD_DIM])
    else:
        tile = v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N]).permute((1, 0))
    return tile


@gluon.jit
def _pv_parts(p8, v_bufs, s, acc, rescale, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, PV_N: gl.constexpr,
              layout: gl.constexpr):
    """P.V at HEAD_DIM = 4 PV_N, in four column parts: the two-level accumulation needs a fresh product beside
    the accumulator, and a whole [64, 256] product (128 registers) next to O (128) does not fit the 240 registers
    a consumer thread gets. Parts 0-2 are issued, waited for and folded one at a time (32 registers in flight);
    part 3 is returned in flight and the caller waits for it and folds it before issuing the next S (issuing S
    behind part 3 spilled 4x more, docs/perf/NOTES.md), so at D=256 a warpgroup's P.V and its next S do not
    overlap; the other warpgroup's work fills the tensor cores meanwhile. acc is a tuple of four [64, PV_N]
    accumulators; returns (acc with parts 0-2 folded, part 3's product)."""
    vt = v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N])
    a0 = acc[0] * rescale[:, None] + warpgroup_mma_wait(num_outstanding=0, deps=(warpgroup_mma(
        p8, vt.slice(0, PV_N, dim=0).permute((1, 0)), gl.zeros([WG_M, PV_N], gl.float32, layout), use_acc=False,
        is_async=True), ))
    a1 = acc[1] * rescale[:, None] + warpgroup_mma_wait(num_outstanding=0, deps=(warpgroup_mma(
        p8, vt.slice(PV_N, PV_N, dim=0).permute((1, 0)), gl.zeros([WG_M, PV_N], gl.float32, layout), use_acc=False,
        is_async=True), ))
    a2 = acc[2] * rescale[:, None] + warpgroup_mma_wait(num_outstanding=0, deps=(warpgroup_mma(
        p8, vt.slice(2 * PV_N, PV_N, dim=0).permute((1, 0)), gl.zeros([WG_M, PV_N], gl.float32, layout),
        use_acc=False, is_async=True), ))
    pv3 = warpgroup_mma(p8, vt.slice(3 * PV_N, PV_N, dim=0).permute((1, 0)),
                        gl.zeros([WG_M, PV_N], gl.float32, layout), use_acc=False, is_async=True)
    return (a0, a1, a2, acc[3]), pv3


@gluon.jit
def _pv_part(p8, vt, c: gl.constexpr, PV_N: gl.constexpr, layout: gl.constexpr):
    """Column part c of P.V (V^T rows c * PV_N ...), issued into a fresh accumulator."""
    return warpgroup_mma(p8, vt.slice(c * PV_N, PV_N, dim=0).permute((1, 0)),
                         gl.zeros([WG_M, PV_N], gl.float32, layout), use_acc=False, is_async=True)


@gluon.jit
def _pv_parts_pipelined(p8, v_bufs, s, acc, rescale, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                        PV_N: gl.constexpr, layout: gl.constexpr):
    """PV_PIPELINED: P.V at HEAD_DIM = 8 PV_N (PV_N = 32) in eight column parts, two in flight: part c + 1 is
    issued before part c is waited for and folded, so each part's MMA latency runs under the previous part's fold
    (_pv_parts waits for each of its four parts in turn). Two [64, 32] products in flight take the 32 registers one
    [64, 64] part takes there. Returns (acc with parts 0-6 folded, part 7's product in flight)."""
    vt = v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N])
    r = rescale[:, None]
    q = _pv_part(p8, vt, 0, PV_N, layout)
    out = ()
    for c in gl.static_range(1, HEAD_DIM // PV_N):
        q_next = _pv_part(p8, vt, c, PV_N, layout)
        out = out + (acc[c - 1] * r + warpgroup_mma_wait(num_outstanding=1, deps=(q, )), )
        q = q_next
    return out + (acc[HEAD_DIM // PV_N - 1], ), q


@gluon.jit
def _pv_issue(p8, v_bufs, s, acc, rescale, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, PV_N: gl.constexpr,
              V_NATURAL: gl.constexpr, layout: gl.constexpr, SPLIT_S: gl.constexpr = False,
              LAZY_RESCALE: gl.constexpr = False):
    """Issues one KV tile's P.V; returns (acc, the product in flight), for _pv_fold once it is done.
    FP8: into a fresh accumulator (two-level accumulation; D=256: parts 0-2 already folded, see _pv_parts).
    BF16: into acc * rescale itself (one level: 16-bit products accumulate in float32 exactly enough; the two
    levels are for FP8's limited accumulator), no fresh product beside O, 64 registers fewer; at D=256 too, in one
    [64, 256] product (wgmma's widest N). LAZY_RESCALE (BF16): acc has been rescaled already (_rescale_by_warp)."""
    if SPLIT_S:  # P as two 128-key operands (_softmax_tile_int8_split), chained into one product
        vt = v_bufs.index(s).reshape([HEAD_DIM, BLOCK_N])
        HALF: gl.constexpr = BLOCK_N // 2
        pv = warpgroup_mma(p8[0], vt.slice(0, HALF, dim=1).permute((1, 0)),
                           gl.zeros([WG_M, HEAD_DIM], gl.float32, layout), use_acc=False, is_async=True)
        pv = warpgroup_mma(p8[1], vt.slice(HALF, HALF, dim=1).permute((1, 0)), pv, use_acc=True, is_async=True)
    elif HEAD_DIM > 128 and not V_NATURAL and HEAD_DIM == 8 * PV_N:
        acc, pv = _pv_parts_pipelined(p8, v_bufs, s, acc, rescale, BLOCK_N, HEAD_DIM, PV_N, layout)
    elif HEAD_DIM > 128 and not V_NATURAL:
        acc, pv = _pv_parts(p8, v_bufs, s, acc, rescale, BLOCK_N, HEAD_DIM, PV_N, layout)
    elif V_NATURAL and LAZY_RESCALE:
        pv = warpgroup_mma(p8, _v_tile(v_bufs, s, BLOCK_N, HEAD_DIM, V_NATURAL), acc, use_acc=True, is_async=True)
    elif V_NATURAL:
        pv = warpgroup_mma(p8, _v_tile(v_bufs, s, BLOCK_N, HEAD_DIM, V_NATURAL), acc * rescale[:, None],
                           use_acc=True, is_async=True)
    else:
        pv = warpgroup_mma(p8, _v_tile(v_bufs, s, BLOCK_N, HEAD_DIM, V_NATURAL),
                           gl.zeros([WG_M, HEAD_DIM], gl.float32, layout), use_acc=False, is_async=True)
    return acc, pv


@gluon.jit
def _pv_fold(acc, pv, rescale, HEAD_DIM: gl.constexpr, V_NATURAL: gl.constexpr, PV_N: gl.constexpr):
    """The accumulator after _pv_issue's product `pv` has completed."""
    if HEAD_DIM > 128 and not V_NATURAL:  # column parts: the last one is in flight
        out = ()
        for c in gl.static_range(HEAD_DIM // PV_N - 1):
            out = out + (acc[c], )
        out = out + (acc[HEAD_DIM // PV_N - 1] * rescale[:, None] + pv, )
    elif V_NATURAL:
        out = pv
    else:
        out = acc * rescale[:, None] + pv
    return out


@gluon.jit
def _s_zeros(M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr, QK_INT8: gl.constexpr):
    """The S accumulator: int32 for INT8 Q.K^T (integer wgmma), float32 otherwise."""
    if QK_INT8:
        return gl.zeros([M, N], gl.int32, layout)
    else:
        return gl.zeros([M, N], gl.float32, layout)


@gluon.jit
def _s_issue(q_tile, k_bufs, s, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, s_layout: gl.constexpr,
             QK_INT8: gl.constexpr, SPLIT_S: gl.constexpr):
    """Issues S = Q K^T of ring stage s: one product, or (SPLIT_S) two [64, 128] ones over the two halves of a
    256-key tile (two commit groups)."""
    if SPLIT_S:
        kt = k_bufs.index(s).reshape([BLOCK_N, HEAD_DIM])
        HALF: gl.constexpr = BLOCK_N // 2
        qa = warpgroup_mma(q_tile, kt.slice(0, HALF, dim=0).permute((1, 0)), _s_zeros(WG_M, HALF, s_layout, QK_INT8),
                           use_acc=False, is_async=True)
        qb = warpgroup_mma(q_tile, kt.slice(HALF, HALF, dim=0).permute((1, 0)),
                           _s_zeros(WG_M, HALF, s_layout, QK_INT8), use_acc=False, is_async=True)
        qk = (qa, qb)
    else:
        qk = warpgroup_mma(q_tile, _k_tile(k_bufs, s, BLOCK_N, HEAD_DIM), _s_zeros(WG_M, BLOCK_N, s_layout, QK_INT8),
                           use_acc=False, is_async=True)
    return qk


@gluon.jit
def _s_wait(qk, SPLIT_S: gl.constexpr):
    """Waits for everything issued (S included): the scores, one tensor or the two halves."""
    if SPLIT_S:
        qk = warpgroup_mma_wait(num_outstanding=0, deps=qk)
    else:
        qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk, ))
    return qk


@gluon.constexpr_function
def _skip_rescale_asm(PACK):
    """PTX for _rescale_by_warp: PACK accumulator values ($0..: outputs tied to their inputs), their rows' factors
    and the warp's flag; the multiplies behind a branch on the flag, which is the same in every lane of the warp
    (a uniform branch: a skipped block costs its compare and branch, not PACK multiplies). Labels inside { } are
    local to the block, so the PACK-wide copies of this text in one function do not clash."""
    body = " ".join(f"mul.f32 ${i}, ${i}, ${2 * PACK + i};" for i in range(PACK))
    return (f"{{ .reg .pred skip; setp.ne.b32 skip, ${3 * PACK}, 0; @skip bra SKIP_RESCALE; {body} SKIP_RESCALE: }}")


@gluon.constexpr_function
def _skip_rescale_pack(HEAD_DIM):
    """Accumulator values per branch of _rescale_by_warp: all of a thread's (HEAD_DIM / 2 of a [64, HEAD_DIM]
    fragment) up to 64, the most an asm block was tried with (D=256: two branches of 64 multiplies)."""
    return min(64, HEAD_DIM // 2)


@gluon.constexpr_function
def _skip_rescale_constraints(PACK):
    return ",".join(["=r"] * PACK + [str(i) for i in range(PACK)] + ["r"] * (2 * PACK))


@gluon.jit
def _rescale_by_warp(acc, rescale):
    """LAZY_RESCALE (BF16): acc * rescale[:, None], skipped by every warp of the warpgroup whose rows all keep their
    frame (factor exactly 1, what _softmax_tile_lazy gives after a row's first tiles). The decision is per warp, a
    vote over its 16 rows (vote.sync.all), so no shared memory and no barrier: the warpgroup-wide minimum an
    earlier version took cost two barriers a tile and measured 1-4% slower (docs/perf/NOTES.md, 2026-12-04)."""
    # The warp's flag, in every lane: 1 when every factor its lanes hold (rows r and r + 8 of the accumulator
    # fragment, the two values a thread holds of the row vector) is exactly 1.
    flag = gl.inline_asm_elementwise(
        "{ .reg .pred one; setp.eq.f32 one, $2, 0f3F800000; setp.eq.and.f32 one, $3, 0f3F800000, one; "
        "vote.sync.all.pred one, one, 0xffffffff; selp.u32 $0, 1, 0, one; mov.b32 $1, $0; }",
        "=r,=r,r,r", [rescale], gl.int32, False, 2)  # not pure: a warp-wide vote, never to be moved or merged
    PACK: gl.constexpr = _skip_rescale_pack(acc.shape[1])
    factors, _ = gl.broadcast(rescale[:, None], acc)  # broadcasts: no data moves
    flags, _ = gl.broadcast(flag[:, None], acc)
    return gl.inline_asm_elementwise(_skip_rescale_asm(PACK), _skip_rescale_constraints(PACK),
                                     [acc, factors, flags], gl.float32, True, PACK)

