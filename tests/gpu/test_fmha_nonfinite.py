"""NaN and Inf inputs reach only the rows they touch (e4m3 and bf16, causal and not).

Semantics (fmha_fwd's docstring): a row whose scores hold NaN gets NaN in O and in LSE (LSE = -inf stays
reserved for "the row saw no key"). What a non-finite input touches:
  * Q row i of head h: that (row, head) alone;
  * key j of K or V in kv head g: every query row of the heads of group g (h // (H_q / H_kv) == g) that sees
    key j, i.e. all rows without causal masking and rows i >= j - (S_k - S_q) with it (bottom-right aligned).
NaN in K makes the touched rows' scores NaN (O and LSE NaN); NaN in V leaves the scores alone, so O is NaN and
LSE is unchanged. +Inf makes scores +-Inf, which gives NaN or Inf, again only in the rows it touches. e4m3fn has
no infinity (torch turns an overflow into NaN), so the e4m3 +Inf case comes from a per-head descale.

Every row that is not touched must come out bit-identical to a run on the same inputs without the NaN or Inf,
and that clean run passes every check of fmha_utils.run_and_check (float64 accuracy rule, LSE), so untouched
rows are also correct. The hard cases are rows of the same tile: a causal row that does not see key j shares
its KV tile (and its P V product, where 0 * NaN = NaN) with rows that do.
"""

import dataclasses

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402
from fmha_utils import Problem  # noqa: E402

# S_q < S_k (causal offset 133, no empty row), S_k not a multiple of any block_n (a partial last tile),
# GQA with two query heads per kv head, two batches.
B, SQ, SK, HQ, HKV, D = 2, 200, 333, 4, 2, 128
GROUP = HQ // HKV
DTYPES = ["e4m3", "bf16"]
# Keys: the middle of the second tile (causal rows 117.. see it, rows 0..116 of the same first query block do
# not), the last key (only the last causal row sees it), the first key (every row sees it).
KEYS = [0, 250, SK - 1]


def causal_id(c):
    return "causal" if c else "full"


def problem(dtype, causal, descale="tensor", seqlen_k=SK):
    return Problem(batch=B, seqlen_q=SQ, seqlen_k=seqlen_k, heads_q=HQ, heads_kv=HKV, head_dim=D, causal=causal,
                   dtype=dtype, descale=descale)


def clean_run(p, seed):
    """Inputs of p, and O, LSE of fmha_fwd on them after every accuracy check."""
    fu.require_compiled(p.dtype, D, p.causal)
    inp = fu.make_inputs(p, seed)
    result = fu.run_and_check(inp, causal=p.causal, what=f"clean {p} ")
    return inp, result["o"], result["lse"]


def poisoned(x, index, value):
    """A copy of x with x[index] = value (float('nan') or float('inf')); e4m3 NaN is the byte 0x7F."""
    y = x.clone()
    if y.dtype == fu.E4M3:
        assert value != value, "e4m3fn has no infinity"
        y.view(torch.uint8)[index] = 0x7F
    else:
        y[index] = value
    return y


def sees_key(j, causal, seqlen_k=SK):
    """Bool [S_q]: query rows that see key j."""
    rows = torch.arange(SQ, device=fu.DEVICE)
    if not causal:
        return torch.ones(SQ, dtype=torch.bool, device=fu.DEVICE)
    return rows + (seqlen_k - SQ) >= j


def touched_by_key(b, j, g, causal, seqlen_k=SK):
    """Bool [B, S_q, H_q]: the (row, head) pairs that key j of kv head g in batch b reaches."""
    t = torch.zeros((B, SQ, HQ), dtype=torch.bool, device=fu.DEVICE)
    t[b, :, g * GROUP:(g + 1) * GROUP] = sees_key(j, causal, seqlen_k)[:, None]
    return t


def touched_row(b, i, h):
    t = torch.zeros((B, SQ, HQ), dtype=torch.bool, device=fu.DEVICE)
    t[b, i, h] = True
    return t


def _where(mask, limit=6):
    """The first few (batch, row, head) positions of a bool [B, S, H] mask, for messages."""
    return [tuple(x) for x in mask.nonzero()[:limit].tolist()]


