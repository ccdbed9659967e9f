"""Family "gluon": kernels written in triton.experimental.gluon (explicit layouts, mbarriers, warp
specialization), compiled with triton.compile(GluonASTSource). A Gluon host tensor descriptor's signature
string carries its shared layout, e.g.
    tensordesc<fp8e4nv[128, 128],NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2,
               transposed=False, fp4_padded=False, cga_layout=[])>
so an operation module gives the full string as the parameter's type.
"""

NAME = "gluon"
CPP_NAME = "kGluon"  # library::KernelFamily


def compile(fn, signature, constexprs, attrs, num_warps, num_stages, target, options=None):
    import triton
    from triton.experimental.gluon._runtime import GluonASTSource

    src = GluonASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=target,
                          options={"num_warps": num_warps, "num_stages": num_stages, **(options or {})})
