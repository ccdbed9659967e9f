"""Kernel families: how a kernel function is turned into a cubin. Keyed by family name.

Each module defines NAME, CPP_NAME (its library::KernelFamily enumerator) and compile(fn, signature, constexprs, attrs, num_warps, num_stages, target) ->
triton's CompiledKernel. Adding a family (a new front end) is a new module here plus manifest rows.
"""

from families import gluon, triton_lang

FAMILIES = {m.NAME: m for m in (triton_lang, gluon)}
