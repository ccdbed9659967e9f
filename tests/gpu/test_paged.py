"""The paged FP8 KV cache on the H200 (fp8attn.paged: append, decode): decode against float64 attention over the
same dequantized cache with random block tables, page boundaries, odd and per-sequence lengths from 1 to 128k in
one batch, NaN-poisoned free slots and pages, GQA ratios and MQA, 1-8 speculative tokens (causal among them),
split-KV, static and per-page descales; append's bytes; invalid tables give NaN rows; CUDA-graph replay.
tests/cpu/test_paged_interpreter.py runs the same kernels in Triton's interpreter."""

import math
import re

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)

import torch  # noqa: E402

import fp8attn  # noqa: E402
from fp8attn.paged import PagedKVCache, append, decode, decode_with_name  # noqa: E402

NAN_E4M3 = 0x7F


def decode_instances():
    return sorted(k["name"] for k in fp8attn.list_operations()
                  if isinstance(k, dict) and k["name"].startswith("fp8attn_sm90_paged_decode_"))


def splits_pairs(name):
    """Whether a head-pair decode instance splits its pairs over the keys (codegen/operations/paged.py
    LIBRARY_PAIR_SPLITS, stated in the operation's summary); without it it runs one split and refuses more."""
    summary = next(k["summary"] for k in fp8attn.list_operations() if isinstance(k, dict) and k["name"] == name)
    return "_pairs" not in name or "split over the keys" in summary


def compiled(page, head_dim):
    return any(n.startswith(f"fp8attn_sm90_paged_decode_e4m3_bf16_p{page}x{head_dim}_") for n in decode_instances())


def cpu_generator(seed):
    """The inputs are drawn on the CPU (the tables are built there) and moved to the GPU."""
    return torch.Generator().manual_seed(seed)


