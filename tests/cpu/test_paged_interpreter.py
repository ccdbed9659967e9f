"""The paged FP8 KV-cache kernels (kernels/paged/paged_decode_triton.py) on the CPU in Triton's interpreter
(tests/cpu/interpreter_host.py): decode against float64 attention over the same dequantized cache, with random
block tables, per-sequence lengths (1, page boundaries, odd), NaN-poisoned free slots and free pages, GQA and MQA,
1 to 8 query tokens (causal among them), split-KV with the combine kernel, per-(page, kv head) and static
descales; the append kernel's bytes against a numpy quantization. Every access is bounds-checked."""

import math
import unittest

from interpreter_host import HostTensor, decode_e4m3, encode_e4m3, from_bf16_bits, launch, to_bf16_bits

import numpy as np  # noqa: E402

from paged import paged_decode_triton as pk  # noqa: E402


class Cache:
    """A paged cache built in numpy: pages shuffled, free slots and unused pages NaN."""

    def __init__(self, rng, seqlens, heads_kv, head_dim, page, per_page_descale):
        self.seqlens = np.array(seqlens, np.int32)
        self.page, self.heads_kv, self.head_dim = page, heads_kv, head_dim
        pages_of = [-(-int(s) // page) for s in seqlens]
        self.max_pages = max(max(pages_of), 1) + 1  # one more column than needed: never read
        num_pages = sum(pages_of) + 3  # 3 pages nobody owns
        order = rng.permutation(num_pages)
        self.block_table = np.zeros((len(seqlens), self.max_pages), np.int32)
        nxt = 0
        for b, n in enumerate(pages_of):
            self.block_table[b, :n] = order[nxt:nxt + n]
            self.block_table[b, n:] = order[-1]  # an unowned page: must never be read either
            nxt += n
        shape = (num_pages, page, heads_kv, head_dim)
        self.k = rng.standard_normal(shape) * 2 + 0.5
        self.v = rng.standard_normal(shape)
        scale = (1 + rng.random((num_pages, heads_kv))) if per_page_descale else np.ones((1, heads_kv))
        self.kd = (np.abs(self.k).max() / 448.0 * scale).astype(np.float32)
        self.vd = (np.abs(self.v).max() / 448.0 * scale).astype(np.float32)
        page_index = np.arange(num_pages) if per_page_descale else np.zeros(num_pages, np.int64)
        kd_full, vd_full = self.kd[page_index][:, None, :, None], self.vd[page_index][:, None, :, None]
        self.k_bytes, self.v_bytes = encode_e4m3(self.k / kd_full), encode_e4m3(self.v / vd_full)
        # Free slots and pages: NaN (0x7F); the dequantized values the reference sees.
        owned = np.zeros((num_pages, page), bool)
        for b, s in enumerate(seqlens):
            for t in range(int(s)):
                owned[self.block_table[b, t // page], t % page] = True
        self.k_bytes[~owned] = 0x7F
        self.v_bytes[~owned] = 0x7F
        self.kf = decode_e4m3(self.k_bytes) * kd_full
        self.vf = decode_e4m3(self.v_bytes) * vd_full
        self.descale_stride_page = heads_kv if per_page_descale else 0
        # The cache's V layout: transposed inside each page, [num_pages, heads_kv, head_dim, page].
        self.v_pages = np.ascontiguousarray(self.v_bytes.transpose(0, 2, 3, 1))

    def keys(self, b):
        """(K, V) float64 [seqlen, heads_kv, D] of sequence b, gathered through its block table."""
        s = int(self.seqlens[b])
        idx = [(self.block_table[b, t // self.page], t % self.page) for t in range(s)]
        k = np.stack([self.kf[p, slot] for p, slot in idx]) if s else np.zeros((0, self.heads_kv, self.head_dim))
        v = np.stack([self.vf[p, slot] for p, slot in idx]) if s else np.zeros((0, self.heads_kv, self.head_dim))
        return k, v


def reference(q, cache, scale, window_left=-1, softcap=0.0):
    """float64 decode: q [B, q_len, H_q, D]; query token t of sequence b sees keys < seqlen - q_len + t + 1 (and,
    with a window, none before seqlen - q_len + t - window_left); softcap > 0 caps the scores."""
    batch, q_len, heads_q, d = q.shape
    group = heads_q // cache.heads_kv
    out = np.zeros(q.shape)
    for b in range(batch):
        k, v = cache.keys(b)
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # [S, H_q, D]
        for t in range(q_len):
            n = int(cache.seqlens[b]) - q_len + t + 1
            if n <= 0:
                continue
            lo = max(0, n - 1 - window_left) if window_left >= 0 else 0
            s = np.einsum("hd,shd->hs", q[b, t], k[lo:n]) * scale
            if softcap > 0:
                s = softcap * np.tanh(s / softcap)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[b, t] = np.einsum("hs,shd->hd", p / p.sum(axis=1, keepdims=True), v[lo:n])
    return out


def run_decode(q_values, cache, num_splits, rows, max_seqlen=None, block_n=64, window_left=-1, softcap=0.0):
    """As PagedDecode plans it: pages_per_split from the keys a row can see (the host's max_seqlen, default the
    longest sequence, or with a window window_left + q_len + block_n - 1 of them), rounded up to whole iterations
    of block_n keys."""
    batch, q_len, heads_q, d = q_values.shape
    q_bits = to_bf16_bits(q_values)
    o = np.full(q_values.shape, 0x7FC0, np.uint16)  # bf16 NaN: every row must be written
    max_seqlen = int(cache.seqlens.max()) if max_seqlen is None else max_seqlen
    per_iteration = max(1, block_n // cache.page)
    span = max_seqlen if window_left < 0 else min(max_seqlen, window_left + q_values.shape[1] + block_n - 1)
    pages_per_split = max(1, -(-(-(-span // cache.page)) // num_splits))
    pages_per_split = -(-pages_per_split // per_iteration) * per_iteration
    row_chunks = -(-(q_len * heads_q // cache.heads_kv) // rows)
    programs = batch * cache.heads_kv * row_chunks * num_splits
    partial_o = np.full((programs * rows, d), np.nan, np.float32)
    partial_ml = np.full((programs * rows, 2), np.nan, np.float32)
    qs = (q_len * heads_q * d, heads_q * d, d)
    os_ = qs
    common = dict(q_len=q_len, heads_q=heads_q, heads_kv=cache.heads_kv, row_chunks=row_chunks, HEAD_DIM=d, ROWS=rows)
    launch(pk.paged_decode_kernel, programs, Q=HostTensor(q_bits, "bfloat16"),
           KPages=HostTensor(cache.k_bytes, "float8_e4m3fn"), VPages=HostTensor(cache.v_pages, "float8_e4m3fn"),
           KDescale=HostTensor(cache.kd, "float32"), VDescale=HostTensor(cache.vd, "float32"),
           BlockTable=HostTensor(cache.block_table, "int32"), Seqlens=HostTensor(cache.seqlens, "int32"),
           O=HostTensor(o, "bfloat16"), PartialO=HostTensor(partial_o, "float32"),
           PartialML=HostTensor(partial_ml, "float32"), softmax_scale=1 / math.sqrt(d),
           num_pages=cache.k_bytes.shape[0], max_pages=cache.max_pages, pages_per_split=pages_per_split,
           num_splits=num_splits,
           stride_qb=qs[0], stride_qs=qs[1], stride_qh=qs[2], stride_ob=os_[0], stride_os=os_[1], stride_oh=os_[2],
           descale_stride_page=cache.descale_stride_page, descale_stride_head=1, window_left=window_left,
           softcap=softcap, PAGE=cache.page, BLOCK_N=block_n,
           **common)
    if num_splits > 1:
        launch(pk.paged_combine_kernel, batch * cache.heads_kv * row_chunks * rows,  # one program per row
               PartialO=HostTensor(partial_o, "float32"),
               PartialML=HostTensor(partial_ml, "float32"), O=HostTensor(o, "bfloat16"), num_splits=num_splits,
               stride_ob=os_[0], stride_os=os_[1], stride_oh=os_[2], **common)
    return from_bf16_bits(o).astype(np.float64), q_bits


class Decode(unittest.TestCase):
    def check(self, seqlens, heads_q, heads_kv, q_len, page, num_splits, per_page_descale, seed, d=64, rows=None,
              block_n=64, window_left=-1, softcap=0.0):
        rng = np.random.default_rng(seed)
        cache = Cache(rng, seqlens, heads_kv, d, page, per_page_descale)
        q = rng.standard_normal((len(seqlens), q_len, heads_q, d))
        rows = rows or max(16, 1 << (q_len * heads_q // heads_kv - 1).bit_length())
        got, q_bits = run_decode(q, cache, num_splits, rows, block_n=block_n, window_left=window_left,
                                 softcap=softcap)
        want = reference(from_bf16_bits(q_bits).astype(np.float64), cache, 1 / math.sqrt(d), window_left, softcap)
        self.assertTrue(np.isfinite(got).all(), "a NaN-poisoned free slot or page reached O (or a row was unwritten)")
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        # P times the v descale rounds to bf16 (8 bits), O to bf16: well under 1%.
        self.assertLess(err, 5e-3, f"relative error {err:.2e}")
        return err

    def test_gqa_one_token_ragged_lengths(self):
        self.check([1, 16, 17, 100], heads_q=8, heads_kv=2, q_len=1, page=16, num_splits=1, per_page_descale=True,
                   seed=0)

    def test_split_kv_with_combine(self):
        self.check([300, 5, 64], heads_q=4, heads_kv=1, q_len=1, page=64, num_splits=3, per_page_descale=True,
                   seed=1)

    def test_speculative_tokens_causal_among_them(self):
        self.check([40, 200], heads_q=4, heads_kv=2, q_len=4, page=16, num_splits=2, per_page_descale=False, seed=2)

    def test_mqa_eight_tokens(self):
        self.check([130], heads_q=8, heads_kv=1, q_len=8, page=64, num_splits=1, per_page_descale=False, seed=3,
                   d=128)

    def test_row_chunks_with_splits(self):
        # MQA with 8 tokens: 64 rows in 4 chunks of 16 (each chunk reads the pages again), 2 splits.
        self.check([150, 33], heads_q=8, heads_kv=1, q_len=8, page=16, num_splits=2, per_page_descale=True, seed=6,
                   rows=16)

    def test_iterations_spanning_pages_and_parts_of_a_page(self):
        # 128 keys per iteration over pages of 16 (eight pages gathered at once, the split boundary inside an
        # iteration's reach), and 32 keys per iteration over pages of 64 (half a page each).
        self.check([300, 17, 129], heads_q=4, heads_kv=2, q_len=2, page=16, num_splits=3, per_page_descale=True,
                   seed=9, block_n=128)
        self.check([300, 64, 65], heads_q=4, heads_kv=2, q_len=1, page=64, num_splits=2, per_page_descale=True,
                   seed=10, block_n=32)

    def test_chunked_prefill(self):
        # A chunk of 100 new queries (its keys already appended) over a cache of earlier tokens: 200 rows in chunks
        # of 64 per kv head, causal among the new tokens, two splits; and with a window.
        self.check([300, 150], heads_q=4, heads_kv=2, q_len=100, page=16, num_splits=2, per_page_descale=True,
                   seed=50, rows=64)
        self.check([300, 150], heads_q=4, heads_kv=2, q_len=100, page=64, num_splits=1, per_page_descale=True,
                   seed=51, rows=64, window_left=70)

    def test_sliding_window_and_softcap(self):
        # Windows shorter than a block, across blocks and pages, longer than the sequence; speculative tokens
        # (each row its own window edge); split-KV over the window only; soft-capping alone and with a window.
        for i, (window, cap, q_len, splits, page, block_n) in enumerate((
                (5, 0.0, 1, 1, 16, 64), (100, 0.0, 3, 2, 16, 64), (130, 0.0, 1, 3, 64, 32), (10**6, 0.0, 1, 2, 16, 64),
                (-1, 2.0, 2, 2, 16, 64), (70, 1.5, 4, 1, 64, 64))):
            self.check([300, 17, 129], heads_q=4, heads_kv=2, q_len=q_len, page=page, num_splits=splits,
                       per_page_descale=True, seed=20 + i, block_n=block_n, window_left=window, softcap=cap)

    def test_window_near_int32_max_and_padding_slots(self):
        # seqlen - q_len - window_left would wrap in int32 (a window of 2^31 - 1, sequences shorter than q_len,
        # several splits): no access outside the table or the cache (the harness checks every one), finite rows.
        rng = np.random.default_rng(40)
        cache = Cache(rng, [0, 50, 1], 2, 64, 16, True)
        q = rng.standard_normal((3, 2, 4, 64))
        for splits in (1, 2, 3):
            got, _ = run_decode(q, cache, splits, 16, window_left=2**31 - 1)
            self.assertTrue(np.isfinite(got).all(), f"{splits} splits")

    def test_v_descale_of_keys_no_row_sees_does_not_coarsen_p(self):
        # Page 0 (keys 0..15) lies before a 20-key window but inside the first block; its v descale is 10^5 times
        # the others'. The visible keys' P must not be scaled against it (it would fall into e4m3's subnormals).
        rng = np.random.default_rng(1)
        cache = Cache(rng, [64], 1, 64, 16, True)
        p0 = cache.block_table[0, 0]
        cache.vd[p0] *= 1e5
        cache.vf[p0] *= 1e5
        q = rng.standard_normal((1, 1, 2, 64))
        got, qb = run_decode(q, cache, 1, 16, window_left=20)
        want = reference(from_bf16_bits(qb).astype(np.float64), cache, 1 / 8, 20)
        self.assertLess(np.linalg.norm(got - want) / np.linalg.norm(want), 5e-3)

    def test_zero_and_negative_descales(self):
        # x = e4m3 * descale with any sign: a page whose k descale is 0 (scores 0), one whose k descale is negative
        # on one head and v descale negative on the other, in the same 64-key block as positive pages of 16 (P is
        # scaled against the largest magnitude of v descale: against the largest value, the negative page's P
        # would pass +-448 and saturate).
        rng = np.random.default_rng(4)
        cache = Cache(rng, [100, 70], 2, 64, 16, True)
        for b in range(2):
            p0, p1 = cache.block_table[b, 0], cache.block_table[b, 1]
            cache.kd[p0] = 0.0
            cache.kd[p1, 0] *= -3
            cache.vd[p1, 1] *= -3
        page_index = np.arange(cache.kd.shape[0])
        cache.kf = decode_e4m3(cache.k_bytes) * cache.kd[page_index][:, None, :, None]
        cache.vf = decode_e4m3(cache.v_bytes) * cache.vd[page_index][:, None, :, None]
        q = rng.standard_normal((2, 1, 4, 64))
        got, qb = run_decode(q, cache, 2, 16)
        self.assertTrue(np.isfinite(got).all())
        want = reference(from_bf16_bits(qb).astype(np.float64), cache, 1 / 8)
        self.assertLess(np.linalg.norm(got - want) / np.linalg.norm(want), 5e-3)

    def test_tiny_values_do_not_overflow_the_e4m3_scales(self):
        # A q row of values near 1e-37 and v descales of 1e-37: 448 / amax would be inf (and 0 * inf NaN).
        rng = np.random.default_rng(2)
        cache = Cache(rng, [40], 1, 64, 16, True)
        cache.vd[:] = 1e-37
        cache.vf = decode_e4m3(cache.v_bytes) * cache.vd[:, None, :, None]
        q = rng.standard_normal((1, 1, 2, 64))
        q[0, 0, 0] *= 1e-37
        q[0, 0, 0, 5] = 0.0
        got, qb = run_decode(q, cache, 1, 16)
        self.assertTrue(np.isfinite(got).all())
        want = reference(from_bf16_bits(qb).astype(np.float64), cache, 1 / 8)
        self.assertLess(np.abs(got - want).max(), 1e-2 * np.abs(want).max())  # bf16 output: 2^-9 relative

    def test_window_checker_catches_a_missing_window(self):
        rng = np.random.default_rng(30)
        cache = Cache(rng, [300], 2, 64, 16, True)
        q = rng.standard_normal((1, 1, 4, 64))
        want = reference(from_bf16_bits(to_bf16_bits(q)).astype(np.float64), cache, 1 / 8, window_left=40)
        got, _ = run_decode(q, cache, 1, 16)  # no window
        self.assertGreater(np.linalg.norm(got - want) / np.linalg.norm(want), 5e-3)

    def test_invalid_tables_and_lengths_give_nan_rows_not_reads_outside(self):
        rng = np.random.default_rng(7)
        cache = Cache(rng, [100, 90, 50], 2, 64, 16, True)
        q = rng.standard_normal((3, 1, 4, 64))
        cache.block_table[0, 2] = 10**6  # a page id past the cache
        cache.seqlens[1] = cache.max_pages * 16 + 5  # longer than its table can hold
        for splits in (1, 2):
            got, _ = run_decode(q, cache, splits, 16)
            self.assertTrue(np.isnan(got[0]).all() and np.isnan(got[1]).all(), "invalid sequences: NaN rows")
            self.assertTrue(np.isfinite(got[2]).all(), "the valid sequence is untouched")

    def test_a_sequence_longer_than_max_seqlen_gives_nan_rows(self):
        rng = np.random.default_rng(8)
        cache = Cache(rng, [300, 60], 2, 64, 16, True)
        q = rng.standard_normal((2, 1, 4, 64))
        for splits in (1, 3):
            # The plan covers 128 keys (one split) or 192 (three), whole iterations of 64 keys past max_seqlen=80;
            # sequence 0 has 300.
            got, _ = run_decode(q, cache, splits, 16, max_seqlen=80)
            self.assertTrue(np.isnan(got[0]).all(), "a length past max_seqlen's plan: NaN, not fewer keys")
            self.assertTrue(np.isfinite(got[1]).all())

    def test_the_checker_catches_a_wrong_block_table(self):
        rng = np.random.default_rng(4)
        cache = Cache(rng, [100, 90], 2, 64, 16, True)
        q = rng.standard_normal((2, 1, 4, 64))
        want = reference(from_bf16_bits(to_bf16_bits(q)).astype(np.float64), cache, 1 / 8)
        # Sequence 0's first page replaced by sequence 1's behind the kernel's back (swapping two pages of one
        # sequence would not show: attention does not depend on the keys' order).
        cache.block_table[0, 0] = cache.block_table[1, 0]
        got, _ = run_decode(q, cache, 1, 16)
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        self.assertGreater(err, 5e-3, "another sequence's page must show")


class Combine(unittest.TestCase):
    """The split-KV combine alone, on partials made here: more splits than it loads at once (pk._SPLIT_BLOCK), the
    largest maximum in a later block for some rows (the online merge's rescale), empty splits (no key: m = -1e30,
    l = 0, O = 0), padding rows; against the two-pass formula in float64."""

    def run_combine(self, num_splits, seed, max_in_split=None, poisoned=None):
        rng = np.random.default_rng(seed)
        batch, heads_kv, group, rows, d = 1, 2, 4, 8, 64  # 4 real rows of 8 per kv head (one token, GQA 4:1)
        n = batch * heads_kv * num_splits * rows
        m = rng.standard_normal(n).astype(np.float32) * 4
        l = (rng.random(n) * 50 + 1).astype(np.float32)
        part = rng.standard_normal((n, d)).astype(np.float32) * l[:, None]
        split_of = (np.arange(n) // rows) % num_splits
        empty = rng.random(n) < 0.1  # splits that saw no key
        m[empty], l[empty], part[empty] = -1.0e30, 0.0, 0.0
        if poisoned is not None:  # a split whose table or length was invalid: the decode wrote l = NaN
            l[split_of == poisoned] = np.nan
        if max_in_split is not None:  # every row's largest maximum in this split, well above the others
            m[split_of == max_in_split] = 30.0 + rng.random(int((split_of == max_in_split).sum()))
            l[split_of == max_in_split] = 1.0
        o = np.full((batch, 1, heads_kv * group, d), 0x7FC0, np.uint16)
        launch(pk.paged_combine_kernel, batch * heads_kv * rows, PartialO=HostTensor(part, "float32"),
               PartialML=HostTensor(np.stack([m, l], 1), "float32"), O=HostTensor(o, "bfloat16"), q_len=1,
               heads_q=heads_kv * group, heads_kv=heads_kv, num_splits=num_splits, row_chunks=1,
               stride_ob=o.shape[1] * o.shape[2] * d, stride_os=o.shape[2] * d, stride_oh=d, HEAD_DIM=d, ROWS=rows)
        got = from_bf16_bits(o).astype(np.float64)
        if poisoned is not None:  # every real row NaN: the poisoned split's rows, whatever block it is in
            self.assertTrue(np.isnan(got).all(), f"split {poisoned} of {num_splits} poisoned: not every row NaN")
            return
        want = np.zeros_like(got)
        for hk in range(heads_kv):
            for r in range(group):  # rows past q_len * group are padding: nothing to store
                idx = (hk * num_splits + np.arange(num_splits)) * rows + r
                w = np.exp2(m[idx].astype(np.float64) - m[idx].max())
                want[0, 0, hk * group + r] = (w[:, None] * part[idx]).sum(0) / (w * l[idx]).sum()
        err = np.abs(got - want).max() / np.abs(want).max()
        self.assertLess(err, 1e-2, f"{num_splits} splits: max error {err:.2e} of the largest output")

    def test_one_block(self):
        self.run_combine(33, seed=0)

    def test_more_splits_than_one_load_and_a_later_maximum(self):
        self.assertGreater(150, 2 * pk._SPLIT_BLOCK)
        self.run_combine(150, seed=1)
        self.run_combine(150, seed=2, max_in_split=140)  # in the third block: both earlier blocks rescaled
        self.run_combine(150, seed=3, max_in_split=0)

    def test_a_poisoned_split_makes_its_rows_nan(self):
        for poisoned, max_in_split in ((5, None), (140, None), (3, 140), (140, 3)):
            self.run_combine(150, seed=4, max_in_split=max_in_split, poisoned=poisoned)


class Append(unittest.TestCase):
    def test_bytes_and_untouched_slots(self):
        rng = np.random.default_rng(5)
        batch, new, heads_kv, d, page = 2, 3, 2, 64, 16
        num_pages, max_pages = 6, 3
        block_table = np.array([[4, 1, 5], [0, 2, 3]], np.int32)
        positions = np.array([14, 0], np.int32)  # sequence 0 crosses from page 4 into page 1
        k = rng.standard_normal((batch, new, heads_kv, d)) * 3
        v = rng.standard_normal((batch, new, heads_kv, d))
        k_bits, v_bits = to_bf16_bits(k), to_bf16_bits(v)
        kd = np.array([[0.01, 0.02]], np.float32)  # static per kv head (stride_page 0)
        vd = np.array([[0.005, 0.004]], np.float32)
        k_pages = np.full((num_pages, page, heads_kv, d), 0x55, np.uint8)
        v_pages = np.full((num_pages, heads_kv, d, page), 0x55, np.uint8)  # V^T inside each page
        ks = (new * heads_kv * d, heads_kv * d, d)
        launch(pk.paged_append_kernel, batch * new * heads_kv, K=HostTensor(k_bits, "bfloat16"),
               V=HostTensor(v_bits, "bfloat16"), KPages=HostTensor(k_pages, "float8_e4m3fn"),
               VPages=HostTensor(v_pages, "float8_e4m3fn"), KDescale=HostTensor(kd, "float32"),
               VDescale=HostTensor(vd, "float32"), BlockTable=HostTensor(block_table, "int32"),
               Positions=HostTensor(positions, "int32"), new_tokens=new, heads_kv=heads_kv, num_pages=num_pages,
               max_pages=max_pages,
               stride_kb=ks[0], stride_ks=ks[1], stride_kh=ks[2], stride_vb=ks[0], stride_vs=ks[1], stride_vh=ks[2],
               descale_stride_page=0, descale_stride_head=1, HEAD_DIM=d, PAGE=page)
        want_k = np.full_like(k_pages, 0x55)
        want_v = np.full_like(v_pages, 0x55)
        kf, vf = from_bf16_bits(k_bits), from_bf16_bits(v_bits)
        for b in range(batch):
            for t in range(new):
                pos = positions[b] + t
                p, slot = block_table[b, pos // page], pos % page
                want_k[p, slot] = encode_e4m3(kf[b, t] / kd[0][:, None])
                want_v[p, :, :, slot] = encode_e4m3(vf[b, t] / vd[0][:, None])
        self.assertTrue(np.array_equal(k_pages, want_k), "K bytes (or a slot written that should not be)")
        self.assertTrue(np.array_equal(v_pages, want_v), "V bytes")
        self.assertEqual(int((decode_e4m3(k_pages[1, :1]) != 0).sum() > 0), 1, "the page crossing was written")

    def test_positions_and_pages_outside_write_nothing(self):
        rng = np.random.default_rng(6)
        heads_kv, d, page, num_pages, max_pages = 1, 64, 16, 3, 2
        block_table = np.array([[0, -1], [7, 1]], np.int32)  # -1: unallocated; 7: past the cache
        positions = np.array([16, 0], np.int32)  # sequence 0 writes into its unallocated page and past its table
        k = to_bf16_bits(rng.standard_normal((2, 20, heads_kv, d)))
        pages = [np.full((num_pages, page, heads_kv, d), 0x55, np.uint8) for _ in range(2)]
        ks = (20 * heads_kv * d, heads_kv * d, d)
        launch(pk.paged_append_kernel, 2 * 20 * heads_kv, K=HostTensor(k, "bfloat16"), V=HostTensor(k, "bfloat16"),
               KPages=HostTensor(pages[0], "float8_e4m3fn"), VPages=HostTensor(pages[1], "float8_e4m3fn"),
               KDescale=HostTensor(np.ones((1, 1), np.float32), "float32"),
               VDescale=HostTensor(np.ones((1, 1), np.float32), "float32"),
               BlockTable=HostTensor(block_table, "int32"), Positions=HostTensor(positions, "int32"), new_tokens=20,
               heads_kv=heads_kv, num_pages=num_pages, max_pages=max_pages, stride_kb=ks[0], stride_ks=ks[1],
               stride_kh=ks[2], stride_vb=ks[0], stride_vs=ks[1], stride_vh=ks[2], descale_stride_page=0,
               descale_stride_head=1, HEAD_DIM=d, PAGE=page)
        # Sequence 1: tokens 0..15 into page 7 (refused), 16..19 into page 1 slots 0..3 (written).
        self.assertTrue((pages[0][1, :4] != 0x55).all() and (pages[0][1, 4:] == 0x55).all())
        self.assertTrue((pages[0][[0, 2]] == 0x55).all(), "nothing written for sequence 0 or page 7")


if __name__ == "__main__":
    unittest.main(verbosity=2)
