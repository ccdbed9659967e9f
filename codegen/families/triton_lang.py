"""Family "triton": kernels written in triton.language, compiled with triton.compile(ASTSource)."""

NAME = "triton"
CPP_NAME = "kTriton"  # library::KernelFamily


def compile(fn, signature, constexprs, attrs, num_warps, num_stages, target, options=None):
    import triton
    from triton.compiler import ASTSource

    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=target,
                          options={"num_warps": num_warps, "num_stages": num_stages, **(options or {})})
