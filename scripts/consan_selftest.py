"""Shows that Triton's concurrency sanitizer (ConSan) is live in this setup and catches a race in the Gluon
attention kernel (device only; device_check's consan step runs it after the instrumented GPU tests).

A checker that reports nothing proves nothing until it has been seen to fail: this runs the library's Gluon
kernel under TRITON_INSTRUMENTATION_MODE=consan through the JIT (bench/sweep_gluon.py's launcher, D=128,
key-permuted V^T, a small problem), in processes of their own run side by side (a device assert ends the CUDA
context; CHILDREN):

    intact    kernels/fmha_fwd/fmha_fwd_gluon.py (and its parts) as it is, on the key-permuted V^T and with the producer
              transposing V itself (TRANSPOSE_V, the vnat instances' three configurations): must finish and
              match float64, and the transposing kernel must give the same bits as the one reading the V^T
    mutated   the same source with the consumer's wait for the V tile's TMA load removed (it then reads V^T's
              shared-memory stage while the copy may still be writing it): ConSan must stop the kernel
    mutated-transpose  the producer's wait for a raw V tile's TMA load removed (TRANSPOSE_V: it then reads the
              raw slot while the copy may still be writing it): ConSan must stop the kernel

    python3 scripts/consan_selftest.py          exit 0 when every child behaves as stated
"""

import importlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The kernel's package (fmha_fwd_gluon.py and the gluon_*.py parts it imports), copied for each child into a
# folder of its own, mutated there, and imported from it.
PACKAGE = os.path.join(ROOT, "kernels", "fmha_fwd")
KERNEL = "fmha_fwd_gluon.py"
# The consumer's wait for a V stage (P_j V_j's operand) in its main loop: the first one after `def _consumer(`.
V_WAIT = "mbarrier.wait(v_ready.index(s), ((it + j) // NUM_STAGES) & 1)"
CONSUMER = ("gluon_consumer.py", "def _consumer(")
# The producer's wait for a raw V tile before transposing it (TRANSPOSE_V), in _transpose_step.
RAW_WAIT = "mbarrier.wait(raw_ready.index(r), (j // RAW_STAGES) & 1)"
TRANSPOSER = ("gluon_producer.py", "def _transpose_step(")
# The partitions' registers (consumers, producer) at the end of the kernel's warp_specialize call.
PRODUCER_REGS = "[240, 24])"
KP, TV = "KEY_PERMUTED=1", "KEY_PERMUTED=1,TRANSPOSE_V=1"
# (name, variant constants, head_dim, causal): the library's vkperm kernel, and the vnat instances' settings
# (codegen/operations/fmha_fwd.py: gluon_raw_stages) with the vkperm run they must match bit for bit.
INTACT = [("vkperm", KP, 128, 0), ("vkperm_causal", KP, 128, 1), ("vnat_causal", TV + ",RAW_STAGES=2", 128, 1),
          ("vnat_wide", TV + ",RAW_STAGES=1,BLOCK_N=256", 128, 0),
          ("vnat_d64_causal", TV + ",RAW_STAGES=2,NUM_STAGES=3", 64, 1),
          # the double-buffered Q (a sweep switch, Q_BUFFERS: two q_ready / q_empty pairs taken in turn)
          ("vkperm_qb2_causal", KP + ",Q_BUFFERS=2", 128, 1)]
SAME_BITS = ("vkperm_causal", "vnat_causal")
# What a ConSan check prints when it fires (device asserts; messages of Triton 3.6's instrumentation).
CONSAN_REPORTS = ("Buffer being accessed has outstanding", "Accessing buffer with pending access",
                  "Barrier arrive underflow")


def mutate(sources, where, text, replacement):
    """sources[file] with the first `text` after `anchor` replaced (where = (file, anchor))."""
    file, anchor = where
    src = sources[file]
    at = src.find(text, src.index(anchor))
    assert at >= 0, f"{text!r} is not in {file} after {anchor!r} any more: update the self-test"
    sources[file] = src[:at] + replacement + src[at + len(text):]


def kernel_sources(kind, names):
    """The package's files as the child `kind` compiles them, and the runs it makes (intact: the INTACT ones
    named)."""
    sources = {f: open(os.path.join(PACKAGE, f)).read() for f in os.listdir(PACKAGE) if f.endswith(".py")}
    if kind == "mutated":
        mutate(sources, CONSUMER, V_WAIT, "pass  # mutated: no wait for V's TMA load")
        return sources, INTACT[:1]
    if kind.startswith("mutated-transpose"):
        mutate(sources, TRANSPOSER, RAW_WAIT, "pass  # mutated: no wait for the raw V tile's TMA load")
        if kind == "mutated-transpose":
            # ConSan's report is a device assert (a printf call), which needs more registers than the 24 the
            # transposing producer runs with: there the check fires as an illegal instruction, no message (H200,
            # 2026-12-03, "mutated-transpose-24"). The self-test gives the producer 56 (the consumers 224) so that
            # the report shows what was caught.
            assert sources[KERNEL].count(PRODUCER_REGS) == 1, \
                "the partitions' register split moved: update PRODUCER_REGS"
            sources[KERNEL] = sources[KERNEL].replace(PRODUCER_REGS, "[224, 56])")
        return sources, [r for r in INTACT if r[0] == "vnat_causal"]
    return sources, [r for r in INTACT if r[0] in names]


