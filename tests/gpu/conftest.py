"""GPU tests of fp8attn (run on the H200 only):

    cmake -B build -G Ninja -DFP8ATTN_BUILD_PYTHON=ON && cmake --build build
    PYTHONPATH=build/python python3 -m pytest tests/gpu -q

Every module skips, with the reason, where torch, a Hopper GPU or the built fp8attn module is missing
(fmha_utils.SKIP_REASON). Fixtures here: a fixed seed per test (different across tests), and guarded,
NaN-poisoned allocations for every buffer fp8attn allocates (output, LSE, workspace), checked after each
test for writes past either end.
"""

import math

import pytest

import fmha_utils as fu


def pytest_configure(config):
    # test_fmha_large.py: tens of GiB and about a minute; `-m "not large"` leaves it out.
    config.addinivalue_line("markers", "large: needs tens of GiB of GPU memory (sizes past 32-bit limits)")


def pytest_report_header(config):
    if fu.SKIP_REASON:
        return f"fp8attn GPU tests: skipped ({fu.SKIP_REASON})"
    import fp8attn
    import torch
    return (f"fp8attn {fp8attn.__version__} (triton {fp8attn.triton_version()}, "
            f"{len(fp8attn.list_kernels())} compiled instances); torch {torch.__version__} on "
            f"{torch.cuda.get_device_name()}")


@pytest.fixture
def seed(request):
    """Fixed per test, different across tests; also seeds torch's global generator."""
    s = fu.seed_for(request.node.nodeid)
    if fu.torch is not None:
        fu.torch.manual_seed(s)
    return s


class GuardedAllocator:
    """Allocates each buffer inside a larger one, everything poisoned (NaN for floats, 0xFF bytes, which is
    NaN in e4m3 and bf16, for the rest), and can check afterwards that the guard regions were not written."""

    GUARD_BYTES = 4096  # keeps the buffer 4 KiB-aligned within the allocation

    def __init__(self):
        self.buffers = []

    @staticmethod
    def _poison(t):
        if t.dtype.is_floating_point:
            t.fill_(float("nan"))
        else:
            t.view(fu.torch.uint8).fill_(0xFF)

    @staticmethod
    def _is_poison(t):
        if t.dtype.is_floating_point:
            return bool(fu.torch.isnan(t).all())
        return bool((t.view(fu.torch.uint8) == 0xFF).all())

    def __call__(self, shape, dtype, device):
        torch = fu.torch
        numel = math.prod(shape)
        guard = self.GUARD_BYTES // torch.empty((), dtype=dtype).element_size()
        flat = torch.empty(numel + 2 * guard, dtype=dtype, device=device)
        self._poison(flat)
        self.buffers.append((flat, guard, numel, tuple(shape)))
        return flat[guard:guard + numel].view(shape)

    def check_guards(self):
        for flat, guard, numel, shape in self.buffers:
            before, after = flat[:guard], flat[guard + numel:]
            assert self._is_poison(before) and self._is_poison(after), (
                f"a {flat.dtype} buffer of shape {shape} allocated by fp8attn was written out of bounds")


@pytest.fixture(autouse=True)
def guarded_allocations(monkeypatch):
    """Every fp8attn allocation poisoned and guarded; the guards are checked when the test ends."""
    if fu.SKIP_REASON:
        yield None
        return
    import fp8attn.fmha
    alloc = GuardedAllocator()
    monkeypatch.setattr(fp8attn.fmha, "_allocate", alloc)
    # The workspace is raw memory (an address): hand out a guarded buffer's address, and keep the buffer until
    # the guards are checked (release is a no-op here).
    monkeypatch.setattr(fp8attn.fmha, "_workspace_alloc",
                        lambda nbytes, stream: alloc((nbytes,), fu.torch.uint8, "cuda").data_ptr())
    monkeypatch.setattr(fp8attn.fmha, "_workspace_free", lambda address: None)
    yield alloc
    fu.torch.cuda.synchronize()
    alloc.check_guards()
