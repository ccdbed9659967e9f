"""A quality guard for FP8 attention: every `every` calls of a key (a layer), a few query rows are recomputed
in BF16 and compared with the FP8 output; when the relative error of those rows exceeds `threshold`, that key
runs BF16 from then on (sticky), and the event is counted.

    guard = QualityGuard(threshold=0.15, every=64, rows=64)
    out = guard.attention(layer_key, q, k, v, fp8_attention, bf16_attention)
    guard.report()   # {key: {"calls", "checks", "last_error", "fallback", "triggered_at_call"}}

fp8_attention(q, k, v) and bf16_attention(q, k, v) take q as (B, H, S_q, D) and k, v as (B, H_kv, S_k, D)
(bottom-right-aligned causal or none, as the caller chooses), and return (B, H, S_q, D). The check recomputes
the last `rows` query rows: with causal alignment from the bottom right they see every key, so they are the
rows an error in K or V reaches most. The comparison stays on the GPU: its result is copied to pinned host
memory without waiting and read at a later call of the same key once its event has completed, so the guard
never synchronizes the stream; a fallback therefore starts one or more calls after the offending one.

What it catches: a quantization that goes wrong for a layer's inputs as a whole (outlier channels, a large key
offset, a range change), seen in the sampled rows. What it cannot: an error confined to rows it did not
sample, a change between two checks (it reacts at the next check), or an error the BF16 path shares. Its cost:
one BF16 call on `rows` query rows every `every` calls, a norm and a 4-byte copy.

The default threshold, 15% relative L2 error of the sampled rows, sits above what FP8 attention gives on
ordinary inputs (about 5% on Gaussian data at D=128, a few % in a model's layers) and below a quantization that
has gone wrong (tens of %).
"""

import dataclasses

import torch


@dataclasses.dataclass
class _KeyState:
    calls: int = 0
    checks: int = 0
    last_error: float = float("nan")
    fallback: bool = False
    triggered_at_call: int = 0
    pending: tuple = None  # (pinned host tensor, event or None, call number)


class QualityGuard:
    def __init__(self, threshold=0.15, every=64, rows=64):
        if not threshold > 0:
            raise ValueError(f"threshold={threshold}: must be > 0")
        if every < 1 or rows < 1:
            raise ValueError(f"every={every}, rows={rows}: must be >= 1")
        self.threshold = float(threshold)
        self.every = int(every)
        self.rows = int(rows)
        self._state = {}

    def _resolve(self, st):
        host, event, call = st.pending
        if event is not None and not event.query():
            return  # not finished yet: look again at the next call
        st.pending = None
        st.last_error = float(host.item())
        if not st.last_error <= self.threshold:  # NaN counts as a failure too
            st.fallback = True
            st.triggered_at_call = call

    def attention(self, key, q, k, v, fp8_attention, bf16_attention):
        st = self._state.setdefault(key, _KeyState())
        st.calls += 1
        if st.pending is not None:
            self._resolve(st)
        if st.fallback:
            return bf16_attention(q, k, v)
        out = fp8_attention(q, k, v)
        if (st.calls - 1) % self.every == 0 and st.pending is None:
            rows = min(self.rows, q.shape[2])
            ref = bf16_attention(q[:, :, -rows:], k, v).float()
            got = out[:, :, -rows:].float()
            err = ((got - ref).norm() / ref.norm().clamp_min(1e-30)).reshape(1)
            st.checks += 1
            if err.is_cuda:
                host = torch.empty(1, dtype=torch.float32, pin_memory=True)
                host.copy_(err, non_blocking=True)
                event = torch.cuda.Event()
                event.record()
            else:
                host, event = err, None
            st.pending = (host, event, st.calls)
        return out

    def report(self):
        """{key: {"calls", "checks", "last_error", "fallback", "triggered_at_call"}} for every key seen."""
        return {key: {"calls": st.calls, "checks": st.checks, "last_error": st.last_error, "fallback": st.fallback,
                      "triggered_at_call": st.triggered_at_call} for key, st in self._state.items()}
