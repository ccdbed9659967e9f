"""Shows that Triton's concurrency sanitizer (ConSan) is live in this setup and catches a race in the Gluon
attention kernel (device only; device_check's consan step runs it after the instrumented GPU tests).

A checker that reports nothing proves nothing until it has been seen to fail: this runs the library's Gluon
kernel twice under TRITON_INSTRUMENTATION_MODE=consan through the JIT (bench/sweep_gluon.py's launcher, D=128,
key-permuted V^T, a small problem), each in its own process (a device assert ends the CUDA context):

    intact    kernels/fmha_fwd/fmha_fwd_gluon.py as it is: must finish, and match float64
    mutated   the same source with the consumer's wait for the V tile's TMA load removed (it then reads V^T's
              shared-memory stage while the copy may still be writing it): ConSan must stop the kernel

    python3 scripts/consan_selftest.py          exit 0 when both behave as stated
"""

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "kernels", "fmha_fwd", "fmha_fwd_gluon.py")
# The consumer's wait for a V stage (P_j V_j's operand) in its main loop: the first one after `def _consumer(`.
V_WAIT = "mbarrier.wait(v_ready.index(s), ((it + j) // NUM_STAGES) & 1)"
CONSUMER = "def _consumer("
# What a ConSan check prints when it fires (device asserts; messages of Triton 3.6's instrumentation).
CONSAN_REPORTS = ("Buffer being accessed has outstanding", "Accessing buffer with pending access",
                  "Barrier arrive underflow")


def child(mutated):
    os.environ["TRITON_INSTRUMENTATION_MODE"] = "consan"
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import torch
    import triton

    import sweep_gluon

    # ConSan keeps its shadow state in global scratch, which the JIT allocates through this hook.
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    src = open(KERNEL).read()
    if mutated:
        at = src.find(V_WAIT, src.index(CONSUMER))
        assert at >= 0, "the consumer's V wait is not in the kernel any more: update V_WAIT"
        src = src[:at] + "pass  # mutated: no wait for V's TMA load" + src[at + len(V_WAIT):]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gluon_consan_selftest.py")
        with open(path, "w") as f:
            f.write(src)
        _, kernel, constexprs = sweep_gluon.load_variant(f"selftest={path}:KEY_PERMUTED=1")
        problem = sweep_gluon.Problem({"batch": 1, "heads_q": 2, "heads_kv": 2, "seqlen_q": 512, "seqlen_k": 512,
                                       "head_dim": 128, "causal": 0})
        problem.launch(kernel, constexprs)
        torch.cuda.synchronize()
    ref = problem.reference(0)
    err = ((problem.o[0, :, 0].double() - ref).norm() / ref.norm()).item()
    print(f"finished; relative error vs float64 {err:.3e}")
    return 0 if err < 0.05 else 1


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return child(sys.argv[2] == "mutated")
    failures = []
    for kind in ("intact", "mutated"):
        try:
            run = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind], capture_output=True,
                                 text=True, timeout=400)
            rc, out = run.returncode, run.stdout + run.stderr
        except subprocess.TimeoutExpired:
            rc, out = None, "timed out"
        reports = [l for l in out.splitlines() if any(r in l for r in CONSAN_REPORTS)][:3]
        tail = "\n    ".join(reports + out.strip().splitlines()[-4:])
        print(f"{kind}: exit {rc}\n    {tail}")
        if kind == "intact" and rc != 0:
            failures.append("the intact kernel failed under ConSan")
        if kind == "mutated" and (rc == 0 or not any(r in out for r in CONSAN_REPORTS)):
            failures.append("ConSan did not report the removed V wait (any other failure, e.g. a compile error, "
                            "does not count): it checks nothing here")
    for f in failures:
        print("FAILED:", f)
    print("consan self-test:", "failed" if failures else "ConSan catches the missing wait; the intact kernel passes")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