def build(seqlens, heads_kv, head_dim, page, per_page, gen):
    """A cache holding random keys/values for each sequence (quantized by append), pages shuffled, every slot
    no sequence owns NaN. Returns (cache, block_table, seqlens tensor, float64 K/V per sequence)."""
    pages_of = [max(1, -(-s // page)) for s in seqlens]
    num_pages = sum(pages_of) + 2
    order = torch.randperm(num_pages, generator=gen)
    max_pages = max(pages_of) + 1
    table = torch.full((len(seqlens), max_pages), int(order[-1]), dtype=torch.int32)
    start = 0
    for b, n in enumerate(pages_of):
        table[b, :n] = order[start:start + n].to(torch.int32)
        start += n
    table = table.cuda()
    kd = torch.rand((num_pages if per_page else 1, heads_kv), generator=gen) * 0.02 + 0.01
    vd = torch.rand((num_pages if per_page else 1, heads_kv), generator=gen) * 0.01 + 0.005
    cache = PagedKVCache(num_pages, page, heads_kv, head_dim, per_page=per_page)
    cache.k_descale.copy_(kd if per_page else kd.expand(1, heads_kv))
    cache.v_descale.copy_(vd if per_page else vd.expand(1, heads_kv))
    cache.k_pages.view(torch.uint8).fill_(NAN_E4M3)
    cache.v_pages.view(torch.uint8).fill_(NAN_E4M3)
    for b, s in enumerate(seqlens):
        k = (torch.randn((1, s, heads_kv, head_dim), generator=gen) * 2 + 0.5).to(torch.bfloat16).cuda()
        v = torch.randn((1, s, heads_kv, head_dim), generator=gen).to(torch.bfloat16).cuda()
        if s:
            append(cache, k, v, table[b:b + 1], torch.zeros(1, dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    return cache, table, torch.tensor(seqlens, dtype=torch.int32, device="cuda"), dequantized(cache, table, seqlens)


def dequantized(cache, table, seqlens):
    """float64 K/V per sequence from the cache's bytes and descales as they are now: the reference reads back what
    append wrote (its bytes are checked in test_append_bytes)."""
    _, page, heads_kv, head_dim = cache.k_pages.shape
    per_page = cache.k_descale.shape[0] > 1  # build's caches have 3 pages or more
    kv = [None] * len(seqlens)
    for b, s in enumerate(seqlens):
        if s == 0:
            kv[b] = (torch.zeros((0, heads_kv, head_dim), dtype=torch.float64),) * 2
            continue
        pos = torch.arange(s)
        pages = table[b].cpu()[pos // page].long()
        slots = pos % page
        kq = cache.k_pages[pages, slots].double().cpu()
        vq = cache.v_pages[pages, :, :, slots].double().cpu()  # V^T inside each page
        dk = cache.k_descale[pages if per_page else torch.zeros_like(pages)].double().cpu()[:, :, None]
        dv = cache.v_descale[pages if per_page else torch.zeros_like(pages)].double().cpu()[:, :, None]
        kv[b] = (kq * dk, vq * dv)
    return kv


def reference(q, kv, seqlens, scale, window_left=-1, softcap=0.0):
    """float64 decode; token t sees keys < seqlen - q_len + t + 1, with a window none before
    seqlen - q_len + t - window_left; softcap > 0 caps the scores."""
    batch, q_len, heads_q, d = q.shape
    out = torch.zeros(q.shape, dtype=torch.float64)
    for b in range(batch):
        k, v = kv[b]
        group = heads_q // k.shape[1]
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        for t in range(q_len):
            n = seqlens[b] - q_len + t + 1
            if n <= 0:
                continue
            lo = max(0, n - 1 - window_left) if window_left >= 0 else 0
            s = torch.einsum("hd,shd->hs", q[b, t].double().cpu(), k[lo:n]) * scale
            if softcap > 0:
                s = softcap * torch.tanh(s / softcap)
            out[b, t] = torch.einsum("hs,shd->hd", torch.softmax(s, -1), v[lo:n])
    return out


@pytest.mark.parametrize("page", [16, 64])
@pytest.mark.parametrize("case", [
    dict(seqlens=[1, 15, 16, 17, 1000, 4097], heads_q=32, heads_kv=8, q_len=1, per_page=True, splits=0),
    dict(seqlens=[63, 64, 65], heads_q=32, heads_kv=8, q_len=4, per_page=False, splits=3),
    dict(seqlens=[333, 2000], heads_q=16, heads_kv=1, q_len=8, per_page=True, splits=0),  # MQA, row chunks
    dict(seqlens=[100, 50], heads_q=12, heads_kv=4, q_len=2, per_page=True, splits=1),
    # More splits than the combine reads in one load (64), the last ones empty.
    dict(seqlens=[5000, 70], heads_q=32, heads_kv=8, q_len=1, per_page=True, splits=80),
    dict(seqlens=[700, 2000], heads_q=32, heads_kv=8, q_len=96, per_page=True, splits=0),  # chunked prefill
    # 512 work items, more than the Gluon decode launches programs (2 per SM here): a program walks several items
    # of different lengths, its ring running from one into the next.
    dict(seqlens=[(i * 677) % 1500 + 1 for i in range(64)], heads_q=32, heads_kv=8, q_len=1, per_page=True,
         splits=1),
    # 32 rows per kv head, the 32-row instances' (the Gluon one at pages of 64): MQA, and 8 speculative tokens of
    # GQA 4:1 (per-row limits: the page path's masked last stages).
    dict(seqlens=[333, 2000, 64], heads_q=32, heads_kv=1, q_len=1, per_page=True, splits=0),
    dict(seqlens=[333, 2000, 64], heads_q=32, heads_kv=8, q_len=8, per_page=True, splits=0),
], ids=["gqa-ragged", "spec4-static", "mqa-spec8", "gqa3", "splits80", "chunk96", "items512", "mqa32", "spec8-gqa4"])
def test_decode_against_float64(page, case, seed):
    d = 128
    if not compiled(page, d):
        pytest.skip(f"no paged decode instance for pages of {page} at D={d}")
    gen = cpu_generator(seed)
    cache, table, seqlens, kv = build(case["seqlens"], case["heads_kv"], d, page, case["per_page"], gen)
    q = torch.randn((len(case["seqlens"]), case["q_len"], case["heads_q"], d), generator=gen).to(torch.bfloat16).cuda()
    o = decode(q, cache, table, seqlens, max(case["seqlens"]), num_splits=case["splits"])
    torch.cuda.synchronize()
    ref = reference(q, kv, case["seqlens"], 1 / math.sqrt(d))
    assert torch.isfinite(o).all(), "a NaN free slot or page reached O"
    err = ((o.double().cpu() - ref).norm() / ref.norm()).item()
    assert err < 5e-3, f"relative error {err:.2e}"


@pytest.mark.parametrize("page", [16, 64])
def test_lengths_from_1_to_128k_in_one_batch(page, seed):
    d = 128
    if not compiled(page, d):
        pytest.skip(f"no paged decode instance for pages of {page} at D=128")
    gen = cpu_generator(seed)
    lengths = [1, 777, 32768, 131072]
    cache, table, seqlens, kv = build(lengths, 8, d, page, True, gen)
    q = torch.randn((4, 1, 32, d), generator=gen).to(torch.bfloat16).cuda()
    o = decode(q, cache, table, seqlens, max(lengths))
    torch.cuda.synchronize()
    ref = reference(q, kv, lengths, 1 / math.sqrt(d))
    err = ((o.double().cpu() - ref).norm() / ref.norm()).item()
    assert err < 5e-3, f"relative error {err:.2e}"


@pytest.mark.parametrize("page", [16, 64])  # the library's pick is the Gluon decode (TMA page loads) at both
def test_invalid_table_gives_nan_rows(page, seed):
    d = 128
    if not compiled(page, d):
        pytest.skip(f"no paged decode instance for pages of {page} at D=128")
    gen = cpu_generator(seed)
    cache, table, seqlens, _ = build([100, 100], 8, d, page, False, gen)
    table[0, 1] = 10**6
    q = torch.randn((2, 1, 8, d), generator=gen).to(torch.bfloat16).cuda()
    o = decode(q, cache, table, seqlens, 100)
    torch.cuda.synchronize()
    assert torch.isnan(o[0]).all() and torch.isfinite(o[1]).all()


@pytest.mark.parametrize("name", decode_instances())
def test_each_decode_instance_against_float64(name, seed):
    """Every compiled decode instance forced by name (the heuristic picks one per row count and page), GQA 32/8 with
    one token, ragged lengths across page boundaries, per-page descales, NaN free slots, split and not."""
    page, d = (int(x) for x in re.search(r"_p(\d+)x(\d+)_", name).groups())
    gen = cpu_generator(seed)
    lengths = [1, page - 1, page + 1, 1000]
    cache, table, seqlens, kv = build(lengths, 8, d, page, True, gen)
    q = torch.randn((len(lengths), 1, 32, d), generator=gen).to(torch.bfloat16).cuda()
    ref = reference(q, kv, lengths, 1 / math.sqrt(d))
    if not splits_pairs(name):
        with pytest.raises(Exception, match="runs one split"):
            decode(q, cache, table, seqlens, max(lengths), num_splits=3, kernel_name=name)
    for splits in (1, 3) if splits_pairs(name) else (1, ):
        o = decode(q, cache, table, seqlens, max(lengths), num_splits=splits, kernel_name=name)
        torch.cuda.synchronize()
        assert torch.isfinite(o).all(), "a NaN free slot or page reached O"
        err = ((o.double().cpu() - ref).norm() / ref.norm()).item()
        assert err < 5e-3, f"{name}, {splits} splits: relative error {err:.2e}"


@pytest.mark.parametrize("name", decode_instances())
def test_zero_and_negative_descales(name, seed):
    """Descales as the cache's formula x = e4m3 * descale takes them, whatever their sign: a page whose k descale is
    0 (its keys' scores 0), pages whose k or v descale is negative (their keys or values negated; three times the
    others' magnitude, so that a P scaled against the largest v descale rather than the largest magnitude would
    saturate), a k descale of 1e-44 (a row scale times it rounds to 0) in a masked last stage, against float64 on
    the same descales. The Gluon decode's page path takes the row maximum on the unscaled product only where every
    row's scale is positive as rounded; these pages take its scaled-first branch. Every compiled decode instance by
    name."""
    page, d = (int(x) for x in re.search(r"_p(\d+)x(\d+)_", name).groups())
    gen = cpu_generator(seed)
    lengths = [page + 1, 1000]
    cache, table, seqlens, _ = build(lengths, 8, d, page, True, gen)
    for b in range(len(lengths)):
        cache.k_descale[table[b, 0].long()] = 0.0
        cache.k_descale[table[b, 1].long(), ::2] *= -3
        cache.k_descale[table[b, 1].long(), 1::2] = 1e-44
        cache.v_descale[table[b, 1].long(), 1::2] *= -3
    kv = dequantized(cache, table, lengths)
    q = torch.randn((len(lengths), 1, 32, d), generator=gen).to(torch.bfloat16).cuda()
    ref = reference(q, kv, lengths, 1 / math.sqrt(d))
    for splits in (1, 3) if splits_pairs(name) else (1, ):
        o = decode(q, cache, table, seqlens, max(lengths), num_splits=splits, kernel_name=name)
        torch.cuda.synchronize()
        assert torch.isfinite(o).all(), f"{name}, {splits} splits: non-finite output"
        err = ((o.double().cpu() - ref).norm() / ref.norm()).item()
        assert err < 5e-3, f"{name}, {splits} splits: relative error {err:.2e}"


def test_head_pair_decode(seed):
    """The head-pair decode (two kv heads per work item) by name: per-(page, head) descales that differ between the
    pair's heads, GQA 2:1 (half of each half of the rows) and 4:1, a window, 2 speculative tokens of 2 query heads,
    one split and, where the instance splits pairs, three (each head's rows into its own partials), against float64;
    an odd heads_kv, rows beyond half the instance's and, where it does not split pairs, splits are refused by
    name."""
    names = [n for n in decode_instances() if "_pairs" in n]
    if not names:
        pytest.skip("no head-pair decode instance in this build")
    for name in names:
        page, d = (int(x) for x in re.search(r"_p(\d+)x(\d+)_", name).groups())
        gen = cpu_generator(seed)
        lengths = [700, 3, page * 2 + 5]
        cache, table, seqlens, kv = build(lengths, 4, d, page, True, gen)
        for heads_q, q_len, window in ((8, 1, -1), (16, 1, 200), (8, 2, -1)):
            q = torch.randn((len(lengths), q_len, heads_q, d), generator=gen).to(torch.bfloat16).cuda()
            ref = reference(q, kv, lengths, 1 / math.sqrt(d), window_left=window)
            for splits in (1, 3) if splits_pairs(name) else (1, ):
                o = decode(q, cache, table, seqlens, max(lengths), num_splits=splits, window_left=window,
                           kernel_name=name)
                torch.cuda.synchronize()
                assert torch.isfinite(o).all(), f"{name}, {splits} splits: a NaN free slot or padding row reached O"
                err = ((o.double().cpu() - ref).norm() / ref.norm()).item()
                assert err < 5e-3, (f"{name}, heads_q={heads_q}, q_len={q_len}, window={window}, {splits} splits: "
                                    f"relative error {err:.2e}")
        q = torch.randn((len(lengths), 2, 16, d), generator=gen).to(torch.bfloat16).cuda()
        with pytest.raises(Exception, match="query rows per kv head"):
            decode(q, cache, table, seqlens, max(lengths), num_splits=1, kernel_name=name)
        if not splits_pairs(name):
            with pytest.raises(Exception, match="runs one split"):
                decode(q[:, :1, :8].contiguous(), cache, table, seqlens, max(lengths), num_splits=3, kernel_name=name)
        odd, odd_table, odd_seqlens, _ = build([50], 3, d, page, False, gen)
        with pytest.raises(Exception, match="is odd"):
            decode(torch.randn((1, 1, 6, d)).to(torch.bfloat16).cuda(), odd, odd_table, odd_seqlens, 50,
                   num_splits=1, kernel_name=name)


def test_head_pair_pick(seed):
    """The heuristic takes the head-pair decode from 256 work items of pairs of kv heads (GQA 4:1, one token): 64
    sequences x 8 kv heads of one split, and, where the instance splits pairs, 8 long sequences split 8 ways (else
    the one-head instance there); not 32 short sequences (128 pairs, too few pages to split). Each against float64,
    over per-sequence lengths with NaN-poisoned free slots."""
    names = [n for n in decode_instances() if "_pairs" in n and "_p64x128_" in n]
    if not names:
        pytest.skip("no head-pair decode instance for pages of 64 at D=128 in this build")
    gen = cpu_generator(seed)
    short = [int(x) for x in torch.randint(1, 300, (64,), generator=gen)]
    short[5] = 64  # a whole page, no free slot
    long = [int(x) for x in torch.randint(3000, 4500, (8,), generator=gen)]  # 47-71 pages: up to 8 splits
    for lengths, batch, want_pairs in ((short, 64, True), (short[:32], 32, False), (long, 8, splits_pairs(names[0]))):
        cache, table, seqlens, kv = build(lengths, 8, 128, 64, True, gen)
        q = torch.randn((batch, 1, 32, 128), generator=gen).to(torch.bfloat16).cuda()
        o, name = decode_with_name(q, cache, table, seqlens, max(lengths))
        torch.cuda.synchronize()
        assert ("_pairs" in name) == want_pairs, f"batch {batch}: the heuristic ran {name}"
        assert torch.isfinite(o).all(), f"{name}: a NaN free slot reached O"
        ref = reference(q, kv, lengths, 1 / math.sqrt(128))
        err = ((o.double().cpu() - ref).norm() / ref.norm()).item()
        assert err < 5e-3, f"batch {batch}, {name}: relative error {err:.2e}"


def test_gluon_decode_refuses_softcap(seed):
    """The Gluon decode has no soft-capping: forced by name with softcap > 0 it is refused, naming both."""
    names = [n for n in decode_instances() if n.endswith("_gluon")]
    if not names:
        pytest.skip("no Gluon decode instance in this build")
    for name in names:
        page = int(re.search(r"_p(\d+)x", name).group(1))
        cache, table, seqlens, _ = build([100], 8, 128, page, False, cpu_generator(seed))
        q = torch.randn((1, 1, 32, 128)).to(torch.bfloat16).cuda()
        with pytest.raises(Exception, match="soft-capping"):
            decode(q, cache, table, seqlens, 100, kernel_name=name, softcap=5.0)


def test_append_bytes(seed):
    d, page = 128, 16
    gen = cpu_generator(seed)
    cache = PagedKVCache(4, page, 2, d, k_descale=[0.01, 0.02], v_descale=[0.005, 0.004])
    cache.k_pages.view(torch.uint8).fill_(0x55)
    table = torch.tensor([[3, 0]], dtype=torch.int32, device="cuda")
    k = (torch.randn((1, 3, 2, d), generator=gen) * 3).to(torch.bfloat16).cuda()
    v = torch.randn((1, 3, 2, d), generator=gen).to(torch.bfloat16).cuda()
    append(cache, k, v, table, torch.tensor([15], dtype=torch.int32, device="cuda"))  # crosses into page 0
    torch.cuda.synchronize()
    want = (k.float() / torch.tensor([0.01, 0.02], device="cuda")[None, None, :, None]).clamp(-448, 448)
    want = want.to(torch.float8_e4m3fn)
    got = torch.stack([cache.k_pages[3, 15], cache.k_pages[0, 0], cache.k_pages[0, 1]])
    assert torch.equal(got.view(torch.uint8), want[0].view(torch.uint8))
    # V goes transposed inside the page: [page, kv head, d, slot].
    want_v = (v.float() / torch.tensor([0.005, 0.004], device="cuda")[None, None, :, None]).clamp(-448, 448)
    want_v = want_v.to(torch.float8_e4m3fn)
    got_v = torch.stack([cache.v_pages[3, :, :, 15], cache.v_pages[0, :, :, 0], cache.v_pages[0, :, :, 1]])
    assert torch.equal(got_v.view(torch.uint8), want_v[0].view(torch.uint8))
    untouched = cache.k_pages[1:3].view(torch.uint8)
    assert (untouched == 0x55).all()


def test_cuda_graph_replay(seed):
    d, page = 128, 64
    if not compiled(page, d):
        pytest.skip("no paged decode instance for pages of 64 at D=128")
    gen = cpu_generator(seed)
    cache, table, seqlens, _ = build([500, 70], 8, d, page, True, gen)
    q = torch.randn((2, 1, 32, d), generator=gen).to(torch.bfloat16).cuda()
    out = torch.empty_like(q)
    want = decode(q, cache, table, seqlens, 512, num_splits=2).clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        decode(q, cache, table, seqlens, 512, num_splits=2, out=out)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want)


def test_combine_reads_this_calls_partials(seed):
    """The combine is launched as a programmatic dependent of the decode (src/paged/paged.cpp) and must wait for
    the decode's partials: back-to-back split calls into one reused workspace, each with new queries, each checked
    against the same queries without a split (no combine). A combine that started early would read the previous
    call's partials: every call's rows would be the previous queries' attention."""
    d, page = 128, 64
    if not compiled(page, d):
        pytest.skip("no paged decode instance for pages of 64 at D=128")
    gen = cpu_generator(seed)
    cache, table, seqlens, _ = build([60000, 3000], 8, d, page, True, gen)
    qs = [torch.randn((2, 1, 32, d), generator=gen).to(torch.bfloat16).cuda() for _ in range(6)]
    whole = [decode(q, cache, table, seqlens, 60000, num_splits=1).clone() for q in qs]
    outs = [torch.empty_like(qs[0]) for _ in qs]
    for q, out in zip(qs, outs):  # queued back to back, no synchronization between the calls
        decode(q, cache, table, seqlens, 60000, num_splits=16, out=out)
    torch.cuda.synchronize()
    for i, (got, want) in enumerate(zip(outs, whole)):
        err = ((got.double() - want.double()).norm() / want.double().norm()).item()
        assert err < 1e-2, f"call {i}: split result differs from the unsplit one by {err:.3e}"


def test_errors(seed):
    cache = PagedKVCache(8, 64, 2, 128)
    table = torch.zeros((1, 4), dtype=torch.int32, device="cuda")
    seqlens = torch.tensor([10], dtype=torch.int32, device="cuda")
    q = torch.zeros((1, 1, 4, 128), dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match="max_seqlen=1000"):
        decode(q, cache, table, seqlens, 1000)  # 4 pages of 64 hold 256 tokens
    with pytest.raises(ValueError, match="q_len=4097"):  # chunked prefill takes up to 4096 new tokens
        decode(torch.zeros((1, 4097, 4, 128), dtype=torch.bfloat16, device="cuda"), cache, table, seqlens, 100)
    with pytest.raises(ValueError, match="heads_q=3"):
        decode(torch.zeros((1, 1, 3, 128), dtype=torch.bfloat16, device="cuda"), cache, table, seqlens, 100)
    with pytest.raises(ValueError, match="block_table"):
        decode(q, cache, table.long(), seqlens, 100)
    wide = torch.zeros((1, 8), dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="block_table: must be contiguous"):
        decode(q.expand(2, 1, 4, 128).contiguous(), cache, wide.expand(2, 8)[:, :4], seqlens.expand(2).contiguous(),
               100)
    with pytest.raises(ValueError, match="out: must be torch.bfloat16"):
        decode(q, cache, table, seqlens, 100, out=torch.empty((1, 1, 4, 64), dtype=torch.bfloat16, device="cuda"))
    with pytest.raises(ValueError, match="k_pages"):
        bad = PagedKVCache(8, 64, 2, 128)
        bad.k_pages = bad.k_pages.to(torch.bfloat16)
        decode(q, bad, table, seqlens, 100)


@pytest.mark.parametrize("page", [16, 64])
def test_sliding_window_and_softcap(page, seed):
    """Decode with a left window (FlashAttention's convention, causal on the right) and soft-capping against
    float64, with speculative tokens (each its own window edge) and split-KV over the window only."""
    d = 128
    if not compiled(page, d):
        pytest.skip(f"no paged decode instance for pages of {page} at D={d}")
    gen = cpu_generator(seed)
    lengths = [3000, 77, 700]
    cache, table, seqlens, kv = build(lengths, 2, d, page, True, gen)
    q = torch.randn((3, 2, 8, d), generator=gen).to(torch.bfloat16).cuda()
    for window, cap, splits in ((100, 0.0, 0), (1000, 0.0, 3), (-1, 5.0, 2), (300, 5.0, 0)):
        o = decode(q, cache, table, seqlens, max(lengths), num_splits=splits, window_left=window, softcap=cap)
        torch.cuda.synchronize()
        ref = reference(q, kv, lengths, 1 / math.sqrt(d), window_left=window, softcap=cap)
        assert torch.isfinite(o).all()
        err = ((o.double().cpu() - ref).norm() / ref.norm()).item()
        assert err < 5e-3, f"window {window}, softcap {cap}, splits {splits}: relative error {err:.2e}"
    # The checker sees a window: the unwindowed result is far from the windowed reference.
    o = decode(q, cache, table, seqlens, max(lengths))
    ref = reference(q, kv, lengths, 1 / math.sqrt(d), window_left=100)
    assert ((o.double().cpu() - ref).norm() / ref.norm()).item() > 5e-3
