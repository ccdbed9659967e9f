"""fp8attn.integrations.transformers on a small random Llama (no download): what runs fp8attn, what falls back to
SDPA, and how close the logits stay to SDPA's. The real-model perplexity runs are bench/ scripts (issue 8)."""

import pytest

import fmha_utils as fu

if fu.SKIP_REASON:
    pytest.skip(fu.SKIP_REASON, allow_module_level=True)
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

import fp8attn.integrations.transformers as fp8attn_hf  # noqa: E402

NAME = fp8attn_hf.register()


def tiny_llama(head_dim=128, heads=4, kv_heads=2, layers=2, seed=0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=512, hidden_size=heads * head_dim, intermediate_size=512,
                                      num_hidden_layers=layers, num_attention_heads=heads,
                                      num_key_value_heads=kv_heads, head_dim=head_dim, max_position_embeddings=2048)
    model = transformers.LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16).eval()
    return model


def logits(model, implementation, input_ids, attention_mask=None):
    model.set_attn_implementation(implementation)
    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=attention_mask).logits.float()


def rel_err(a, b):
    return ((a - b).norm() / b.norm()).item()


@pytest.fixture
def calls(monkeypatch):
    """Counts the calls that reached fp8attn, by query length."""
    seen = []
    original = fp8attn_hf._fp8attn

    def counting(query, key, value, scaling, mode):
        seen.append((query.shape[2], key.shape[2]))
        return original(query, key, value, scaling, mode)

    monkeypatch.setattr(fp8attn_hf, "_fp8attn", counting)
    fp8attn_hf.reset_fallback_counts()
    fp8attn_hf.reset_guard()
    yield seen
    fp8attn_hf.set_mode("fp8")


@pytest.mark.parametrize("mode,tolerance", [("fp8", 0.08), ("fp8_per_head", 0.08), ("fp8_smooth_rotate", 0.08),
                                            ("bf16", 0.02)])
def test_prefill_matches_sdpa(mode, tolerance, calls):
    model = tiny_llama()
    ids = torch.randint(0, 512, (2, 300), device="cuda")
    want = logits(model, "sdpa", ids)
    fp8attn_hf.set_mode(mode)
    got = logits(model, NAME, ids)
    assert fp8attn_hf.fallback_counts() == {}, fp8attn_hf.fallback_counts()
    assert calls == [(300, 300)] * 2, calls  # both layers ran fp8attn
    err = rel_err(got, want)
    assert err < tolerance, f"{mode}: logits differ from SDPA by {err:.3g}"
    if mode != "bf16":
        assert err > 0, "FP8 attention gave SDPA's exact logits: did it run?"


def test_padding_falls_back_to_sdpa(calls):
    model = tiny_llama()
    ids = torch.randint(0, 512, (2, 64), device="cuda")
    mask = torch.ones_like(ids)
    mask[0, :10] = 0  # left padding in the first sequence
    want = logits(model, "sdpa", ids, mask)
    got = logits(model, NAME, ids, mask)
    assert calls == [], "a padded batch must not reach fp8attn"
    counts = fp8attn_hf.fallback_counts()
    assert list(counts) == ["an attention mask tensor was given (padding or a custom mask)"], counts
    assert counts[list(counts)[0]] == 2
    # The same SDPA call with the same mask: equal up to how transformers built the mask.
    valid = mask.bool()
    assert rel_err(got[valid], want[valid]) < 1e-3


def test_decode_steps_run_fp8attn(calls):
    model = tiny_llama()
    model.set_attn_implementation(NAME)
    # No token 0 (the pad id: generate() would build a padding mask from it) and no early stop at the EOS id.
    ids = torch.randint(3, 512, (1, 200), device="cuda")
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, min_new_tokens=6,
                             do_sample=False, pad_token_id=0)
    assert out.shape == (1, 206)
    assert fp8attn_hf.fallback_counts() == {}, fp8attn_hf.fallback_counts()
    # Prefill (200 x 200) in both layers, then one query row against a growing cache.
    assert calls[:2] == [(200, 200)] * 2, calls[:4]
    assert [c for c in calls[2:]] == [(1, 200 + i) for i in range(1, 6) for _ in range(2)], calls


def test_decode_step_matches_sdpa(calls):
    """A single-row step against a cache equals the prefill's last row (bottom-right causal alignment)."""
    model = tiny_llama()
    ids = torch.randint(0, 512, (1, 257), device="cuda")
    fp8attn_hf.set_mode("bf16")
    full = logits(model, NAME, ids)[:, -1]
    model.set_attn_implementation(NAME)
    with torch.no_grad():
        prefix = model(input_ids=ids[:, :-1], use_cache=True)
        step = model(input_ids=ids[:, -1:], past_key_values=prefix.past_key_values, use_cache=True).logits[:, -1]
    assert rel_err(step.float(), full) < 0.02


def test_default_mode_in_prefill_and_decode_steps(calls):
    """register() without a mode gives fp8_smooth_rotate (the measured default); a decode step in it (one query
    row, K smoothed over the cached keys) stays as close to SDPA's last-row logits as the prefill does."""
    fp8attn_hf.register()
    assert fp8attn_hf._mode == fp8attn_hf.DEFAULT_MODE == "fp8_smooth_rotate"
    model = tiny_llama()
    ids = torch.randint(0, 512, (1, 257), device="cuda")
    want = logits(model, "sdpa", ids)[:, -1]
    model.set_attn_implementation(NAME)
    with torch.no_grad():
        prefix = model(input_ids=ids[:, :-1], use_cache=True)
        step = model(input_ids=ids[:, -1:], past_key_values=prefix.past_key_values, use_cache=True).logits[:, -1]
    assert fp8attn_hf.fallback_counts() == {}, fp8attn_hf.fallback_counts()
    assert (1, 257) in calls, calls  # the decode step reached fp8attn
    err = rel_err(step.float(), want)
    assert 0 < err < 0.08, f"decode step in the default mode differs from SDPA by {err:.3g}"


def test_unsupported_head_dim_falls_back(calls):
    model = tiny_llama(head_dim=96, heads=4, kv_heads=2)
    ids = torch.randint(0, 512, (1, 64), device="cuda")
    want = logits(model, "sdpa", ids)
    got = logits(model, NAME, ids)
    assert calls == []
    assert any("head_dim=96" in r for r in fp8attn_hf.fallback_counts()), fp8attn_hf.fallback_counts()
    assert rel_err(got, want) < 1e-3


def test_guarded_mode_checks_each_layer(calls):
    model = tiny_llama()
    ids = torch.randint(0, 512, (1, 256), device="cuda")
    want = logits(model, "sdpa", ids)
    fp8attn_hf.set_mode("fp8_guarded")
    got = logits(model, NAME, ids)
    # Each layer: its FP8 call, then the check's BF16 call on the last 64 query rows.
    assert calls[:2] == [(256, 256), (64, 256)], calls
    assert rel_err(got, want) < 0.08
    # A check's result is read at the layer's next call: a second pass reads the first pass's checks.
    torch.cuda.synchronize()
    logits(model, NAME, ids)
    report = fp8attn_hf.guard_report()
    assert sorted(layer for layer, _ in report) == [0, 1], report  # keyed by (layer index, module)
    for r in report.values():
        assert r["checks"] >= 1 and not r["fallback"] and 0 < r["last_error"] < 0.15, report