def shares_key_tile(b, j, g, causal, block_m, block_n, seqlen_k=SK):
    """Bool [B, S_q, H_q]: rows that mask key j (causal) but whose query block still multiplies j's key tile in
    P.V. There P = 0 meets V[j] = NaN and 0 * NaN = NaN: the documented result (README, "Semantics") is that a
    NaN in V reaches these rows too. Everything else that does not see j must stay clean."""
    t = torch.zeros((B, SQ, HQ), dtype=torch.bool, device=fu.DEVICE)
    if not causal:
        return t
    rows = torch.arange(SQ, device=fu.DEVICE)
    block_end = torch.div(rows, block_m, rounding_mode="floor") * block_m + block_m  # exclusive
    processed = (j // block_n) * block_n < torch.clamp(block_end + (seqlen_k - SQ), max=seqlen_k)
    t[b, :, g * GROUP:(g + 1) * GROUP] = (processed & ~sees_key(j, causal, seqlen_k))[:, None]
    return t


def check_isolated(clean_o, clean_lse, o, lse, touched, o_touched, lse_touched, what, may_touch=None):
    """Compares the poisoned run (o [B, S_q, H_q, D], lse [B, H_q, S_q] or None) with the clean one.

    touched: bool [B, S_q, H_q]. Untouched rows: bit-identical to the clean run, in O and LSE.
    o_touched: "nan" (every element of every touched row NaN) or "nonfinite" (at least one touched row holds a
    NaN or an Inf: +-Inf scores need not poison every row they reach). lse_touched: "nan", "clean"
    (bit-identical to the clean run) or "any"."""
    torch.cuda.synchronize()
    assert touched.any(), "the test touches no row"
    keep = ~touched if may_touch is None else ~(touched | may_touch)  # may_touch: either outcome is documented

    # Untouched rows: exactly the clean run's values (which are finite and passed the float64 check).
    leaked = keep & ~(o == clean_o).all(dim=-1)  # NaN != NaN: a leaked NaN counts as a difference
    assert not leaked.any(), (
        f"{what}: {int(leaked.sum())} untouched (batch, row, head) rows of O differ from the clean run "
        f"({int((keep & ~torch.isfinite(o).all(dim=-1)).sum())} of them non-finite), e.g. at {_where(leaked)}")

    rows = o[touched]  # [N, D]
    if o_touched == "nan":
        bad = ~torch.isnan(rows).all(dim=-1)
        assert not bad.any(), (
            f"{what}: {int(bad.sum())} of {rows.shape[0]} touched rows of O are not all NaN, e.g. at "
            f"{_where(touched & ~torch.isnan(o).all(dim=-1))}")
    elif o_touched == "nonfinite":
        assert (~torch.isfinite(rows)).any(), f"{what}: no touched row of O shows the non-finite input"
    else:
        raise ValueError(o_touched)

    if lse is None:
        return
    lse_bsh = lse.permute(0, 2, 1)  # [B, S_q, H_q], like touched
    clean_bsh = clean_lse.permute(0, 2, 1)
    lse_leaked = keep & ~(lse_bsh == clean_bsh)
    assert not lse_leaked.any(), (
        f"{what}: {int(lse_leaked.sum())} untouched rows of LSE differ from the clean run, e.g. at "
        f"{_where(lse_leaked)}")
    if lse_touched == "nan":
        bad = touched & ~torch.isnan(lse_bsh)
        assert not bad.any(), (
            f"{what}: LSE of {int(bad.sum())} touched rows is not NaN (a row whose scores hold NaN gets NaN, "
            f"not -inf), e.g. at {_where(bad)}: {lse_bsh[bad][:4].tolist()}")
    elif lse_touched == "clean":
        bad = touched & ~(lse_bsh == clean_bsh)
        assert not bad.any(), (
            f"{what}: LSE of {int(bad.sum())} touched rows changed, but V does not enter the scores, e.g. at "
            f"{_where(bad)}")
    elif lse_touched != "any":
        raise ValueError(lse_touched)


def run(inp, causal, return_lse=True, **replace):
    """fmha_fwd on inp with some operands replaced (q=, k=, v=, k_descale=, ...)."""
    inp = dataclasses.replace(inp, **replace)
    result = fp8attn.fmha_fwd(inp.q, inp.k, inp.v, causal=causal, return_lse=return_lse, **inp.kwargs())
    return result if return_lse else (result, None)


# ---- NaN -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("row", [0, 150, SQ - 1], ids=lambda r: f"row{r}")
@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_in_q_reaches_its_row_only(dtype, causal, row, seed):
    inp, clean_o, clean_lse = clean_run(problem(dtype, causal), seed)
    b, h = 1, 3
    o, lse = run(inp, causal, q=poisoned(inp.q, (b, row, h, 17), float("nan")))
    check_isolated(clean_o, clean_lse, o, lse, touched_row(b, row, h), "nan", "nan",
                   f"NaN in q[{b}, {row}, {h}, 17] ({dtype}, {causal_id(causal)})")


@pytest.mark.parametrize("key", KEYS, ids=lambda j: f"key{j}")
@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_in_k_reaches_the_rows_that_see_it(dtype, causal, key, seed):
    inp, clean_o, clean_lse = clean_run(problem(dtype, causal), seed)
    b, g = 0, 1
    o, lse = run(inp, causal, k=poisoned(inp.k, (b, key, g, 7), float("nan")))
    check_isolated(clean_o, clean_lse, o, lse, touched_by_key(b, key, g, causal), "nan", "nan",
                   f"NaN in k[{b}, {key}, {g}, 7] ({dtype}, {causal_id(causal)})")


@pytest.mark.parametrize("key", KEYS, ids=lambda j: f"key{j}")
@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_in_v_reaches_the_rows_that_see_it(dtype, causal, key, seed):
    """The whole value vector of key j is NaN: every row that sees j gets an all-NaN O row; LSE is unchanged.
    Causal rows that mask j but share its key tile with their query block may get NaN too (0 * NaN in the
    P.V product; documented); every other row stays bit-identical to the clean run."""
    inp, clean_o, clean_lse = clean_run(problem(dtype, causal), seed)
    b, g = 1, 0
    k = fp8attn.find_kernel(fp8attn.select_kernel(inp.q, inp.k, inp.v, causal=causal, return_lse=True, **inp.kwargs()))
    may = shares_key_tile(b, key, g, causal, k["block_m"], k["block_n"])
    o, lse = run(inp, causal, v=poisoned(inp.v, (b, key, g), float("nan")))
    check_isolated(clean_o, clean_lse, o, lse, touched_by_key(b, key, g, causal), "nan", "clean",
                   f"NaN in v[{b}, {key}, {g}, :] ({dtype}, {causal_id(causal)})", may_touch=may)


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_nan_without_lse(which, seed):
    """The call without LSE, non-causal, S_k a multiple of 128: the heuristic may pick another instance (the
    warp-specialized even-N one) than with LSE; the same isolation holds for O."""
    fu.require_compiled("e4m3", D, False)
    p = problem("e4m3", False, seqlen_k=256)
    inp = fu.make_inputs(p, seed)
    name = fp8attn.select_kernel(inp.q, inp.k, inp.v, **inp.kwargs())
    clean_o, _ = run(inp, False, return_lse=False)
    torch.cuda.synchronize()
    fu.check_written(clean_o, None, fu.empty_rows(SQ, 256, False))
    fu.check_accuracy(clean_o, inp, False, D ** -0.5, fu.block_n_of(name), what=f"clean [{name}] ")
    key = 200
    if which == "q":
        op, touched = dict(q=poisoned(inp.q, (0, 77, 2, 0), float("nan"))), touched_row(0, 77, 2)
    elif which == "k":
        op, touched = dict(k=poisoned(inp.k, (1, key, 1, 5), float("nan"))), touched_by_key(1, key, 1, False, 256)
    else:
        op, touched = dict(v=poisoned(inp.v, (1, key, 0), float("nan"))), touched_by_key(1, key, 0, False, 256)
    o, _ = run(inp, False, return_lse=False, **op)
    check_isolated(clean_o, None, o, None, touched, "nan", "any", f"NaN in {which} without LSE [{name}]")


# ---- +Inf ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
def test_inf_in_q_bf16(causal, seed):
    """+Inf in one element of a query row: its scores are +-Inf (the keys' signs differ), the row is NaN."""
    inp, clean_o, clean_lse = clean_run(problem("bf16", causal), seed)
    b, i, h = 0, 50, 1
    o, lse = run(inp, causal, q=poisoned(inp.q, (b, i, h, 3), float("inf")))
    check_isolated(clean_o, clean_lse, o, lse, touched_row(b, i, h), "nonfinite", "any",
                   f"+Inf in q[{b}, {i}, {h}, 3] (bf16, {causal_id(causal)})")


@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
def test_inf_in_k_bf16(causal, seed):
    """+Inf in one element of key 250: the rows that see it get a +Inf or -Inf score (by the sign of their
    query element), so some of them are NaN; no other row may change."""
    inp, clean_o, clean_lse = clean_run(problem("bf16", causal), seed)
    b, j, g = 0, 250, 1
    o, lse = run(inp, causal, k=poisoned(inp.k, (b, j, g, 3), float("inf")))
    check_isolated(clean_o, clean_lse, o, lse, touched_by_key(b, j, g, causal), "nonfinite", "any",
                   f"+Inf in k[{b}, {j}, {g}, 3] (bf16, {causal_id(causal)})")


@pytest.mark.parametrize("causal", [False, True], ids=causal_id)
def test_inf_descale_e4m3(causal, seed):
    """k_descale = +Inf for one (batch, kv head) of per-head descales: every score of that group's heads is
    +-Inf (e4m3 has no Inf of its own); the other heads and batches must not change."""
    inp, clean_o, clean_lse = clean_run(problem("e4m3", causal, descale="head"), seed)
    b, g = 1, 0
    k_descale = inp.k_descale.clone()
    k_descale[b, g] = float("inf")
    o, lse = run(inp, causal, k_descale=k_descale)
    touched = torch.zeros((B, SQ, HQ), dtype=torch.bool, device=fu.DEVICE)
    touched[b, :, g * GROUP:(g + 1) * GROUP] = True
    check_isolated(clean_o, clean_lse, o, lse, touched, "nonfinite", "any",
                   f"k_descale[{b}, {g}] = +Inf (e4m3, {causal_id(causal)})")