def import_package(sources, folder):
    """Writes the package into folder/fmha_fwd and puts it first on the path, so that the kernel loaded from there
    imports its parts from there too (not the library's kernels/fmha_fwd, which sweep_gluon put on the path).
    Returns the kernel file's path. Checks that the modules Python resolves are the copies, and that a mutation
    is in the source the JIT compiles: a self-test that ran the intact kernel as the 'mutated' one would show a
    silent ConSan as a pass of the intact kernel."""
    package = os.path.join(folder, "fmha_fwd")
    os.makedirs(package)
    for file, src in sources.items():
        with open(os.path.join(package, file), "w") as f:
            f.write(src)
    sys.path.insert(0, folder)
    for name in [m for m in sys.modules if m == "fmha_fwd" or m.startswith("fmha_fwd.")]:
        del sys.modules[name]
    for file, src in sources.items():
        if file == "__init__.py":
            continue
        module = importlib.import_module("fmha_fwd." + file[:-3])
        assert os.path.dirname(os.path.abspath(module.__file__)) == os.path.abspath(package), \
            f"fmha_fwd.{file[:-3]} resolves to {module.__file__}, not the self-test's copy"
        # The JIT compiles each function from its own source text (JITFunction.src): the copy's, mutation included.
        for value in vars(module).values():
            fn = getattr(value, "fn", None)
            if getattr(fn, "__module__", None) == module.__name__:
                assert value.src in src, f"{module.__name__}.{fn.__name__}: the JIT's source is not the copy's"
    return os.path.join(package, KERNEL)


def child(kind, names):
    os.environ["TRITON_INSTRUMENTATION_MODE"] = "consan"
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import torch
    import triton

    import sweep_gluon

    # ConSan keeps its shadow state in global scratch, which the JIT allocates through this hook.
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    sources, runs = kernel_sources(kind, names)
    outputs, worst = {}, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        path = import_package(sources, tmp)
        for name, consts, head_dim, causal in runs:
            _, kernel, constexprs = sweep_gluon.load_variant(f"selftest={path}:{consts}")
            problem = sweep_gluon.Problem({"batch": 1, "heads_q": 2, "heads_kv": 2, "seqlen_q": 512,
                                           "seqlen_k": 512, "head_dim": head_dim, "causal": causal})
            problem.launch(kernel, constexprs)
            torch.cuda.synchronize()
            ref = problem.reference(0)
            err = ((problem.o[0, :, 0].double() - ref).norm() / ref.norm()).item()
            print(f"{name}: finished; relative error vs float64 {err:.3e}", flush=True)
            outputs[name], worst = problem.o.clone(), max(worst, err)
    same = True
    if all(n in outputs for n in SAME_BITS):
        same = torch.equal(*(outputs[n] for n in SAME_BITS))
        print(f"{' and '.join(SAME_BITS)}: {'the same bits' if same else 'DIFFERENT bits'}")
    return 0 if worst < 0.05 and same else 1


# The children, run at the same time (each instrumented compile takes 40-50 s on the H200's host, one core each):
# (kind, the INTACT settings it runs). The two settings that must give the same bits run in one process.
CHILDREN = [("intact", SAME_BITS)] + [("intact", (name, )) for name, *_ in INTACT if name not in SAME_BITS] + [
    ("mutated", ("vkperm", )), ("mutated-transpose", ("vnat_causal", ))]
if os.environ.get("CONSAN_SELFTEST_ONLY"):  # a comma-separated list of kinds to run (the others are skipped)
    CHILDREN = [c for c in CHILDREN + [("mutated-transpose-24", ("vnat_causal", ))]
                if c[0] in os.environ["CONSAN_SELFTEST_ONLY"].split(",")]


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3].split(","))
    procs = [(kind, names, subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", kind,
                                             ",".join(names)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True)) for kind, names in CHILDREN]
    failures = []
    for kind, names, proc in procs:
        try:
            out, _ = proc.communicate(timeout=600)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            rc, out = None, "timed out"
        reports = [l for l in out.splitlines() if any(r in l for r in CONSAN_REPORTS)][:3]
        tail = "\n    ".join(reports + out.strip().splitlines()[-(40 if not reports else 4):])
        print(f"{kind} ({', '.join(names)}): exit {rc}\n    {tail}")
        if kind == "intact" and rc != 0:
            failures.append(f"the intact kernel failed under ConSan ({', '.join(names)})")
        if kind != "intact" and (rc == 0 or not any(r in out for r in CONSAN_REPORTS)):
            failures.append(f"{kind}: ConSan did not report the removed wait (any other failure, e.g. a compile "
                            "error, does not count): it checks nothing here")
    for f in failures:
        print("FAILED:", f)
    print("consan self-test:", "failed" if failures else "ConSan catches both missing waits; the intact kernels pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
